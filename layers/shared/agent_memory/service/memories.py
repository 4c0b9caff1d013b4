"""Long-term memory use cases: save (a session's events by policy, or texts directly), search, forget."""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, SessionNotFound, UnprocessableInput
from ..limits import MAX_BATCH, MAX_DATETIME_SECONDS, MAX_TOP_K, MIN_DATETIME_SECONDS
from ..policy.identifiers import validate_identifier
from ..policy.quotas import NO_QUOTAS, Quotas
from ..stores.ports import (
    EVENT_PREFIX,
    ClaimStore,
    EventQuery,
    MemoryRecord,
    MemoryStore,
    NotStored,
    SessionKey,
    SessionStore,
)
from ..wire.jsonio import dumps

if TYPE_CHECKING:  # named only: no pydantic on a search function's cold path (edge/params.py)
    from ..edge.requests import MemoryText
    from ..models import Event
    from ..policy.autosave import MemoryPolicy
    from ..providers.ports import FactExtractor

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = 5
# Explicit events (``add_events``): every role's text, tool calls and results; no thoughts, nothing empty.
EXPLICIT_EVENTS_POLICY: dict[str, Any] = {"preset": "all", "include_thought": False, "include_empty_text": False}
NO_SESSION = ""  # the id scope of explicit events sent without a session
CONTEXT_TURNS = 2  # turns before a memory, in its session, indexed with it (contextual retrieval)
# Where a memory's retrieval context came from: the memories of the turns before it, and of its reply (the turn just
# after it, said by another author, when the same save holds it), as (memory id, "author: text") fragments.
Sources = dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]]


def event_memory_id(session_id: str, event_id: str) -> str:
    return "e-" + hashlib.sha256(f"{session_id}\x00{event_id}".encode()).hexdigest()[:32]


def text_memory_id(text: str) -> str:
    return "t-" + hashlib.sha256(_normalise_text(text).encode()).hexdigest()[:32]


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def claim_key(session_id: str, event_id: str) -> str:
    """The key that marks an event forgotten (``ClaimStore``). A directly added text is never marked: only an
    event's save could bring a forgotten memory back unasked, and the user may add the text again."""
    return f"{EVENT_PREFIX}{session_id}#{event_id}"


def _finite_timestamp(value: Any) -> float | None:
    """``value`` as epoch seconds when it is a number a datetime can hold; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        ts = float(value)
    except (ValueError, OverflowError):
        return None
    return ts if math.isfinite(ts) and MIN_DATETIME_SECONDS <= ts <= MAX_DATETIME_SECONDS else None


def _iso(ts: float) -> str:
    safe = _finite_timestamp(ts)
    if safe is None:  # out of range: the nearest end (NaN: the epoch)
        safe = MAX_DATETIME_SECONDS if ts > 0 else MIN_DATETIME_SECONDS if ts < 0 else 0.0
    return datetime.fromtimestamp(safe, tz=UTC).isoformat().replace("+00:00", "Z")


def _date_text(ts: float) -> str:
    safe = _finite_timestamp(ts)
    return "" if safe is None else datetime.fromtimestamp(safe, tz=UTC).strftime("%A %d %B %Y")


def _context_text(before: list[str], ts: float) -> str:
    """A memory's retrieval context: the turns before it, then its date (``"Caroline: … Melanie: … Monday 08 May
    2023"``)."""
    return " ".join(part for part in [*before, _date_text(ts)] if part)


# Facts of texts extracted on read, by a digest of the text (not the text: a long text is not kept alive by it).
_OFFLINE_FACTS: OrderedDict[bytes, tuple[tuple[str, str], ...]] = OrderedDict()
_OFFLINE_FACTS_MAX = 65536
_OFFLINE_FACTS_LOCK = threading.Lock()


def _offline_facts(text: str) -> list[dict[str, str]]:
    """The offline extractor's facts of ``text``, cached per process: a warm function reading the profile of a
    user whose records predate stored facts extracts each text once."""
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    with _OFFLINE_FACTS_LOCK:
        cached = _OFFLINE_FACTS.get(key)
        if cached is not None:
            _OFFLINE_FACTS.move_to_end(key)
    if cached is None:
        from ..providers.facts import ExtractiveFactExtractor  # its patterns compile on import: not a search's

        (facts,) = ExtractiveFactExtractor().extract([text])
        cached = tuple((f["category"], f["text"]) for f in facts)
        with _OFFLINE_FACTS_LOCK:
            _OFFLINE_FACTS[key] = cached
            while len(_OFFLINE_FACTS) > _OFFLINE_FACTS_MAX:
                _OFFLINE_FACTS.popitem(last=False)
    return [{"category": c, "text": t} for c, t in cached]


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


def _factory[T](store: T | Callable[[], T]) -> Callable[[], T]:
    """A function giving ``store``: itself when it is one (the stores are objects, never callables)."""
    if callable(store):
        return store
    return lambda: store


class MemoryService:
    """``sessions`` and ``claims`` may be given as functions that build the store when first used: a search or a
    profile read uses neither, and in the search function building them (DynamoDB clients) was part of the first
    search's cold path."""

    def __init__(
        self,
        sessions: SessionStore | Callable[[], SessionStore],
        memories: MemoryStore,
        claims: ClaimStore | Callable[[], ClaimStore],
        search: Callable[[Any, str, int, float | None], list[tuple[str, float]]],
        default_policy: str | dict[str, Any] = "default",
        clock: Callable[[], float] = time.time,
        quotas: Quotas = NO_QUOTAS,
        facts: FactExtractor | None = None,
        warm: Callable[[], None] | None = None,
    ) -> None:
        """``warm``: called when a search or a save begins, before its reads: start loading what embedding needs
        (the composition's ``preload_embedder``), so that a function that only forgets never loads it."""
        self._warm = warm or (lambda: None)
        self._quotas = quotas
        self._facts_given = facts
        self._sessions_of: Callable[[], SessionStore] = _factory(sessions)
        self._memories = memories
        self._claims_of: Callable[[], ClaimStore] = _factory(claims)
        self._search = search
        self._default_policy = default_policy
        self._clock = clock

    @property
    def _sessions(self) -> SessionStore:
        return self._sessions_of()

    @property
    def _claims(self) -> ClaimStore:
        return self._claims_of()

    # --- save -----------------------------------------------------------------------------------------------

    def save_session(
        self, *, app_name: str, user_id: str, session_id: str, policy: str | dict[str, Any] | None = None
    ) -> dict[str, int]:
        """Save a session's events to long-term memory by ``policy`` (default ``default``), each event once."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        validate_identifier(session_id, "session_id", UnprocessableInput)
        from ..policy.autosave import parse_policy  # the saves' policy code: not a forget's or a search's

        parsed = parse_policy(policy, default="default")
        key = SessionKey(app_name, user_id, session_id)
        if self._sessions.get_session(key) is None:
            raise SessionNotFound(session_id)
        events = self._sessions.read_events(key, EventQuery())
        return self.save_events(key, events, parsed, previous=[])

    def add_events(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        policy: str | dict[str, Any] | None = None,
    ) -> dict[str, int]:
        """Save explicit events (ADK's ``add_events_to_memory``): each one the policy keeps with text becomes one
        memory, once per event id within ``session_id`` (the same memory a save of that session makes; without a
        session, the ids share one scope of their own). The session need not exist. A forgotten event is never
        saved again, as with a session's events. The events in the order sent are each other's context.
        """
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        if session_id is not None:
            validate_identifier(session_id, "session_id", UnprocessableInput)
        if not events:
            raise UnprocessableInput("events must be a non-empty list", field="events")
        if len(events) > MAX_BATCH:
            raise UnprocessableInput(f"events holds {len(events)} items; at most {MAX_BATCH}", field="events")
        from ..policy.autosave import parse_policy

        parsed = parse_policy(policy, default=EXPLICIT_EVENTS_POLICY)
        dumped = []
        for event in events:
            data = event.dump()
            # An event without an id is named by its content, so that sending it again saves nothing new.
            data.setdefault("id", "c-" + hashlib.sha256(dumps(data).encode()).hexdigest()[:32])
            dumped.append(data)
        key = SessionKey(app_name, user_id, session_id or NO_SESSION)
        return self.save_events(key, dumped, parsed, previous=[])

    def save_events(
        self,
        key: SessionKey,
        events: list[dict[str, Any]],
        policy: MemoryPolicy,
        previous: list[dict[str, Any]],
    ) -> dict[str, int]:
        """Store the events ``policy`` keeps, each once; ``previous`` are the session's events just before
        ``events`` (context for the first ones)."""
        return self.save_user_events(key.app_name, key.user_id, [(key, events, previous)], policy)

    def save_user_events(
        self,
        app_name: str,
        user_id: str,
        sessions: Sequence[tuple[SessionKey, list[dict[str, Any]], list[dict[str, Any]]]],
        policy: MemoryPolicy,
    ) -> dict[str, int]:
        """Store the events ``policy`` keeps of several sessions of one user, each once, in one write of the
        user's memory (auto-save: one save per user per batch, not one per session). Each item is (session key,
        its new events, the session's events just before them): each session's memories carry the context of
        their own session only."""
        from ..policy.messages import is_compaction

        records: list[MemoryRecord] = []
        sources: Sources = {}
        candidates = 0
        for key, events, previous in sessions:
            if (key.app_name, key.user_id) != (app_name, user_id):
                raise ValueError("save_user_events saves the sessions of one user")
            records += self._session_records(key, events, policy, previous, sources)
            candidates += len([e for e in events if not is_compaction(e)])
        saved = self._store(app_name, user_id, records, sources)
        return {"saved": saved, "skipped": candidates - saved}

    def _session_records(
        self,
        key: SessionKey,
        events: list[dict[str, Any]],
        policy: MemoryPolicy,
        previous: list[dict[str, Any]],
        sources: Sources,
    ) -> list[MemoryRecord]:
        """The memory records of a session's ``events`` by ``policy``; ``sources`` gets, for each, the turns its
        context was built from."""
        from ..policy.autosave import apply_policy, memory_text, normalise_role
        from ..policy.messages import is_compaction

        records: list[MemoryRecord] = []
        # Context for contextual retrieval: the texts the policy kept of the turns just before each memory
        # (what it filtered out is never stored, not even as context), with the memory each came from: a turn
        # whose memory was forgotten must not come back as another memory's context (see ``_store``).
        history: list[tuple[str, str]] = []
        for event in previous:
            kept = apply_policy(event, policy) if not is_compaction(event) else None
            if kept is not None and event.get("id") and (text := memory_text(kept)):
                author = str(event.get("author") or normalise_role(event))
                fragment = (event_memory_id(key.session_id, str(event["id"])), f"{author}: {text}")
                history = [*history, fragment][-CONTEXT_TURNS:]
        said: list[MemoryRecord] = []  # the records with text, in order: each one's reply is the next one's
        for event in events:
            if is_compaction(event):
                continue
            kept = apply_policy(event, policy)
            if kept is None or not event.get("id"):
                continue
            text = memory_text(kept)
            author = str(event.get("author") or normalise_role(event))
            # An event stored before timestamps were bounded may hold one no datetime does (NaN, 1e20): the
            # memory is dated when it is saved instead, and the stored event stays as it is.
            # 0 is a time too (the epoch), not a missing one.
            stamp = _finite_timestamp(event.get("timestamp"))
            ts = self._clock() if stamp is None else stamp
            record = MemoryRecord(
                id=event_memory_id(key.session_id, str(event["id"])),
                text=text,
                author=author,
                timestamp=ts,
                role=normalise_role(event),
                session_id=key.session_id,
                event_id=str(event["id"]),
                custom_metadata=event.get("custom_metadata"),
                context=_context_text([f for _, f in history], ts),
            )
            records.append(record)
            sources[record.id] = (list(history), [])
            if text:
                history = [*history, (record.id, f"{author}: {text}")][-CONTEXT_TURNS:]
                said.append(record)
        # A memory's reply, the next turn kept with text, when another author said it (what the other side of a
        # conversation answered tells what a turn was about: "Are they yours at the festival?"); a same author's
        # next turn is a statement of its own. It goes into the memory's vector only (``Doc.reply``): a query word
        # still matches what the memory and the turns before it said. Only within this save: auto-save's last turn
        # of a session in a batch has none (its reply is in a later batch, and a stored memory is never rewritten).
        # The store's write sets it, with the context, from the turns stored (``_context_of_stored_turns``).
        for turn, reply in itertools.pairwise(said):
            if reply.author != turn.author:
                sources[turn.id][1].append((reply.id, f"{reply.author}: {reply.text}"))
        return records

    @staticmethod
    def _context_of_stored_turns(
        held: Mapping[str, MemoryRecord], fresh: list[MemoryRecord], sources: Sources
    ) -> list[MemoryRecord]:
        """``fresh`` records with a context and reply built only from turns whose memory is stored (``held``), or
        stored now.

        A turn whose memory was forgotten (its claim committed, its record gone) stays in the session's events,
        but its text must never be stored again, not even as the retrieval context or reply of another memory. A
        turn the policy kept but that is not stored (a save in flight) is left out too: the context is only an aid.
        """
        allowed = set(held) | {r.id for r in fresh}
        out: list[MemoryRecord] = []
        for record in fresh:
            before, after = sources.get(record.id, ([], []))
            context = _context_text(
                [fragment for memory_id, fragment in before if memory_id in allowed], record.timestamp
            )
            reply = " ".join(fragment for memory_id, fragment in after if memory_id in allowed)
            out.append(MemoryRecord(**{**record.to_json(), "context": context, "reply": reply}))
        return out

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

    def _store(
        self,
        app_name: str,
        user_id: str,
        records: list[MemoryRecord],
        sources: Sources | None = None,
    ) -> int:
        """Store each record exactly once, whatever fault an earlier attempt met: the store writes only records
        whose (deterministic) ids its view does not hold. Which records are new, which events are forgotten,
        the quota, the facts and the retrieval context are all decided in the store's write, off the one read of
        the memory it is made over (one manifest read per save in S3); nothing is written but the memory."""
        if not records:
            return 0
        self._warm()
        try:
            added = self._memories.add(app_name, user_id, records, self._preparer(app_name, user_id, records, sources))
        except NotStored as failed:
            raise failed.cause from None
        return len(added)

    def _preparer(
        self,
        app_name: str,
        user_id: str,
        records: list[MemoryRecord],
        sources: Sources | None,
    ) -> Callable[[Mapping[str, MemoryRecord]], list[MemoryRecord]]:
        """The last step of storing ``records``, run by the store off the view its write is made over (again
        when a race makes it redo the write): the records the view does not hold and whose event is not
        forgotten, checked against the quota, with their facts and their context from the turns whose memory is
        ``held`` (or stored now).

        Forgotten events are read here, after the view: a forget marks an event before its merge drops the
        record, so a mark this read misses belongs to a forget whose merge comes after the view, and the write,
        conditional on that view, loses to it and is redone (docs/design.md, "Forgotten events")."""
        with_context = bool(sources and any(before or after for before, after in sources.values()))
        with_facts: dict[str, MemoryRecord] = {}  # by id: extracted once per save, whatever the redone writes

        def prepare(held: Mapping[str, MemoryRecord]) -> list[MemoryRecord]:
            new = [r for r in records if r.id not in held]
            events = {
                claim_key(r.session_id, r.event_id): r.id
                for r in new
                if r.event_id is not None and r.session_id is not None
            }
            if events:
                gone = {events[k] for k in self._claims.forgotten(app_name, user_id, list(events))}
                new = [r for r in new if r.id not in gone]
            if not new:
                return []
            if self._quotas.memories_per_user:
                # Concurrent saves of one user may pass the limit by a batch each (at most MAX_BATCH records);
                # memory is not the hot path sessions are. Records held already (a resend) are not new. Raised
                # here, nothing is stored.
                self._quotas.check_memories(len(held), len({r.id for r in new}))
            missing = [r for r in new if r.id not in with_facts]
            if missing:
                with_facts.update((r.id, r) for r in self._with_facts(missing))
            new = [with_facts[r.id] for r in new]
            return self._context_of_stored_turns(held, new, sources or {}) if with_context else new

        return prepare

    @property
    def _facts(self) -> FactExtractor:
        """The fact extractor, the offline one unless given; made (its patterns compiled) when a save first needs it,
        so a search function's cold start never compiles them."""
        if self._facts_given is None:
            from ..providers.facts import ExtractiveFactExtractor

            self._facts_given = ExtractiveFactExtractor()
        return self._facts_given

    def _with_facts(self, records: list[MemoryRecord]) -> list[MemoryRecord]:
        """``records`` with the facts about the user their texts state (the user's own words only: what an
        assistant or a tool said is not the user's profile). Never fails the save: when extraction fails the
        records are stored without facts (None), and the profile extracts them on read."""
        spoken = [r for r in records if r.role == "user" and r.text]
        try:
            extracted = self._facts.extract([r.text for r in spoken]) if spoken else []
            if len(extracted) != len(spoken):
                raise ValueError(f"{len(extracted)} fact lists for {len(spoken)} texts")
        except Exception as exc:
            logger.warning("facts not extracted at save; the profile reads them later", extra={"error": repr(exc)})
            return records
        found = {r.id: facts for r, facts in zip(spoken, extracted, strict=True)}
        return [MemoryRecord(**{**r.to_json(), "facts": found.get(r.id, [])}) for r in records]

    # --- search and forget ----------------------------------------------------------------------------------

    def search(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int = DEFAULT_TOP_K,
        min_score: float | None = None,
    ) -> dict[str, Any]:
        """The user's memories that best match ``query``, best first (at most ``top_k``), leaving out those whose
        score is below ``min_score`` (None: the search's calibrated default, so that a query that matches
        nothing finds nothing; 0: none left out)."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        if not query.strip():
            raise InvalidInput("query must be a non-blank string", field="query")
        if isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInput(f"top_k must be an integer from 1 to {MAX_TOP_K}", field="top_k")
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, int | float) or not 0 <= min_score <= 1
        ):
            raise InvalidInput("min_score must be a number from 0 to 1", field="min_score")
        self._warm()
        view = self._memories.view(app_name, user_id)
        if view.index is None or not view.records:
            return {"memories": []}
        hits = self._search(view.index, query, top_k, min_score)
        return {"memories": [memory_entry(view.records[i], s) for i, s in hits if i in view.records][:top_k]}

    def profile(self, app_name: str, user_id: str) -> dict[str, Any]:
        """What is known about the user: the facts of their current memory records, aggregated
        (``policy/profile.py``), each with the ids of the memories it came from; a forgotten memory's facts are
        gone at once. Reads the same (cached) view a search reads."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        records = self._memories.view(app_name, user_id).records
        from ..policy.profile import Source, aggregate

        sources = [Source(r.id, r.timestamp, self._facts_of(r)) for r in records.values()]
        facts = [{**fact, "updated_at": _iso(fact["updated_at"])} for fact in aggregate(sources)]
        return {"app_name": app_name, "user_id": user_id, "facts": facts, "memory_count": len(records)}

    def _facts_of(self, record: MemoryRecord) -> list[dict[str, str]]:
        """The record's stored facts; for a record saved before facts were stored, the offline extractor's."""
        if record.facts is not None:
            return record.facts
        if record.role != "user" or not record.text:
            return []
        return _offline_facts(record.text)

    def forget(self, app_name: str, user_id: str, memory_id: str) -> None:
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        validate_identifier(memory_id, "memory_id")
        record = self._memories.view(app_name, user_id).records.get(memory_id)
        if record is not None and record.event_id is not None and record.session_id is not None:
            # Marked before the record goes: a save that reads the memory without it reads the mark after, and
            # never stores the event again (docs/design.md, "Forgotten events").
            self._claims.commit(app_name, user_id, [claim_key(record.session_id, record.event_id)])
        # Always, even when the record is gone: a retry finishes the deletions an earlier attempt left pending.
        self._memories.forget(app_name, user_id, [memory_id])

    def forget_events(self, key: SessionKey, event_ids: list[str]) -> None:
        """Forget what long-term memory holds of these events of the session (their events are being deleted),
        as ``forget`` does for each: their claims are committed first, so that auto-save never saves them later
        (the change feed may deliver an event after its deletion); then the user's memory is fenced, so that a
        save already past its check of the claims writes nothing of them after this returns; then their records
        go, their text scrubbed from other records' retrieval context by the store."""
        if not event_ids:
            return
        keys = [claim_key(key.session_id, e) for e in event_ids]
        # A clear hands over thousands: their commits run on a few threads (each a BatchWriteItem of 25 keys).
        chunks = [keys[start : start + 250] for start in range(0, len(keys), 250)]
        if len(chunks) == 1:  # one event, or a page of them: no thread to start
            self._claims.commit(key.app_name, key.user_id, keys)
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(chunks))) as pool:
                futures = [pool.submit(self._claims.commit, key.app_name, key.user_id, c) for c in chunks]
            for future in futures:
                future.result()
        # A save that prepared before the marks (it read them unset) must not write after this returns: the
        # fence makes its write lose its race, and the save prepares again, reading the marks (docs/design.md,
        # "Forgotten events"). A save that wrote before the fence left a record, which goes below.
        self._memories.fence(key.app_name, key.user_id)
        # Which are held, read without the search index: most deleted events were never saved.
        doomed = sorted(
            self._memories.held(key.app_name, key.user_id, {event_memory_id(key.session_id, e) for e in event_ids})
        )
        if doomed:
            self._memories.forget(key.app_name, key.user_id, doomed)

    def forget_all(self, app_name: str, user_id: str) -> None:
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")

        def mark(held: Mapping[str, MemoryRecord]) -> None:
            # Every event memory the forget-all removes is marked first, off the view it replaces (again when a
            # save lands meanwhile), so that no save brings one back: saves write no claims of their own.
            self._claims.commit(
                app_name,
                user_id,
                [
                    claim_key(r.session_id, r.event_id)
                    for r in held.values()
                    if r.event_id is not None and r.session_id is not None
                ],
            )

        self._memories.forget_all(app_name, user_id, mark)
