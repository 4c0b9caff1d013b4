"""The deletion policy: tool pairs, the summaries a deletion takes with it, where the watermark falls back to."""

from __future__ import annotations

from typing import Any

from agent_memory.policy.deletion import first_of_invocation, plan_delete, seq_ranges, tool_units, with_partners
from agent_memory.policy.messages import COMPACTION_META


def text(eid: str, seq: int, inv: str = "") -> dict[str, Any]:
    return {"id": eid, "seq": seq, "invocation_id": inv, "content": {"parts": [{"text": eid}]}}


def call(eid: str, seq: int, *calls: tuple[str | None, str]) -> dict[str, Any]:
    parts = [{"function_call": {"id": cid, "name": name}} for cid, name in calls]
    return {"id": eid, "seq": seq, "content": {"parts": parts}}


def result(eid: str, seq: int, *answers: tuple[str | None, str]) -> dict[str, Any]:
    parts = [{"function_response": {"id": cid, "name": name, "response": {}}} for cid, name in answers]
    return {"id": eid, "seq": seq, "content": {"parts": parts}}


def summary(eid: str, seq: int, start: int, end: int) -> dict[str, Any]:
    return {
        "id": eid,
        "seq": seq,
        "actions": {"compaction": {"compacted_content": {"parts": [{"text": "s"}]}}},
        "custom_metadata": {COMPACTION_META: {"start_seq": start, "end_seq": end}},
    }


def test_a_call_and_its_responses_are_one_unit_even_across_events() -> None:
    events = [
        text("t", 1),
        call("c", 2, ("a", "search"), ("b", "fetch")),
        result("r1", 3, ("a", "search")),
        result("r2", 4, ("b", "fetch")),
        text("u", 5),
    ]
    units = tool_units(events)
    assert units["r1"] == units["c"] == {"c", "r1", "r2"}
    assert units["t"] == {"t"}
    assert with_partners(events, {"r2"}) == {"c", "r1", "r2"}


def test_a_response_without_an_id_answers_the_oldest_open_call_of_its_tool() -> None:
    events = [call("c1", 1, (None, "search")), call("c2", 2, (None, "search")), result("r", 3, (None, "search"))]
    assert with_partners(events, {"r"}) == {"c1", "r"}
    assert with_partners(events, {"c2"}) == {"c2"}


def test_deleting_an_event_takes_every_summary_that_covered_it_and_the_watermark_falls_back() -> None:
    events = [text("a", 1), text("b", 2), summary("s1", 3, 1, 1), text("c", 4), summary("s2", 5, 1, 4), text("d", 6)]
    plan = plan_delete(events, {"b"}, watermark=("s2", 4))
    assert plan.ids == ["b", "s2"] and plan.seqs == [2, 5]
    assert (plan.summary_event_id, plan.summary_end_seq) == ("s1", 1)
    untouched = plan_delete(events, {"d"}, watermark=("s2", 4))
    assert untouched.ids == ["d"] and (untouched.summary_event_id, untouched.summary_end_seq) == ("s2", 4)
    first = plan_delete(events, {"a"}, watermark=("s2", 4))
    assert first.ids == ["a", "s1", "s2"] and (first.summary_event_id, first.summary_end_seq) == (None, 0)


def test_a_rewind_takes_the_tail_and_a_partner_before_the_cut() -> None:
    events = [text("a", 1, "i1"), call("c", 2, ("x", "t")), text("b", 3, "i2"), result("r", 4, ("x", "t"))]
    plan = plan_delete(events, set(), from_seq=4)
    assert plan.ids == ["c", "r"]
    assert seq_ranges(plan.seqs, tail=(4, 9)) == ((2, 2), (4, 9))
    assert first_of_invocation(events, "i2") == 3 and first_of_invocation(events, "nope") is None


def test_seq_ranges_join_consecutive_seqs() -> None:
    assert seq_ranges([5, 1, 2, 3, 7, 8]) == ((1, 3), (5, 5), (7, 8))
    assert seq_ranges([]) == ()
