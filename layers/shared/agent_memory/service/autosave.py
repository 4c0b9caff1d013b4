"""Auto-save: the store's change feed hands new events to long-term memory, by the deployment's policy.

The feed is the table's stream in AWS and the SQLite outbox when embedded; the store's adapter turns its records
into ``Change``s (session key, event, record id), so no storage key format is parsed here. Records arrive in batches
(the event source mapping's batch size and batching window: by default up to 1000 records gathered for at most
300 s, so that a user's save holds several of their turns). Events are grouped by session, the sessions by user, and
each user's are saved in one write of their memory through the same path as the save route (the same record ids,
the same forgotten events). A user whose save fails has their records reported as batch item failures (a session
whose events cannot be read, only that session's), so Lambda retries from there without losing or duplicating the
rest: a retried record that was already stored is skipped by the memory store, which never stores an id twice (a
save that failed after its records landed). An event whose stored timestamp no datetime holds (old data) is dated
by the save time, so it never makes every later batch of its session fail.

Batches are large (the mapping's window, not its count, cuts them: several turns of each user per save), so a
batch can hold more users than one invocation saves in its time: no user's save is started with less than
``SAVE_RESERVE_S`` left before the function's timeout. The users not reached are reported as batch item
failures, and Lambda hands their records over again (with the later records of users already saved, which
the memory store skips), instead of the function being stopped in the middle of a save.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import QuotaExceeded
from ..policy.autosave import MemoryPolicy, apply_policy, memory_text, parse_policy
from ..policy.messages import is_compaction
from ..stores.ports import Change, EventQuery, SessionKey, SessionStore
from .memories import CONTEXT_TURNS, MemoryService

logger = logging.getLogger(__name__)

# How far back, past the events the policy drops (an agent's turns, tool calls), a batch's first memories look for
# the turns of their retrieval context: at most this many events more than the ``CONTEXT_TURNS`` read first, in
# reads of doubling size (4, 8, …), made only while the events read hold fewer than ``CONTEXT_TURNS`` kept turns.
LOOKBACK_EVENTS = 50

# No user's save starts with less time than this left before the function's timeout: one save's writes after its
# model calls (the manifest read, the forgotten events' read, the part, the manifest: each botocore's 3 attempts of
# a 1 s connect and 3 s read at worst) fit in it, and the handler ends model calls ``functions/autosave``'s reserve
# before the timeout. A save the function were stopped in leaves nothing held (a part at worst, an orphan the next
# writes sweep), but its records wait for the batch's retry. An invocation
# given less time than the function's 300 s (a local emulation's context) keeps a fifth of what it started with.
SAVE_RESERVE_S = 60.0
SAVE_RESERVE_SHARE = 0.2


def handle_feed(
    records: list[dict[str, Any]],
    store: SessionStore,
    service: MemoryService,
    policy_value: str | dict[str, Any],
    time_left_s: Callable[[], float | None] | None = None,
) -> dict[str, list[dict[str, str]]]:
    """A change-feed batch: the offloaded payloads of the events the retention's expiry removed are deleted
    (``purge_expired``; nothing else deletes them, so this runs with auto-save off too), the new events saved
    (``handle_changes``); the Lambda partial-batch response of both."""
    expired = [{"itemIdentifier": sequence} for sequence in store.purge_expired(records)]
    saved = handle_changes(store.changes(records), service, store.read_events, policy_value, time_left_s)
    return {"batchItemFailures": saved["batchItemFailures"] + expired}


def handle_changes(
    changes: list[Change],
    service: MemoryService,
    read_events: Callable[[SessionKey, EventQuery], list[dict[str, Any]]],
    policy_value: str | dict[str, Any],
    time_left_s: Callable[[], float | None] | None = None,
) -> dict[str, list[dict[str, str]]]:
    """Save the new events of a change-feed batch (the store's adapter parsed its records into ``Change``s);
    return the Lambda partial-batch response. ``time_left_s`` tells the seconds left before the function's
    timeout (None: no deadline): the users a save could not start for in time are reported failed."""
    if policy_value == "off":
        return {"batchItemFailures": []}
    policy = parse_policy(policy_value)
    groups: dict[SessionKey, list[Change]] = {}
    for change in changes:
        groups.setdefault(change.key, []).append(change)
    users: dict[tuple[str, str], list[SessionKey]] = {}
    for key in groups:
        users.setdefault((key.app_name, key.user_id), []).append(key)
    failures: list[dict[str, str]] = []
    out_of_time = 0
    started_with = time_left_s() if time_left_s is not None else None
    reserve = None if started_with is None else min(SAVE_RESERVE_S, SAVE_RESERVE_SHARE * started_with)
    for (app_name, user_id), keys in users.items():
        left = time_left_s() if time_left_s is not None else None
        if out_of_time or (left is not None and reserve is not None and left < reserve):
            out_of_time += 1
            failures += [{"itemIdentifier": c.sequence} for key in keys for c in groups[key]]
            continue
        # One save per user: each save reads and rewrites the user's memory (S3 requests, most of auto-save's
        # cost), whatever number of sessions it holds. A session that cannot be prepared fails alone.
        ready: list[tuple[SessionKey, list[dict[str, Any]], list[dict[str, Any]]]] = []
        for key in keys:
            try:
                ready.append(_session_batch(key, groups[key], policy, read_events))
            except Exception:
                logger.exception("auto-save failed; its records will be retried", extra={"session_id": key.session_id})
                failures += [{"itemIdentifier": c.sequence} for c in groups[key]]
        if not ready:
            continue
        sessions = [key.session_id for key, _, _ in ready]
        try:
            result = service.save_user_events(app_name, user_id, ready, policy)
            logger.info("auto-saved", extra={"user_id": user_id, "session_ids": sessions, **result})
        except QuotaExceeded as exc:
            # Retrying would fail the same way (and hold the stream back): the events stay in their session,
            # unsaved; the user (or an admin) frees memories and saves the session explicitly.
            logger.warning(
                "auto-save skipped: memory quota reached", extra={"session_ids": sessions, "error": exc.message}
            )
        except Exception:
            logger.exception("auto-save failed; its records will be retried", extra={"session_ids": sessions})
            failures += [{"itemIdentifier": c.sequence} for key, _, _ in ready for c in groups[key]]
    if out_of_time:
        logger.warning(
            "auto-save stopped before the function's timeout; the records of the users not reached are retried",
            extra={"users_left": out_of_time, "users": len(users)},
        )
    return {"batchItemFailures": failures}


def _session_batch(
    key: SessionKey,
    group: list[Change],
    policy: MemoryPolicy,
    read_events: Callable[[SessionKey, EventQuery], list[dict[str, Any]]],
) -> tuple[SessionKey, list[dict[str, Any]], list[dict[str, Any]]]:
    """A session's new events in order and the turns just before them (their retrieval context)."""
    unread = next((c.unread for c in group if c.unread), None)
    if unread:
        raise RuntimeError(f"an event of the batch could not be read: {unread}")
    events = sorted((c.event for c in group), key=lambda e: int(e.get("seq") or 0))
    first = int(events[0].get("seq") or 1)
    previous = previous_turns(key, first, policy, read_events)
    return key, events, previous


def previous_turns(
    key: SessionKey,
    first: int,
    policy: MemoryPolicy,
    read_events: Callable[[SessionKey, EventQuery], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The session's events before seq ``first`` that the batch's first memories take their retrieval context
    from, so that auto-save stores the context an explicit save of the whole session stores, wherever a batch
    starts: the last ``CONTEXT_TURNS`` events, and while the policy keeps fewer turns of those read (in a
    conversation with an agent the default policy drops every other turn), earlier ones, in reads of doubling size,
    at most ``LOOKBACK_EVENTS`` more. Two people's turns cost one read of two events; a person's and an agent's,
    two reads of six."""
    if first <= 1:
        return []
    events = read_events(key, EventQuery(up_to_seq=first - 1, num_recent=CONTEXT_TURNS))
    page = CONTEXT_TURNS
    while events and sum(_is_context_turn(e, policy) for e in events) < CONTEXT_TURNS:
        oldest = int(events[0].get("seq") or 1)
        page = min(page * 2, CONTEXT_TURNS + LOOKBACK_EVENTS - len(events))
        if oldest <= 1 or page <= 0:
            break
        earlier = read_events(key, EventQuery(up_to_seq=oldest - 1, num_recent=page))
        if not earlier:
            break
        events = earlier + events
    return events


def _is_context_turn(event: dict[str, Any], policy: MemoryPolicy) -> bool:
    """Whether ``event`` enters a later memory's context in ``MemoryService.save_events``."""
    if is_compaction(event) or not event.get("id"):
        return False
    kept = apply_policy(event, policy)
    return kept is not None and bool(memory_text(kept))
