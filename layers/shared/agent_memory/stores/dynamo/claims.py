"""Forgotten events: the events of a user whose memories must never be stored again (``ClaimStore``).

A forget (one memory, a deleted event, forget-all) marks each event with a committed claim before its records
go, so that auto-save (which may be handed an event after its deletion) and explicit saves never store it
again. A save writes nothing here: it reads the marks of the events it is about to store (one BatchGetItem per
100, strongly consistent) inside the memory store's write, off the view the write is made over
(``MemoryService._preparer``), and drops the marked ones; the store itself writes only records whose
deterministic ids its view does not hold, so a retry or a racing save never stores a record twice.

DynamoDB items: ``M#{app}#{user}`` / ``C#{claim key}`` with ``committed`` (always true) and ``claimed_at`` (the time
of the mark). Every item is a mark: a read asks only whether it exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .retries import Budget, batch_write


class DynamoClaimStore:
    def __init__(self, client: Any, table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._db = client
        self._table = table_name
        self._clock = clock

    @staticmethod
    def _pk(app_name: str, user_id: str) -> dict[str, str]:
        return {"S": f"M#{app_name}#{user_id}"}

    def forgotten(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        unique = list(dict.fromkeys(keys))
        marked: set[str] = set()
        budget = Budget()  # throttles and unprocessed keys retried within the write budget, then 503
        pk = self._pk(app_name, user_id)
        for start in range(0, len(unique), 100):
            pending: dict[str, Any] = {
                self._table: {
                    "Keys": [{"PK": pk, "SK": {"S": f"C#{k}"}} for k in unique[start : start + 100]],
                    "ProjectionExpression": "SK",
                    "ConsistentRead": True,
                }
            }
            while pending:
                response = budget.call(self._db.batch_get_item, RequestItems=pending)
                marked.update(item["SK"]["S"][2:] for item in response.get("Responses", {}).get(self._table, []))
                pending = response.get("UnprocessedKeys") or {}
                if pending:
                    budget.after_fault("unprocessed keys")
        return marked

    def _batch(self, requests: list[dict[str, Any]]) -> None:
        batch_write(self._db, self._table, requests)

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None:
        now = self._clock()
        self._batch(
            [
                {
                    "PutRequest": {
                        "Item": {
                            "PK": self._pk(app_name, user_id),
                            "SK": {"S": f"C#{key}"},
                            "committed": {"BOOL": True},
                            "claimed_at": {"N": repr(now)},
                        }
                    }
                }
                for key in dict.fromkeys(keys)
            ]
        )
