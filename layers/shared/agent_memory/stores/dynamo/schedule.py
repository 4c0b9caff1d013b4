"""The compaction schedule's index: sessions an append or a deletion marked due (``due``, ``due_since``), in
``DUE_SHARDS`` partitions of the sparse global index ``by_due``."""

from __future__ import annotations

from typing import Any

from ..ports import SessionKey
from .keys import DUE_SHARDS, N, S, session_key
from .retries import Budget
from .table import Table


def list_due(table: Table, limit: int) -> list[SessionKey]:
    """Up to ``limit`` due sessions, oldest first in each shard, the shards interleaved.

    Every round asks each shard that has more for an equal share of what is left (paging past a query's
    1 MB), so a busy shard cannot fill the listing while the others wait: with more sessions due than
    ``limit``, every shard gets its share and its oldest go first. The index is eventually consistent (a
    GSI always is): a session marked a moment ago may wait for the next run.
    """
    budget = Budget()
    listed: dict[int, list[SessionKey]] = {shard: [] for shard in range(DUE_SHARDS)}
    cursors: dict[int, dict[str, Any] | None] = dict.fromkeys(range(DUE_SHARDS))
    total = 0
    while total < limit and cursors:
        share = max(1, -(-(limit - total) // len(cursors)))
        for shard in list(cursors):
            if total >= limit:
                break
            params: dict[str, Any] = {
                "TableName": table.name,
                "IndexName": "by_due",
                "KeyConditionExpression": "due = :d",
                "ExpressionAttributeValues": {":d": S(f"DUE#{shard}")},
                "Limit": min(share, limit - total),
            }
            if cursors[shard] is not None:
                params["ExclusiveStartKey"] = cursors[shard]
            response = budget.call(table.db.query, **params)
            for item in response.get("Items", []):
                _, app_name, user_id = item["PK"]["S"].split("#", 2)
                listed[shard].append(SessionKey(app_name, user_id, item["SK"]["S"][2:]))
                total += 1
            if response.get("LastEvaluatedKey"):
                cursors[shard] = response["LastEvaluatedKey"]
            else:
                del cursors[shard]
    # Interleaved by rank (each shard's oldest, then each one's second …): a sweep that runs out of time leaves
    # the newest of every shard, not a whole shard.
    longest = max((len(keys) for keys in listed.values()), default=0)
    return [keys[rank] for rank in range(longest) for keys in listed.values() if rank < len(keys)]


def clear_due(table: Table, key: SessionKey, version: int) -> bool:
    """Take the session off the schedule unless an append moved its version since the compaction read it."""
    try:
        # Idempotent: a retry after a lost answer meets the same version and removes nothing more.
        Budget().call(
            table.db.update_item,
            TableName=table.name,
            Key=session_key(key),
            UpdateExpression="REMOVE due, due_since",
            ConditionExpression="version = :v",
            ExpressionAttributeValues={":v": N(version)},
        )
    except table.db.exceptions.ConditionalCheckFailedException:
        return False
    return True
