"""moto as the local AWS: a server whose requests are applied one at a time, and cheaper transactions.

moto keeps its state in plain dicts and is not safe under concurrent requests ("dictionary changed size during
iteration"). DynamoDB and S3 apply each request atomically; so does this server, by holding a lock while moto
handles a request. Requests from concurrent clients still interleave between requests, which is what the
service's concurrency handling (conditional writes, retries) is about.

moto's ``TransactWriteItems`` deep-copies every table it touches before applying anything, so that it can put
the copy back if the transaction fails. With one table holding everything, each transaction costs time (and
memory) in proportion to all data stored, and under the lock every other request waits for it: racing appends,
which mostly lose their condition and cancel, spent most of their time copying the table. ``TransactionApplier``
gives the same answers for the same requests without the copy: it checks every condition first (a transaction
that would be cancelled on a condition writes nothing and answers at once), and applies one whose conditions
hold with an undo log of the items it touches (at most 100) and of the table's stream.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

MOTO_LOCK = threading.RLock()

_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_Reason = tuple[str, str, dict[str, Any]] | tuple[None, None, None]


def serialized(app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
    """Wrap a WSGI app so that one request at a time runs inside it (the body is read under the lock too)."""

    def wrapper(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with MOTO_LOCK:
            return list(app(environ, start_response))

    return wrapper


class SerializedMotoServer(ThreadedMotoServer):
    def _server_entry(self) -> None:
        install_transaction_applier()
        app = serialized(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()


@dataclass(frozen=True)
class _Target:
    table: Table
    hash_key: DynamoType
    range_key: DynamoType | None


class _Unplanned(Exception):
    """A transaction this applier does not judge up front (an unknown table, a malformed item): moto's own path
    answers it, with its own error."""


_moto_transact_write_items = DynamoDBBackend.transact_write_items


def install_transaction_applier() -> None:
    """Make moto's DynamoDB apply ``TransactWriteItems`` without copying whole tables (idempotent)."""
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign,assignment]


def uninstall_transaction_applier() -> None:
    """Give moto its own ``TransactWriteItems`` back."""
    DynamoDBBackend.transact_write_items = _moto_transact_write_items  # type: ignore[method-assign,assignment]


def _transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto's ``transact_write_items``, answering alike, at the cost of the items written rather than the tables."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    try:
        targets, reasons = _check(backend, transact_items)
    except _Unplanned:
        _moto_transact_write_items(backend, transact_items)
        return
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)  # cancelled on a condition: nothing was written
    _apply(backend, transact_items, targets)


def _check(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> tuple[list[_Target], list[_Reason]]:
    """Each item's target and condition outcome against the current state, writing nothing.

    moto checks item N after applying items 0..N-1; since no two items may name the same key and a condition
    reads only its own item, checking them all against the state before the transaction gives the same outcome.
    """
    targets: list[_Target] = []
    reasons: list[_Reason] = []
    seen: set[tuple[str, str]] = set()
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        if op_type not in _OPERATIONS:
            raise _Unplanned(op_type)
        try:
            table_name = op["TableName"]
            table = backend.get_table(table_name)
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            hash_key, range_key = backend.get_keys_value(table, key)
            current = table.get_item(hash_key, range_key)
            condition = op.get("ConditionExpression")
            holds = condition is None or get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            ).expr(current)
        except Exception as exc:  # moto answers these in its own ways (a reason, a validation error)
            raise _Unplanned(repr(exc)) from exc
        unique = (str(table_name), str(dict(sorted(key.items()))))
        if unique in seen:
            raise MultipleTransactionsException()
        seen.add(unique)
        targets.append(_Target(table, hash_key, range_key))
        if holds:
            reasons.append((None, None, None))
        else:
            old = None
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
                old = current.to_json()["Attributes"]
            reasons.append(("ConditionalCheckFailed", str(ConditionalCheckFailed(item=old).message), old))  # type: ignore[arg-type]
    return targets, reasons


def _apply(backend: DynamoDBBackend, transact_items: list[dict[str, Any]], targets: list[_Target]) -> None:
    """Apply a transaction whose conditions hold; on any failure put back what it changed and answer as moto."""
    undo = [(t, copy.deepcopy(t.table.get_item(t.hash_key, t.range_key))) for t in targets]
    streams = {id(t.table): (t.table, len(t.table.stream_shard.items)) for t in targets if t.table.stream_shard}
    reasons: list[_Reason] = []
    try:
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            common = {
                "condition_expression": op.get("ConditionExpression"),
                "expression_attribute_names": op.get("ExpressionAttributeNames"),
                "expression_attribute_values": op.get("ExpressionAttributeValues"),
            }
            try:
                if op_type == "Put":
                    backend.put_item(op["TableName"], op["Item"], **common)
                elif op_type == "Delete":
                    backend.delete_item(op["TableName"], op["Key"], **common)
                elif op_type == "Update":
                    backend.update_item(op["TableName"], op["Key"], update_expression=op["UpdateExpression"], **common)
                reasons.append((None, None, None))
            except MockValidationException:
                raise
            except ConditionalCheckFailed as exc:  # checked above under the same lock; kept for moto's parity
                reasons.append(("ConditionalCheckFailed", str(exc.message), None))  # type: ignore[arg-type]
            except Exception as exc:
                reasons.append((type(exc).__name__, str(exc), None))  # type: ignore[arg-type]
    except BaseException:
        _undo(undo, streams)
        raise
    if any(code is not None for code, _, _ in reasons):
        _undo(undo, streams)
        raise TransactionCanceledException(reasons)


def _undo(undo: list[tuple[_Target, Item | None]], streams: dict[int, tuple[Table, int]]) -> None:
    for target, old in reversed(undo):
        items: Any = target.table.items
        if target.range_key is not None:
            if old is None:
                items[target.hash_key].pop(target.range_key, None)
            else:
                items[target.hash_key][target.range_key] = old
        elif old is None:
            items.pop(target.hash_key, None)
        else:
            items[target.hash_key] = old
    for table, length in streams.values():
        assert table.stream_shard is not None
        del table.stream_shard.items[length:]  # the records of writes that are now undone
