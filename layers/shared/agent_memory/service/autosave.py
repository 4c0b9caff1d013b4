"""Auto-save: the table's stream hands new events to long-term memory, by the deployment's policy.

Records arrive in batches (the event source mapping's batch size and batching window play the role of
"every 60 seconds or every 10 events"). Events are grouped by session and saved through the same path as
the save route, sharing its idempotency record. A session whose save fails has its records reported as
batch item failures, so Lambda retries from there without losing or duplicating the rest: a retried record
that was already stored is skipped by its claim, or by the memory store, which never stores an id twice (a
save that failed after its records landed). An event whose stored timestamp no datetime holds (old data) is
dated by the save time, so it never makes every later batch of its session fail.
"""

from __future__ import annotations

import logging
from typing import Any

from ..policy.autosave import parse_policy
from ..stores.ports import EventQuery, SessionKey
from .memories import CONTEXT_TURNS, MemoryService

logger = logging.getLogger(__name__)


def session_key_of(pk: str) -> SessionKey:
    _, app_name, user_id, session_id = pk.split("#", 3)
    return SessionKey(app_name, user_id, session_id)


def handle_stream_batch(
    records: list[dict[str, Any]],
    service: MemoryService,
    read_event: Any,
    read_events: Any,
    policy_value: str | dict[str, Any],
) -> dict[str, list[dict[str, str]]]:
    """Save the batch's new events; return the Lambda partial-batch response."""
    if policy_value == "off":
        return {"batchItemFailures": []}
    policy = parse_policy(policy_value)
    groups: dict[SessionKey, list[tuple[str, dict[str, Any]]]] = {}
    for record in records:
        change = record.get("dynamodb") or {}
        image = change.get("NewImage") or {}
        sk = (change.get("Keys") or {}).get("SK", {}).get("S", "")
        if record.get("eventName") != "INSERT" or not sk.startswith("V#") or not image:
            continue
        key = session_key_of(image["PK"]["S"])
        groups.setdefault(key, []).append((change.get("SequenceNumber", ""), image))
    failures: list[dict[str, str]] = []
    for key, items in groups.items():
        try:
            events = sorted((read_event(image) for _, image in items), key=lambda e: int(e.get("seq") or 0))
            first = int(events[0].get("seq") or 1)
            previous = read_events(key, EventQuery(up_to_seq=first - 1, num_recent=CONTEXT_TURNS)) if first > 1 else []
            result = service.save_events(key, events, policy, previous)
            logger.info("auto-saved", extra={"session_id": key.session_id, **result})
        except Exception:
            logger.exception("auto-save failed; its records will be retried", extra={"session_id": key.session_id})
            failures += [{"itemIdentifier": sequence} for sequence, _ in items]
    return {"batchItemFailures": failures}
