"""The windowed context read (``SessionStore.read_tail`` paced by ``policy.context.tail_need``) gives the context the
whole read gave, for random sessions: chat, tool calls and responses (with and without call ids, ids reused),
state-only, partial, system and unreadable events, summaries, hidden and purged deletions, every budget, format and
option, memories and profile; while reading about the window, not the session."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.errors import UnprocessableInput
from agent_memory.policy.context import TAIL_ALL, ContextOptions, build_context, reads_tail, tail_need
from agent_memory.policy.messages import COMPACTION_META, event_messages, is_compaction
from agent_memory.policy.state import ScopedDelta
from agent_memory.service import context as context_module
from agent_memory.service.context import ContextService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import (
    Deletion,
    EventQuery,
    NewEvent,
    SessionKey,
    SessionRecord,
    Tail,
    TailNeed,
    marks_of,
)

KEY = SessionKey("app", "u", "s")
ALWAYS = -(10**9)  # ContextService's tail_margin: a budgeted context reads newest first whatever the session's size
CALL_IDS = ["c1", "c2", "c3", None]
TOOLS = ["f", "g"]


class SpyStore(InMemorySessionStore):
    """The in-memory store, remembering what each read returned (how many events each read read)."""

    def __init__(self) -> None:
        super().__init__()
        self.tails: list[Tail] = []
        self.read: list[int] = []

        self._in_tail = False

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        self._in_tail = True  # the in-memory tail reads its snapshot with read_events: not counted twice
        try:
            tail = super().read_tail(key, query, need)
        finally:
            self._in_tail = False
        self.tails.append(tail)
        self.read.append(len(tail.events))
        return tail

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        events = super().read_events(key, query)
        if not self._in_tail:
            self.read.append(len(events))
        return events


class FakeMemory:
    """What the context asks of the memory service: a search (recording its query) and a profile."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, *, app_name: str, user_id: str, query: str, top_k: int, min_score: float | None) -> Any:
        self.queries.append(query)
        hits = [
            {"id": f"m{i}", "score": 0.9 - i / 10, "timestamp": 1_683_540_000.0, "content": {"parts": [{"text": t}]}}
            for i, t in enumerate(["likes trains", "allergic to peanuts", "lives in Porto"])
        ]
        return {"memories": hits[:top_k]}

    def profile(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {"facts": [{"text": "Name: Ana", "memory_ids": ["m1"]}, {"text": "Nurse", "memory_ids": ["m2"]}]}


def old_context(service: ContextService, store: InMemorySessionStore, options: ContextOptions) -> dict[str, Any]:
    """The context as it was read before windowed reads: every event after the watermark (the reference)."""
    record = store.get_session(KEY)
    assert record is not None
    events = store.read_events(KEY, EventQuery(after_seq=record.summary_end_seq, marks=marks_of(record)))
    summary = next((e for e in events if e.get("id") == record.summary_event_id), None)
    recall = service._recall(KEY, events, options) if options.wants_memory else None
    try:
        return build_context(events, summary, options, recall)
    except (AttributeError, TypeError, KeyError, ValueError):
        pass
    readable = [e for e in events if context_module._reads_as_messages(e)]
    if summary is not None and not context_module._reads_as_messages(summary):
        summary = None
    return build_context(readable, summary, options, recall)


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n)) or tag


def body(kind: str, spec: Any, n: int) -> dict[str, Any]:
    """An event of ``kind`` (its content from ``spec``), the ``n``th of the session."""
    event: dict[str, Any] = {"id": f"e{n}", "author": "user", "timestamp": 1000.0 + n, "actions": {}}
    if kind == "user":
        event["content"] = {"role": "user", "parts": [{"text": words(spec, f"u{n}-")}]}
    elif kind in {"assistant", "partial", "system"}:
        event["author"] = {"assistant": "agent", "partial": "agent", "system": "system"}[kind]
        event["content"] = {"role": "model", "parts": [{"text": words(spec, f"a{n}-")}]}
        event["partial"] = kind == "partial"
    elif kind == "call":
        event["author"] = "agent"
        parts = [{"function_call": {"name": name, "args": {"n": n}, **({"id": i} if i else {})}} for i, name in spec]
        event["content"] = {"role": "model", "parts": parts}
    elif kind == "response":
        event["author"] = "agent"
        parts = [
            {"function_response": {"name": name, "response": {"result": f"r{n}"}, **({"id": i} if i else {})}}
            for i, name in spec
        ]
        event["content"] = {"role": "user", "parts": parts}
    elif kind == "state":
        event["actions"] = {"state_delta": {"k": n}}
    else:  # an event the message reader cannot read
        event["content"] = {"role": "user", "parts": "not a list of parts"}
    return event


tool_parts = st.lists(st.tuples(st.sampled_from(CALL_IDS), st.sampled_from(TOOLS)), min_size=1, max_size=2)
event_specs = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 40)),
    st.tuples(st.just("assistant"), st.integers(0, 40)),
    st.tuples(st.just("call"), tool_parts),
    st.tuples(st.just("response"), tool_parts),
    st.tuples(st.sampled_from(["state", "partial", "system", "bad"]), st.integers(0, 5)),
)
# Events, with now and then a compaction (covering up to a fraction of the session), a deletion (of a range,
# hidden, maybe purged) between them.
step = st.one_of(
    event_specs,
    event_specs,
    event_specs,
    st.tuples(st.just("compact"), st.floats(0, 1)),
    st.tuples(st.just("delete"), st.tuples(st.floats(0, 1), st.integers(0, 3), st.booleans())),
)
steps = st.lists(step, max_size=90)
context_options = st.builds(
    ContextOptions,
    format=st.sampled_from(["openai", "full", "adk"]),
    max_tokens=st.one_of(st.none(), st.integers(1, 600)),
    max_messages=st.one_of(st.none(), st.integers(1, 25)),
    max_chars=st.one_of(st.none(), st.integers(1, 2_000)),
    keep_first=st.booleans(),
    start_with_user=st.booleans(),
    include_summary=st.booleans(),
    system=st.lists(st.sampled_from(["Be brief.", "You are a helpful travel agent."]), max_size=2).map(tuple),
    memories=st.sampled_from([0, 0, 0, 2]),
    profile=st.sampled_from([False, False, True]),
)


def build_session(store: InMemorySessionStore, plan: list[Any]) -> None:
    store.create_session(SessionRecord("app", "u", "s", create_time=1.0, update_time=1.0), ScopedDelta())
    n = 0
    for kind, spec in plan:
        record = store.get_session(KEY)
        assert record is not None
        if kind == "compact":
            end = int(spec * record.last_seq)
            if end <= record.summary_end_seq:
                continue
            n += 1
            meta = {"start_seq": 1, "end_seq": end, "event_count": end, "trigger": "test", "summarizer": "test"}
            summary = {
                "id": f"sum{n}",
                "author": "system",
                "timestamp": 1000.0 + n,
                "actions": {"compaction": {"compacted_content": {"role": "model", "parts": [{"text": f"S{n}"}]}}},
                "custom_metadata": {COMPACTION_META: meta},
            }
            new = NewEvent(id=f"sum{n}", timestamp=1000.0 + n, body=summary, delta=ScopedDelta())
            assert store.append_compaction(KEY, new, end, record.summary_end_seq) is not None
        elif kind == "delete":
            at, width, purge = spec
            lo = 1 + int(at * record.last_seq)
            deletion = Deletion(
                ranges=((lo, lo + width),),
                based_on_seq=record.last_seq,
                based_on_deletions=record.deletions,
                summary_event_id=record.summary_event_id,
                summary_end_seq=record.summary_end_seq,
            )
            store.delete_events(KEY, deletion, None)
            if purge:
                store.purge_deleted(KEY, lambda ids: None)
        else:
            n += 1
            event = body(kind, spec, n)
            store.append_events(
                KEY, [NewEvent(id=event["id"], timestamp=1000.0 + n, body=event, delta=ScopedDelta())], None
            )


def unread_without_messages(store: InMemorySessionStore, tail: Tail) -> int:
    """Events the tail left unread that the whole read would not have counted as dropped (no message, or the
    summary)."""
    record = store.get_session(KEY)
    assert record is not None
    if not tail.older:
        return 0
    oldest = tail.events[0]["seq"]
    unread = store.read_events(KEY, EventQuery(after_seq=record.summary_end_seq, up_to_seq=oldest - 1))
    assert len(unread) == tail.older

    def silent(event: dict[str, Any]) -> bool:
        if event.get("id") == record.summary_event_id:
            return False  # found on its own, not counted
        if is_compaction(event):
            return True
        try:
            return not event_messages(event)
        except (AttributeError, TypeError, KeyError, ValueError):
            return True

    return sum(1 for e in unread if silent(e))


def compare(plan: list[Any], options: ContextOptions) -> tuple[SpyStore, dict[str, Any]]:
    """The windowed context and the whole read's, asserted equal (``dropped_events`` as documented); returns the
    store (what it read) and the context."""
    store = SpyStore()
    build_session(store, plan)
    old_memory, new_memory = FakeMemory(), FakeMemory()
    try:
        expected = old_context(ContextService(store, memories=lambda: old_memory), store, options)  # type: ignore[arg-type,return-value]
    except UnprocessableInput:
        with pytest.raises(UnprocessableInput):
            ContextService(store, memories=lambda: new_memory, tail_margin=ALWAYS).get_context("app", "u", "s", options)  # type: ignore[arg-type,return-value]
        return store, {}
    store.read.clear()
    got = ContextService(store, memories=lambda: new_memory, tail_margin=ALWAYS).get_context("app", "u", "s", options)  # type: ignore[arg-type,return-value]
    read = list(store.read)
    assert new_memory.queries == old_memory.queries
    silent = unread_without_messages(store, store.tails[-1]) if store.tails else 0
    assert got["dropped_events"] == expected["dropped_events"] + silent
    assert {**got, "dropped_events": 0} == {**expected, "dropped_events": 0}
    store.read = read
    return store, got


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, options=context_options)
def test_the_windowed_context_is_the_whole_reads_context(plan: list[Any], options: ContextOptions) -> None:
    compare(plan, options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(event_specs, max_size=60),
    compaction=st.lists(st.tuples(st.just("compact"), st.floats(0.5, 1)), max_size=1),
    after=st.lists(st.one_of(event_specs, event_specs, step), min_size=30, max_size=90),
    options=context_options.filter(reads_tail),
)
def test_long_sessions_with_small_windows_are_the_same_too(
    before: list[Any], compaction: list[Any], after: list[Any], options: ContextOptions
) -> None:
    """Long sessions (a summary, many events after it) and budgets: most reads stop before the watermark, and
    before the summary, so the cut itself is what is tested."""
    compare([*before, *compaction, *after], dataclasses.replace(options, keep_first=False))


def chat(n: int, size: int = 5) -> list[Any]:
    return [("user" if i % 2 == 0 else "assistant", size) for i in range(n)]


@pytest.mark.parametrize(
    ("options", "most"),
    [
        (ContextOptions(max_messages=20), 24),
        (ContextOptions(max_messages=20, system=("Be brief.",)), 24),
        (ContextOptions(max_tokens=200), 40),  # a message of 5 words is 11 tokens: 18 fit
        (ContextOptions(max_chars=500), 60),
        (ContextOptions(max_messages=5, start_with_user=True), 12),
    ],
)
def test_a_window_of_a_long_session_reads_about_the_window(options: ContextOptions, most: int) -> None:
    store, got = compare(chat(1_000), options)
    assert sum(store.read) <= most, store.read
    assert got["dropped_events"] + len(got["messages"]) - len(options.system) == 1_000


def test_a_summary_older_than_the_window_is_found_and_not_counted_as_dropped() -> None:
    plan = [*chat(100), ("compact", 0.95), *chat(100)]  # events 96..100 kept, the summary (101), 102..201
    store, got = compare(plan, ContextOptions(max_messages=5))
    assert got["messages"][0]["content"].endswith("S101") and len(got["messages"]) == 5
    # The tail (a page: 193..201), then the summary forward from the watermark (a page of 16: 96..111).
    assert store.read == [9, 16]
    assert got["dropped_events"] == 105 - 4


@pytest.mark.parametrize(
    ("window", "roles"),
    [(6, "user user assistant user assistant"), (7, "assistant tool user user assistant user assistant")],
)
def test_tool_pairs_are_not_split_at_the_windows_start(window: int, roles: str) -> None:
    plan = [*chat(30), ("call", [("c1", "f")]), ("user", 3), ("response", [("c1", "f")]), *chat(4)]
    _, got = compare(plan, ContextOptions(max_messages=window))
    assert [m["role"] for m in got["messages"]] == roles.split()


def test_a_response_without_a_call_id_in_the_window_reads_the_whole_session() -> None:
    """Without an id a response pairs with the oldest open call of its tool, which may be anywhere before."""
    plan = [("call", [(None, "f")]), *chat(60), ("call", [(None, "f")]), ("response", [(None, "f")]), *chat(2)]
    store, got = compare(plan, ContextOptions(max_messages=4))
    # The old call takes the response: the new call is left unanswered, so it is out.
    assert [m["role"] for m in got["messages"]] == ["user", "assistant", "user", "assistant"]
    assert sum(store.read) == 65


def test_tail_need_asks_for_the_rest_only_when_it_must() -> None:
    events = [body("user", 2, n) | {"seq": n} for n in range(1, 30)]
    assert tail_need([], ContextOptions(max_messages=20)) == 24
    assert tail_need(events[-24:], ContextOptions(max_messages=20)) == 0
    assert tail_need(events[-10:], ContextOptions(max_messages=20)) > 0
    idless = [body("call", [(None, "f")], 100) | {"seq": 100}, body("response", [(None, "f")], 101) | {"seq": 101}]
    assert tail_need(events[-24:] + idless, ContextOptions(max_messages=20)) == TAIL_ALL
    # A base prompt over the budget decides at once (422).
    assert tail_need(events[-3:], ContextOptions(max_chars=5, system=("You are a helpful travel agent.",))) == 0


def test_a_short_tail_after_the_watermark_is_read_at_once() -> None:
    """When about as many events follow the watermark as the window's first page and a summary look-up would read,
    one read takes them all (fewer requests); a longer tail is read newest first."""
    store = SpyStore()
    build_session(store, [*chat(100), ("compact", 0.95), *chat(12)])  # 5 kept, the summary, 12: a span of 18
    service = ContextService(store)
    store.read.clear()
    short = service.get_context("app", "u", "s", ContextOptions(max_messages=5))
    assert store.read == [18] and not store.tails
    store.read.clear()
    assert (
        ContextService(store, tail_margin=ALWAYS).get_context("app", "u", "s", ContextOptions(max_messages=5)) == short
    )
    assert len(store.tails) == 1
