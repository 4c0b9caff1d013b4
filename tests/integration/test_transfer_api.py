"""Export / import and the memo through the template's routes (handlers behind API Gateway v2 events, moto)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.support.api import Api, text_event

SESSIONS = "/apps/app/users/alice/sessions"
BIG = "y" * 400_000  # over the 350 KB offload threshold: DynamoDB keeps the body in S3


def export(api: Api, sid: str, fmt: str = "json", user: str = "alice") -> Any:
    reply = api.request("GET", f"/apps/app/users/{user}/sessions/{sid}/export", query={"format": fmt})
    assert reply.status == 200, reply.body
    return reply


def import_(api: Api, document: str | bytes, *, yaml_body: bool = False, user: str = "alice", **query: Any) -> Any:
    headers = {"content-type": "application/yaml" if yaml_body else "application/json"}
    return api.request(
        "POST", f"/apps/app/users/{user}/sessions/import", raw=document, headers=headers, query=query or None
    )


def raw_text(reply: Any) -> str:
    return reply.raw.decode() if isinstance(reply.raw, bytes) else str(reply.raw)


def seed(api: Api, sid: str = "s1") -> None:
    assert api.create(session_id=sid, state={"topic": "trips", "user:name": "Ann", "app:tier": "pro"}).status == 201
    call = {"function_call": {"id": "call-1", "name": "weather", "args": {"city": "Zürich", "days": [1, 2]}}}
    result = {"function_response": {"id": "call-1", "name": "weather", "response": {"result": {"temp": 21.5}}}}
    events = [
        text_event("héllo ✓ — 日本語", id="e1", invocation_id="inv-1"),
        {"author": "agent", "content": {"role": "model", "parts": [call]}, "id": "e2", "invocation_id": "inv-1"},
        {"author": "agent", "content": {"role": "user", "parts": [result]}, "id": "e3", "invocation_id": "inv-1"},
        text_event(BIG, author="agent", id="e4", custom_metadata={"deep": {"a": {"b": {"c": [[[1]]]}}}}),
    ]
    assert api.append(sid, {"events": events}, headers=None).status == 201
    assert api.request("PUT", f"{SESSIONS}/{sid}/memo", json_body={"memo": {"resized": 3, "note": "ü"}}).status == 200


def test_export_holds_the_whole_session_in_the_documented_order(api: Api) -> None:
    seed(api)
    reply = export(api, "s1")
    assert reply.headers["content-type"] == "application/json" and reply.headers["etag"] == '"1"'
    document = reply.body
    assert list(document) == [
        "format",
        "app_name",
        "user_id",
        "session_id",
        "create_time",
        "last_update_time",
        "version",
        "last_seq",
        "state",
        "memo",
        "compaction",
        "events",
    ]
    assert document["format"] == "agent-memory/session@1"
    assert document["state"] == {"session": {"topic": "trips"}, "user": {"name": "Ann"}, "app": {"tier": "pro"}}
    assert document["memo"] == {"resized": 3, "note": "ü"}
    assert document["compaction"] == {"summary_event_id": None, "end_seq": 0}
    assert [(e["id"], e["seq"]) for e in document["events"]] == [("e1", 1), ("e2", 2), ("e3", 3), ("e4", 4)]
    assert document["events"][3]["content"]["parts"][0]["text"] == BIG


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_import_export_is_byte_identical_but_for_the_ids(api: Api, fmt: str) -> None:
    seed(api)
    first = raw_text(export(api, "s1", fmt))
    imported = import_(api, first, yaml_body=fmt == "yaml", user="bob", session_id="copy")
    assert imported.status == 201, imported.body
    assert imported.body["id"] == "copy" and imported.body["created"] is True and imported.body["events"] == []
    assert imported.headers["etag"] == '"1"' and imported.body["version"] == 1
    second = raw_text(export(api, "copy", fmt, user="bob"))
    expected = first.replace('"user_id":"alice"', '"user_id":"bob"').replace('"session_id":"s1"', '"session_id":"copy"')
    if fmt == "yaml":
        expected = first.replace("user_id: alice", "user_id: bob").replace("session_id: s1", "session_id: copy")
    assert second == expected
    # The copy lives on: appends continue after its counters.
    after = api.append("copy", text_event("next"), user="bob")
    assert after.status == 201 and after.body["seq"] == 5 and after.headers["etag"] == '"2"'


def test_yaml_export_is_yaml_of_the_same_tree(api: Api) -> None:
    seed(api)
    as_yaml = export(api, "s1", "yaml")
    assert as_yaml.headers["content-type"] == "application/yaml"
    assert yaml.safe_load(raw_text(as_yaml)) == export(api, "s1").body


def test_import_under_the_same_id_is_409_unless_replace(api: Api) -> None:
    seed(api)
    document = export(api, "s1").body
    document["memo"] = {"replaced": True}
    document["events"] = document["events"][:2]
    document["last_seq"] = 2
    text = json.dumps(document)
    refused = import_(api, text)
    assert refused.status == 409 and refused.error["code"] == "already_exists"
    assert len(api.get("s1").body["events"]) == 4
    replaced = import_(api, text, replace="true")
    assert replaced.status == 201
    assert [e["id"] for e in api.get("s1").body["events"]] == ["e1", "e2"]
    assert api.request("GET", f"{SESSIONS}/s1/memo").body == {"memo": {"replaced": True}}


def test_import_is_reserved_as_a_session_id(api: Api) -> None:
    created = api.create(session_id="import")
    assert created.status == 422 and created.error["field"] == "session_id"
    assert api.get("import").status == 404
    document = {**minimal_document(), "session_id": "import"}
    refused = import_(api, json.dumps(document))
    assert refused.status == 422 and refused.error["field"] == "session_id"
    assert import_(api, json.dumps(minimal_document()), session_id="import").status == 400


def minimal_document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": "agent-memory/session@1",
        "app_name": "app",
        "user_id": "alice",
        "session_id": "m1",
        "create_time": 1.5,
        "last_update_time": 2.5,
        "version": 1,
        "last_seq": 2,
        "state": {"session": {}, "user": {}, "app": {}},
        "memo": {},
        "compaction": {"summary_event_id": None, "end_seq": 0},
        "events": [
            {"id": "a", "author": "user", "timestamp": 2.0, "seq": 1},
            {"id": "b", "author": "user", "timestamp": 2.5, "seq": 2},
        ],
    }
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("changes", "status", "field"),
    [
        ({"format": "other@9"}, 422, "format"),
        ({"version": -1}, 422, "version"),
        ({"version": True}, 422, "version"),
        ({"last_seq": 1}, 422, "events[1].seq"),
        (
            {"events": [{"id": "a", "timestamp": 1.0, "seq": 2}, {"id": "b", "timestamp": 1.0, "seq": 1}]},
            422,
            "events[1].seq",
        ),
        (
            {"events": [{"id": "a", "timestamp": 1.0, "seq": 1}, {"id": "a", "timestamp": 1.0, "seq": 2}]},
            422,
            "events[1].id",
        ),
        ({"events": [{"id": "a", "timestamp": "soon", "seq": 1}]}, 422, "events[0].timestamp"),
        ({"events": [{"id": "a", "timestamp": 1.0}]}, 422, "events[0].seq"),
        ({"events": [{"timestamp": 1.0, "seq": 1}]}, 422, "events[0].id"),
        ({"state": {"session": {"user:x": 1}}}, 422, "state.session.user:x"),
        ({"state": {"session": {}, "other": {}}}, 422, "state.other"),
        ({"compaction": {"summary_event_id": "a", "end_seq": 1}}, 422, "compaction.summary_event_id"),
        ({"compaction": {"summary_event_id": None, "end_seq": 9}}, 422, "compaction.end_seq"),
        ({"memo": {"big": "z" * 70_000}}, 413, "memo"),
        ({"memo": ["not", "an", "object"]}, 422, "memo"),
    ],
)
def test_an_import_names_the_field_of_the_document_that_is_wrong(
    api: Api, changes: dict[str, Any], status: int, field: str
) -> None:
    reply = import_(api, json.dumps(minimal_document(**changes)))
    assert reply.status == status, reply.body
    assert reply.error["field"] == field
    assert api.get("m1").status == 404


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1, 2]\nb: *x\n",
        "format: !!python/object/apply:os.system ['true']\n",
        'lol: &l ["lol","lol"]\nlol2: &l2 [*l,*l,*l,*l,*l,*l,*l,*l,*l]\nlol3: [*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2]\n',
        "format: !custom x\n",
        "a: 1\na: 2\n",
        "[" * 200 + "]" * 200,
    ],
    ids=["alias", "python-tag", "billion-laughs", "custom-tag", "duplicate-key", "deep"],
)
def test_hostile_yaml_is_400_naming_the_body(api: Api, text: str) -> None:
    reply = import_(api, text, yaml_body=True)
    assert reply.status == 400 and reply.error["field"] == "body"


def test_yaml_is_read_only_by_the_import(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.request(
        "POST",
        f"{SESSIONS}/s1/events",
        raw="author: user\ncontent: {role: user, parts: [{text: hi}]}\n",
        headers={"content-type": "application/yaml"},
    )
    assert reply.status == 400 and reply.error["field"] == "body"


def test_memo_reads_writes_and_leaves_the_version(api: Api) -> None:
    assert api.request("GET", f"{SESSIONS}/nope/memo").status == 404
    assert api.request("PUT", f"{SESSIONS}/nope/memo", json_body={"memo": {}}).status == 404
    api.create(session_id="s1")
    assert api.request("GET", f"{SESSIONS}/s1/memo").body == {"memo": {}}
    put = api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"k": [1, "ü"]}})
    assert put.status == 200 and put.body == {"memo": {"k": [1, "ü"]}}
    assert api.request("GET", f"{SESSIONS}/s1/memo").body == {"memo": {"k": [1, "ü"]}}
    assert api.get("s1").headers["etag"] == '"0"'
    too_big = api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"k": "z" * 70_000}})
    assert too_big.status == 413 and too_big.error["field"] == "memo"
    not_object = api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": [1]})
    assert not_object.status == 422 and not_object.error["field"] == "memo"
    assert api.request("DELETE", f"{SESSIONS}/s1").status == 204
    assert api.create(session_id="s1").status == 201
    assert api.request("GET", f"{SESSIONS}/s1/memo").body == {"memo": {}}


def test_export_of_a_missing_session_is_404_and_a_bad_format_400(api: Api) -> None:
    assert api.request("GET", f"{SESSIONS}/nope/export").status == 404
    api.create(session_id="s1")
    reply = api.request("GET", f"{SESSIONS}/s1/export", query={"format": "xml"})
    assert reply.status == 400 and reply.error["field"] == "format"


def test_a_session_past_the_response_cap_exports_in_pages_that_import_whole(api: Api) -> None:
    """Unpaged, a session whose events pass what one response carries is a 413 that says to page; paged (limit,
    next_token), every page fits, and the pages' events put together are the whole session."""
    assert api.create(session_id="huge").status == 201
    for n in range(14):  # 14 x 400 KB: past the 5 MB a response carries
        assert api.append("huge", text_event(BIG, id=f"h{n:02}", author="agent")).status == 201
    assert api.append("huge", text_event("small", id="tail")).status == 201
    whole = api.request("GET", f"{SESSIONS}/huge/export")
    assert whole.status == 413 and "pages" in whole.error["message"]
    pages: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        query = {"limit": 6} | ({"next_token": token} if token else {})
        reply = api.request("GET", f"{SESSIONS}/huge/export", query=query)
        assert reply.status == 200 and len(reply.raw) < 5_500_000
        pages.append(reply.body)
        token = reply.body["next_token"]
        if token is None:
            break
    assert len(pages) >= 3 and all(len(p["events"]) <= 6 for p in pages)
    events = [e for page in pages for e in page["events"]]
    assert [e["id"] for e in events] == [f"h{n:02}" for n in range(14)] + ["tail"]
    assert [e["seq"] for e in events] == list(range(1, 16)) and {p["last_seq"] for p in pages} == {15}
    assert all(e["content"]["parts"][0]["text"] == BIG for e in events[:14])
    # An append after the first page is not half in the export: the pages stop at the first page's last_seq.
    first = api.request("GET", f"{SESSIONS}/huge/export", query={"limit": 10}).body
    assert api.append("huge", text_event("later", id="later")).status == 201
    rest = api.request("GET", f"{SESSIONS}/huge/export", query={"next_token": first["next_token"]}).body
    assert [e["id"] for e in first["events"] + rest["events"]][-1] == "tail" and rest["next_token"] is None
    bad = api.request("GET", f"{SESSIONS}/huge/export", query={"limit": 0})
    assert bad.status == 400 and bad.error["field"] == "limit"
    assert api.create(session_id="other").status == 201
    foreign = api.request("GET", f"{SESSIONS}/other/export", query={"next_token": pages[0]["next_token"]})
    assert foreign.status == 400 and foreign.error["field"] == "next_token"


@pytest.mark.parametrize(
    ("field", "value"),
    [("version", 2**63), ("version", 2**53), ("last_seq", 2**63 - 1), ("version", 2**50 + 1)],
)
def test_an_imported_counter_past_what_every_store_holds_exactly_is_refused(api: Api, field: str, value: int) -> None:
    document = {
        "format": "agent-memory/session@1", "app_name": "app", "user_id": "alice", "session_id": "big",
        "create_time": 1000.0, "last_update_time": 1000.0, "version": 3, "last_seq": 0, "events": [],
    } | {field: value}  # fmt: skip
    reply = api.request("POST", f"{SESSIONS}/import", json_body=document)
    assert reply.status == 422 and reply.error["field"] == field


def test_the_largest_imported_version_keeps_its_etag_exact_after_appends(api: Api) -> None:
    top = 2**50
    document = {
        "format": "agent-memory/session@1", "app_name": "app", "user_id": "alice", "session_id": "top",
        "create_time": 1000.0, "last_update_time": 1000.0, "version": top, "last_seq": 0, "events": [],
    }  # fmt: skip
    assert api.request("POST", f"{SESSIONS}/import", json_body=document).status == 201
    first = api.append("top", text_event("a"), headers={"If-Match": f'"{top}"'})
    assert first.status == 201 and first.headers.get("ETag", first.headers.get("etag")) == f'"{top + 1}"'
    again = api.append("top", text_event("b"), headers={"If-Match": f'"{top + 1}"'})
    assert again.status == 201 and api.get("top").body["version"] == top + 2
