"""Compaction planning: invocations, the triggers, the retained tail, open tool calls and the roll-up."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.policy.compaction import (
    CLAIM_SETTLE_S,
    CompactionPlan,
    CompactionSettings,
    invocations,
    plan_compaction,
    settled_events,
)
from agent_memory.policy.messages import COMPACTION_META

# --------------------------------------------------------------------------------------------------------------
# Builders: events in the stored JSON shape
# --------------------------------------------------------------------------------------------------------------


def event(seq: int, inv: str, author: str = "user", text: str | None = None, **extra: Any) -> dict[str, Any]:
    parts = extra.pop("parts", None)
    if parts is None and text is not None:
        parts = [{"text": text}]
    body: dict[str, Any] = {
        "id": f"e{seq}",
        "seq": seq,
        "author": author,
        "invocation_id": inv,
        "timestamp": 1000.0 + seq,
        "actions": {"state_delta": {}, **extra.pop("actions", {})},
        **extra,
    }
    if parts is not None:
        body["content"] = {"role": "user" if author == "user" else "model", "parts": parts}
    return body


def user(seq: int, inv: str, text: str = "hello") -> dict[str, Any]:
    return event(seq, inv, "user", text)


def model(seq: int, inv: str, text: str = "hi there") -> dict[str, Any]:
    return event(seq, inv, "agent", text)


def call(seq: int, inv: str, call_id: str | None, name: str = "weather", **extra: Any) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": {"city": "Lisbon"}}
    if call_id is not None:
        fc["id"] = call_id
    return event(seq, inv, "agent", parts=[{"function_call": fc}], **extra)


def response(seq: int, inv: str, call_id: str | None, name: str = "weather") -> dict[str, Any]:
    fr: dict[str, Any] = {"name": name, "response": {"result": "sunny"}}
    if call_id is not None:
        fr["id"] = call_id
    return event(seq, inv, "agent", parts=[{"function_response": fr}])


def conversation(invocation_count: int, *, first_seq: int = 1, first_inv: int = 0) -> list[dict[str, Any]]:
    """``invocation_count`` invocations of a user message and an agent reply each."""
    events: list[dict[str, Any]] = []
    seq = first_seq
    for i in range(first_inv, first_inv + invocation_count):
        events += [user(seq, f"i{i}", f"user {i}"), model(seq + 1, f"i{i}", f"agent {i}")]
        seq += 2
    return events


def summary_event(
    seq: int, text: str, *, start_seq: int, end_seq: int, count: int, start_ts: float = 1001.0
) -> dict[str, Any]:
    return {
        "id": f"sum{seq}",
        "seq": seq,
        "author": "system",
        "invocation_id": f"compaction-{seq}",
        "timestamp": 5000.0 + seq,
        "actions": {
            "state_delta": {},
            "compaction": {
                "start_timestamp": start_ts,
                "end_timestamp": 1000.0 + end_seq,
                "compacted_content": {"role": "model", "parts": [{"text": text}]},
            },
        },
        "custom_metadata": {
            COMPACTION_META: {"start_seq": start_seq, "end_seq": end_seq, "event_count": count, "trigger": "interval"}
        },
    }


def settings(**overrides: Any) -> CompactionSettings:
    values: dict[str, Any] = {
        "compaction_interval": 3,
        "overlap_size": 1,
        "token_threshold": 10**9,
        "event_retention_size": 2,
    }
    values.update(overrides)
    return CompactionSettings(**values)


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def a_plan(result: CompactionPlan | str) -> CompactionPlan:
    assert isinstance(result, CompactionPlan), result
    return result


# --------------------------------------------------------------------------------------------------------------
# Invocations
# --------------------------------------------------------------------------------------------------------------


def test_invocations_group_by_invocation_id_change() -> None:
    events = [user(1, "a"), model(2, "a"), user(3, "b"), model(4, "b"), model(5, "b"), user(6, "a")]
    assert [seqs(g) for g in invocations(events)] == [[1, 2], [3, 4, 5], [6]]


def test_chat_events_without_invocation_ids_start_a_group_at_each_user_event() -> None:
    events = [
        user(1, ""),
        model(2, ""),
        event(3, "", "tool", parts=[{"function_response": {"id": "c", "name": "f", "response": {}}}]),
        model(4, ""),
        user(5, ""),
        user(6, ""),
        model(7, ""),
    ]
    del events[1]["invocation_id"]  # absent is the same as empty
    assert [seqs(g) for g in invocations(events)] == [[1, 2, 3, 4], [5], [6, 7]]


def test_invocations_of_nothing() -> None:
    assert invocations([]) == []


# --------------------------------------------------------------------------------------------------------------
# Triggers
# --------------------------------------------------------------------------------------------------------------


def test_fewer_invocations_than_the_interval_is_a_reason() -> None:
    result = plan_compaction(conversation(2), None, settings())
    assert isinstance(result, str) and result


def test_interval_reached_gives_a_plan() -> None:
    plan = a_plan(plan_compaction(conversation(3), None, settings()))
    assert plan.trigger == "interval"
    assert seqs(plan.events) == [1, 2, 3, 4]
    assert plan.start_seq == 1 and plan.end_seq == 4
    assert plan.start_timestamp == 1001.0 and plan.end_timestamp == 1004.0
    assert plan.event_count == 4
    assert plan.previous_summary is None
    assert plan.overlap == []


@pytest.mark.parametrize(
    ("retention", "end_seq"), [(0, 8), (1, 6), (2, 6), (3, 4), (4, 4), (5, 2), (6, 2), (7, None), (8, None)]
)
def test_cut_keeps_retention_and_falls_on_an_invocation_boundary(retention: int, end_seq: int | None) -> None:
    events = conversation(4)
    result = plan_compaction(events, None, settings(event_retention_size=retention))
    if end_seq is None:
        assert isinstance(result, str) and result
        return
    plan = a_plan(result)
    assert plan.end_seq == end_seq
    assert seqs(plan.events) == list(range(1, end_seq + 1))
    assert len(events) - len(plan.events) >= retention
    rest = events[len(plan.events) :]
    assert not rest or rest[0]["invocation_id"] != plan.events[-1]["invocation_id"]


def test_cut_with_uneven_invocations() -> None:
    events = [
        user(1, "a"),
        model(2, "a"),
        model(3, "a"),
        user(4, "b"),
        user(5, "c"),
        model(6, "c"),
        model(7, "c"),
        model(8, "c"),
    ]
    plan = a_plan(plan_compaction(events, None, settings(event_retention_size=3)))
    assert seqs(plan.events) == [1, 2, 3, 4]  # invocation c (4 events) stays whole


def test_token_threshold_triggers() -> None:
    events = [user(1, "i0", "x" * 400), model(2, "i0", "y" * 400), user(3, "i1", "z" * 400), model(4, "i1", "ok")]
    cfg = settings(compaction_interval=100, token_threshold=150)
    plan = a_plan(plan_compaction(events, None, cfg))
    assert plan.trigger == "tokens"
    assert seqs(plan.events) == [1, 2]
    below = settings(compaction_interval=100, token_threshold=10_000)
    assert isinstance(plan_compaction(events, None, below), str)


def test_token_threshold_counts_the_previous_summary() -> None:
    summary = summary_event(5, "s" * 800, start_seq=1, end_seq=4, count=4)
    events = [*conversation(2, first_seq=6), summary]
    cfg = settings(compaction_interval=100, token_threshold=150)
    assert isinstance(plan_compaction(events[:-1], None, cfg), str)
    plan = a_plan(plan_compaction(events, summary, cfg))
    assert plan.trigger == "tokens"


def test_force_is_manual_below_the_thresholds() -> None:
    events = conversation(2)
    assert isinstance(plan_compaction(events, None, settings()), str)
    plan = a_plan(plan_compaction(events, None, settings(), force=True))
    assert plan.trigger == "manual"
    assert seqs(plan.events) == [1, 2]


@pytest.mark.parametrize("events", [conversation(1), [], conversation(1)[:1]])
def test_force_with_nothing_outside_the_retained_tail_is_a_reason(events: list[dict[str, Any]]) -> None:
    result = plan_compaction(events, None, settings(), force=True)
    assert isinstance(result, str) and result


def test_force_wins_over_an_interval_trigger_name() -> None:
    plan = a_plan(plan_compaction(conversation(5), None, settings(), force=True))
    assert plan.trigger == "manual"


# --------------------------------------------------------------------------------------------------------------
# Open tool calls
# --------------------------------------------------------------------------------------------------------------


def long_running_tool(call_extra: dict[str, Any] | None = None, response_id: str | None = "c1") -> list[dict]:
    """A call in invocation i1 whose response only comes in invocation i2."""
    return [
        user(1, "i0"),
        model(2, "i0"),
        user(3, "i1"),
        call(4, "i1", "c1", **(call_extra or {})),
        response(5, "i2", response_id),
        model(6, "i2"),
        user(7, "i3"),
        model(8, "i3"),
    ]


def test_call_answered_in_the_retained_part_moves_the_cut_earlier() -> None:
    plan = a_plan(plan_compaction(long_running_tool(), None, settings(event_retention_size=4)))
    assert seqs(plan.events) == [1, 2]  # the natural cut after seq 4 would leave call c1 open


def test_call_answered_inside_the_covered_part_does_not_move_the_cut() -> None:
    plan = a_plan(plan_compaction(long_running_tool(), None, settings(event_retention_size=2)))
    assert seqs(plan.events) == [1, 2, 3, 4, 5, 6]


def test_call_never_answered_blocks_the_cut_before_it() -> None:
    events = [*long_running_tool()[:4], model(5, "i2"), user(6, "i3"), model(7, "i3")]
    plan = a_plan(plan_compaction(events, None, settings(event_retention_size=1), force=True))
    assert seqs(plan.events) == [1, 2]


def test_call_and_response_without_ids_are_paired_by_name() -> None:
    events = [
        user(1, "i0"),
        call(2, "i0", None, "lookup"),
        response(3, "i0", None, "lookup"),
        *conversation(3, first_seq=4, first_inv=1),
    ]
    plan = a_plan(plan_compaction(events, None, settings()))
    assert seqs(plan.events) == [1, 2, 3, 4, 5, 6, 7]


def test_response_without_id_answers_the_call_with_that_name() -> None:
    # As in the context window, a response without an id answers the unanswered call of the same name, so the
    # call is not open and compaction can move past it (otherwise the session could never compact again).
    events = [
        user(1, "i0"),
        call(2, "i0", "c1", "lookup"),
        response(3, "i0", None, "lookup"),
        model(4, "i0"),
        *conversation(3, first_seq=5, first_inv=1),
    ]
    plan = a_plan(plan_compaction(events, None, settings()))
    assert seqs(plan.events) == [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("action", ["requested_tool_confirmations", "requested_auth_configs"])
def test_confirmation_and_auth_requests_count_as_open_calls(action: str) -> None:
    events = [
        user(1, "i0"),
        model(2, "i0"),
        user(3, "i1"),
        event(4, "i1", "agent", "needs approval", actions={action: {"req-7": {"hint": "approve?"}}}),
        user(5, "i2"),
        response(6, "i2", "req-7", "adk_request_confirmation"),
        user(7, "i3"),
        model(8, "i3"),
    ]
    plan = a_plan(plan_compaction(events, None, settings(event_retention_size=4)))
    assert seqs(plan.events) == [1, 2]
    answered = a_plan(plan_compaction(events, None, settings(event_retention_size=2)))
    assert seqs(answered.events) == [1, 2, 3, 4, 5, 6]


# --------------------------------------------------------------------------------------------------------------
# Roll-up and overlap
# --------------------------------------------------------------------------------------------------------------


def test_roll_up_keeps_start_and_adds_counts() -> None:
    earlier = conversation(3)  # seqs 1..6, covered by the previous summary
    summary = summary_event(7, "OLD SUMMARY", start_seq=1, end_seq=6, count=6, start_ts=1001.0)
    events = [summary, *conversation(4, first_seq=8, first_inv=3)]  # seqs 8..15
    plan = a_plan(plan_compaction(events, summary, settings(overlap_size=1), earlier=earlier))
    assert seqs(plan.events) == [8, 9, 10, 11, 12, 13]  # the summary event itself is never a covered event
    assert plan.start_seq == 1
    assert plan.end_seq == 13
    assert plan.start_timestamp == 1001.0
    assert plan.end_timestamp == 1013.0
    assert plan.event_count == 6 + len(plan.events)
    assert plan.previous_summary == "OLD SUMMARY"
    assert seqs(plan.overlap) == [5, 6]


def test_roll_up_start_timestamp_is_the_previous_compactions() -> None:
    summary = summary_event(7, "OLD", start_seq=1, end_seq=6, count=6, start_ts=123.5)
    events = [summary, *conversation(4, first_seq=8, first_inv=3)]
    plan = a_plan(plan_compaction(events, summary, settings()))
    assert plan.start_timestamp == 123.5
    assert plan.start_seq == 1


@pytest.mark.parametrize(("overlap_size", "expected"), [(0, []), (1, [5, 6]), (2, [3, 4, 5, 6])])
def test_overlap_invocations_come_from_earlier(overlap_size: int, expected: list[int]) -> None:
    earlier = conversation(3)
    summary = summary_event(7, "OLD", start_seq=1, end_seq=6, count=6)
    events = [summary, *conversation(4, first_seq=8, first_inv=3)]
    plan = a_plan(plan_compaction(events, summary, settings(overlap_size=overlap_size), earlier=earlier))
    assert seqs(plan.overlap) == expected
    assert not set(seqs(plan.overlap)) & set(seqs(plan.events))


def test_overlap_larger_than_earlier_takes_all_earlier_invocations() -> None:
    earlier = conversation(3)  # 3 invocations, seqs 1..6
    summary = summary_event(7, "OLD", start_seq=1, end_seq=6, count=6)
    events = [summary, *conversation(4, first_seq=8, first_inv=3)]
    plan = a_plan(plan_compaction(events, summary, settings(overlap_size=5), earlier=earlier))
    assert seqs(plan.overlap) == [1, 2, 3, 4, 5, 6]


def test_overlap_ignores_compaction_events_in_earlier() -> None:
    older_summary = summary_event(5, "OLDER", start_seq=1, end_seq=2, count=2)
    earlier = [*conversation(2), older_summary, user(6, "i2"), model(7, "i2")]
    summary = summary_event(8, "OLD", start_seq=1, end_seq=7, count=6)
    events = [summary, *conversation(4, first_seq=9, first_inv=3)]
    plan = a_plan(plan_compaction(events, summary, settings(overlap_size=1), earlier=earlier))
    assert seqs(plan.overlap) == [6, 7]


def test_nothing_new_after_a_plan_gives_no_plan() -> None:
    events = conversation(4)
    plan = a_plan(plan_compaction(events, None, settings()))
    summary = summary_event(
        9, "NEW", start_seq=plan.start_seq, end_seq=plan.end_seq, count=plan.event_count, start_ts=plan.start_timestamp
    )
    tail = [e for e in events if e["seq"] > plan.end_seq]
    assert seqs(tail) == [7, 8]
    assert isinstance(plan_compaction([*tail, summary], summary, settings(), earlier=plan.events), str)
    assert isinstance(plan_compaction([*tail, summary], summary, settings(), earlier=plan.events, force=True), str)


# --------------------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [{"compaction_interval": 0}, {"token_threshold": 0}, {"overlap_size": -1}, {"event_retention_size": -1}],
)
def test_bad_settings_raise(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        settings(**overrides)


# --------------------------------------------------------------------------------------------------------------
# Holes: seqs claimed whose event may still land (DynamoDB's claim-first append)
# --------------------------------------------------------------------------------------------------------------


def seqs_settled(seqs: list[int], *, after: int = 0, last: int = 20, hidden: Any = (), age: float | None) -> list[int]:
    events = [user(s, f"i{s}") for s in seqs]
    now = 10_000.0
    claimed_at = None if age is None else now - age
    out = settled_events(events, after_seq=after, last_seq=last, hidden=hidden, claimed_at=claimed_at, now=now)
    return [e["seq"] for e in out]


def test_a_recent_claim_stops_the_events_before_the_lowest_hole() -> None:
    assert seqs_settled([1, 2, 3, 5, 6, 8], age=1.0) == [1, 2, 3]
    assert seqs_settled([2, 3], age=1.0) == []  # seq 1 is a hole
    assert seqs_settled([6, 7, 9], after=5, age=CLAIM_SETTLE_S - 1) == [6, 7]  # from the watermark on


def test_hidden_seqs_are_no_holes() -> None:
    # 4-5 deleted, not purged yet (the items are there, hidden): no put can land there.
    assert seqs_settled([1, 2, 3, 6, 7, 9], hidden=[(4, 5)], age=1.0) == [1, 2, 3, 6, 7]
    assert seqs_settled([1, 3], hidden=[(2, 2), (4, 4)], age=1.0) == [1, 3]


def test_an_old_claim_lets_the_cut_pass_every_hole() -> None:
    assert seqs_settled([1, 2, 3, 5, 6, 8], age=CLAIM_SETTLE_S) == [1, 2, 3, 5, 6, 8]
    assert seqs_settled([1, 2, 3, 5, 6, 8], age=None) == [1, 2, 3, 5, 6, 8]  # never claimed (atomic appends)


def test_events_above_the_last_seq_read_are_left_out_whatever_the_claims() -> None:
    # Claimed after the session was read: seq 6 may be in flight, so 7 may not be cut in.
    assert seqs_settled([1, 2, 3, 4, 5, 7], last=5, age=None) == [1, 2, 3, 4, 5]
    assert seqs_settled([1, 2, 3, 4, 5, 7], last=5, age=1.0) == [1, 2, 3, 4, 5]
