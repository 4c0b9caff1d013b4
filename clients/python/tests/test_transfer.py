"""Export / import and the memo through both clients: against `make run` (the round trip, replace, the memo) and
against scripted answers (what is resent after a failed attempt)."""

from __future__ import annotations

import httpx
import pytest
import yaml
from support import Driver, Script, answer, mocked, session_json
from test_live import said

from agent_memory_client.errors import AlreadyExists, NotFound, RequestTimeout, ServiceUnavailable

UNAVAILABLE = {"error": {"code": "service_unavailable", "message": "retry"}}


async def seeded(client: Driver, app_name: str) -> str:
    session = await client.call("create_session", app_name, "u1", state={"topic": "trips", "user:name": "Ann"})
    await client.call("append_event", app_name, "u1", session.id, said("héllo ✓"))
    await client.call("append_event", app_name, "u1", session.id, said("second"))
    await client.call("put_memo", app_name, "u1", session.id, {"resized": 2, "note": "ü"})
    return str(session.id)


async def test_export_import_export_round_trips_in_json(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    sid = await seeded(client, app_name)
    document = await client.call("export_session", app_name, "u1", sid)
    assert document["format"] == "agent-memory/session@1" and document["memo"] == {"resized": 2, "note": "ü"}
    assert [e["seq"] for e in document["events"]] == [1, 2]
    copy = await client.call("import_session", app_name, "u2", document, session_id="copy")
    assert copy.id == "copy" and copy.version == document["version"] and copy.events == []
    again = await client.call("export_session", app_name, "u2", "copy")
    assert again == document | {"user_id": "u2", "session_id": "copy"}
    with pytest.raises(AlreadyExists):
        await client.call("import_session", app_name, "u2", document, session_id="copy")
    await client.close()


async def test_a_session_past_the_response_cap_exports_whole(kind: str, server_url: str, app_name: str) -> None:
    """The client reads an export in pages and puts them together: a session of 6 MB (past the 5 MB one response
    carries, where the unpaged export answers 413) exports whole."""
    client = Driver(kind, server_url)
    session = await client.call("create_session", app_name, "u1")
    big = "z" * 400_000
    for n in range(15):
        await client.call("append_event", app_name, "u1", session.id, said(f"{n}:{big}"))
    document = await client.call("export_session", app_name, "u1", session.id)
    assert [e["seq"] for e in document["events"]] == list(range(1, 16)) and document["last_seq"] == 15
    assert [e["content"]["parts"][0]["text"].split(":")[0] for e in document["events"]] == [str(n) for n in range(15)]
    assert "next_token" not in document
    await client.close()


async def test_export_import_round_trips_in_yaml(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    sid = await seeded(client, app_name)
    text = await client.call("export_session", app_name, "u1", sid, format="yaml")
    assert isinstance(text, str) and yaml.safe_load(text)["memo"] == {"resized": 2, "note": "ü"}
    await client.call("import_session", app_name, "u1", text, session_id="y-copy")
    again = await client.call("export_session", app_name, "u1", "y-copy", format="yaml")
    assert again == text.replace(f"session_id: {sid}\n", "session_id: y-copy\n")
    await client.close()


async def test_replace_and_the_memo(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    sid = await seeded(client, app_name)
    document = await client.call("export_session", app_name, "u1", sid)
    document["events"] = document["events"][:1]
    document["memo"] = {"replaced": True}
    await client.call("import_session", app_name, "u1", document, replace=True)
    session = await client.call("get_session", app_name, "u1", sid)
    assert [e.content.parts[0].text for e in session.events] == ["héllo ✓"]
    assert await client.call("get_memo", app_name, "u1", sid) == {"replaced": True}
    assert await client.call("put_memo", app_name, "u1", sid, {"v": [1, 2]}) == {"v": [1, 2]}
    assert (await client.call("get_session", app_name, "u1", sid)).version == document["version"]
    with pytest.raises(NotFound):
        await client.call("get_memo", app_name, "u1", "nope")
    await client.close()


async def test_a_plain_import_is_not_resent_once_it_may_have_landed(kind: str) -> None:
    script = Script(httpx.ReadTimeout)
    client = mocked(kind, script)
    with pytest.raises(RequestTimeout):
        await client.call("import_session", "app", "u", {"format": "agent-memory/session@1"})
    assert len(script.requests) == 1  # a retry would meet the session it stored (409)


async def test_a_replace_and_a_memo_write_are_resent(kind: str) -> None:
    script = Script(httpx.ReadTimeout, answer(201, session_json("s1", 4), {"ETag": '"4"'}))
    client = mocked(kind, script)
    session = await client.call("import_session", "app", "u", "format: x\n", session_id="s1", replace=True)
    assert session.version == 4 and len(script.requests) == 2
    sent = script.requests[-1]
    assert sent.headers["content-type"] == "application/yaml" and sent.content == b"format: x\n"
    assert sent.url.params["replace"] == "true" and sent.url.params["session_id"] == "s1"

    script = Script(answer(503, UNAVAILABLE), answer(200, {"memo": {"a": 1}}))
    client = mocked(kind, script)
    assert await client.call("put_memo", "app", "u", "s1", {"a": 1}) == {"a": 1}
    assert script.bodies() == [{"memo": {"a": 1}}, {"memo": {"a": 1}}]
    script = Script(*[answer(503, UNAVAILABLE) for _ in range(5)])
    with pytest.raises(ServiceUnavailable):
        await mocked(kind, script).call("put_memo", "app", "u", "s1", {"a": 1})


async def test_an_unknown_export_format_is_refused_before_sending(kind: str) -> None:
    script = Script()
    with pytest.raises(ValueError, match="format"):
        await mocked(kind, script).call("export_session", "app", "u", "s1", format="xml")
    assert script.requests == []
