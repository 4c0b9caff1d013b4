"""A cold search's read of the user's memory parts (the cold path): the parts not cached are fetched at
once, and a part S3 fails to answer fails that search without touching storage; the next search reads them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_memory.composition import services
from tests.support.api import Api

from .injector import FaultInjector, s3_error
from .memory_storage import FACTS, assert_unavailable, named_parts, on_key, save, texts, versions

EXTRA = ["collects stamps", "learning the cello", "visited Lisbon in May"]


@pytest.fixture(autouse=True)
def _lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")  # the parts' read is under test, not the query's embedding


def seed_parts(api: Api, aws: dict[str, Any]) -> list[str]:
    """One save per text: a manifest naming one segment each (fewer than a merge needs)."""
    for text in FACTS + EXTRA:
        assert save(api, {"memories": [{"text": text}]}).status == 200
    parts = named_parts(aws)
    assert len(parts) == len(FACTS + EXTRA)
    return parts


@pytest.mark.usefixtures("parts_only")
def test_a_cold_search_fetches_its_parts_at_once(aws: dict[str, Any], faults: FaultInjector) -> None:
    api = Api()
    parts = seed_parts(api, aws)
    services.cache_clear()  # a cold container: no part cached
    # Each part's GET waits at a barrier until every part's GET has started: read one after the other, the first
    # would wait alone until the barrier broke (and the search failed).
    barrier = threading.Barrier(len(parts), timeout=20)

    def all_started(request: Any) -> bool:
        barrier.wait()
        return False  # no fault: the GET goes on to the store

    rule = faults.fail("GetObject", s3_error(), times=len(parts), when=lambda r: "/parts/" in r.url and all_started(r))
    before = len(faults.calls)
    assert sorted(texts(api, "peanuts Porto oboe stamps cello Lisbon")) == sorted(FACTS + EXTRA)
    assert rule.hits == 0 and not barrier.broken
    assert faults.calls[before:].count("GetObject") == 1 + len(parts)  # the manifest, then each part once


@pytest.mark.usefixtures("parts_only")
def test_a_part_s3_cannot_read_fails_the_cold_search_and_the_next_one_reads_it(
    aws: dict[str, Any], faults: FaultInjector
) -> None:
    api = Api()
    parts = seed_parts(api, aws)
    stored = {(v["Key"], v["VersionId"]) for v in versions(aws)}
    services.cache_clear()
    faults.fail("GetObject", s3_error(), times=-1, when=on_key(parts[2]))  # every attempt botocore makes
    reply = api.request("POST", "/apps/app/users/alice/memories/search", json_body={"query": "oboe", "top_k": 10})
    assert_unavailable(reply)
    # storage untouched: an unreadable part is not a missing one (no repair drops it from the manifest)
    assert named_parts(aws) == parts and {(v["Key"], v["VersionId"]) for v in versions(aws)} == stored
    faults.clear()
    assert sorted(texts(api, "peanuts Porto oboe stamps cello Lisbon")) == sorted(FACTS + EXTRA)
