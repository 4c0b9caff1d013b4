"""Deleting events, clearing and rewinding a session, through the template's routes against moto: counters, tool
pairs, and the privacy cases (a deleted text is in no later context, summary, session read or search result)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.api import Api, text_event
from tests.support.autosave import autosave, stream_records
from tests.support.aws import BUCKET, TABLE
from tests.support.context_api import compact, context, sweep
from tests.support.memories_api import search
from tests.support.memory_objects import readable

S = "/apps/app/users/alice/sessions"
SECRET = "my banking password is hunter2"


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
    monkeypatch.setenv("COMPACTION_INTERVAL", "3")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "2")
    monkeypatch.setenv("TOKEN_THRESHOLD", "100000")
    monkeypatch.setenv("OFFLOAD_BYTES", "5000")


def delete(api: Api, sid: str, event_id: str | None = None, headers: dict[str, str] | None = None, **query: Any) -> Any:
    path = f"{S}/{sid}/events" + (f"/{event_id}" if event_id else "")
    return api.request("DELETE", path, query=query or None, headers=headers)


def conversation(api: Api, sid: str = "s1") -> None:
    api.create(session_id=sid)
    events = []
    for i in range(6):
        text = SECRET if i == 2 else f"question {i} about the museum"
        events.append(text_event(text, id=f"u{i}", invocation_id=f"inv{i}"))
        events.append(text_event(f"answer {i}", author="assistant", id=f"a{i}", invocation_id=f"inv{i}"))
    assert api.append(sid, {"events": events}).status == 201


def texts(value: Any) -> str:
    return json.dumps(value)


def test_a_deleted_text_is_in_no_later_context_summary_session_or_search(api: Api, aws: dict[str, Any]) -> None:
    conversation(api)
    assert api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1"}).status == 200
    summary = compact(api, "s1")["event"]
    assert "hunter2" in texts(summary)  # the summary holds the text before the delete
    assert any("hunter2" in texts(hit) for hit in search(api, "banking password hunter2"))
    # The next turn's memory was indexed with the secret as its retrieval context: it matches too.
    assert "question 3 about the museum" in texts(search(api, "hunter2", top_k=10))
    before = api.get("s1")
    reply = delete(api, "s1", "u2")
    assert reply.status == 200, reply.body
    # The summary that covered it goes in the same step (listed), the counters move, the seq does not.
    assert reply.body == {"deleted": ["u2", summary["id"]], "version": before.body["version"] + 1}
    assert reply.headers["etag"] == f'"{before.body["version"] + 1}"'
    session = api.get("s1")
    assert "hunter2" not in texts(session.body) and summary["id"] not in texts(session.body)
    body = context(api, "s1")
    assert body["summary"] is None and "hunter2" not in texts(body)
    assert not any("hunter2" in texts(hit) for hit in search(api, "banking password hunter2"))
    assert search(api, "hunter2", top_k=10) == []  # scrubbed from the other memories' context too
    # The session is due again: the sweep rebuilds the summary, without the text.
    report = sweep()
    assert report["compacted"] == 1, report
    rebuilt = context(api, "s1")
    assert rebuilt["summary"] and "hunter2" not in texts(rebuilt) and "question 0" in rebuilt["summary"]
    # Nothing of it is stored anywhere in the table any more.
    scan = aws["dynamodb"].scan(TableName=TABLE)["Items"]
    assert "hunter2" not in texts(scan)
    # A later append continues after the deleted seq.
    appended = api.append("s1", text_event("later", id="later"))
    assert appended.body["seq"] == 15  # 12 events, the first summary (13) and the rebuilt one (14)


def test_auto_save_never_saves_an_event_deleted_before_its_stream_record_arrives(api: Api, aws: dict[str, Any]) -> None:
    conversation(api)
    assert delete(api, "s1", "u2").status == 200
    # The stream delivers the INSERTs after the delete (they are in the stream whatever happened since).
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}
    found = search(api, "banking password hunter2 museum", top_k=20)
    assert found and not any("hunter2" in texts(hit) for hit in found)


def test_tool_pairs_are_deleted_together_or_refused_with_their_partner(api: Api) -> None:
    api.create(session_id="t1")
    call = {
        "author": "agent",
        "id": "call",
        "content": {"role": "model", "parts": [{"function_call": {"id": "fc1", "name": "lookup", "args": {"q": "x"}}}]},
    }
    result = {
        "author": "agent",
        "id": "result",
        "content": {
            "role": "user",
            "parts": [{"function_response": {"id": "fc1", "name": "lookup", "response": {"r": "secret result"}}}],
        },
    }
    api.append("t1", {"events": [text_event("hi", id="hi"), call, result, text_event("bye", id="bye")]})
    refused = delete(api, "t1", "result", pairs="reject")
    assert refused.status == 409
    assert refused.error["code"] == "tool_pair" and refused.error["field"] == "event_id"
    assert "'call'" in refused.error["message"]
    assert [e["id"] for e in api.get("t1").body["events"]] == ["hi", "call", "result", "bye"]
    done = delete(api, "t1", "result")
    assert done.status == 200 and done.body["deleted"] == ["call", "result"]
    assert [e["id"] for e in api.get("t1").body["events"]] == ["hi", "bye"]
    assert delete(api, "t1", "hi", pairs="bogus").status == 400


def test_a_rewind_never_splits_a_pair_and_keeps_the_state(api: Api) -> None:
    api.create(session_id="r1")
    call = {
        "author": "agent",
        "id": "call",
        "invocation_id": "i2",
        "content": {"role": "model", "parts": [{"function_call": {"id": "fc1", "name": "lookup", "args": {}}}]},
    }
    result = {
        "author": "agent",
        "id": "result",
        "invocation_id": "i3",
        "content": {"role": "user", "parts": [{"function_response": {"id": "fc1", "name": "lookup", "response": {}}}]},
    }
    api.append(
        "r1",
        {
            "events": [
                text_event("one", id="one", invocation_id="i1", actions={"state_delta": {"k": 1}}),
                call,
                result,
                text_event("four", id="four", invocation_id="i3", actions={"state_delta": {"k": 4}}),
            ]
        },
    )
    # seq 3 is the result; its call (seq 2) sits before the cut and goes with it.
    reply = delete(api, "r1", before_seq=3)
    assert reply.status == 200 and reply.body["deleted"] == 3
    got = api.get("r1").body
    assert [e["id"] for e in got["events"]] == ["one"]
    assert got["state"] == {"k": 4}  # state is not rewound (documented)
    api.append(
        "r1",
        {
            "events": [
                text_event("five", id="five", invocation_id="i5"),
                text_event("six", id="six", invocation_id="i6"),
            ]
        },
    )
    assert delete(api, "r1", before_invocation_id="i6").body["deleted"] == 1
    assert [e["id"] for e in api.get("r1").body["events"]] == ["one", "five"]
    missing = delete(api, "r1", before_invocation_id="nope")
    assert missing.status == 404 and missing.error["field"] == "before_invocation_id"
    both = delete(api, "r1", before_seq=1, before_invocation_id="i1")
    assert both.status == 400


def test_clear_moves_the_version_honours_if_match_and_never_reuses_a_seq(api: Api) -> None:
    conversation(api, "c1")
    version = api.get("c1").body["version"]
    stale = delete(api, "c1", headers={"If-Match": f'"{version - 1}"'})
    assert stale.status == 412
    assert len(api.get("c1").body["events"]) == 12
    reply = delete(api, "c1", headers={"If-Match": f'"{version}"'})
    assert reply.status == 200 and reply.body == {"deleted": 12, "version": version + 1}
    assert api.get("c1").body["events"] == []
    assert context(api, "c1")["messages"] == []
    again = delete(api, "c1")
    assert again.body == {"deleted": 0, "version": version + 1}  # nothing left: nothing moves
    assert api.append("c1", text_event("fresh", id="u0")).body["seq"] == 13  # an old id is free, its seq is not


def test_missing_session_or_event_answers_404_naming_it(api: Api) -> None:
    assert delete(api, "nope").status == 404
    assert delete(api, "nope", "e1").error["code"] == "session_not_found"
    api.create(session_id="m1")
    missing = delete(api, "m1", "e1")
    assert missing.status == 404 and missing.error == {
        "code": "event_not_found",
        "message": missing.error["message"],
        "field": "event_id",
    }


def test_an_offloaded_payload_is_gone_from_every_version_before_the_answer(api: Api, aws: dict[str, Any]) -> None:
    api.create(session_id="o1")
    api.append("o1", {"events": [text_event("x" * 8_000 + " hunter2", id="big"), text_event("small", id="small")]})
    versions = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="sessions/")
    assert versions.get("Versions")
    assert delete(api, "o1", "big").status == 200
    versions = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="sessions/")
    assert not versions.get("Versions") and not versions.get("DeleteMarkers")
    assert [e["id"] for e in api.get("o1").body["events"]] == ["small"]


def _every_object_version(aws: dict[str, Any]) -> str:
    """The bytes of every object version in the context bucket (a memory manifest's inline records decompressed),
    decoded as far as they decode."""
    s3 = aws["s3"]
    out = []
    for version in s3.list_object_versions(Bucket=BUCKET).get("Versions", []):
        body = s3.get_object(Bucket=BUCKET, Key=version["Key"], VersionId=version["VersionId"])["Body"].read()
        out.append(readable(body).decode("utf-8", "replace"))
    return "\n".join(out)


def test_a_deleted_fact_leaves_the_profile_the_export_and_every_stored_byte(api: Api, aws: dict[str, Any]) -> None:
    """The privacy case across the issue's features: a user turn stating a fact is saved to memory (and so to the
    profile), exported, then deleted; no later profile, export, context, search or stored object holds it."""
    api.create(session_id="p1")
    turns = [
        text_event("I'm allergic to sesame, and my code word is zanzibar", id="fact", invocation_id="i1"),
        text_event("Noted, no sesame.", author="assistant", id="ack", invocation_id="i1"),
        text_event("I live in Porto", id="home", invocation_id="i2"),
    ]
    assert api.append("p1", {"events": turns}).status == 201
    assert api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "p1"}).status == 200
    profile = api.request("GET", "/apps/app/users/alice/profile").body
    assert any("sesame" in f["text"].lower() for f in profile["facts"]), profile
    assert "zanzibar" in texts(api.request("GET", f"{S}/p1/export").body)
    assert "zanzibar" in _every_object_version(aws)  # the memory (inline in its manifest: a small save)

    assert delete(api, "p1", "fact").status == 200

    profile = api.request("GET", "/apps/app/users/alice/profile").body
    assert "sesame" not in texts(profile).lower() and any("porto" in f["text"].lower() for f in profile["facts"])
    exported = api.request("GET", f"{S}/p1/export", query={"format": "yaml"})
    assert exported.status == 200 and "Noted" in exported.raw.decode() and "zanzibar" not in exported.raw.decode()
    assert [e["id"] for e in api.request("GET", f"{S}/p1/export").body["events"]] == ["ack", "home"]
    assert "zanzibar" not in texts(context(api, "p1"))
    assert not any("zanzibar" in texts(hit) for hit in search(api, "code word zanzibar sesame", top_k=20))
    assert "zanzibar" not in texts(aws["dynamodb"].scan(TableName=TABLE)["Items"])
    assert "zanzibar" not in _every_object_version(aws)
