"""GET /apps/{app}/users/{user}/profile through the template's routes, against S3 and DynamoDB in moto: facts
from every save path, with the memories they came from, gone with a forgotten memory."""

from __future__ import annotations

from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, seed_session, stream_records
from tests.support.aws import BUCKET
from tests.support.memories_api import BASE, save, search
from tests.support.memory_objects import version_bytes

PROFILE = "/apps/app/users/alice/profile"


@pytest.fixture(autouse=True)
def _lexical_and_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")


def profile(api: Api, user: str = "alice") -> dict[str, Any]:
    reply = api.request("GET", f"/apps/app/users/{user}/profile")
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def facts(api: Api, user: str = "alice") -> dict[str, list[str]]:
    """Fact text -> the memory ids it came from."""
    return {f["text"]: f["memory_ids"] for f in profile(api, user)["facts"]}


def memory_id(api: Api, text: str) -> str:
    return next(h["id"] for h in search(api, text, top_k=20, min_score=0) if h["content"]["parts"][0]["text"] == text)


def test_the_profile_holds_the_facts_of_every_save_path_with_their_memories(api: Api) -> None:
    assert profile(api) == {"app_name": "app", "user_id": "alice", "facts": [], "memory_count": 0}
    seed_session(api)  # "I am allergic to peanuts", "My sister Ana lives in Porto" (and an assistant's words)
    save(api, {"session_id": "s1"})
    save(api, {"memories": [{"text": "My name is Alice and I love hiking", "timestamp": 100}]})
    events = [text_event("I'm vegetarian. I am allergic to peanuts!", id="x1", timestamp=200)]
    save(api, {"events": events, "session_id": "chat-1"})
    body = profile(api)
    assert body["memory_count"] == 4
    got = {f["text"]: f for f in body["facts"]}
    assert list(got) == ["Name: Alice", "Allergic to peanuts", "Vegetarian", "Loves hiking", "Sister: Ana"]
    assert got["Allergic to peanuts"]["memory_ids"] == sorted(
        [memory_id(api, "I am allergic to peanuts"), memory_id(api, "I'm vegetarian. I am allergic to peanuts!")]
    )
    assert got["Name: Alice"] == {
        "category": "name",
        "text": "Name: Alice",
        "memory_ids": [memory_id(api, "My name is Alice and I love hiking")],
        "updated_at": "1970-01-01T00:01:40Z",
    }
    assert {f["category"] for f in body["facts"]} == {"name", "allergy", "diet", "preference", "person"}


def test_auto_save_extracts_facts_too(api: Api, aws: dict[str, Any]) -> None:
    seed_session(api)
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}
    assert set(facts(api)) == {"Allergic to peanuts", "Sister: Ana"}


def test_facts_are_stored_with_the_record_in_the_bucket(api: Api, aws: dict[str, Any]) -> None:
    save(api, {"memories": [{"text": "I am allergic to shellfish"}]})
    stored = version_bytes(aws["s3"], BUCKET, "memories/app/alice/")  # a small save: inline in the manifest
    assert b'"facts":[{"category":"allergy","text":"Allergic to shellfish"}]' in stored


def test_a_forgotten_memorys_facts_leave_the_profile_and_forget_all_empties_it(api: Api) -> None:
    save(
        api, {"memories": [{"text": "I am allergic to peanuts"}, {"text": "I live in Porto. I am allergic to peanuts"}]}
    )
    both = facts(api)["Allergic to peanuts"]
    assert len(both) == 2 and "Lives in Porto" in facts(api)
    porto = memory_id(api, "I live in Porto. I am allergic to peanuts")
    assert api.request("DELETE", f"{BASE}/{porto}").status == 204
    assert facts(api) == {"Allergic to peanuts": [memory_id(api, "I am allergic to peanuts")]}
    assert api.request("DELETE", BASE).status == 204
    assert profile(api) == {"app_name": "app", "user_id": "alice", "facts": [], "memory_count": 0}


def test_the_newest_statement_wins_a_single_valued_fact(api: Api) -> None:
    save(api, {"memories": [{"text": "My name is Bob. I love sushi", "timestamp": 10}]})
    save(api, {"memories": [{"text": "Call me Robert. I hate sushi now", "timestamp": 20}]})
    assert list(facts(api)) == ["Name: Robert", "Dislikes sushi"]
    robert = memory_id(api, "Call me Robert. I hate sushi now")
    assert api.request("DELETE", f"{BASE}/{robert}").status == 204  # the older statements are current again
    assert list(facts(api)) == ["Name: Bob", "Loves sushi"]


def test_profiles_are_private_per_user_and_identifiers_are_checked(api: Api) -> None:
    save(api, {"memories": [{"text": "I am allergic to peanuts"}]})
    assert profile(api, user="bob")["facts"] == []
    for bad in ("/apps/app/users/%20/profile", "/apps/a%2Fb/users/alice/profile"):
        reply = api.request("GET", bad)
        assert 400 <= reply.status < 500, (bad, reply.body)


def test_a_warm_profile_read_costs_one_s3_request(api: Api, counter: RequestCounter) -> None:
    save(api, {"memories": [{"text": f"I love topic {i}"} for i in range(30)]})
    for i in range(12):  # more segments than MAX_SEGMENTS: at least one merge
        save(api, {"memories": [{"text": f"I visited Town{i}"}]})
    counter.reset()
    cold = profile(api)
    assert counter.count("s3") <= 1 + 1 + 8 and counter.count("dynamodb") == 0
    counter.reset()
    assert profile(api) == cold and len(cold["facts"]) == 42
    assert counter.calls == [("s3", "GetObject")]  # the conditional GET of the manifest, as a search
