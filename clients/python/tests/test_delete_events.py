"""Deleting events through both clients against `make run`: one event with its tool-call partner, a clear, rewinds
(by seq and by invocation), If-Match, the errors, and a delete whose answer was lost."""

from __future__ import annotations

import httpx
import pytest
from support import Driver, Script, answer
from test_live import LoseAnswers, lossy, said

from agent_memory_client import Client
from agent_memory_client.errors import EventNotFound, PreconditionFailed, ToolPairConflict
from agent_memory_client.models import ClearResult, DeleteResult

CALL = {
    "id": "call",
    "author": "agent",
    "content": {"role": "model", "parts": [{"function_call": {"id": "fc1", "name": "weather", "args": {}}}]},
}
RESULT = {
    "id": "result",
    "author": "agent",
    "content": {"role": "user", "parts": [{"function_response": {"id": "fc1", "name": "weather", "response": {}}}]},
}


async def test_delete_one_event_with_its_tool_partner(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    await client.call("append_events", app_name, "u1", session.id, [said("hi"), CALL, RESULT, said("my pin is 4321")])
    stored = await client.call("get_session", app_name, "u1", session.id)
    secret = stored.events[-1].id
    with pytest.raises(ToolPairConflict) as split:
        await client.call("delete_event", app_name, "u1", session.id, "result", pairs="reject")
    assert split.value.status == 409 and split.value.field == "event_id" and "call" in split.value.message
    pair = await client.call("delete_event", app_name, "u1", session.id, "result")
    assert pair == DeleteResult(deleted=["call", "result"], version=stored.version + 1)
    gone = await client.call("delete_event", app_name, "u1", session.id, secret, if_match=pair.version)
    assert gone.deleted == [secret] and gone.version == pair.version + 1
    after = await client.call("get_session", app_name, "u1", session.id)
    assert [e.content.text for e in after.events] == ["hi"]
    context = await client.call("get_context", app_name, "u1", session.id)
    assert "4321" not in context.model_dump_json()
    with pytest.raises(EventNotFound) as missing:
        await client.call("delete_event", app_name, "u1", session.id, secret)
    assert missing.value.status == 404 and missing.value.field == "event_id"
    await client.close()


async def test_clear_and_rewind(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    turns = [said(f"turn {i}") for i in range(6)]
    for i, turn in enumerate(turns):
        turn.invocation_id = f"inv-{i}"
    appended = await client.call("append_events", app_name, "u1", session.id, turns)
    rewound = await client.call("rewind", app_name, "u1", session.id, before_seq=5)
    assert rewound == ClearResult(deleted=2, version=appended.version + 1)
    by_invocation = await client.call("rewind", app_name, "u1", session.id, before_invocation_id="inv-2")
    assert by_invocation.deleted == 2
    with pytest.raises(EventNotFound):
        await client.call("rewind", app_name, "u1", session.id, before_invocation_id="inv-5")
    with pytest.raises(PreconditionFailed):
        await client.call("clear_events", app_name, "u1", session.id, if_match=appended.version)
    cleared = await client.call("clear_events", app_name, "u1", session.id, if_match=by_invocation.version)
    assert cleared.deleted == 2
    assert (await client.call("get_session", app_name, "u1", session.id)).events == []
    again = await client.call("append_event", app_name, "u1", session.id, said("fresh start"))
    assert again.events[0].seq == 7  # seqs are never reused
    with pytest.raises(ValueError):
        await client.call("rewind", app_name, "u1", session.id)
    with pytest.raises(ValueError):
        await client.call("clear_events", app_name, "u1", session.id, before_seq=1, before_invocation_id="x")
    await client.close()


def test_a_delete_whose_answer_was_lost_reports_the_event_deleted(server_url: str, app_name: str) -> None:
    plain = Client(server_url)
    session = plain.create_session(app_name, "u1")
    plain.append_events(app_name, "u1", session.id, [said("keep"), said("drop")])
    dropped = plain.get_session(app_name, "u1", session.id).events[1].id
    assert dropped is not None
    transport = LoseAnswers(when=lambda r: r.method == "DELETE")
    with lossy(server_url, transport) as client:
        result = client.delete_event(app_name, "u1", session.id, dropped)
    assert len(transport.sent) == 2  # deleted by the first attempt; the second finds it gone
    assert result.deleted == [dropped]
    assert [e.content.text for e in plain.get_session(app_name, "u1", session.id).events] == ["keep"]


def test_the_requests_carry_the_options() -> None:
    script = Script(
        answer(200, {"deleted": ["e1"], "version": 3}, {"etag": '"3"'}),
        answer(200, {"deleted": 4, "version": 4}, {"etag": '"4"'}),
    )
    with Client("http://memory.test", transport=httpx.MockTransport(script)) as client:
        assert client.delete_event("a", "u", "s", "e1", pairs="reject", if_match=2).version == 3
        assert client.clear_events("a", "u", "s", before_invocation_id="inv 1").deleted == 4
    first, second = script.requests
    assert first.method == "DELETE" and first.url.path == "/apps/a/users/u/sessions/s/events/e1"
    assert first.url.params["pairs"] == "reject" and first.headers["if-match"] == '"2"'
    assert second.url.path == "/apps/a/users/u/sessions/s/events"
    assert second.url.params["before_invocation_id"] == "inv 1"
