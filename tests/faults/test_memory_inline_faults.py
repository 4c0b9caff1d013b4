"""Memory saves that keep their records inline in the manifest (small saves: no part), and forgets of such
records, under faults injected below botocore's retries. The part path's faults are in test_memory_faults.py
(``parts_only``); the save-fault matrix there runs on both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_memory.service.memories import text_memory_id
from tests.support.api import Api
from tests.support.aws import BUCKET
from tests.support.memory_objects import inline_records

from .injector import FaultInjector, s3_error
from .memory_storage import (
    BASE,
    FACTS,
    MANIFEST,
    PREFIX,
    assert_unavailable,
    manifest,
    only_if_match,
    save,
    seed_texts,
    stored_bytes,
    stored_record_ids,
    texts,
    versions,
)


@pytest.fixture(autouse=True)
def _short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent_memory.runtime.aws.WRITE_BUDGET_S", 3.0)
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 3.0)


@pytest.fixture(autouse=True)
def _lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    return Api()


def seed_one_by_one(api: Api) -> None:
    """Each fact a save of its own: every one inline, in a manifest version of its own (three versions)."""
    for fact in FACTS:
        seed_texts(api, [fact])
    assert versions(aws_of(api), PREFIX + "parts/") == [] and len(inline_records(manifest(aws_of(api)))) == 3


def aws_of(api: Api) -> dict[str, Any]:
    return api.aws  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def seeded(api: Api, aws: dict[str, Any]) -> None:
    api.aws = aws  # type: ignore[attr-defined]
    seed_one_by_one(api)


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize("operation", ["DeleteObjects", "ListObjectVersions"])
def test_a_forget_of_an_inline_record_that_cannot_delete_the_old_manifests_is_finished_by_its_retry(
    api: Api, aws: dict[str, Any], faults: FaultInjector, operation: str
) -> None:
    target = text_memory_id(FACTS[0])
    faults.fail(operation, s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", f"{BASE}/{target}"))
    faults.clear()
    # Search no longer finds it; the earlier manifests holding it are still there, and the manifest says so.
    assert manifest(aws).get("x") is True and b"peanuts" in stored_bytes(aws)
    assert "allergic to peanuts" not in texts(api, "peanuts oboe Porto")
    assert api.request("DELETE", f"{BASE}/{target}").status == 204
    assert b"peanuts" not in stored_bytes(aws) and b"oboe" in stored_bytes(aws)
    assert "x" not in manifest(aws)
    assert sorted(texts(api, "peanuts oboe Porto")) == sorted(FACTS[1:])


@pytest.mark.usefixtures("seeded")
def test_a_later_small_save_finishes_the_manifest_deletes_a_failed_forget_left(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", f"{BASE}/{text_memory_id(FACTS[0])}"))
    faults.clear()
    assert save(api, {"memories": [{"text": "grows basil"}]}).status == 200  # the client never retried
    assert b"peanuts" not in stored_bytes(aws) and "x" not in manifest(aws)
    assert [r.text for r in inline_records(manifest(aws))] == ["grows basil"]  # inline, beside the snapshot
    assert sorted(texts(api, "basil oboe Porto peanuts")) == sorted([*FACTS[1:], "grows basil"])


@pytest.mark.usefixtures("seeded")
def test_a_forget_all_of_inline_records_leaves_no_version_holding_them(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", BASE))
    faults.clear()
    assert texts(api, "peanuts oboe Porto") == []
    assert api.request("DELETE", BASE).status == 204
    assert {v["Key"] for v in versions(aws)} == {MANIFEST} and b"peanuts" not in stored_bytes(aws)
    assert inline_records(manifest(aws)) == []


def test_a_lost_inline_write_followed_by_another_writer_stores_each_record_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """The manifest write holding the records inline lands, another writer follows, the first answer is lost:
    the save's retry finds its records held and stores nothing again (it then counts them as not saved by it:
    unlike a part, an inline write leaves no key of its own to recognise; storage is exact either way)."""
    from botocore.exceptions import ReadTimeoutError

    seed_texts(api, FACTS[:1])

    def applied_then_overtaken(apply: Callable[[], Any], _event: str, request: Any) -> Any:
        apply()
        assert save(api, {"memories": [{"text": "another writer's fact"}]}).status == 200
        raise ReadTimeoutError(endpoint_url=request.url)

    faults.add("PutObject", applied_then_overtaken, when=only_if_match)
    reply = save(api, {"memories": [{"text": t} for t in FACTS[1:]]})
    assert reply.status == 200 and reply.body["saved"] == 0
    counts = stored_record_ids(aws)
    assert len(counts) == 4 and set(counts.values()) == {1}
    assert versions(aws, PREFIX + "parts/") == [] and len(inline_records(manifest(aws))) == 4
    assert len(texts(api, "peanuts Porto oboe fact")) == 4


def test_a_save_that_writes_the_inline_records_out_keeps_them_through_a_failed_manifest_write(
    api: Api, aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save passing the bound writes the inline records and its own out as a part; its manifest write fails:
    the inline records stay in the manifest (nothing lost), the part is deleted, and the retry stores them once."""
    seed_texts(api, FACTS[:2])
    monkeypatch.setattr("agent_memory.stores.s3_memories.INLINE_MAX_BYTES", 1)  # the next save writes a part
    faults.fail("PutObject", s3_error(), times=-1, when=lambda r: "manifest.json" in r.url)
    assert_unavailable(save(api, {"memories": [{"text": FACTS[2]}]}))
    faults.clear()
    assert len(inline_records(manifest(aws))) == 2 and versions(aws, PREFIX + "parts/") == []
    assert save(api, {"memories": [{"text": FACTS[2]}]}).body["saved"] == 1
    m = manifest(aws)
    assert "i" not in m and len(m["segments"]) == 1 and len(versions(aws, PREFIX + "parts/")) == 1
    counts = stored_record_ids(aws)
    assert len(counts) == 3 and set(counts.values()) == {1}
    assert sorted(texts(api, "peanuts Porto oboe")) == sorted(FACTS)
    assert aws["s3"].get_object(Bucket=BUCKET, Key=m["segments"][0])["Body"].read().startswith(b"AMEM2")
