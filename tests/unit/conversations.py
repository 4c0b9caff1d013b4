"""Stored events of a conversation (text turns, tool calls and their results, summaries) for the unit tests of
the context window, and the check that its tool calls and results stay paired."""

from __future__ import annotations

from typing import Any

from agent_memory.policy.messages import COMPACTION_META


def event(seq: int, author: str, parts: list[dict[str, Any]] | None, *, role: str = "model", **extra: Any) -> dict:
    body: dict[str, Any] = {
        "id": f"e{seq}",
        "seq": seq,
        "author": author,
        "invocation_id": extra.pop("invocation_id", f"inv{seq}"),
        "timestamp": 1000.0 + seq,
        "actions": {"state_delta": {}, **extra.pop("actions", {})},
        **extra,
    }
    if parts is not None:
        body["content"] = {"role": role, "parts": parts}
    return body


def user(seq: int, text: str, **extra: Any) -> dict:
    return event(seq, "user", [{"text": text}], role="user", **extra)


def model(seq: int, text: str, **extra: Any) -> dict:
    return event(seq, "agent", [{"text": text}], **extra)


def calls(seq: int, *specs: tuple[str | None, str, dict[str, Any]]) -> dict:
    parts = []
    for call_id, name, args in specs:
        call: dict[str, Any] = {"name": name, "args": args}
        if call_id is not None:
            call["id"] = call_id
        parts.append({"function_call": call})
    return event(seq, "agent", parts)


def call(seq: int, call_id: str | None, name: str = "weather", args: dict[str, Any] | None = None) -> dict:
    return calls(seq, (call_id, name, args if args is not None else {"city": "Lisbon"}))


def responses(seq: int, *specs: tuple[str | None, str, dict[str, Any]]) -> dict:
    parts = []
    for call_id, name, response in specs:
        resp: dict[str, Any] = {"name": name, "response": response}
        if call_id is not None:
            resp["id"] = call_id
        parts.append({"function_response": resp})
    return event(seq, "agent", parts, role="user")


def response(seq: int, call_id: str | None, name: str = "weather", result: Any = "sunny") -> dict:
    return responses(seq, (call_id, name, {"result": result}))


def summary_event(seq: int, text: str, *, start_seq: int = 1, end_seq: int = 4, count: int = 4) -> dict:
    return {
        "id": f"sum{seq}",
        "seq": seq,
        "author": "system",
        "invocation_id": f"compaction-{seq}",
        "timestamp": 2000.0 + seq,
        "actions": {
            "state_delta": {},
            "compaction": {
                "start_timestamp": 1001.0,
                "end_timestamp": 1000.0 + end_seq,
                "compacted_content": {"role": "model", "parts": [{"text": text}]},
            },
        },
        "custom_metadata": {
            COMPACTION_META: {"start_seq": start_seq, "end_seq": end_seq, "event_count": count, "trigger": "manual"}
        },
    }


def assert_tool_pairs_whole(messages: list[dict[str, Any]]) -> None:
    """Every emitted tool call has its result emitted, and every emitted result its call."""
    call_ids = sorted(c["id"] for m in messages for c in m.get("tool_calls") or [])
    answered = sorted(m["tool_call_id"] for m in messages if m["role"] == "tool")
    assert call_ids == answered


def tool_conversation() -> list[dict]:
    return [
        user(1, "What's the weather in Lisbon?"),
        call(2, "c1", "weather", {"city": "Lisbon"}),
        response(3, "c1", "weather", "sunny, 24C"),
        model(4, "It is sunny and 24C."),
        user(5, "And tomorrow, with the forecast?"),
        calls(6, ("c2", "weather", {"city": "Lisbon", "day": 1}), ("c3", "forecast", {"city": "Lisbon"})),
        responses(7, ("c2", "weather", {"result": "cloudy"}), ("c3", "forecast", {"rain": 0.7})),
        model(8, "Cloudy, with a good chance of rain."),
        call(9, "c4", "calendar", {"day": 1}),
        response(10, "c4", "calendar", "free"),
    ]
