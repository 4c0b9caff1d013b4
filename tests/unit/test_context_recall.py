"""Base system messages, recalled memories and the profile in the context window: order, formats, budgets (memories
and profile give way before the conversation), validation; and properties over random conversations."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.errors import InvalidInput, UnprocessableInput
from agent_memory.policy.context import (
    MEMORIES_PREFIX,
    SUMMARY_PREFIX,
    ContextOptions,
    ProfileFacts,
    Recall,
    RecalledMemory,
    build_context,
    iso_date,
    latest_user_text,
    memories_text,
)
from agent_memory.policy.profile import PROFILE_HEADER
from tests.unit.conversations import (
    assert_tool_pairs_whole,
    call,
    model,
    response,
    summary_event,
    tool_conversation,
    user,
)

PROFILE_PREFIX = PROFILE_HEADER + "\n"
FACTS = ["Name: Ana", "Allergic to peanuts", "Lives in Porto", "Works as a nurse"]


def profile(facts: list[str] = FACTS) -> ProfileFacts:
    return ProfileFacts(
        count=len(facts),
        render=lambda n: PROFILE_PREFIX + "\n".join(f"- {f}" for f in facts[:n]),
        memory_ids=tuple((f"m{i}",) for i in range(len(facts))),
    )


def hit(i: int, score: float, text: str | None = None, date: str = "2023-05-08") -> RecalledMemory:
    return RecalledMemory(id=f"h{i}", text=text or f"memory number {i}", score=score, date=date)


def ctx(
    events: list[dict[str, Any]], summary: dict[str, Any] | None = None, recall: Recall | None = None, **options: Any
) -> dict[str, Any]:
    return build_context(events, summary, ContextOptions(**options), recall)


def chats(n: int) -> list[dict[str, Any]]:
    return [(user if i % 2 == 0 else model)(i + 1, f"turn {i} " + "w" * 10) for i in range(n)]


def kinds(result: dict[str, Any]) -> list[str]:
    return [m["metadata"].get("kind", m["role"]) for m in result["messages"]]


def chars(message: dict[str, Any]) -> int:
    size = len(message.get("content") or "")
    for c in message.get("tool_calls") or []:
        size += len(c["function"]["name"]) + len(c["function"]["arguments"])
    return size


# --------------------------------------------------------------------------------------------------------------
# Order and formats
# --------------------------------------------------------------------------------------------------------------


def test_order_is_base_profile_memories_summary_conversation() -> None:
    summary = summary_event(9, "they talked about trains")
    events = [summary, user(10, "hello"), model(11, "hi")]
    recall = Recall(memories=(hit(1, 0.2),), profile=profile())
    result = ctx(events, summary, recall, system=("You are kind.", "Answer briefly."), format="full")
    assert kinds(result) == ["system", "system", "profile", "memories", "system", "user", "assistant"]
    contents = [m["content"] for m in result["messages"]]
    assert contents[:2] == ["You are kind.", "Answer briefly."]
    assert contents[2] == PROFILE_PREFIX + "\n".join(f"- {f}" for f in FACTS)
    assert contents[3] == MEMORIES_PREFIX + "- [2023-05-08] memory number 1"
    assert contents[4] == SUMMARY_PREFIX + "they talked about trains"
    assert result["memories"] == [{"id": "h1", "score": 0.2}] and result["profile"] is True
    assert result["summary"] == "they talked about trains" and result["dropped_events"] == 0


def test_memories_message_lists_hits_best_first_with_their_dates() -> None:
    recall = Recall(memories=(hit(1, 0.1, "likes tea"), hit(2, 0.9, "allergic to peanuts"), hit(3, 0.5, "a\nb", "")))
    result = ctx([user(1, "what can I eat?")], None, recall)
    assert result["messages"][0] == {
        "role": "system",
        "content": MEMORIES_PREFIX + "- [2023-05-08] allergic to peanuts\n- a\n  b\n- [2023-05-08] likes tea",
    }
    assert result["memories"] == [{"id": "h2", "score": 0.9}, {"id": "h3", "score": 0.5}, {"id": "h1", "score": 0.1}]
    assert result["profile"] is False


def test_full_format_metadata_names_kind_ids_and_scores() -> None:
    recall = Recall(memories=(hit(1, 0.3), hit(2, 0.7)), profile=profile(FACTS[:2]))
    messages = ctx([user(1, "hi")], None, recall, system=("base",), format="full")["messages"]
    assert messages[0]["metadata"] == {"kind": "system"}
    assert messages[1]["metadata"] == {"kind": "profile", "memory_ids": ["m0", "m1"]}
    assert messages[2]["metadata"] == {
        "kind": "memories",
        "memories": [{"id": "h2", "score": 0.7}, {"id": "h1", "score": 0.3}],
    }
    assert all(m["timestamp"] is None and m["turn_id"] is None for m in messages[:3])


def test_adk_format_renders_system_messages_as_the_summary_is() -> None:
    summary = summary_event(9, "earlier")
    recall = Recall(memories=(hit(1, 0.3),), profile=profile())
    messages = ctx([summary, user(10, "hi")], summary, recall, system=("base",), format="adk")["messages"]
    for message in messages[:4]:
        assert message["role"] == "model" and len(message["parts"]) == 1 and set(message["parts"][0]) == {"text"}
    assert messages[0]["parts"][0]["text"] == "base"
    assert messages[2]["parts"][0]["text"].startswith(MEMORIES_PREFIX)
    assert messages[3]["parts"][0]["text"] == SUMMARY_PREFIX + "earlier"
    assert messages[4] == {"role": "user", "parts": [{"text": "hi"}]}


def test_no_recall_and_no_system_is_the_context_as_before() -> None:
    events = tool_conversation()
    assert ctx(events, None, Recall()) == {**ctx(events), "memories": [], "profile": False}
    empty_profile = Recall(profile=ProfileFacts(count=0, render=lambda n: PROFILE_PREFIX))
    assert ctx(events, None, empty_profile)["profile"] is False


# --------------------------------------------------------------------------------------------------------------
# Budgets
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [{"max_messages": 1}, {"max_chars": 10}, {"max_tokens": 8}])
def test_base_system_messages_over_the_budget_alone_are_refused(budget: dict[str, int]) -> None:
    with pytest.raises(UnprocessableInput) as raised:
        ctx([user(1, "hi")], None, None, system=("You are a helpful assistant.", "Be brief."), **budget)
    assert raised.value.field == "system"


def test_base_system_messages_are_kept_and_the_conversation_trimmed() -> None:
    result = ctx(chats(6), None, None, system=("base",), max_messages=3)
    assert result["messages"][0]["content"] == "base"
    assert len(result["messages"]) == 3 and result["dropped_events"] == 4


def test_memory_hits_go_lowest_score_first_before_the_conversation() -> None:
    events = chats(4)
    recall = Recall(memories=(hit(1, 0.9), hit(2, 0.1), hit(3, 0.5)))
    full = ctx(events, None, recall)
    assert len(full["memories"]) == 3
    one_less = ctx(events, None, recall, max_chars=sum(chars(m) for m in full["messages"]) - 1)
    assert one_less["memories"] == [{"id": "h1", "score": 0.9}, {"id": "h3", "score": 0.5}]
    assert one_less["dropped_events"] == 0
    conversation = sum(chars(m) for m in ctx(events)["messages"])
    just_one = ctx(events, None, recall, max_chars=conversation + len(memories_text([hit(1, 0.9)])))
    assert just_one["memories"] == [{"id": "h1", "score": 0.9}] and just_one["dropped_events"] == 0
    assert ctx(events, None, recall, max_messages=5)["memories"] == full["memories"]  # one message holds them all
    # The conversation alone fills the budget: no memory at all, and the conversation whole.
    none = ctx(events, None, recall, max_messages=4)
    assert none["memories"] == [] and none["dropped_events"] == 0 and len(none["messages"]) == 4


def test_profile_facts_go_after_the_memories_and_before_the_conversation() -> None:
    events = chats(2)
    recall = Recall(memories=(hit(1, 0.9),), profile=profile())
    conversation = sum(chars(m) for m in ctx(events)["messages"])
    room = len(PROFILE_PREFIX + "- Name: Ana\n- Allergic to peanuts")
    result = ctx(events, None, recall, max_chars=conversation + room, format="full")
    assert kinds(result) == ["profile", "user", "assistant"]
    assert result["messages"][0]["content"] == PROFILE_PREFIX + "- Name: Ana\n- Allergic to peanuts"
    assert result["messages"][0]["metadata"]["memory_ids"] == ["m0", "m1"]
    assert result["memories"] == [] and result["profile"] is True
    # Less room than one fact: no profile, the conversation whole.
    tight = ctx(events, None, recall, max_chars=conversation + len(PROFILE_PREFIX))
    assert tight["profile"] is False and tight["dropped_events"] == 0 and len(tight["messages"]) == 2


def test_a_conversation_over_budget_leaves_no_room_for_memories_or_profile() -> None:
    recall = Recall(memories=(hit(1, 0.9),), profile=profile())
    result = ctx(chats(10), None, recall, system=("base",), max_messages=4)
    assert [m["role"] for m in result["messages"]] == ["system", "assistant", "user", "assistant"]
    assert result["memories"] == [] and result["profile"] is False and result["dropped_events"] == 7


def test_a_conversation_that_fits_is_emitted_whole_whatever_keep_first_takes() -> None:
    """keep_first would spend the budget on a leading reply that start_with_user then drops (found by hypothesis)."""
    events = [model(1, "a"), user(2, "b"), model(3, "c")]
    recall = Recall(memories=(hit(1, 0.5),))
    result = ctx(events, None, recall, max_messages=3, keep_first=True, start_with_user=True)
    assert [m["content"] for m in result["messages"]][1:] == ["b", "c"] and len(result["memories"]) == 1
    assert [m["content"] for m in ctx(events, max_messages=2, keep_first=True, start_with_user=True)["messages"]] == [
        "b",
        "c",
    ]


def test_the_summary_counts_as_conversation() -> None:
    summary = summary_event(9, "S" * 40)
    events = [summary, user(10, "hi")]
    recall = Recall(memories=(hit(1, 0.9),))
    assert ctx(events, summary, recall, max_messages=3)["memories"] == [{"id": "h1", "score": 0.9}]
    squeezed = ctx(events, summary, recall, max_messages=2)
    assert squeezed["memories"] == [] and squeezed["messages"][0]["content"].startswith(SUMMARY_PREFIX)


# --------------------------------------------------------------------------------------------------------------
# Validation and helpers
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"system": ("",)}, "system"),
        ({"system": ("  ",)}, "system"),
        ({"system": tuple("x" for _ in range(21))}, "system"),
        ({"system": ("x" * 200_001,)}, "system"),
        ({"memories": -1}, "memories"),
        ({"memories": 51}, "memories"),
        ({"memories": True}, "memories"),
        ({"memory_query": "cats"}, "memory_query"),
        ({"memories": 3, "memory_query": " "}, "memory_query"),
        ({"memory_min_score": 0.5}, "memory_min_score"),
        ({"memories": 3, "memory_min_score": 1.5}, "memory_min_score"),
    ],
)
def test_bad_recall_options_raise_invalid_input(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        ContextOptions(**options)
    assert raised.value.field == field


def test_only_memories_or_profile_want_memory() -> None:
    assert not ContextOptions(system=("base",), max_tokens=10).wants_memory
    assert ContextOptions(memories=1).wants_memory and ContextOptions(profile=True).wants_memory


def test_latest_user_text_is_the_newest_user_message_with_text() -> None:
    events = [user(1, "first"), model(2, "reply"), user(3, "  "), call(4, "c1"), response(5, "c1")]
    assert latest_user_text(events) == "first"
    assert latest_user_text([model(1, "only the model")]) is None
    assert latest_user_text([{"id": "bad", "content": {"parts": "not a list"}}, user(2, "ok")]) == "ok"


@pytest.mark.parametrize(
    ("value", "date"),
    [
        (1683540000.0, "2023-05-08"),
        ("2023-05-08T23:59:59Z", "2023-05-08"),
        ("2023-05-08T23:30:00-02:00", "2023-05-09"),
        ("yesterday", ""),
        (None, ""),
        (True, ""),
        (1e20, ""),
    ],
)
def test_iso_date(value: Any, date: str) -> None:
    assert iso_date(value) == date


def test_memories_text_without_dates() -> None:
    assert memories_text([hit(1, 0.5, "x", date="")]) == MEMORIES_PREFIX + "- x"


# --------------------------------------------------------------------------------------------------------------
# Properties: budgets never exceeded, tool pairs never split, order kept, memories give way first
# --------------------------------------------------------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    seq = 0
    for kind in draw(st.lists(st.sampled_from(["user", "model", "tool"]), max_size=12)):
        seq += 1
        text = draw(st.text(alphabet="abc ,\n", min_size=1, max_size=60))
        if kind == "user":
            events.append(user(seq, text))
        elif kind == "model":
            events.append(model(seq, text))
        else:
            events.append(call(seq, f"c{seq}", "lookup", {"q": text}))
            seq += 1
            events.append(response(seq, f"c{seq - 1}", "lookup", text))
    return events


recalls = st.builds(
    lambda scores, facts: Recall(
        memories=tuple(hit(i, s, "fact " * (i + 1)) for i, s in enumerate(scores)),
        profile=profile(facts) if facts else None,
    ),
    st.lists(st.floats(min_value=0, max_value=1), max_size=6),
    st.lists(st.text(alphabet="xyz ", min_size=1, max_size=30), max_size=5),
)
budgets = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": st.integers(min_value=1, max_value=300),
        "max_chars": st.integers(min_value=1, max_value=800),
        "max_messages": st.integers(min_value=1, max_value=12),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=conversations(),
    recall=recalls,
    system=st.lists(st.text(alphabet="sys ,", min_size=1, max_size=40).filter(str.strip), max_size=3),
    budget=budgets,
    keep_first=st.booleans(),
    start_with_user=st.booleans(),
    summary_chars=st.one_of(st.none(), st.integers(min_value=1, max_value=300)),
)
def test_budgets_pairs_and_order_hold(
    events: list[dict[str, Any]],
    recall: Recall,
    system: list[str],
    budget: dict[str, int],
    keep_first: bool,
    start_with_user: bool,
    summary_chars: int | None,
) -> None:
    options = {"system": tuple(system), "keep_first": keep_first, "start_with_user": start_with_user, **budget}
    summary = None if summary_chars is None else summary_event(0, "S" * summary_chars)
    if summary is not None:
        events = [summary, *events]
    try:
        result = ctx(events, summary, recall, format="full", **options)
    except UnprocessableInput as exc:
        # Refused only when the base messages alone are over a budget.
        assert exc.field == "system"
        base_chars = sum(len(s) for s in system)
        base_tokens = sum(4 + math.ceil(len(s) / 4) for s in system)
        assert (
            len(system) > budget.get("max_messages", 10**9)
            or base_chars > budget.get("max_chars", 10**9)
            or base_tokens > budget.get("max_tokens", 10**9)
        )
        return
    messages = result["messages"]
    # Budgets.
    assert len(messages) <= budget.get("max_messages", 10**9)
    assert sum(chars(m) for m in messages) <= budget.get("max_chars", 10**9)
    tokens = sum(4 + math.ceil(chars(m) / 4) for m in messages)
    assert tokens == result["token_estimate"] <= budget.get("max_tokens", 10**9)
    # Tool pairs.
    assert_tool_pairs_whole(messages)
    # Order: the base messages, in order, then profile, memories, then the conversation in its order.
    assert [m["content"] for m in messages[: len(system)]] == system
    rest = kinds({"messages": messages[len(system) :]})
    recall_kinds = [k for k in rest if k in {"profile", "memories"}]
    assert rest[: len(recall_kinds)] == recall_kinds
    assert recall_kinds in ([], ["profile"], ["memories"], ["profile", "memories"])
    conversation = messages[len(system) + len(recall_kinds) :]
    summaries = [i for i, m in enumerate(conversation) if m["role"] == "system"]
    assert summaries in ([], [0])  # the summary (maybe tail-cut), first
    seqs = [m["timestamp"] for m in conversation[len(summaries) :]]
    assert seqs == sorted(seqs)
    # Memories give way first: the best hits are the ones kept, and none is kept when the conversation lost any.
    kept_scores = [m["score"] for m in result["memories"]]
    all_scores = sorted((h.score for h in recall.memories), reverse=True)
    assert kept_scores == all_scores[: len(kept_scores)]
    unbounded = ctx(events, summary, None, format="full", keep_first=keep_first, start_with_user=start_with_user)
    if conversation != unbounded["messages"]:
        assert result["memories"] == [] and result["profile"] is False
    if result["memories"] and recall.profile is not None:
        assert result["profile"] is True  # a fact goes only once every hit has
