"""How a memory's retrieval context is written (issue 13): the date first, as LoCoMo writes a session's date, then
the turns before it, one a line; and what a forget's scrub leaves of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_memory.policy.state import ScopedDelta
from agent_memory.search.index import Doc, SearchIndex, _embedding_text
from agent_memory.service.memories import MemoryService, event_memory_id, retrieval_context
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import MemoryRecord, NewEvent, SessionKey, SessionRecord, scrubbed_context


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("when", "date"),
    [
        (ts(2023, 5, 8, 13, 56), "1:56 pm on 8 May, 2023"),  # LoCoMo's own "1:56 pm on 8 May, 2023"
        (ts(2023, 10, 22, 9, 5, 59), "9:05 am on 22 October, 2023"),
        (ts(2024, 1, 1, 0, 0), "12:00 am on 1 January, 2024"),
        (ts(2024, 1, 1, 12, 30), "12:30 pm on 1 January, 2024"),
    ],
)
def test_the_date_comes_first_as_locomo_writes_it_then_the_turns_nearest_last(when: float, date: str) -> None:
    turns = ["Caroline: I went to the support group.", "Melanie: How was it?"]
    assert retrieval_context(turns, when) == f"{date}\nCaroline: I went to the support group.\nMelanie: How was it?"
    assert retrieval_context([], when) == date  # a direct text: its date alone


def test_a_timestamp_no_datetime_holds_gives_no_date_line() -> None:
    assert retrieval_context(["user: hi"], float("nan")) == "user: hi"
    assert retrieval_context([], 1e20) == ""


def test_a_long_context_keeps_its_nearest_turn_in_the_embedded_text() -> None:
    # The embedded text keeps the context's end: with the date first, what a long context loses is the date and
    # the farther turn, never the nearest one.
    context = retrieval_context(["Melanie: " + "far " * 80, "Caroline: the nearest turn"], ts(2023, 5, 8, 13, 56))
    embedded = _embedding_text(Doc("m", "Melanie: " + "text " * 50, context))
    assert embedded.endswith("\nCaroline: the nearest turn") and "2023" not in embedded


def test_a_session_save_stores_the_date_first_and_the_two_turns_before() -> None:
    sessions = InMemorySessionStore()
    memories = InMemoryMemoryStore(
        lambda rs: SearchIndex.build([Doc(r.id, f"{r.author}: {r.text}", r.context) for r in rs], None),
        SearchIndex.combine,
    )
    service = MemoryService(
        sessions, memories, InMemoryClaimStore(), lambda index, q, k, cut: index.search(q, k, min_score=cut)
    )
    key = SessionKey("app", "alice", "s1")
    start = ts(2023, 5, 8, 13, 56)
    texts = [("Caroline", "Hi Melanie!"), ("Melanie", "Hey Caroline, how are you?"), ("Caroline", "I went hiking.")]
    events: list[dict[str, Any]] = [
        {"id": f"e{i}", "author": a, "timestamp": start + i, "content": {"role": "user", "parts": [{"text": t}]}}
        for i, (a, t) in enumerate(texts)
    ]
    sessions.create_session(SessionRecord("app", "alice", "s1", start, start), ScopedDelta())
    sessions.append_events(key, [NewEvent(e["id"], e["timestamp"], e, ScopedDelta()) for e in events], None)
    service.save_session(app_name="app", user_id="alice", session_id="s1", policy="all")
    records = memories.view("app", "alice").records
    assert records[event_memory_id("s1", "e0")].context == "1:56 pm on 8 May, 2023"
    assert records[event_memory_id("s1", "e2")].context == (
        "1:56 pm on 8 May, 2023\nCaroline: Hi Melanie!\nMelanie: Hey Caroline, how are you?"
    )


def test_a_scrub_keeps_the_lines_of_a_context_and_the_one_line_of_an_old_one() -> None:
    new = "1:56 pm on 8 May, 2023\nuser: my PIN is quokka4412\nuser: I went hiking"
    assert scrubbed_context(new, ["user: my PIN is quokka4412"]) == "1:56 pm on 8 May, 2023\nuser: I went hiking"
    old = "user: my PIN is quokka4412 user: I went hiking Monday 08 May 2023"  # stored before the date came first
    assert scrubbed_context(old, ["user: my PIN is quokka4412"]) == "user: I went hiking Monday 08 May 2023"
    assert scrubbed_context("user: my PIN is quokka4412", ["user: my PIN is quokka4412"]) == ""


def test_records_are_json_round_tripped_with_the_context_as_written() -> None:
    record = MemoryRecord(id="m", text="t", author="user", timestamp=0.0, context=retrieval_context(["user: a"], 0.0))
    assert MemoryRecord.from_json(record.to_json()).context == "12:00 am on 1 January, 1970\nuser: a"
