"""The idempotency record of long-term memory: which events (and which direct texts) a user's memory holds.

Auto-save and explicit saves share it: a save first claims its candidates with conditional writes, stores
only what it claimed, then commits the claims. Whichever save runs first stores an event; the other stores
nothing for it. A claim that was never committed (its save died between claim and commit) goes stale after
``STALE_AFTER_S`` and can be claimed again. Event claims outlive a forget, so that a forgotten memory never
comes back through auto-save; the claim of a directly added text is released when it is forgotten, so the
user can add it again.

Faults: a claim whose answer was lost is recognised as this save's by the ``owner`` token it carries; a claim
call that fails gives back what it claimed; a save whose store failed gives back (``abandon``) only the claims
of records that did not land, and a commit never undoes a claim. A claim left uncommitted by a fault goes stale;
the memory store skips records it already holds, so a later save of them stores nothing twice.

DynamoDB items: ``M#{app}#{user}`` / ``C#{claim key}`` with ``committed``, ``claimed_at``, ``owner``.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .dynamo import batch_write
from .ports import EVENT_PREFIX, STALE_AFTER_S, TEXT_PREFIX

logger = logging.getLogger(__name__)
# A claim is free when nobody holds it, or when its save died before committing it long enough ago.
_FREE = "attribute_not_exists(PK) OR (committed = :f AND claimed_at < :stale)"


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
        owner = uuid.uuid4().hex
        if len(unique) <= 1:
            return {k for k in unique if self._claim_one(app_name, user_id, k, owner)}
        with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
            futures = [pool.submit(self._claim_one, app_name, user_id, k, owner) for k in unique]
        won = {k for k, f in zip(unique, futures, strict=True) if f.exception() is None and f.result()}
        failure = next((f.exception() for f in futures if f.exception() is not None), None)
        if failure is not None:
            # Nothing is stored for them yet: give them back, or a retry would find them held for minutes.
            try:
                self.abandon(app_name, user_id, sorted(won))
            except Exception as exc:
                logger.warning("could not give back the claims of a failed claim call", extra={"error": repr(exc)})
            raise failure
        return won

    def _claim_one(self, app_name: str, user_id: str, key: str, owner: str) -> bool:
        now = self._clock()
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "PK": self._pk(app_name, user_id),
                    "SK": {"S": f"C#{key}"},
                    "committed": {"BOOL": False},
                    "claimed_at": {"N": repr(now)},
                    "owner": {"S": owner},
                },
                ConditionExpression=_FREE,
                ExpressionAttributeValues={":f": {"BOOL": False}, ":stale": {"N": repr(now - STALE_AFTER_S)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            # Held: by another save, or by this one when an applied PutItem lost its answer and botocore's
            # retry met the condition the first attempt made true.
            held = exc.response.get("Item") or {}
            return bool(held.get("owner", {}).get("S") == owner and not held.get("committed", {}).get("BOOL"))
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

    def abandon(self, app_name: str, user_id: str, keys: list[str]) -> None:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return
        with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
            for future in [pool.submit(self._abandon_one, app_name, user_id, k) for k in unique]:
                future.result()

    def _abandon_one(self, app_name: str, user_id: str, key: str) -> None:
        # A claim committed since (a forget marked it) or gone already: nothing to give back.
        with contextlib.suppress(self._db.exceptions.ConditionalCheckFailedException):
            self._db.delete_item(
                TableName=self._table,
                Key={"PK": self._pk(app_name, user_id), "SK": {"S": f"C#{key}"}},
                ConditionExpression="committed = :f",
                ExpressionAttributeValues={":f": {"BOOL": False}},
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
