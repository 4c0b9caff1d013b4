"""The context window: output formats, the summary, budgets, tool pairing, keep_first and start_with_user."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.policy.context import ContextOptions, build_context
from tests.unit.conversations import (
    assert_tool_pairs_whole,
    call,
    calls,
    event,
    model,
    response,
    responses,
    summary_event,
    tool_conversation,
    user,
)

# --------------------------------------------------------------------------------------------------------------
# Builders: events in the stored JSON shape
# --------------------------------------------------------------------------------------------------------------


def ctx(events: list[dict], summary: dict | None = None, **options: Any) -> dict[str, Any]:
    return build_context(events, summary, ContextOptions(**options))


def contents(result: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in result["messages"]]


# --------------------------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------------------------


def test_openai_format_gives_role_and_content_only() -> None:
    result = ctx([user(1, "hi", turn_id="t1", metadata={"x": 1}), model(2, "hello")])
    assert result["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert result["summary"] is None
    assert result["compacted_events"] == 0
    assert result["dropped_events"] == 0


def test_openai_format_tool_call_and_result() -> None:
    args = {"city": "Lisbon", "days": 2}
    result = ctx([user(1, "weather?"), call(2, "c1", "weather", args), response(3, "c1", "weather", "sunny")])
    assistant, tool = result["messages"][1], result["messages"][2]
    assert set(assistant) == {"role", "content", "tool_calls"}
    assert assistant["role"] == "assistant"
    assert assistant["content"] is None
    [tool_call] = assistant["tool_calls"]
    assert set(tool_call) == {"id", "type", "function"}
    assert tool_call["id"] == "c1" and tool_call["type"] == "function"
    assert tool_call["function"]["name"] == "weather"
    assert isinstance(tool_call["function"]["arguments"], str)
    assert json.loads(tool_call["function"]["arguments"]) == args
    assert tool == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}


@pytest.mark.parametrize(
    "payload", [{"temp": 21, "sky": "clear"}, {"result": 5}, {"result": "x", "extra": True}, {"items": [1, 2]}]
)
def test_non_text_result_is_compact_json(payload: dict[str, Any]) -> None:
    result = ctx([call(1, "c1"), responses(2, ("c1", "weather", payload))])
    content = result["messages"][1]["content"]
    assert json.loads(content) == payload
    assert " " not in content and "\n" not in content


def test_full_format_carries_turn_id_timestamp_and_metadata() -> None:
    voice = {"interrupted": True, "interrupt_timestamp": 1003.5, "original": "I was saying that the train"}
    events = [user(1, "hello", turn_id="t1"), model(2, "I was saying", turn_id="t2", metadata=voice)]
    full = ctx(events, format="full")["messages"]
    assert full[0]["role"] == "user" and full[0]["content"] == "hello"
    assert full[0]["turn_id"] == "t1" and full[0]["timestamp"] == 1001.0
    assert full[1]["turn_id"] == "t2" and full[1]["timestamp"] == 1002.0
    assert full[1]["metadata"] == voice
    openai = ctx(events, format="openai")["messages"]
    assert all(set(m) == {"role", "content"} for m in openai)


def test_adk_format_gives_role_and_parts() -> None:
    events = [user(1, "weather?"), call(2, "c1"), response(3, "c1"), model(4, "It is sunny.")]
    messages = ctx(events, format="adk")["messages"]
    assert all(set(m) == {"role", "parts"} for m in messages)
    assert [m["role"] for m in messages] == ["user", "model", "user", "model"]
    assert messages[0]["parts"] == [{"text": "weather?"}]
    assert messages[1]["parts"][0]["function_call"]["name"] == "weather"
    assert messages[2]["parts"][0]["function_response"]["response"] == {"result": "sunny"}
    assert messages[3]["parts"] == [{"text": "It is sunny."}]


@pytest.mark.parametrize("fmt", ["openai", "full", "adk"])
def test_thought_parts_never_appear(fmt: str) -> None:
    events = [
        user(1, "question"),
        event(2, "agent", [{"text": "SECRET-THOUGHT-A", "thought": True}, {"text": "visible answer"}]),
        event(3, "agent", [{"text": "SECRET-THOUGHT-B", "thought": True}]),
        event(
            4,
            "agent",
            [{"text": "SECRET-THOUGHT-C", "thought": True}, {"function_call": {"id": "c1", "name": "f", "args": {}}}],
        ),
        response(5, "c1", "f"),
    ]
    result = ctx(events, format=fmt)
    dumped = json.dumps(result)
    assert "SECRET-THOUGHT" not in dumped
    assert "visible answer" in dumped
    assert len(result["messages"]) == 4  # the thought-only event gives no message


def test_compaction_partial_and_state_only_events_give_no_message() -> None:
    events = [
        summary_event(1, "OLD SUMMARY TEXT"),
        model(2, "PARTIAL CHUNK", partial=True),
        event(3, "agent", None, actions={"state_delta": {"k": 1}}),
        user(4, "real message"),
    ]
    result = ctx(events)
    assert result["messages"] == [{"role": "user", "content": "real message"}]
    assert result["summary"] is None
    assert result["dropped_events"] == 0


# --------------------------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------------------------


def test_summary_comes_first_as_one_system_message() -> None:
    summary = summary_event(9, "Bob likes tea.", start_seq=1, end_seq=6, count=6)
    result = ctx([user(7, "hi"), model(8, "hello"), summary], summary)
    first = result["messages"][0]
    assert first["role"] == "system"
    assert "Bob likes tea." in first["content"]
    assert [m["role"] for m in result["messages"]] == ["system", "user", "assistant"]
    assert sum(1 for m in result["messages"] if "Bob likes tea." in (m["content"] or "")) == 1
    assert result["summary"] == "Bob likes tea."
    assert result["compacted_events"] == 6


def test_include_summary_false_removes_it() -> None:
    summary = summary_event(9, "Bob likes tea.", count=6)
    result = ctx([user(7, "hi"), summary], summary, include_summary=False)
    assert result["messages"] == [{"role": "user", "content": "hi"}]
    assert "Bob likes tea." not in json.dumps(result["messages"])


# --------------------------------------------------------------------------------------------------------------
# Budgets
# --------------------------------------------------------------------------------------------------------------

TEXTS = ["a" * 10, "b" * 30, "c" * 7, "d" * 50, "e" * 3, "f" * 21]


def conversation() -> list[dict]:
    return [(user if i % 2 == 0 else model)(i + 1, text) for i, text in enumerate(TEXTS)]


def tail_tokens(k: int) -> int:
    events = conversation()
    return ctx(events[len(events) - k :])["token_estimate"] if k else 0


def tail_chars(k: int) -> int:
    return sum(len(t) for t in TEXTS[len(TEXTS) - k :]) if k else 0


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 9])
def test_max_messages_keeps_newest(n: int) -> None:
    result = ctx(conversation(), max_messages=n)
    kept = min(n, len(TEXTS))
    assert contents(result) == TEXTS[len(TEXTS) - kept :]
    assert result["dropped_events"] == len(TEXTS) - kept


def test_max_tokens_keeps_longest_newest_tail_within_budget() -> None:
    total = tail_tokens(len(TEXTS))
    assert ctx(conversation())["token_estimate"] == total
    for budget in range(tail_tokens(1), total + 3):
        result = ctx(conversation(), max_tokens=budget)
        k = max(k for k in range(len(TEXTS) + 1) if tail_tokens(k) <= budget)
        assert contents(result) == TEXTS[len(TEXTS) - k :], budget
        assert result["token_estimate"] <= budget
        assert result["dropped_events"] == len(TEXTS) - k


def test_max_chars_keeps_longest_newest_tail_within_budget() -> None:
    for budget in range(len(TEXTS[-1]), tail_chars(len(TEXTS)) + 3):
        result = ctx(conversation(), max_chars=budget)
        k = max(k for k in range(len(TEXTS) + 1) if tail_chars(k) <= budget)
        assert contents(result) == TEXTS[len(TEXTS) - k :], budget
        assert sum(len(c) for c in contents(result)) <= budget


@pytest.mark.parametrize("max_messages", [2, 4, 6])
@pytest.mark.parametrize("max_chars", [40, 70, 130])
@pytest.mark.parametrize("max_tokens", [25, 40, 100])
def test_combined_budgets_all_hold(max_messages: int, max_chars: int, max_tokens: int) -> None:
    result = ctx(conversation(), max_messages=max_messages, max_chars=max_chars, max_tokens=max_tokens)
    k = max(
        k
        for k in range(len(TEXTS) + 1)
        if k <= max_messages and tail_chars(k) <= max_chars and tail_tokens(k) <= max_tokens
    )
    assert contents(result) == TEXTS[len(TEXTS) - k :]
    assert len(result["messages"]) <= max_messages
    assert result["token_estimate"] <= max_tokens
    assert sum(len(c) for c in contents(result)) <= max_chars


@pytest.mark.parametrize("max_chars", [1, 5, 12, 30])
def test_newest_message_over_max_chars_keeps_its_tail(max_chars: int) -> None:
    newest = "The meeting moved to Thursday at 3pm in room 401."
    assert len(newest) > max_chars
    result = ctx([user(1, "earlier"), model(2, newest)], max_chars=max_chars)
    [message] = result["messages"]
    assert message["role"] == "assistant"
    assert 0 < len(message["content"]) <= max_chars
    assert message["content"] == newest[-len(message["content"]) :]
    assert result["dropped_events"] == 1


@pytest.mark.parametrize("max_tokens", [5, 8, 13])
def test_newest_message_over_max_tokens_keeps_its_tail(max_tokens: int) -> None:
    newest = "x" * 40 + "The meeting moved to Thursday at 3pm in room 401."
    result = ctx([user(1, "earlier"), model(2, newest)], max_tokens=max_tokens)
    [message] = result["messages"]
    assert 0 < len(message["content"]) < len(newest)
    assert message["content"] == newest[-len(message["content"]) :]
    assert result["token_estimate"] <= max_tokens


def test_budgets_count_the_summary() -> None:
    summary = summary_event(9, "S" * 20, count=4)
    events = [*conversation(), summary]
    result = ctx(events, summary, max_messages=3)
    assert result["messages"][0]["role"] == "system"
    assert contents(result)[1:] == TEXTS[-2:]
    budget = ctx(events, summary)["token_estimate"] - 1
    limited = ctx(events, summary, max_tokens=budget)
    assert limited["token_estimate"] <= budget
    assert limited["messages"][0]["role"] == "system"


# --------------------------------------------------------------------------------------------------------------
# Tool pairing
# --------------------------------------------------------------------------------------------------------------


def test_tool_pairs_are_whole_under_every_budget() -> None:
    events = tool_conversation()
    full = ctx(events)
    assert len(full["messages"]) == 11
    assert_tool_pairs_whole(full["messages"])
    for n in range(1, 15):
        assert_tool_pairs_whole(ctx(events, max_messages=n)["messages"])
    for budget in range(1, full["token_estimate"] + 2):
        assert_tool_pairs_whole(ctx(events, max_tokens=budget)["messages"])
    for budget in range(1, 400, 3):
        assert_tool_pairs_whole(ctx(events, max_chars=budget)["messages"])
        assert_tool_pairs_whole(ctx(events, max_chars=budget, keep_first=True, start_with_user=True)["messages"])


def test_pair_last_with_one_message_budget_gives_neither() -> None:
    result = ctx([user(1, "weather?"), call(2, "c1"), response(3, "c1")], max_messages=1)
    assert result["messages"] == []
    assert result["dropped_events"] == 3


@pytest.mark.parametrize(
    ("max_messages", "expected_roles"), [(1, ["user"]), (2, ["user"]), (3, ["assistant", "tool", "user"])]
)
def test_pair_followed_by_plain_message(max_messages: int, expected_roles: list[str]) -> None:
    events = [call(1, "c1"), response(2, "c1"), user(3, "thanks")]
    result = ctx(events, max_messages=max_messages)
    assert [m["role"] for m in result["messages"]] == expected_roles
    assert result["messages"][-1]["content"] == "thanks"


def test_call_without_response_never_appears() -> None:
    events = [user(1, "q1"), call(2, "c1"), model(3, "a1"), user(4, "q2"), call(5, "c2")]
    result = ctx(events)
    assert contents(result) == ["q1", "a1", "q2"]
    assert not any(m.get("tool_calls") for m in result["messages"])
    assert result["dropped_events"] == 2


def test_response_without_call_never_appears() -> None:
    events = [response(1, "c0"), user(2, "q1"), response(3, "c9", "lookup"), model(4, "a1")]
    result = ctx(events)
    assert contents(result) == ["q1", "a1"]
    assert not any(m["role"] == "tool" for m in result["messages"])


def test_response_with_unknown_id_is_not_matched_to_another_call() -> None:
    # Only a response WITHOUT an id is matched by name; a response naming id c9 has no call, and call c1 has no
    # response: neither may appear.
    events = [user(1, "q"), call(2, "c1", "weather"), response(3, "c9", "weather", "rain"), model(4, "done")]
    result = ctx(events)
    assert contents(result) == ["q", "done"]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in result["messages"])


def test_parallel_calls_stay_together() -> None:
    events = [
        user(1, "q"),
        calls(2, ("c1", "weather", {"city": "A"}), ("c2", "weather", {"city": "B"})),
        responses(3, ("c1", "weather", {"result": "rain"}), ("c2", "weather", {"result": "sun"})),
    ]
    full = ctx(events)["messages"]
    assert [m["role"] for m in full] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in full[1]["tool_calls"]] == ["c1", "c2"]
    assert [m["tool_call_id"] for m in full[2:]] == ["c1", "c2"]
    assert [m["content"] for m in full[2:]] == ["rain", "sun"]
    assert ctx(events, max_messages=3)["messages"] == full[1:]
    assert ctx(events, max_messages=2)["messages"] == []


def test_parallel_calls_with_one_result_missing_are_left_out() -> None:
    events = [
        user(1, "q"),
        calls(2, ("c1", "weather", {"city": "A"}), ("c2", "weather", {"city": "B"})),
        response(3, "c1", "weather", "rain"),
        model(4, "done"),
    ]
    assert contents(ctx(events)) == ["q", "done"]


def test_response_without_id_is_matched_by_name() -> None:
    events = [user(1, "q"), call(2, "c9", "lookup"), response(3, None, "lookup", "found")]
    messages = ctx(events)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[2]["tool_call_id"] == "c9"
    assert messages[2]["content"] == "found"


def test_responses_without_ids_match_unanswered_calls_in_order() -> None:
    events = [
        calls(1, ("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"})),
        responses(2, (None, "lookup", {"result": "A"}), (None, "lookup", {"result": "B"})),
    ]
    messages = ctx(events)["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[1:]] == [("c1", "A"), ("c2", "B")]


def test_call_and_response_without_ids_pair_by_name() -> None:
    events = [user(1, "q"), call(2, None, "lookup"), response(3, None, "lookup", "found")]
    messages = ctx(events)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["id"]


# --------------------------------------------------------------------------------------------------------------
# keep_first and start_with_user
# --------------------------------------------------------------------------------------------------------------


def test_keep_first_keeps_the_first_message_when_the_middle_is_cut() -> None:
    result = ctx(conversation(), max_messages=3, keep_first=True)
    assert contents(result) == [TEXTS[0], *TEXTS[-2:]]
    assert result["dropped_events"] == 3
    without = ctx(conversation(), max_messages=3)
    assert contents(without) == TEXTS[-3:]


def test_keep_first_with_chars_budget() -> None:
    budget = len(TEXTS[0]) + len(TEXTS[-1]) + len(TEXTS[-2])
    result = ctx(conversation(), max_chars=budget, keep_first=True)
    assert contents(result) == [TEXTS[0], TEXTS[-2], TEXTS[-1]]


def test_keep_first_keeps_first_after_the_summary() -> None:
    summary = summary_event(9, "the summary", count=4)
    result = ctx([*conversation(), summary], summary, max_messages=3, keep_first=True)
    assert result["messages"][0]["role"] == "system"
    assert contents(result)[1:] == [TEXTS[0], TEXTS[-1]]


def test_start_with_user_drops_leading_assistant_and_tool_messages() -> None:
    events = [model(1, "Welcome!"), call(2, "c1"), response(3, "c1"), user(4, "q"), model(5, "a")]
    assert [m["role"] for m in ctx(events)["messages"]] == ["assistant", "assistant", "tool", "user", "assistant"]
    result = ctx(events, start_with_user=True)
    assert result["messages"] == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert result["dropped_events"] == 3


def test_start_with_user_after_a_budget_cut() -> None:
    result = ctx(conversation(), max_messages=3, start_with_user=True)
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    assert contents(result) == TEXTS[-2:]


def test_start_with_user_keeps_the_summary_first() -> None:
    summary = summary_event(9, "the summary", count=4)
    events = [model(5, "a0"), user(6, "q1"), model(7, "a1"), summary]
    result = ctx(events, summary, start_with_user=True)
    assert [m["role"] for m in result["messages"]] == ["system", "user", "assistant"]
    assert contents(result)[1:] == ["q1", "a1"]


# --------------------------------------------------------------------------------------------------------------
# Bad options
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"format": "xml"}, "format"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_chars": 0}, "max_chars"),
    ],
)
def test_bad_options_raise_invalid_input(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        ContextOptions(**options)
    assert info.value.field == field
    assert info.value.status == 400
