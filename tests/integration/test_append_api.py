"""Appending events: ADK and chat-message shapes, state scopes, idempotency, If-Match, size, races."""

from __future__ import annotations

import base64
import threading
from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, text_event

ALL_PARTS_EVENT: dict[str, Any] = {
    "id": "evt-1",
    "invocationId": "inv-1",
    "author": "planner",
    "branch": "root.planner",
    "timestamp": 1700000000.25,
    "content": {
        "role": "model",
        "parts": [
            {"text": "Let me check.", "thought": True, "thoughtSignature": "c2ln"},
            {"text": "Checking the weather"},
            {"functionCall": {"id": "call-1", "name": "get_weather", "args": {"city": "Paris", "days": [1, 2]}}},
            {"functionResponse": {"id": "call-1", "name": "get_weather", "response": {"temp_c": 21.5}}},
            {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(b"\x89PNG\r\n").decode()}},
            {"fileData": {"fileUri": "s3://bucket/report.pdf", "mimeType": "application/pdf"}},
            {"executableCode": {"code": "print(1 + 1)", "language": "PYTHON"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}},
        ],
    },
    "actions": {
        "stateDelta": {"city": "Paris", "user:units": "metric", "app:model": "m1", "temp:scratch": "gone"},
        "artifactDelta": {"report.pdf": 2},
        "transferToAgent": "writer",
    },
    "longRunningToolIds": ["call-1"],
    "turnComplete": True,
    "customMetadata": {"trace": {"span": "abc"}, "score": 0.5},
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7},
    "outputTranscription": {"text": "checking", "finished": True},
}


def test_adk_camel_case_event_round_trips_in_snake_case(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.append("s1", ALL_PARTS_EVENT)
    assert reply.status == 201
    stored = reply.body
    assert stored["id"] == "evt-1" and stored["seq"] == 1 and stored["invocation_id"] == "inv-1"
    parts = stored["content"]["parts"]
    assert parts[0] == {"text": "Let me check.", "thought": True, "thought_signature": "c2ln"}
    assert parts[2]["function_call"] == {
        "id": "call-1",
        "name": "get_weather",
        "args": {"city": "Paris", "days": [1, 2]},
    }
    assert parts[3]["function_response"]["response"] == {"temp_c": 21.5}
    assert parts[4]["inline_data"]["mime_type"] == "image/png"
    assert base64.b64decode(parts[4]["inline_data"]["data"]) == b"\x89PNG\r\n"
    assert parts[5]["file_data"] == {"file_uri": "s3://bucket/report.pdf", "mime_type": "application/pdf"}
    assert parts[6]["executable_code"] == {"code": "print(1 + 1)", "language": "PYTHON"}
    assert parts[7]["code_execution_result"] == {"outcome": "OUTCOME_OK", "output": "2\n"}
    assert stored["actions"]["state_delta"] == {"city": "Paris", "user:units": "metric", "app:model": "m1"}
    assert stored["actions"]["artifact_delta"] == {"report.pdf": 2}
    assert stored["actions"]["transfer_to_agent"] == "writer"
    assert stored["long_running_tool_ids"] == ["call-1"] and stored["turn_complete"] is True
    assert stored["custom_metadata"] == {"trace": {"span": "abc"}, "score": 0.5}
    # Fields this service does not model are kept, their names snake_case as ADK's own JSON has them.
    assert stored["usage_metadata"] == {"prompt_token_count": 12, "candidates_token_count": 7}
    assert stored["output_transcription"] == {"text": "checking", "finished": True}

    session = api.get("s1").body
    assert session["events"] == [stored]
    assert session["state"] == {"city": "Paris", "user:units": "metric", "app:model": "m1"}


def test_snake_case_event_is_accepted_too(api: Api) -> None:
    api.create(session_id="s1")
    body = text_event("hi", invocation_id="inv-9", actions={"state_delta": {"x": 1}}, custom_metadata={"a": 1})
    stored = api.append("s1", body).body
    assert stored["invocation_id"] == "inv-9" and stored["custom_metadata"] == {"a": 1}
    assert api.get("s1").body["state"] == {"x": 1}


def test_server_fills_id_and_timestamp(api: Api) -> None:
    api.create(session_id="s1")
    stored = api.append("s1", text_event("hi")).body
    assert len(stored["id"]) == 36 and stored["timestamp"] > 1.7e9


def test_chat_messages_keep_every_field(api: Api) -> None:
    api.create(session_id="s1")
    voice = {
        "role": "assistant",
        "content": "The weather in Par",
        "turn_id": "turn-7",
        "timestamp": 1700000100.5,
        "metadata": {
            "interrupted": True,
            "interrupt_timestamp": 1700000101.0,
            "original": "The weather in Paris is sunny.",
        },
        "name": "voice-bot",
    }
    stored = api.append("s1", voice).body
    assert stored["author"] == "assistant" and stored["name"] == "voice-bot"
    assert stored["content"] == {"role": "model", "parts": [{"text": "The weather in Par"}]}
    assert stored["turn_id"] == "turn-7" and stored["timestamp"] == 1700000100.5
    assert stored["metadata"] == voice["metadata"]

    tool_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
    }
    call = api.append("s1", tool_call).body
    assert call["content"]["parts"] == [{"function_call": {"id": "c1", "name": "lookup", "args": {"q": "x"}}}]
    result = api.append("s1", {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "42"}).body
    assert result["content"]["parts"][0]["function_response"] == {
        "id": "c1",
        "name": "lookup",
        "response": {"result": "42"},
    }
    user = api.append("s1", {"role": "user", "content": [{"type": "text", "text": "hello"}]}).body
    assert user["content"] == {"role": "user", "parts": [{"text": "hello"}]}


def test_temp_state_is_never_stored(api: Api) -> None:
    api.create(session_id="s1")
    stored = api.append("s1", text_event("x", actions={"state_delta": {"temp:t": 1, "keep": 2}})).body
    assert stored["actions"]["state_delta"] == {"keep": 2}
    session = api.get("s1").body
    assert session["state"] == {"keep": 2}
    assert session["events"][0]["actions"]["state_delta"] == {"keep": 2}


def test_batch_append_returns_events_in_order(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.append("s1", {"events": [text_event(f"m{i}") for i in range(100)]})
    assert reply.status == 201
    assert [e["seq"] for e in reply.body["events"]] == list(range(1, 101))
    assert reply.headers["etag"] == f'"{api.get("s1").body["version"]}"'
    assert len(api.get("s1").body["events"]) == 100


def test_batch_over_100_is_rejected_and_stores_nothing(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.append("s1", {"events": [text_event("m") for _ in range(101)]})
    assert reply.status == 422 and reply.error["field"] == "events"
    assert api.get("s1").body["events"] == []


def test_one_bad_event_in_a_batch_stores_nothing(api: Api) -> None:
    api.create(session_id="s1")
    events = [text_event("ok", actions={"state_delta": {"k": 1}}), {"author": "user", "content": {"parts": "nope"}}]
    reply = api.append("s1", {"events": events})
    assert reply.status == 422
    assert reply.error["field"].startswith("events[1].content.parts")
    session = api.get("s1").body
    assert session["events"] == [] and session["state"] == {}


def test_duplicate_id_answers_with_the_stored_event(api: Api) -> None:
    api.create(session_id="s1")
    first = api.append("s1", text_event("original", id="e-1", actions={"state_delta": {"k": 1}}))
    again = api.append("s1", text_event("original", id="e-1", actions={"state_delta": {"k": 1}}))
    assert first.status == 201 and again.status == 200
    assert again.body == first.body
    changed = api.append("s1", text_event("changed", id="e-1", actions={"state_delta": {"k": 2}}))
    assert changed.status == 409 and changed.error["code"] == "event_id_conflict" and changed.error["field"] == "id"
    session = api.get("s1").body
    assert len(session["events"]) == 1 and session["state"] == {"k": 1} and session["version"] == 1


def test_if_match_stale_is_412_and_stores_nothing(api: Api) -> None:
    api.create(session_id="s1")
    etag = api.get("s1").headers["etag"]
    ok = api.append("s1", text_event("a"), headers={"If-Match": etag})
    assert ok.status == 201 and ok.headers["etag"] == '"1"'
    stale = api.append("s1", text_event("b", actions={"state_delta": {"k": 1}}), headers={"If-Match": etag})
    assert stale.status == 412 and stale.error["code"] == "precondition_failed"
    for bad in ['"abc"', 'W/"7"']:
        assert api.append("s1", text_event("c"), headers={"If-Match": bad}).status == 412
    assert api.append("s1", text_event("d"), headers={"If-Match": "*"}).status == 201
    session = api.get("s1").body
    assert [e["content"]["parts"][0]["text"] for e in session["events"]] == ["a", "d"]
    assert session["state"] == {}


def test_600kb_event_round_trips_through_s3(api: Api, aws: dict[str, Any]) -> None:
    api.create(session_id="s1")
    text = "".join(chr(0x41 + i % 26) for i in range(600_000))
    reply = api.append("s1", text_event(text))
    assert reply.status == 201
    assert api.get("s1").body["events"][0]["content"]["parts"][0]["text"] == text
    objects = aws["s3"].list_objects_v2(Bucket="agent-memory-test-context")["Contents"]
    # Under the session's prefix, in its incarnation's folder.
    assert len(objects) == 1 and objects[0]["Key"].startswith("sessions/app/alice/s1/")
    assert "/events/" in objects[0]["Key"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"author": "user", "content": {"role": "user", "parts": [{"text": 5}]}}, "content.parts[0].text"),
        ({"author": "user", "timestamp": "noon"}, "timestamp"),
        ({"author": "user", "id": "bad id!"}, "id"),
        ({"author": "user", "actions": {"state_delta": [1]}}, "actions.state_delta"),
        ({"role": "robot", "content": "hi"}, "body"),
        ({"events": []}, "events"),
        ({"events": "x"}, "events"),
        ({"events": [1]}, "events[0]"),
        ([1, 2], "body"),
    ],
)
def test_bad_events_are_422_naming_the_field(api: Api, body: Any, field: str) -> None:
    api.create(session_id="s1")
    reply = api.append("s1", body)
    assert reply.status == 422, reply.body
    assert reply.error["field"] == field
    assert api.get("s1").body["events"] == []


def test_bad_json_and_empty_body_are_client_errors(api: Api) -> None:
    api.create(session_id="s1")
    assert api.request("POST", "/apps/app/users/alice/sessions/s1/events", raw="{oops").status == 400
    assert api.request("POST", "/apps/app/users/alice/sessions/s1/events").status == 422


def test_oversized_state_is_413_not_500(api: Api) -> None:
    api.create(session_id="s1")
    huge = text_event("x", actions={"state_delta": {"blob": "y" * 450_000}})
    reply = api.append("s1", huge)
    assert reply.status == 413, reply.body
    session = api.get("s1").body
    assert session["events"] == [] and session["state"] == {}


def test_racing_appends_all_land_once_in_order(api: Api) -> None:
    api.create(session_id="s1")
    writers, per_writer = 6, 8
    statuses: list[int] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        for i in range(per_writer):
            reply = api.append("s1", text_event(f"w{w}-{i}", id=f"w{w}-{i}", actions={"state_delta": {f"w{w}": i}}))
            with lock:
                statuses.append(reply.status)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [201] * writers * per_writer
    session = api.get("s1").body
    events = session["events"]
    assert [e["seq"] for e in events] == list(range(1, writers * per_writer + 1))
    assert sorted(e["id"] for e in events) == sorted(f"w{w}-{i}" for w in range(writers) for i in range(per_writer))
    for w in range(writers):  # each writer's events land in the order it sent them
        mine = [e["id"] for e in events if e["id"].startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(per_writer)]
    assert session["state"] == {f"w{w}": per_writer - 1 for w in range(writers)}
    assert session["version"] == writers * per_writer


def test_racing_duplicates_store_one_event(api: Api) -> None:
    api.create(session_id="s1")
    replies: list[Any] = []

    def writer() -> None:
        replies.append(api.append("s1", text_event("same", id="dup")))

    threads = [threading.Thread(target=writer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status for r in replies) == [200] * 5 + [201]
    assert len({r.body["seq"] for r in replies}) == 1
    assert len(api.get("s1").body["events"]) == 1


def test_append_costs_two_dynamodb_requests(api: Api, counter: RequestCounter) -> None:
    api.create(session_id="s1")
    counter.reset()
    api.append("s1", text_event("hi", actions={"state_delta": {"k": 1, "user:u": 1, "app:a": 1}}))
    assert counter.calls == [("dynamodb", "GetItem"), ("dynamodb", "TransactWriteItems")]


def test_get_with_num_recent_events_reads_only_those(api: Api, counter: RequestCounter) -> None:
    api.create(session_id="s1")
    for _ in range(3):
        api.append("s1", {"events": [text_event("m") for _ in range(50)]})
    counter.reset()
    assert len(api.get("s1", num_recent_events=20).body["events"]) == 20
    # The events' Query, then a one-item Query of the session item's deletion count (a deletion committing during the
    # read makes it read again: no read shows part of one); the marks before the read came with the session item.
    assert counter.calls == [("dynamodb", "BatchGetItem"), ("dynamodb", "Query"), ("dynamodb", "Query")]
    # The session item, its state item and the user's state item (it holds the user's session count from the first
    # create on), read in the same BatchGetItem as before, the 20 events (no app state yet), and the session item
    # once more.
    assert counter.items_read == 24


def test_an_event_whose_answer_could_not_fit_a_response_is_refused_before_it_is_stored(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_REQUEST_BYTES", "0")  # only Lambda's 6 MB: the deployment's own limit would refuse first
    api.create(session_id="big")
    # 1.8 MB of emoji is under the 6 MB body limit, but about 5.4 MB once JSON-escaped in the answer.
    reply = api.append("big", text_event("😀" * 450_000, id="emoji-1"))
    assert reply.status == 413 and reply.error["code"] == "payload_too_large" and reply.error["field"] == "body"
    assert api.get("big").body["events"] == []  # nothing stored: a retry is not a duplicate
    batch = {"events": [text_event("😀" * 150_000, id=f"e{i}") for i in range(3)]}  # 5.4 MB escaped
    reply = api.append("big", batch)
    assert reply.status == 413 and reply.error["field"] == "events"
    assert api.get("big").body["events"] == []


def test_unmodelled_event_fields_come_back_snake_case(api: Api) -> None:
    api.create(session_id="s1")
    event = text_event(
        "hi",
        author="model",
        usageMetadata={"promptTokenCount": 3, "candidatesTokenCount": 1},
        outputTranscription={"text": "hi", "finished": True},
        actions={"stateDelta": {"camelKey": 1}, "agentState": {"myKey": 1}},
        customMetadata={"traceId": "t"},
    )
    stored = api.append("s1", event)
    assert stored.status == 201, stored.body
    for got in (stored.body, api.get("s1").body["events"][0]):
        assert got["usage_metadata"] == {"prompt_token_count": 3, "candidates_token_count": 1}
        assert got["output_transcription"] == {"text": "hi", "finished": True}
        assert got["actions"]["state_delta"] == {"camelKey": 1} and got["actions"]["agent_state"] == {"myKey": 1}
        assert got["custom_metadata"] == {"traceId": "t"}
        assert "usageMetadata" not in got and "outputTranscription" not in got
    assert api.get("s1").body["state"] == {"camelKey": 1}


def test_prefer_return_minimal_answers_where_the_events_landed_not_their_bodies(api: Api) -> None:
    assert api.create(session_id="s1").status == 201
    big = text_event("x" * 50_000, id="big")
    full = api.append("s1", big)
    assert full.status == 201 and full.body["content"]["parts"][0]["text"] == "x" * 50_000
    assert "preference-applied" not in {k.lower() for k in full.headers}
    minimal = api.append(
        "s1",
        {"events": [text_event("y" * 50_000, id="b2"), text_event("z", id="b3")]},
        headers={"Prefer": "return=minimal"},
    )
    assert minimal.status == 201 and len(minimal.raw) < 300
    assert [set(e) for e in minimal.body["events"]] == [{"id", "seq", "timestamp"}] * 2
    assert [(e["id"], e["seq"]) for e in minimal.body["events"]] == [("b2", 2), ("b3", 3)]
    assert {k.lower(): v for k, v in minimal.headers.items()}["preference-applied"] == "return=minimal"
    assert minimal.headers.get("ETag", minimal.headers.get("etag")) == '"2"'  # a version per append
    # A resend is recognised as before (200), and answered minimal too; another preference is ignored.
    again = api.append("s1", text_event("z", id="b3"), headers={"Prefer": "respond-async, return=minimal"})
    assert again.status == 200 and set(again.body) == {"id", "seq", "timestamp"} and again.body["seq"] == 3
    other = api.append("s1", text_event("w", id="b4"), headers={"Prefer": "return=representation"})
    assert other.status == 201 and other.body["content"]["parts"][0]["text"] == "w"
    stored = api.get("s1").body["events"]
    assert [e["id"] for e in stored] == ["big", "b2", "b3", "b4"] and stored[1]["content"]["parts"][0][
        "text"
    ] == "y" * 50_000


@pytest.mark.parametrize("timestamp", ["1700000000", "1700000000.5", "2024-01-01T00:00:00Z"])
def test_an_event_time_is_a_json_number_never_a_string(api: Api, timestamp: str) -> None:
    assert api.create(session_id="s1").status == 201
    reply = api.append("s1", text_event("hi", timestamp=timestamp))
    assert reply.status == 422 and reply.error["field"] == "timestamp"
    batch = api.append("s1", {"events": [text_event("hi", timestamp=timestamp)]})
    assert batch.status == 422 and batch.error["field"] == "events[0].timestamp"
    assert api.get("s1").body["events"] == []


def test_a_state_delta_past_what_one_dynamodb_update_expresses_is_refused_up_front(api: Api) -> None:
    """At most 100 keys a delta (one update expression of at most 4 KB on DynamoDB): 156 keys answered 503 after
    10 s of retries on moto. Deltas at the bound store, one after another, a state of any number of keys."""
    assert api.create(session_id="s1").status == 201
    too_many = api.append("s1", text_event("x", actions={"state_delta": {f"k{i}": i for i in range(101)}}))
    assert too_many.status == 422 and too_many.error["field"] == "actions.state_delta"
    for start in (0, 100, 200):
        delta = {f"k{i}": i for i in range(start, start + 100)}
        assert api.append("s1", text_event("x", actions={"state_delta": delta})).status == 201
    assert len(api.get("s1").body["state"]) == 300
    created = api.create(session_id="s2", state={f"k{i}": i for i in range(101)})
    assert created.status == 422 and created.error["field"] == "state"
    exported = api.request("GET", "/apps/app/users/alice/sessions/s1/export").body
    imported = api.request(
        "POST", "/apps/app/users/alice/sessions/import", json_body=exported, query={"session_id": "s3"}
    )
    assert imported.status == 201 and len(api.get("s3").body["state"]) == 300
