"""The table's keys and attribute names, and typed attribute values (``{"S": …}``, ``{"N": …}``) both ways.

Nothing here makes a request: every other module of the store builds on it.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from ..ports import SessionKey

STATE_ATTR_PREFIX = "st:"
# The sort key of the user's and app's state items (in their partitions) and of a session's state item (in the
# session's events partition, where no index takes it: it has no seq or ts).
STATE_SK = "#STATE"
# On a session item: when its state item expires (with a retention). The state item is written with twice the
# retention and moved on by the first append that would outlive it, so it outlives the session without every
# append rewriting it.
STATE_EXPIRY_ATTR = "stx"
# On every session item: its state is in its state item. No read needs it; it stays in the stored format.
STATE_ITEM_ATTR = "sti"
# On the user's state item: how many sessions the user holds (the MaxSessionsPerUser quota's count); on a session
# item: that it is in that count (an import's placeholder is not).
SESSIONS_ATTR = "sessions"
COUNTED_ATTR = "counted"
# On a session item made by a create: no payload (an event body offloaded to S3) was ever uploaded under this
# incarnation, so its DELETE need not list the bucket (an S3 client and a LIST: most of a cold delete's first
# response). Removed before the incarnation's first upload (``appends``); never on an imported or placeholder
# item, nor with a retention (TTL removes items, never payloads), whose deletes list the bucket.
NO_PAYLOADS_ATTR = "nb"
IMPORTED_ATTR = "imp"
# On a session item: the greatest timestamp of its events and the most one fell below the greatest before it
# (``items.TimeOrder``). Events keep their timestamp in ``t``, which no index takes.
TIME_MAX_ATTR = "tmax"
TIME_SKEW_ATTR = "tskew"
# On a session item: when the claim-first append (``claim_first``) last claimed a seq. A put lands within the
# function's 29 s of its claim, so once this is ``policy.compaction.CLAIM_SETTLE_S`` old no hole can be filled.
CLAIM_TIME_ATTR = "ct"
MEMO_ATTR = "memo"
# An event's body stored zlib-compressed, binary, in place of its JSON text ``body`` (``items.with_body``).
COMPRESSED_BODY_ATTR = "bz"
# The custom_metadata key that marks an event read back without its offloaded payload (the object is gone).
PAYLOAD_MISSING_META = "agent_memory:payload_missing"
# The stream record's ``userIdentity`` of an item DynamoDB's TTL deleted (a request's deletion carries none).
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

DUE_SHARDS = 8
# A Query's Limit stays an int32 whatever a client asks for (one call returns at most 1 MB anyway).
QUERY_LIMIT_MAX = 10_000


def due_shard(key: SessionKey) -> str:
    """The partition of the due index a session goes to (spread so that no partition is hot)."""
    return f"DUE#{zlib.crc32(f'{key.app_name}#{key.user_id}#{key.session_id}'.encode()) % DUE_SHARDS}"


def session_pk(app_name: str, user_id: str) -> str:
    return f"U#{app_name}#{user_id}"


def app_pk(app_name: str) -> str:
    return f"A#{app_name}"


def events_pk(key: SessionKey) -> str:
    return f"E#{key.app_name}#{key.user_id}#{key.session_id}"


def session_key(key: SessionKey) -> dict[str, Any]:
    """The key of the session item (in its user's partition)."""
    return {"PK": S(session_pk(key.app_name, key.user_id)), "SK": S(f"S#{key.session_id}")}


def state_key(key: SessionKey) -> dict[str, Any]:
    """The key of the session's state item (in its events partition)."""
    return {"PK": S(events_pk(key)), "SK": S(STATE_SK)}


def event_key(key: SessionKey, event_id: str) -> dict[str, Any]:
    return {"PK": S(events_pk(key)), "SK": S(f"V#{event_id}")}


def blob_prefix(key: SessionKey) -> str:
    """Where a session's offloaded payloads live in the context bucket (every incarnation)."""
    return f"sessions/{key.app_name}/{key.user_id}/{key.session_id}/"


def incarnation_prefix(key: SessionKey, incarnation: str) -> str:
    """Where one incarnation's payloads live."""
    return f"{blob_prefix(key)}{incarnation}/"


def S(value: str) -> dict[str, str]:
    return {"S": value}


def N(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def string_attr(item: dict[str, Any], name: str) -> str:
    """A string attribute of an item, "" when absent."""
    return str(item.get(name, {}).get("S", ""))


def number_attr(item: dict[str, Any], name: str) -> float | None:
    try:
        return float(item[name]["N"])
    except (KeyError, TypeError, ValueError):
        return None


def whole_attr(item: dict[str, Any], name: str) -> int:
    value = number_attr(item, name)
    return int(value) if value is not None and value.is_integer() else 0


def state_json(value: Any) -> dict[str, str]:
    """A state value as its ``st:`` attribute holds it: JSON text, so values keep their JSON types exactly."""
    return S(json.dumps(value, separators=(",", ":")))


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Update:
    """Builds an UpdateExpression's SET clause with placeholder names and values."""

    def __init__(self) -> None:
        self.sets: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def set(self, attr: str, value: dict[str, Any], *, if_absent: bool = False) -> None:
        i = len(self.names)
        self.names[f"#a{i}"] = attr
        self.values[f":v{i}"] = value
        self.sets.append(f"#a{i} = if_not_exists(#a{i}, :v{i})" if if_absent else f"#a{i} = :v{i}")

    def set_state(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            self.set(STATE_ATTR_PREFIX + k, state_json(v))

    def expression(self) -> str:
        return "SET " + ", ".join(self.sets)
