"""The state, listing, memo and transfer routes, through both clients against `make run`: state reads, both
listings (ordered, merged state), strict create, an If-Match that outlives a compaction, snake_case output, memory
saves of events."""

from __future__ import annotations

import pytest
from support import Driver
from test_live import LoseAnswers, lossy, said

from agent_memory_client import Client
from agent_memory_client.errors import AlreadyExists
from agent_memory_client.models import EventActions


async def test_user_and_app_state(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    assert await client.call("get_user_state", app_name, "nobody") == {}  # never 404
    assert await client.call("get_app_state", app_name) == {}
    session = await client.call("create_session", app_name, "u1", state={"s": 1, "user:home": "Lisbon", "app:v": 2})
    delta = said("moving")
    delta.actions = EventActions(state_delta={"user:home": "Porto", "temp:t": 0})
    await client.call("append_event", app_name, "u1", session.id, delta)
    assert await client.call("get_user_state", app_name, "u1") == {"user:home": "Porto"}
    assert await client.call("get_user_state", app_name, "u2") == {}
    assert await client.call("get_app_state", app_name) == {"app:v": 2}
    await client.close()


async def test_listings_oldest_update_first_with_merged_state(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    first = await client.call("create_session", app_name, "u1", session_id="a", state={"user:tier": "gold"})
    await client.call("create_session", app_name, "u1", session_id="b", state={"app:flag": True})
    await client.call("create_session", app_name, "u2", session_id="c")
    await client.call("append_event", app_name, "u1", first.id, said("touch a"))  # a is now the newest
    mine = await client.call("list_sessions", app_name, "u1")
    assert [s.id for s in mine.sessions] == ["b", "a"]
    assert all(s.state == {"user:tier": "gold", "app:flag": True} for s in mine.sessions)
    everyone = await client.call("list_sessions", app_name, limit=2)  # app-wide: user_id None
    assert len(everyone.sessions) == 2 and everyone.next_token
    if kind == "sync":
        listed = [(s.user_id, s.id) for s in client.client.iter_sessions(app_name, limit=2)]
    else:
        listed = [(s.user_id, s.id) async for s in client.client.iter_sessions(app_name, limit=2)]
    assert sorted(listed) == [("u1", "a"), ("u1", "b"), ("u2", "c")]
    await client.close()


async def test_strict_create(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1", session_id="s1", state={"k": 1}, strict=True)
    assert session.created is True
    with pytest.raises(AlreadyExists) as taken:
        await client.call("create_session", app_name, "u1", session_id="s1", state={"k": 2}, strict=True)
    assert taken.value.status == 409 and taken.value.code == "already_exists"
    assert (await client.call("get_session", app_name, "u1", "s1")).state == {"k": 1}  # nothing changed
    await client.close()


def test_a_strict_create_whose_answer_was_lost_returns_the_session_it_created(server_url: str, app_name: str) -> None:
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        session = client.create_session(app_name, "u1", state={"k": 1}, strict=True)
    # created, answer lost; the retry met already_exists for the client's own fresh id; the read returned it
    assert [r.method for r in transport.sent] == ["POST", "POST", "GET"]
    assert session.created is True and session.state == {"k": 1}
    assert [s.id for s in Client(server_url).list_sessions(app_name, "u1").sessions] == [session.id]


async def test_an_if_match_taken_before_a_compaction_still_matches(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    turns = [said(f"turn {i}: the weather in Porto is {i} degrees") for i in range(14)]
    appended = await client.call("append_events", app_name, "u1", session.id, turns)
    compacted = await client.call("compact", app_name, "u1", session.id)
    assert compacted.compacted is True and compacted.event.is_compaction
    after = await client.call("append_event", app_name, "u1", session.id, said("still mine"), if_match=appended.version)
    assert after.version == appended.version + 1
    read = await client.call("get_session", app_name, "u1", session.id)
    assert read.events[-1].content.text == "still mine" and any(e.is_compaction for e in read.events)
    await client.close()


async def test_unmodelled_fields_come_back_snake_case(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    event = {
        "author": "agent",
        "content": {"role": "model", "parts": [{"text": "hi"}]},
        "usageMetadata": {"promptTokenCount": 3},
        "custom_metadata": {"keepThisKey": 1},
    }
    stored = (await client.call("append_event", app_name, "u1", session.id, event)).events[0]
    assert stored.model_extra == {"usage_metadata": {"prompt_token_count": 3}}
    assert stored.custom_metadata == {"keepThisKey": 1}  # a free-form map keeps its keys
    await client.close()


async def test_memory_saves_of_explicit_events(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    cat = said("My cat is called Mishka").model_copy(update={"id": "e1", "custom_metadata": {"k": 1}})
    events = [cat, {"id": "e2", "author": "user"}]
    result = await client.call("save_memories", app_name, "u1", events=events, session_id="chat-1")
    assert (result.saved, result.skipped) == (1, 1)  # the second has no text
    again = await client.call("save_memories", app_name, "u1", events=events, session_id="chat-1")
    assert (again.saved, again.skipped) == (0, 2)  # saved once per event id
    hits = await client.call("search_memories", app_name, "u1", "what is the cat called?", top_k=5)
    assert [(h.text, h.custom_metadata) for h in hits] == [("My cat is called Mishka", {"k": 1})]
    # Without ids, the service names each event by its content: the same turn sent again is not saved again.
    dog = said("The dog is called Rex")
    assert (await client.call("save_memories", app_name, "u1", events=[dog])).saved == 1
    assert (await client.call("save_memories", app_name, "u1", events=[dog])).saved == 0
    assert dog.id is None  # the caller's event is not modified
    await client.close()


def test_a_memory_save_of_events_whose_answer_was_lost_stores_them_once(server_url: str, app_name: str) -> None:
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        result = client.save_memories(app_name, "u1", events=[said("The boat is named Aurora")])
        hits = client.search_memories(app_name, "u1", "boat name", top_k=10)
    assert len(transport.sent) == 3 and result.saved == 0 and result.skipped == 1  # the retry found it stored
    assert [h.text for h in hits] == ["The boat is named Aurora"]


async def test_search_scores_and_the_default_cut(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    await client.call("save_memories", app_name, "u1", memories=["Ana's flight to Porto leaves on Friday"])
    (only,) = await client.call("search_memories", app_name, "u1", "when does Ana fly to Porto?")
    assert 0 < only.score <= 1  # a single memory is not rescaled to 0.0 or 1.0 by itself
    assert await client.call("search_memories", app_name, "u1", "quantum chromodynamics lecture") == []
    anything = await client.call("search_memories", app_name, "u1", "quantum chromodynamics lecture", min_score=0)
    assert [m.text for m in anything] == ["Ana's flight to Porto leaves on Friday"]
    at_its_score = await client.call(
        "search_memories", app_name, "u1", "when does Ana fly to Porto?", min_score=only.score
    )
    assert [m.id for m in at_its_score] == [only.id]  # kept at the cut, not only above it
    await client.close()
