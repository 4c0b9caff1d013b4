"""Memory in the context through both clients against `make run`: base system prompts (any length, commas and
all), recalled memories with their dates, the profile, and what a budget leaves of them; plus the requests sent."""

from __future__ import annotations

import json

import httpx
from support import Driver, Script, answer
from test_live import said

from agent_memory_client import Client

MAY_8 = 1683540000.0  # 2023-05-08T10:00:00Z
CONTEXT = {"messages": [], "token_estimate": 0, "compacted_events": 0, "dropped_events": 0}


async def test_memories_and_profile_from_another_session(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    await client.call(
        "save_memories",
        app_name,
        "ana",
        memories=[
            {"text": "My name is Ana", "timestamp": MAY_8},
            {"text": "I am allergic to peanuts, even a trace", "timestamp": MAY_8},
        ],
    )
    session = await client.call("create_session", app_name, "ana")
    await client.call("append_event", app_name, "ana", session.id, said("Which peanut snacks are safe for me?"))
    context = await client.call(
        "get_context", app_name, "ana", session.id, system=["You are kind, brief."], memories=1, profile=True
    )
    base, profile, memories, question = context.messages
    assert base == {"role": "system", "content": "You are kind, brief."}
    assert profile["content"] == "What is known about the user:\n- Name: Ana\n- Allergic to peanuts"
    assert memories["content"] == (
        "Relevant memories of earlier conversations:\n- [2023-05-08] I am allergic to peanuts, even a trace"
    )
    assert question == {"role": "user", "content": "Which peanut snacks are safe for me?"}
    assert context.profile is True and len(context.memories) == 1 and context.memories[0].score > 0
    # Forgotten: recalled no more, and gone from the profile.
    await client.call("forget_memory", app_name, "ana", context.memories[0].id)
    after = await client.call("get_context", app_name, "ana", session.id, memories=3, profile=True, format="full")
    assert after.memories == [] and "peanut" not in json.dumps(after.messages[:-1]).lower()
    await client.close()


async def test_a_long_system_prompt_and_a_budget(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    await client.call("append_events", app_name, "u1", session.id, [said(f"turn {i}") for i in range(6)])
    prompt = "Follow these rules, always, in order. " * 500  # ~19 KB: more than a URL may hold
    context = await client.call("get_context", app_name, "u1", session.id, system=prompt, max_messages=3)
    assert [m["content"] for m in context.messages] == [prompt, "turn 4", "turn 5"]
    assert context.dropped_events == 4 and context.memories == [] and context.profile is False
    await client.close()


def test_system_goes_in_a_post_body_and_the_rest_stays_a_get() -> None:
    script = Script(answer(200, CONTEXT), answer(200, {**CONTEXT, "memories": [{"id": "m1", "score": 0.5}]}))
    with Client("http://api.test", transport=httpx.MockTransport(script)) as client:
        client.get_context("a", "u", "s", memories=2, memory_query="tea, please", profile=True, max_tokens=100)
        got = client.get_context("a", "u", "s", system=["one, two", "three"], memories=2, format="full")
    plain, posted = script.requests
    assert plain.method == "GET" and plain.content == b""
    assert plain.url.params.multi_items() == [
        ("max_tokens", "100"),
        ("memories", "2"),
        ("memory_query", "tea, please"),
        ("profile", "true"),
    ]
    assert posted.method == "POST" and posted.url.path == "/apps/a/users/u/sessions/s/context"
    assert json.loads(posted.content) == {"system": ["one, two", "three"], "memories": 2, "format": "full"}
    assert got.memories[0].id == "m1" and got.memories[0].score == 0.5
