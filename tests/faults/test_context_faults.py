"""The context's memory reads under faults injected below botocore's retries: a memory store that cannot be read
answers 503 (retry later), never 500 and never a context silently without the memories asked for; a context that
asks for no memory never meets those faults; a fault botocore's retries absorb changes nothing. The context only
reads, so storage is asserted unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.composition import services
from tests.support.api import Api
from tests.support.aws import BUCKET

from .injector import FaultInjector, s3_error

CTX = "/apps/app/users/alice/sessions/now/context"


@pytest.fixture(autouse=True)
def _lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    api = Api()
    saved = api.request(
        "POST",
        "/apps/app/users/alice/memories",
        json_body={"memories": [{"text": "I am allergic to peanuts"}, {"text": "My name is Ana"}]},
    )
    assert saved.status == 200 and saved.body["saved"] == 2
    assert api.create(session_id="now").status == 201
    assert api.append("now", {"role": "user", "content": "are peanuts ok for me?"}).status == 201
    return api


def memory_objects(aws: dict[str, Any]) -> list[tuple[str, str]]:
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="memories/")
    return sorted((v["Key"], v["VersionId"]) for v in listed.get("Versions", []))


def memory_read(request: Any) -> bool:
    return "/memories/" in request.url


@pytest.mark.parametrize("fault", [s3_error("SlowDown", 503), s3_error("InternalError", 500)])
@pytest.mark.parametrize("query", ["memories=3", "profile=true"])
def test_an_unreadable_memory_store_answers_503(
    api: Api, aws: dict[str, Any], faults: FaultInjector, fault: Any, query: str
) -> None:
    before = memory_objects(aws)
    services.cache_clear()  # a fresh container: no memory view cached from the save
    faults.fail("GetObject", fault, times=-1, when=memory_read)
    reply = api.request("GET", f"{CTX}?{query}")
    assert reply.status == 503 and reply.error["code"] == "service_unavailable", reply.body
    assert "retry-after" in reply.headers
    assert any(op == "GetObject" for op in faults.calls)
    faults.clear()
    assert memory_objects(aws) == before  # a read: nothing written, nothing lost
    again = api.request("GET", f"{CTX}?{query}")
    assert again.status == 200 and (again.body["memories"] or again.body["profile"])


def test_a_plain_context_never_meets_memory_faults(api: Api, faults: FaultInjector) -> None:
    services.cache_clear()
    faults.fail("GetObject", s3_error("SlowDown", 503), times=-1, when=memory_read)
    faults.fail("ListObjectsV2", s3_error("SlowDown", 503), times=-1)
    reply = api.request("GET", f"{CTX}?system=Be+brief.&max_tokens=200")
    assert reply.status == 200 and [m["role"] for m in reply.body["messages"]] == ["system", "user"]
    assert not any(op in {"GetObject", "ListObjectsV2"} for op in faults.calls)


def test_a_transient_fault_is_absorbed_by_botocores_retries(api: Api, faults: FaultInjector) -> None:
    services.cache_clear()
    faults.fail("GetObject", s3_error("SlowDown", 503), times=1, when=memory_read)
    reply = api.request("GET", f"{CTX}?memories=3&profile=true")
    assert reply.status == 200, reply.body
    assert len(reply.body["memories"]) == 1 and reply.body["profile"] is True
    assert "allergic to peanuts" in reply.body["messages"][1]["content"]
