"""Long-term memory routes, auto-save from the table's stream, and storage in the S3 context bucket (moto)."""

from __future__ import annotations

import base64
import threading
from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, seed_session, stream_records
from tests.support.aws import BUCKET
from tests.support.memories_api import BASE, save, search
from tests.support.memory_objects import version_bytes


@pytest.fixture(autouse=True)
def _lexical_and_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")  # the dense embedder has its own tests; keep these fast
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")


def test_save_session_by_default_policy_is_idempotent(api: Api) -> None:
    seed_session(api)
    first = save(api, {"session_id": "s1"})
    assert first.status == 200 and first.body == {"saved": 2, "skipped": 2}
    assert save(api, {"session_id": "s1"}).body == {"saved": 0, "skipped": 4}
    # A wider policy stores what the narrower one filtered out, and nothing twice.
    assert save(api, {"session_id": "s1", "policy": "all"}).body == {"saved": 2, "skipped": 2}


def test_search_returns_adk_memory_entries_best_first(api: Api) -> None:
    seed_session(api)
    save(api, {"session_id": "s1"})
    hits = search(api, "peanut allergy")
    assert hits[0]["content"] == {"role": "user", "parts": [{"text": "I am allergic to peanuts"}]}
    assert hits[0]["author"] == "user" and hits[0]["custom_metadata"] == {"dia_id": "D1:1"}
    assert hits[0]["timestamp"].endswith("Z") and "T" in hits[0]["timestamp"]
    assert set(hits[0]) == {"id", "content", "author", "timestamp", "custom_metadata", "score"}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    got = api.request("GET", f"{BASE}/search", query={"query": "peanut allergy"})
    assert got.status == 200 and got.body["memories"] == hits


def test_direct_adds_store_a_text_once(api: Api) -> None:
    body = {
        "memories": [
            {"text": "Prefers window seats", "metadata": {"source": "crm"}},
            {"text": "Prefers  window seats "},
        ]
    }
    assert save(api, body).body == {"saved": 1, "skipped": 1}
    assert save(api, {"memories": [{"text": "Prefers window seats"}]}).body == {"saved": 0, "skipped": 1}
    (hit,) = search(api, "window seat")
    assert hit["custom_metadata"] == {"source": "crm"}


def test_top_k(api: Api) -> None:
    save(api, {"memories": [{"text": f"fact number {i} about cats"} for i in range(12)]})
    assert len(search(api, "cats")) == 5
    assert len(search(api, "cats", top_k=10)) == 10


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        # A body's content answers 422, the same value in a query string 400 (the API's one rule).
        ({"query": ""}, 422, "query"),
        ({"query": "   "}, 422, "query"),
        ({"query": "x", "top_k": 0}, 422, "top_k"),
        ({"query": "x", "top_k": 101}, 422, "top_k"),
        ({"query": "x", "top_k": "5"}, 422, "top_k"),
        ({"query": "x", "top_k": True}, 422, "top_k"),
        ({"query": "x", "top_k": 2.0}, 422, "top_k"),
        ({"query": "x", "extra": 1}, 422, "extra"),
    ],
)
def test_bad_searches(api: Api, body: dict[str, Any], status: int, field: str) -> None:
    reply = api.request("POST", f"{BASE}/search", json_body=body)
    assert reply.status == status and reply.error["field"] == field, reply.body
    if "extra" not in body and not isinstance(body.get("top_k"), str | bool | float):  # a query's "5" is a number
        got = api.request("GET", f"{BASE}/search", query=body)
        assert got.status == 400 and got.error["field"] == field


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"session_id": "s1", "policy": "everything"}, 422, "policy"),
        ({"session_id": "s1", "policy": {"preset": "nope"}}, 422, "policy.preset"),
        ({"session_id": "s1", "policy": {"include_rolez": ["user"]}}, 422, "policy.include_rolez"),
        ({"session_id": "nope"}, 404, "session_id"),
        ({"memories": []}, 422, "memories"),
        ({"memories": [{"text": ""}]}, 422, "memories[0].text"),
        ({"memories": [{"text": "x", "metadata": 3}]}, 422, "memories[0].metadata"),
        ({}, 422, "session_id"),
    ],
)
def test_bad_saves(api: Api, body: dict[str, Any], status: int, field: str) -> None:
    api.create(session_id="s1")
    reply = save(api, body)
    assert reply.status == status and reply.error["field"] == field


def test_explicit_events_save_once_and_are_found(api: Api) -> None:
    events = [
        text_event("I am allergic to peanuts", id="u1", timestamp=100, custom_metadata={"dia_id": "D1:1"}),
        text_event("Noted.", author="assistant", id="a1", timestamp=101),
    ]
    first = save(api, {"events": events, "session_id": "chat-1"})
    assert first.status == 200 and first.body == {"saved": 2, "skipped": 0}
    assert save(api, {"events": events, "sessionId": "chat-1"}).body == {"saved": 0, "skipped": 2}
    (hit, *_) = search(api, "peanut allergy")
    assert hit["content"]["parts"] == [{"text": "I am allergic to peanuts"}]
    assert hit["custom_metadata"] == {"dia_id": "D1:1"} and hit["timestamp"] == "1970-01-01T00:01:40Z"
    bad = save(api, {"events": [text_event("x", timestamp="soon")]})
    assert bad.status == 422 and bad.error["field"] == "events[0].timestamp"


def test_min_score_cuts_by_the_calibrated_score(api: Api) -> None:
    save(api, {"memories": [{"text": "I play the cello every morning"}, {"text": "the cello teacher moved away"}]})
    everything = search(api, "cello lessons morning", min_score=0)
    assert len(everything) == 2 and all(0 < h["score"] < 1 for h in everything)
    best = max(h["score"] for h in everything)
    assert [h["score"] for h in search(api, "cello lessons morning", min_score=best)] == [best]
    assert search(api, "cello lessons morning", min_score=1) == []
    assert search(api, "tungsten boiling point") == []  # matches nothing: nothing, not the user's memories
    got = api.request("GET", f"{BASE}/search", query={"query": "cello lessons morning", "min_score": str(best)})
    assert got.status == 200 and [h["score"] for h in got.body["memories"]] == [best]
    for bad in ("1.5", "-0.1", "nan", "true", "x"):
        reply = api.request("GET", f"{BASE}/search", query={"query": "cello", "min_score": bad})
        assert reply.status == 400 and reply.error["field"] == "min_score", (bad, reply.body)
    for bad_value in (1.5, -0.1, True, "0.5"):
        reply = api.request("POST", f"{BASE}/search", json_body={"query": "cello", "min_score": bad_value})
        assert reply.status == 422 and reply.error["field"] == "min_score", (bad_value, reply.body)


def test_memories_are_private_per_user(api: Api) -> None:
    seed_session(api)
    save(api, {"session_id": "s1"})
    assert search(api, "peanuts", user="bob") == []
    assert save(api, {"session_id": "s1"}, user="bob").status == 404


def test_forget_one_and_all(api: Api, aws: dict[str, Any]) -> None:
    seed_session(api)
    save(api, {"session_id": "s1"})
    save(api, {"memories": [{"text": "Loves peanut-free chocolate"}]})
    target = next(h for h in search(api, "peanuts", top_k=10) if "allergic" in h["content"]["parts"][0]["text"])
    assert api.request("DELETE", f"{BASE}/{target['id']}").status == 204
    assert target["id"] not in {h["id"] for h in search(api, "allergic peanuts", top_k=10)}
    # Forgotten text is gone from the bucket, every version of it.
    stored = b""
    for v in aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="memories/app/alice/").get("Versions", []):
        stored += aws["s3"].get_object(Bucket=BUCKET, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
    assert b"allergic" not in stored and b"Porto" in stored
    # Saving the session again does not bring it back.
    assert save(api, {"session_id": "s1"}).body["saved"] == 0
    assert api.request("DELETE", BASE).status == 204
    assert search(api, "peanuts") == [] and search(api, "Porto") == []
    # Every version of every part is gone; an empty manifest stays (it holds no text, and keeps a racing save
    # from recreating an index over deleted parts).
    left = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="memories/app/alice/").get("Versions", [])
    assert {v["Key"] for v in left} == {"memories/app/alice/manifest.json"}
    stored = aws["s3"].get_object(Bucket=BUCKET, Key="memories/app/alice/manifest.json")["Body"].read()
    assert b"peanut" not in stored and b'"segments":[]' in stored and b'"snapshot":null' in stored
    # A directly added text can be added again after it was forgotten.
    assert save(api, {"memories": [{"text": "Loves peanut-free chocolate"}]}).body["saved"] == 1


def bucket_bytes(aws: dict[str, Any], prefix: str = "memories/app/alice/") -> bytes:
    """Every version of every object under ``prefix``, concatenated (a manifest's inline records decompressed)."""
    return version_bytes(aws["s3"], BUCKET, prefix)


@pytest.mark.parametrize("forget_all", [False, True])
def test_a_forgotten_turn_never_comes_back_as_a_later_memorys_context(
    api: Api, aws: dict[str, Any], forget_all: bool
) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("my password is hunter2", id="e1"))
    save(api, {"session_id": "s1"})
    (hit,) = search(api, "password")
    path = BASE if forget_all else f"{BASE}/{hit['id']}"
    assert api.request("DELETE", path).status == 204
    assert b"hunter2" not in bucket_bytes(aws)
    # The turn is still in the session; the next one's memory is indexed with the turns before it as context.
    api.append("s1", text_event("I like green tea", id="e2"))
    assert save(api, {"session_id": "s1"}).body["saved"] == 1
    assert b"green tea" in bucket_bytes(aws)
    assert b"hunter2" not in bucket_bytes(aws)
    assert all("hunter2" not in h["content"]["parts"][0]["text"] for h in search(api, "hunter2 password"))


def test_a_forgotten_reply_leaves_the_record_of_the_turn_it_answered(api: Api, aws: dict[str, Any]) -> None:
    """A turn is stored with its reply (the next turn, by another author) for its vector; forgetting the reply
    takes its text out of that record too, in every stored object, and out of search."""
    api.create(session_id="s1")
    api.append("s1", text_event("Where should I keep the spare key?", id="e1"))
    api.append("s1", text_event("under the blue flowerpot by the door", author="Ben", id="e2"))
    assert save(api, {"session_id": "s1", "policy": "all"}).body["saved"] == 2
    hits = {h["content"]["parts"][0]["text"]: h["id"] for h in search(api, "spare key flowerpot")}
    assert set(hits) == {"Where should I keep the spare key?", "under the blue flowerpot by the door"}
    assert b"flowerpot" in bucket_bytes(aws)
    assert api.request("DELETE", f"{BASE}/{hits['under the blue flowerpot by the door']}").status == 204
    assert b"flowerpot" not in bucket_bytes(aws)  # neither the memory nor the question's record quoting it
    assert [h["content"]["parts"][0]["text"] for h in search(api, "spare key")] == [
        "Where should I keep the spare key?"
    ]
    assert search(api, "blue flowerpot") == []


def test_inline_data_is_never_stored(api: Api, aws: dict[str, Any]) -> None:
    api.create(session_id="s1")
    payload = base64.b64encode(b"\x89PNG" + b"x" * 300).decode()
    api.append(
        "s1",
        {
            "author": "user",
            "content": {
                "role": "user",
                "parts": [{"text": "my cat"}, {"inline_data": {"mime_type": "image/png", "data": payload}}],
            },
        },
    )
    assert save(api, {"session_id": "s1", "policy": "all"}).body["saved"] == 1
    stored = version_bytes(aws["s3"], BUCKET, "memories/")
    assert b"my cat" in stored and payload.encode() not in stored


def test_search_costs_one_s3_request_when_warm(api: Api, counter: RequestCounter) -> None:
    save(api, {"memories": [{"text": f"memory {i} about travel"} for i in range(30)]})
    for i in range(12):  # more segments than MAX_SEGMENTS: at least one merge
        save(api, {"memories": [{"text": f"later memory {i} about food"}]})
    counter.reset()
    search(api, "travel")
    cold = counter.count("s3")
    counter.reset()
    search(api, "food")
    assert counter.calls == [("s3", "GetObject")]  # the conditional GET of the manifest
    assert cold <= 1 + 1 + 8


def test_a_search_in_a_new_container_builds_no_dynamodb_store(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search (and a profile read) uses the memory store only: building the session and claim stores, DynamoDB
    clients and all, was part of the search function's cold start."""
    from agent_memory.composition import services
    from agent_memory.stores.dynamo.claims import DynamoClaimStore
    from agent_memory.stores.dynamo.store import DynamoSessionStore

    save(api, {"memories": [{"text": "my sister lives in Porto"}]})
    services.cache_clear()  # a new container

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a search built a DynamoDB store")

    monkeypatch.setattr(DynamoSessionStore, "__init__", refuse)
    monkeypatch.setattr(DynamoClaimStore, "__init__", refuse)
    assert [m["content"]["parts"][0]["text"] for m in search(api, "sister")] == ["my sister lives in Porto"]
    assert api.request("GET", "/apps/app/users/alice/profile").status == 200


def test_concurrent_saves_for_one_user_lose_nothing(api: Api) -> None:
    def writer(w: int) -> None:
        for i in range(4):
            assert save(api, {"memories": [{"text": f"writer {w} fact {i} zebra"}]}).status == 200

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = search(api, "zebra", top_k=100)
    assert sorted(h["content"]["parts"][0]["text"] for h in found) == sorted(
        f"writer {w} fact {i} zebra" for w in range(5) for i in range(4)
    )


def test_autosave_from_the_stream_shares_the_idempotency_record(api: Api, aws: dict[str, Any]) -> None:
    seed_session(api)
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}
    assert {h["content"]["parts"][0]["text"] for h in search(api, "peanuts Porto sister", top_k=10)} == {
        "I am allergic to peanuts",
        "My sister Ana lives in Porto",
    }
    assert save(api, {"session_id": "s1"}).body["saved"] == 0  # auto-save got there first
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}  # a redelivered batch stores nothing twice
    assert len(search(api, "peanuts Porto sister", top_k=10)) == 2


def test_autosave_never_brings_back_a_forgotten_memory(api: Api, aws: dict[str, Any]) -> None:
    seed_session(api)
    autosave(stream_records(aws))
    for hit in search(api, "peanuts Porto sister", top_k=10):
        api.request("DELETE", f"{BASE}/{hit['id']}")
    autosave(stream_records(aws))
    assert search(api, "peanuts Porto sister", top_k=10) == []


def test_autosave_reports_only_the_failing_session(
    api: Api, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_session(api, "s1")
    seed_session(api, "s2", user="bob")
    from agent_memory.stores.s3_memories import S3MemoryStore

    original = S3MemoryStore.add

    def flaky(self: Any, app_name: str, user_id: str, records: Any, prepare: Any = None) -> list[str]:
        if user_id == "bob":
            raise RuntimeError("throttled")
        return original(self, app_name, user_id, records, prepare)

    monkeypatch.setattr(S3MemoryStore, "add", flaky)
    records = stream_records(aws)
    result = autosave(records)
    bobs = {r["dynamodb"]["SequenceNumber"] for r in records if "#bob#" in r["dynamodb"]["Keys"]["PK"]["S"]}
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == bobs
    assert len(search(api, "peanuts Porto sister", top_k=10)) == 2
    assert search(api, "peanuts Porto sister", user="bob") == []
    monkeypatch.setattr(S3MemoryStore, "add", original)
    retried = [r for r in records if r["dynamodb"]["SequenceNumber"] in bobs]
    assert autosave(retried) == {"batchItemFailures": []}
    assert len(search(api, "peanuts Porto sister", user="bob", top_k=10)) == 2


def test_autosave_off_stores_nothing(api: Api, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.config import settings

    monkeypatch.setenv("AUTOSAVE_POLICY", "off")
    settings.cache_clear()
    seed_session(api)
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}
    assert search(api, "peanuts") == []


def test_a_word_only_a_forgotten_memory_used_leaves_the_stored_index(api: Api, aws: dict[str, Any]) -> None:
    save(api, {"memories": [{"text": "my password is zanzibar42"}]})
    save(api, {"memories": [{"text": "I like tea"}]})
    (hit,) = search(api, "zanzibar42")
    assert api.request("DELETE", f"{BASE}/{hit['id']}").status == 204
    assert b"zanzibar42" not in bucket_bytes(aws)  # not in the records, nor in the index's vocabulary
    assert [h["content"]["parts"][0]["text"] for h in search(api, "tea")] == ["I like tea"]
