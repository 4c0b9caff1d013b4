"""Forgotten events: the events of a user whose memories must never be stored again (``ClaimStore``).

A forget (one memory, a deleted event, forget-all) marks each event with a committed claim before its records
go, so that auto-save (which may be handed an event after its deletion) and explicit saves never store it
again. A save writes nothing here: it reads the marks of the events it is about to store (one BatchGetItem per
100, strongly consistent) inside the memory store's write, off the view the write is made over
(``MemoryService._preparer``), and drops the marked ones; the store itself writes only records whose
deterministic ids its view does not hold, so a retry or a racing save never stores a record twice.

Earlier versions claimed every candidate of every save here (a conditional PutItem, then a commit): their
committed claims read as marks (an event stored then, or forgotten: skipped either way), their uncommitted
ones (a save that died) as no mark. The claim of a directly added text is no longer written; ``release`` and
``release_texts`` delete the old ones when their text is forgotten.

DynamoDB items: ``M#{app}#{user}`` / ``C#{claim key}`` with ``committed`` and ``claimed_at`` (the time of the mark).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..ports import EVENT_PREFIX, TEXT_PREFIX
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
                    "ProjectionExpression": "SK, #c",
                    "ExpressionAttributeNames": {"#c": "committed"},
                    "ConsistentRead": True,
                }
            }
            while pending:
                response = budget.call(self._db.batch_get_item, RequestItems=pending)
                for item in response.get("Responses", {}).get(self._table, []):
                    if item.get("committed", {}).get("BOOL"):
                        marked.add(item["SK"]["S"][2:])
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

    def release(self, app_name: str, user_id: str, keys: list[str]) -> None:
        self._batch(
            [
                {"DeleteRequest": {"Key": {"PK": self._pk(app_name, user_id), "SK": {"S": f"C#{key}"}}}}
                for key in dict.fromkeys(keys)
            ]
        )

    def _claim_keys(self, app_name: str, user_id: str, prefix: str, uncommitted_only: bool) -> list[str]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
            "ExpressionAttributeValues": {":pk": self._pk(app_name, user_id), ":p": {"S": f"C#{prefix}"}},
            "ProjectionExpression": "SK",
        }
        if uncommitted_only:
            params["FilterExpression"] = "committed = :f"
            params["ExpressionAttributeValues"][":f"] = {"BOOL": False}
        keys: list[str] = []
        while True:
            response = self._db.query(**params)
            keys += [item["SK"]["S"][2:] for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return keys
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def release_texts(self, app_name: str, user_id: str) -> None:
        self.release(app_name, user_id, self._claim_keys(app_name, user_id, TEXT_PREFIX, uncommitted_only=False))

    def commit_events(self, app_name: str, user_id: str) -> None:
        self.commit(app_name, user_id, self._claim_keys(app_name, user_id, EVENT_PREFIX, uncommitted_only=True))
