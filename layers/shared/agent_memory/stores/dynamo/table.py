"""The table the store keeps its items in: the client, the table's name, the bucket for offloaded bodies, the
store's settings, and the reads and writes every operation shares. Each operation takes it as a collaborator.
"""

from __future__ import annotations

import time
from typing import Any

from ...policy.quotas import NO_QUOTAS, Quotas
from ..ports import BlobStore, SessionKey
from .items import read_event
from .keys import QUERY_LIMIT_MAX, N, S, Update, event_key, session_key
from .retries import Budget


class Table:
    def __init__(
        self,
        client: Any,
        name: str,
        blobs: BlobStore,
        *,
        offload_bytes: int = 350_000,
        retention_days: int = 0,
        quotas: Quotas = NO_QUOTAS,
    ) -> None:
        self.db = client
        self.name = name
        self.blobs = blobs
        self.offload_bytes = offload_bytes
        self.retention_s = retention_days * 86400
        self.quotas = quotas

    @staticmethod
    def now() -> float:
        """The wall clock every stored time is taken from."""
        return time.time()

    def expiry(self, now: float) -> dict[str, str] | None:
        """An item's ``expires_at`` with a retention (None without one)."""
        return N(int(now + self.retention_s)) if self.retention_s else None

    def state_expiry(self, now: float) -> dict[str, str] | None:
        """A state item's expiry: twice the retention, so the first append to outlive it moves it on (rarely)."""
        return N(int(now + 2 * self.retention_s)) if self.retention_s else None

    def read_event(self, item: dict[str, Any], *, verbatim: bool = False) -> dict[str, Any]:
        return read_event(self.blobs, item, verbatim=verbatim)

    def state_update(self, pk: str, sk: str, state: dict[str, Any]) -> dict[str, Any]:
        """A transaction's Update that sets ``state``'s keys on an item, whether or not it exists."""
        update = Update()
        update.set_state(state)
        return {
            "Update": {
                "TableName": self.name,
                "Key": {"PK": S(pk), "SK": S(sk)},
                "UpdateExpression": update.expression(),
                "ExpressionAttributeNames": update.names,
                "ExpressionAttributeValues": update.values,
            }
        }

    # --- reads --------------------------------------------------------------------------------------------------

    def get_items(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The items under ``keys`` (PK, SK) that exist, by consistent BatchGetItem (100 keys a call)."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        budget = Budget()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 100):
            chunk = [{"PK": S(pk), "SK": S(sk)} for pk, sk in unique[start : start + 100]]
            request: dict[str, Any] = {self.name: {"Keys": chunk, "ConsistentRead": True}}
            while request:
                response = self.db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.name, []):
                    found[(item["PK"]["S"], item["SK"]["S"])] = item
                request = response.get("UnprocessedKeys") or {}
                if request:  # throttled keys: back off, within the budget (then 503), never spin
                    budget.after_fault("unprocessed keys")
        return found

    def stored_items(self, key: SessionKey, event_ids: list[str], budget: Budget) -> dict[str, dict[str, Any]]:
        """The stored items of those of ``event_ids`` that exist (consistent reads), by event id."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(event_ids), 100):
            keys = [event_key(key, i) for i in event_ids[start : start + 100]]
            request: dict[str, Any] = {self.name: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = budget.call(self.db.batch_get_item, RequestItems=request)
                for item in response.get("Responses", {}).get(self.name, []):
                    found[item["SK"]["S"][2:]] = item
                request = response.get("UnprocessedKeys") or {}
                if request:
                    budget.after_fault("unprocessed keys")
        return found

    def session_item(self, key: SessionKey, budget: Budget, projection: str) -> dict[str, Any] | None:
        """The session item's ``projection`` (a consistent GetItem; None when there is no item)."""
        item: dict[str, Any] | None = budget.call(
            self.db.get_item,
            TableName=self.name,
            Key=session_key(key),
            ConsistentRead=True,
            ProjectionExpression=projection,
        ).get("Item")
        return item

    def session_marks(self, key: SessionKey, budget: Budget) -> dict[str, Any] | None:
        """The session item's incarnation, tombstone and import marks (consistent read); None when there is none."""
        return self.session_item(key, budget, "inc, deleting, importing, import_started, nb")

    def session_attributes(self, key: SessionKey, projection: str) -> dict[str, Any]:
        """Attributes of the session item (consistent; {} when there is none). A Query of the one item rather
        than a GetItem: every function that reads events may Query the table (the read-only ones, auto-save),
        not all may GetItem."""
        sk = session_key(key)
        response = Budget().call(
            self.db.query,
            TableName=self.name,
            ConsistentRead=True,
            KeyConditionExpression="PK = :pk AND SK = :sk",
            ExpressionAttributeValues={":pk": sk["PK"], ":sk": sk["SK"]},
            ProjectionExpression=projection,
        )
        item: dict[str, Any] = (response.get("Items") or [{}])[0]
        return item

    def query_all(self, params: dict[str, Any], limit: int | None) -> list[dict[str, Any]]:
        """Every item a consistent Query answers, page after page (at most ``limit``)."""
        params = {"TableName": self.name, "ConsistentRead": True} | params
        if limit is not None:
            params["Limit"] = min(limit, QUERY_LIMIT_MAX)
        items: list[dict[str, Any]] = []
        while True:
            response = self.db.query(**params)
            items.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response or (limit is not None and len(items) >= limit):
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
            if limit is not None:
                params["Limit"] = min(limit - len(items), QUERY_LIMIT_MAX)
        return items[:limit] if limit is not None else items


def by_seq(pk: str, low: int, high: int) -> dict[str, Any]:
    """A Query's parameters for a session's events with low <= seq <= high (the ``by_seq`` index)."""
    return {
        "IndexName": "by_seq",
        "KeyConditionExpression": "PK = :pk AND seq BETWEEN :low AND :high",
        "ExpressionAttributeValues": {":pk": S(pk), ":low": N(low), ":high": N(high)},
    }
