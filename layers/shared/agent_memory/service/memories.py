"""Long-term memory use cases: save (a session's events by policy, or texts directly), search, forget."""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..bounds import MAX_BATCH
from ..errors import InvalidInput, SessionNotFound, UnprocessableInput
from ..policy.autosave import MemoryPolicy, apply_policy, memory_text, normalise_role, parse_policy
from ..policy.identifiers import validate_identifier
from ..policy.messages import is_compaction
from ..requests import MAX_TOP_K, MemoryText
from ..stores.claims import TEXT_PREFIX, ClaimStore
from ..stores.memories import MemoryRecord, MemoryStore
from ..stores.ports import EventQuery, SessionKey, SessionStore

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = 5
CONTEXT_TURNS = 2  # turns before a memory, in its session, indexed with it (contextual retrieval)


def event_memory_id(session_id: str, event_id: str) -> str:
    return "e-" + hashlib.sha256(f"{session_id}\x00{event_id}".encode()).hexdigest()[:32]


def text_memory_id(text: str) -> str:
    return "t-" + hashlib.sha256(_normalise_text(text).encode()).hexdigest()[:32]


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def claim_key(record: MemoryRecord) -> str:
    """The idempotency key of a record: its event, or (for a direct add) its text."""
    if record.event_id is not None and record.session_id is not None:
        return f"E#{record.session_id}#{record.event_id}"
    return TEXT_PREFIX + record.id[2:]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _date_text(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%A %d %B %Y")


def memory_entry(record: MemoryRecord, score: float) -> dict[str, Any]:
    """An ADK MemoryEntry plus its score."""
    return {
        "id": record.id,
        "content": {"role": "user" if record.role == "user" else "model", "parts": [{"text": record.text}]},
        "author": record.author,
        "timestamp": _iso(record.timestamp),
        "custom_metadata": record.custom_metadata or {},
        "score": score,
    }


class MemoryService:
    def __init__(
        self,
        sessions: SessionStore,
        memories: MemoryStore,
        claims: ClaimStore,
        search: Callable[[Any, str, int], list[tuple[str, float]]],
        default_policy: str | dict[str, Any] = "default",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sessions = sessions
        self._memories = memories
        self._claims = claims
        self._search = search
        self._default_policy = default_policy
        self._clock = clock

    # --- save -----------------------------------------------------------------------------------------------

    def save_session(
        self, *, app_name: str, user_id: str, session_id: str, policy: str | dict[str, Any] | None = None
    ) -> dict[str, int]:
        """Save a session's events to long-term memory by ``policy`` (default ``default``), each event once."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        validate_identifier(session_id, "session_id", UnprocessableInput)
        parsed = parse_policy(policy, default="default")
        key = SessionKey(app_name, user_id, session_id)
        if self._sessions.get_session(key) is None:
            raise SessionNotFound(session_id)
        events = self._sessions.read_events(key, EventQuery())
        return self.save_events(key, events, parsed, previous=[])

    def save_events(
        self,
        key: SessionKey,
        events: list[dict[str, Any]],
        policy: MemoryPolicy,
        previous: list[dict[str, Any]],
    ) -> dict[str, int]:
        """Store the events ``policy`` keeps, each once; ``previous`` are the session's events just before
        ``events`` (context for the first ones)."""
        records: list[MemoryRecord] = []
        # Context for contextual retrieval: the texts the policy kept of the turns just before each memory
        # (what it filtered out is never stored, not even as context).
        history: list[str] = []
        for event in previous:
            kept = apply_policy(event, policy) if not is_compaction(event) else None
            if kept is not None and (text := memory_text(kept)):
                history = [*history, f"{event.get('author') or ''}: {text}"][-CONTEXT_TURNS:]
        for event in events:
            if is_compaction(event):
                continue
            kept = apply_policy(event, policy)
            if kept is None or not event.get("id"):
                continue
            text = memory_text(kept)
            author = str(event.get("author") or normalise_role(event))
            stamp = event.get("timestamp")  # 0 is a time too (the epoch), not a missing one
            ts = float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else self._clock()
            records.append(
                MemoryRecord(
                    id=event_memory_id(key.session_id, str(event["id"])),
                    text=text,
                    author=author,
                    timestamp=ts,
                    role=normalise_role(event),
                    session_id=key.session_id,
                    event_id=str(event["id"]),
                    custom_metadata=event.get("custom_metadata"),
                    context=" ".join([*history, _date_text(ts)]),
                )
            )
            if text:
                history = [*history, f"{author}: {text}"][-CONTEXT_TURNS:]
        saved = self._store(key.app_name, key.user_id, records)
        return {"saved": saved, "skipped": len([e for e in events if not is_compaction(e)]) - saved}

    def add_texts(self, *, app_name: str, user_id: str, memories: Sequence[MemoryText]) -> dict[str, int]:
        """Add texts directly (1-100, validated by the request model); a text already stored is skipped."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        if not memories:
            raise UnprocessableInput("memories must be a non-empty list", field="memories")
        if len(memories) > MAX_BATCH:
            raise UnprocessableInput(f"memories holds {len(memories)} items; at most {MAX_BATCH}", field="memories")
        records: dict[str, MemoryRecord] = {}
        for item in memories:
            ts = self._clock() if item.timestamp is None else item.timestamp
            record = MemoryRecord(
                id=text_memory_id(item.text),
                text=item.text.strip(),
                author="user",
                timestamp=ts,
                role="user",
                custom_metadata=item.metadata,
                context=_date_text(ts),
            )
            records.setdefault(record.id, record)
        saved = self._store(app_name, user_id, list(records.values()))
        return {"saved": saved, "skipped": len(memories) - saved}

    def _store(self, app_name: str, user_id: str, records: list[MemoryRecord]) -> int:
        if not records:
            return 0
        keys = {claim_key(r): r for r in records}
        claimed = self._claims.claim(app_name, user_id, list(keys))
        fresh = [keys[k] for k in keys if k in claimed]
        try:
            self._memories.add(app_name, user_id, fresh)
        except Exception:
            self._claims.release(app_name, user_id, list(claimed))
            raise
        self._claims.commit(app_name, user_id, list(claimed))
        return len(fresh)

    # --- search and forget ----------------------------------------------------------------------------------

    def search(self, *, app_name: str, user_id: str, query: str, top_k: int = DEFAULT_TOP_K) -> dict[str, Any]:
        """The user's memories that best match ``query``, best first (at most ``top_k``)."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        if not query.strip():
            raise InvalidInput("query must be a non-blank string", field="query")
        if isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInput(f"top_k must be an integer from 1 to {MAX_TOP_K}", field="top_k")
        view = self._memories.view(app_name, user_id)
        if view.index is None or not view.records:
            return {"memories": []}
        hits = self._search(view.index, query, top_k)
        return {"memories": [memory_entry(view.records[i], s) for i, s in hits if i in view.records][:top_k]}

    def forget(self, app_name: str, user_id: str, memory_id: str) -> None:
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        validate_identifier(memory_id, "memory_id")
        record = self._memories.view(app_name, user_id).records.get(memory_id)
        if record is None:
            return  # idempotent: forgetting what is not there succeeds
        self._memories.forget(app_name, user_id, [memory_id])
        if record.event_id is None:
            self._claims.release(app_name, user_id, [claim_key(record)])

    def forget_all(self, app_name: str, user_id: str) -> None:
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        self._memories.forget_all(app_name, user_id)
        self._claims.release_texts(app_name, user_id)


@functools.cache
def default_memory_service() -> MemoryService:
    """Wired to DynamoDB (sessions, claims), S3 (memories) and the configured embedder."""
    from ..aws import client
    from ..config import settings
    from ..search.index import Doc, SearchIndex
    from ..stores.claims import DynamoClaimStore
    from ..stores.memories import S3MemoryStore
    from .sessions import default_session_service

    cfg = settings()
    embedder = default_embedder()

    def build(records: list[MemoryRecord]) -> SearchIndex:
        return SearchIndex.build(
            [Doc(id=r.id, text=f"{r.author}: {r.text}", context=r.context) for r in records], embedder
        )

    memories = S3MemoryStore(lambda: client("s3"), cfg.bucket_name, build, SearchIndex.from_bytes, SearchIndex.combine)
    return MemoryService(
        default_session_service().store,
        memories,
        DynamoClaimStore(client("dynamodb"), cfg.table_name),
        lambda index, query, k: index.search(query, k, embedder=embedder),
        default_policy=cfg.autosave_policy_value(),
    )


@functools.cache
def default_embedder() -> Any:
    from ..config import settings
    from ..providers.embedders import build_embedder

    cfg = settings()
    return build_embedder(
        cfg.embedder,
        model=cfg.embedder_model,
        endpoint=cfg.embedder_endpoint,
        api_key_parameter=cfg.embedder_api_key_parameter,
        api_key_secret=cfg.embedder_api_key_secret,
    )
