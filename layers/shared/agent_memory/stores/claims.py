"""The idempotency record of long-term memory: which events (and which direct texts) a user's memory holds.

Auto-save and explicit saves share it: a save first claims its candidates with conditional writes, stores
only what it claimed, then commits the claims. Whichever save runs first stores an event; the other stores
nothing for it. A claim that was never committed (its save died between claim and commit) goes stale after
``STALE_AFTER_S`` and can be claimed again. Event claims outlive a forget, so that a forgotten memory never
comes back through auto-save; the claim of a directly added text is released when it is forgotten, so the
user can add it again.

DynamoDB items: ``M#{app}#{user}`` / ``C#{claim key}`` with ``memory_id``, ``committed``, ``claimed_at``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .dynamo import batch_write

STALE_AFTER_S = 300
# A claim is free when nobody holds it, or when its save died before committing it long enough ago.
_FREE = "attribute_not_exists(PK) OR (committed = :f AND claimed_at < :stale)"


class ClaimStore(Protocol):
    def claim(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        """Claim ``keys``; return those this call claimed (the others are held by earlier saves)."""
        ...

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None: ...

    def release(self, app_name: str, user_id: str, keys: list[str]) -> None:
        """Give claims back (a failed save, or a forgotten direct text)."""
        ...

    def release_texts(self, app_name: str, user_id: str) -> None:
        """Release every direct-text claim of the user (forget all); event claims stay."""
        ...


TEXT_PREFIX = "T#"


class DynamoClaimStore:
    def __init__(self, client: Any, table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._db = client
        self._table = table_name
        self._clock = clock

    @staticmethod
    def _pk(app_name: str, user_id: str) -> dict[str, str]:
        return {"S": f"M#{app_name}#{user_id}"}

    def claim(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        # One conditional PutItem per key, a few at a time: half the write units of a transaction, and one
        # key already held does not cancel the others.
        unique = list(dict.fromkeys(keys))
        if len(unique) <= 1:
            return {k for k in unique if self._claim_one(app_name, user_id, k)}
        with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
            won = list(pool.map(lambda k: self._claim_one(app_name, user_id, k), unique))
        return {k for k, ok in zip(unique, won, strict=True) if ok}

    def _claim_one(self, app_name: str, user_id: str, key: str) -> bool:
        now = self._clock()
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "PK": self._pk(app_name, user_id),
                    "SK": {"S": f"C#{key}"},
                    "committed": {"BOOL": False},
                    "claimed_at": {"N": repr(now)},
                },
                ConditionExpression=_FREE,
                ExpressionAttributeValues={":f": {"BOOL": False}, ":stale": {"N": repr(now - STALE_AFTER_S)}},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

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

    def release_texts(self, app_name: str, user_id: str) -> None:
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
            "ExpressionAttributeValues": {":pk": self._pk(app_name, user_id), ":p": {"S": f"C#{TEXT_PREFIX}"}},
            "ProjectionExpression": "SK",
        }
        keys: list[str] = []
        while True:
            response = self._db.query(**params)
            keys += [item["SK"]["S"][2:] for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        self.release(app_name, user_id, keys)


class InMemoryClaimStore:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str, str], tuple[bool, float]] = {}
        self._clock = clock

    def claim(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        with self._lock:
            now = self._clock()
            claimed = set()
            for key in dict.fromkeys(keys):
                held = self._claims.get((app_name, user_id, key))
                if held is None or (not held[0] and held[1] < now - STALE_AFTER_S):
                    self._claims[(app_name, user_id, key)] = (False, now)
                    claimed.add(key)
            return claimed

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._claims[(app_name, user_id, key)] = (True, self._clock())

    def release(self, app_name: str, user_id: str, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._claims.pop((app_name, user_id, key), None)

    def release_texts(self, app_name: str, user_id: str) -> None:
        with self._lock:
            for claim in [c for c in self._claims if c[:2] == (app_name, user_id) and c[2].startswith(TEXT_PREFIX)]:
                del self._claims[claim]
