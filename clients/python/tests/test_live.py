"""The client against `make run` (the server_url fixture): every route that exists today, through both clients,
and retries whose first attempt reached the real server (its answer lost), checked in the server's storage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support import Driver

from agent_memory_client import Client
from agent_memory_client.errors import BadRequest, EventIdConflict, NotFound, PreconditionFailed
from agent_memory_client.models import Content, Event, Part


def said(text: str, author: str = "user") -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, content=Content(role=role, parts=[Part(text=text)]))


async def test_a_session_from_creation_to_deletion(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1", state={"topic": "tea"})
    assert session.created is True and session.version == 0 and session.state == {"topic": "tea"}
    again = await client.call("create_session", app_name, "u1", session_id=session.id, state={"ignored": 1})
    assert again.created is False and again.state == {"topic": "tea"}

    first = await client.call("append_event", app_name, "u1", session.id, said("I like green tea"), if_match=0)
    assert first.version == 1 and first.events[0].seq == 1 and first.events[0].id  # id assigned by the client
    chat = [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "and jasmine"}]
    batch = await client.call("append_events", app_name, "u1", session.id, chat, if_match=first.version)
    assert batch.version == 2 and [(e.author, e.seq) for e in batch.events] == [("assistant", 2), ("user", 3)]
    with pytest.raises(PreconditionFailed) as stale:
        await client.call("append_event", app_name, "u1", session.id, said("late"), if_match=first.version)
    assert stale.value.status == 412 and stale.value.field == "If-Match"

    read = await client.call("get_session", app_name, "u1", session.id, limit=1)  # three pages, all followed
    assert [e.content.text for e in read.events] == ["I like green tea", "Noted.", "and jasmine"]
    assert read.version == 2 and read.next_token is None
    page = await client.call("get_session", app_name, "u1", session.id, limit=2, all_pages=False)
    assert len(page.events) == 2 and page.next_token
    rest = await client.call("get_session", app_name, "u1", session.id, limit=2, next_token=page.next_token)
    assert [e.content.text for e in rest.events] == ["and jasmine"]
    recent = await client.call("get_session", app_name, "u1", session.id, num_recent_events=1)
    assert [e.seq for e in recent.events] == [3]

    context = await client.call("get_context", app_name, "u1", session.id, format="openai", max_messages=2)
    assert [m["content"] for m in context.messages] == ["Noted.", "and jasmine"] and context.dropped_events == 1
    compacted = await client.call("compact", app_name, "u1", session.id)
    assert compacted.compacted is False and compacted.reason

    await client.call("delete_session", app_name, "u1", session.id)
    await client.call("delete_session", app_name, "u1", session.id)  # idempotent
    with pytest.raises(NotFound) as missing:
        await client.call("get_session", app_name, "u1", session.id)
    assert missing.value.code == "session_not_found"
    await client.close()


async def test_events_keep_what_the_client_sent(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1", session_id="s:1")
    event = Event(
        id="e-1",
        invocation_id="inv-1",
        author="agent",
        timestamp=1700000000.5,
        content=Content(role="model", parts=[Part(function_call={"id": "c1", "name": "lookup", "args": {"q": 1}})]),
        actions={"state_delta": {"user:lang": "pt", "temp:scratch": 1, "mood": "ok"}},
        custom_metadata={"k": [1, 2]},
        future_field={"kept": True},  # a field the client does not model
    )
    result = await client.call("append_event", app_name, "u1", session.id, event)
    stored = result.events[0]
    assert stored.id == "e-1" and stored.timestamp == 1700000000.5 and stored.invocation_id == "inv-1"
    assert stored.content.parts[0].function_call.args == {"q": 1}
    assert stored.actions.state_delta == {"user:lang": "pt", "mood": "ok"}  # temp: is never stored
    assert stored.model_extra == {"future_field": {"kept": True}}
    read = await client.call("get_session", app_name, "u1", session.id)
    assert read.state == {"user:lang": "pt", "mood": "ok"} and read.events == [stored]
    # The same id with the same body is the same event; with another body a conflict.
    again = await client.call("append_event", app_name, "u1", session.id, event)
    assert again.events == [stored] and again.version == result.version
    with pytest.raises(EventIdConflict) as conflict:
        await client.call("append_event", app_name, "u1", session.id, said("other").model_copy(update={"id": "e-1"}))
    assert conflict.value.field == "id"
    with pytest.raises(BadRequest) as invalid:
        await client.call("append_event", app_name, "u1", session.id, {"author": "user", "timestamp": "soon"})
    assert invalid.value.status == 422 and invalid.value.field == "timestamp"
    await client.close()


async def test_listing_pages(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    ids = {(await client.call("create_session", app_name, "u1")).id for _ in range(5)}
    page = await client.call("list_sessions", app_name, "u1", limit=2)
    assert len(page.sessions) == 2 and page.next_token and all(s.events == [] for s in page.sessions)
    if kind == "sync":
        listed = [s.id for s in client.client.iter_sessions(app_name, "u1", limit=2)]
    else:
        listed = [s.id async for s in client.client.iter_sessions(app_name, "u1", limit=2)]
    assert sorted(listed) == sorted(ids) and len(listed) == 5
    await client.close()


async def test_long_term_memory(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    await client.call("append_events", app_name, "u1", session.id, [said("My sister Ana lives in Lisbon")])
    saved = await client.call("save_memories", app_name, "u1", session_id=session.id)
    assert (saved.saved, saved.skipped) == (1, 0)
    texts = await client.call("save_memories", app_name, "u1", memories=["I am allergic to peanuts", {"text": "x y"}])
    assert texts.saved == 2
    hits = await client.call("search_memories", app_name, "u1", "Where does Ana live?", top_k=1)
    assert [h.text for h in hits] == ["My sister Ana lives in Lisbon"] and hits[0].author == "user"
    await client.call("forget_memory", app_name, "u1", hits[0].id)
    after = await client.call("search_memories", app_name, "u1", "Where does Ana live?", top_k=5)
    assert "My sister Ana lives in Lisbon" not in [h.text for h in after]
    await client.call("forget_memories", app_name, "u1")
    assert await client.call("search_memories", app_name, "u1", "peanuts") == []
    with pytest.raises(ValueError):
        await client.call("save_memories", app_name, "u1")
    await client.close()


class LoseAnswers(httpx.HTTPTransport):
    """Forwards each request to the server; for the first ``times`` that ``when`` picks, the server's answer is
    dropped and a read timeout raised instead: the request took effect, the client cannot know it."""

    def __init__(self, times: int = 1, when: Callable[[httpx.Request], bool] = lambda r: r.method == "POST") -> None:
        super().__init__()
        self.times = times
        self.when = when
        self.between: Callable[[], Any] = lambda: None  # runs after an answer is lost, before the retry
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = super().handle_request(request)
        if self.times and self.when(request):
            self.times -= 1
            response.read()
            response.close()
            self.between()
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def lossy(server_url: str, transport: LoseAnswers) -> Client:
    client = Client(server_url, transport=transport, backoff=0.0)
    return client


def test_an_append_whose_answer_was_lost_is_stored_once(server_url: str, app_name: str) -> None:
    plain = Client(server_url)
    session = plain.create_session(app_name, "u1")
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        result = client.append_events(app_name, "u1", session.id, [said("one"), said("two")])
    assert len(transport.sent) == 2  # stored by the first attempt, answered by the second
    stored = plain.get_session(app_name, "u1", session.id)
    assert [e.content.text for e in stored.events] == ["one", "two"] and stored.version == 1
    assert [e.id for e in result.events] == [e.id for e in stored.events] and result.version == 1


def test_a_conditional_append_whose_answer_was_lost_succeeds_with_the_new_version(
    server_url: str, app_name: str
) -> None:
    plain = Client(server_url)
    session = plain.create_session(app_name, "u1")
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        result = client.append_event(app_name, "u1", session.id, said("hello"), if_match=session.version)
        assert len(transport.sent) == 3  # lost, 412 (it had landed), the read that recognised it
        follow = client.append_event(app_name, "u1", session.id, said("next"), if_match=result.version)
    stored = plain.get_session(app_name, "u1", session.id)
    assert [e.content.text for e in stored.events] == ["hello", "next"]
    assert result.version == 1 and follow.version == 2 == stored.version
    assert result.events[0].id == stored.events[0].id


def test_a_conditional_append_overtaken_after_its_lost_answer_is_stale(server_url: str, app_name: str) -> None:
    plain = Client(server_url)
    session = plain.create_session(app_name, "u1")
    transport = LoseAnswers()
    transport.between = lambda: plain.append_event(app_name, "u1", session.id, said("someone else"))
    with lossy(server_url, transport) as client, pytest.raises(PreconditionFailed):
        client.append_event(app_name, "u1", session.id, said("mine"), if_match=session.version)
    stored = plain.get_session(app_name, "u1", session.id)
    assert [e.content.text for e in stored.events] == ["mine", "someone else"]  # stored once, and not ours last


def test_a_create_whose_answer_was_lost_creates_one_session(server_url: str, app_name: str) -> None:
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        session = client.create_session(app_name, "u1", state={"k": 1})
    assert len(transport.sent) == 2
    listed = Client(server_url).list_sessions(app_name, "u1").sessions
    assert [(s.id, s.state) for s in listed] == [(session.id, {"k": 1})]


def test_a_memory_save_whose_answer_was_lost_stores_each_memory_once(server_url: str, app_name: str) -> None:
    transport = LoseAnswers()
    with lossy(server_url, transport) as client:
        client.save_memories(app_name, "u1", memories=["The dog is called Rex"])
        hits = client.search_memories(app_name, "u1", "dog name", top_k=10)
    assert [h.text for h in hits] == ["The dog is called Rex"]


async def test_reading_events_after_a_time(kind: str, server_url: str, app_name: str) -> None:
    from datetime import datetime, timezone

    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    stamps = [1700000000.0, 1700000100.0, 1700000200.0]
    events = [said(f"at {t}").model_copy(update={"timestamp": t}) for t in stamps]
    await client.call("append_events", app_name, "u1", session.id, events)
    for after in (1700000100.0, "2023-11-14T22:15:00Z", datetime.fromtimestamp(1700000100, timezone.utc)):
        read = await client.call("get_session", app_name, "u1", session.id, after_timestamp=after)
        assert [e.timestamp for e in read.events] == stamps[1:], after
    await client.close()


async def test_both_clients_close_their_connections_as_context_managers(server_url: str, app_name: str) -> None:
    from agent_memory_client import AsyncClient

    async with AsyncClient(server_url) as async_client:
        created = await async_client.create_session(app_name, "u1")
        pool = async_client._http  # the running loop's
    with Client(server_url) as client:
        assert client.get_session(app_name, "u1", created.id).id == created.id
    assert pool.is_closed and client._http.is_closed and async_client._pools == {}
