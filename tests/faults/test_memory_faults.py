"""Long-term memory writes under faults injected below botocore's retries: memory save, auto-save, forget one,
forget all. Each test asserts storage afterwards: every object version under the user's prefix, the parts the
manifest names and the records they hold, the forgotten-event marks in the table, and what search returns."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_memory.composition import services
from agent_memory.service.memories import event_memory_id, text_memory_id
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, seed_session, stream_records
from tests.support.aws import BUCKET
from tests.support.memory_objects import inline_records

from .injector import FaultInjector, s3_error, throttle
from .memory_storage import (
    BASE,
    FACTS,
    MANIFEST,
    PREFIX,
    SAVE_FAULTS,
    assert_unavailable,
    claims,
    manifest,
    named_parts,
    on_key,
    only_if_match,
    save,
    seed_texts,
    stored_bytes,
    stored_record_ids,
    texts,
    versions,
)

pytestmark = pytest.mark.usefixtures("memory_write_budget", "lexical_default_policy")


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    return Api()


# --- what is stored -------------------------------------------------------------------------------------------


def orphans(aws: dict[str, Any]) -> set[str]:
    """Part keys in the bucket that the manifest does not name."""
    return {v["Key"] for v in versions(aws, PREFIX + "parts/")} - set(named_parts(aws))


def assert_nothing_left(aws: dict[str, Any]) -> None:
    """After a forget-all: no part version, and only an empty manifest (it holds no text)."""
    assert {v["Key"] for v in versions(aws)} <= {MANIFEST}
    assert named_parts(aws) == [] and not manifest(aws).get("pending_delete") and not manifest(aws).get("purge")


def leave_an_orphan(faults: FaultInjector) -> None:
    """Make the next save leave its part an orphan: its manifest write fails, and so does its read of the
    manifest to see whether the write landed (as when the function dies there), so the part is kept."""
    put = faults.fail("PutObject", s3_error(), times=-1, when=on_key("manifest.json"))
    # every attempt of that one read (botocore makes 4: max_attempts 3 counts retries), none of later ones
    faults.fail("GetObject", s3_error(), times=4, when=lambda r: put.hits > 0 and "manifest.json" in r.url)


# --- 1. forgetting is durable ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("parts_only")
@pytest.mark.parametrize("operation", ["DeleteObjects", "ListObjectVersions"])
def test_a_forget_interrupted_before_its_deletes_is_finished_by_the_retry(
    api: Api, aws: dict[str, Any], faults: FaultInjector, operation: str
) -> None:
    seed_texts(api)
    target = text_memory_id("allergic to peanuts")
    faults.fail(operation, s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", f"{BASE}/{target}"))
    faults.clear()
    # The index no longer names it (search does not return it) and the deletion is recorded, not lost.
    assert manifest(aws)["pending_delete"] and b"peanuts" in stored_bytes(aws)
    assert "allergic to peanuts" not in texts(api, "peanuts oboe Porto")
    assert api.request("DELETE", f"{BASE}/{target}").status == 204
    assert b"peanuts" not in stored_bytes(aws) and b"oboe" in stored_bytes(aws)
    assert manifest(aws)["pending_delete"] == [] and not orphans(aws)
    assert sorted(texts(api, "peanuts oboe Porto")) == sorted(FACTS[1:])
    # The direct text's claim is released: the user may add it again.
    assert save(api, {"memories": [{"text": "allergic to peanuts"}]}).body["saved"] == 1


@pytest.mark.usefixtures("parts_only")
def test_a_later_save_finishes_the_deletes_a_failed_forget_left(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed_texts(api)
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", f"{BASE}/{text_memory_id('allergic to peanuts')}"))
    faults.clear()
    assert save(api, {"memories": [{"text": "grows basil"}]}).status == 200  # the client never retried
    assert b"peanuts" not in stored_bytes(aws)
    assert manifest(aws)["pending_delete"] == []
    assert sorted(texts(api, "basil oboe Porto peanuts")) == sorted([*FACTS[1:], "grows basil"])


@pytest.mark.usefixtures("parts_only")
def test_the_parts_a_merge_replaces_are_deleted_even_when_the_first_delete_fails(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    for i in range(8):
        assert save(api, {"memories": [{"text": f"fact {i} about kites"}]}).status == 200
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert save(api, {"memories": [{"text": "fact 8 about kites"}]}).status == 200  # the 9th segment: a merge
    m = manifest(aws)
    assert m["segments"] == [] and len(m["pending_delete"]) == 9  # the merge stored, its cleanup recorded
    faults.clear()
    assert save(api, {"memories": [{"text": "fact 9 about kites"}]}).status == 200
    assert manifest(aws)["pending_delete"] == [] and not orphans(aws)
    assert {v["Key"] for v in versions(aws, PREFIX + "parts/")} == set(named_parts(aws))
    assert len(texts(api, "kites")) == 10


# --- 2. forget-all and save never leave the index broken -------------------------------------------------------


def test_forget_all_racing_saves_never_breaks_the_index(api: Api, aws: dict[str, Any]) -> None:
    # Load both handlers before the race (the local server's lazy loading is not what is tested here).
    assert save(api, {"memories": [{"text": "warm-up"}]}).status == 200
    assert api.request("DELETE", BASE).status == 204
    errors: list[Any] = []
    stop = threading.Event()

    def saver(w: int) -> None:
        i = 0
        while not stop.is_set() and i < 15:
            try:
                reply = save(api, {"memories": [{"text": f"writer {w} fact {i} zebra"}]})
            except Exception as exc:  # reported, not lost in the thread
                errors.append(("save", repr(exc)))
                return
            if reply.status != 200:
                errors.append(("save", reply.status, reply.body))
            i += 1

    def forgetter() -> None:
        for _ in range(6):
            reply = api.request("DELETE", BASE)
            if reply.status != 204:
                errors.append(("forget-all", reply.status, reply.body))

    threads = [threading.Thread(target=saver, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    forget = threading.Thread(target=forgetter)
    forget.start()
    forget.join()
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    found = texts(api, "zebra")
    assert len(found) == len(set(found))
    # Every part the manifest names exists, and holds what search returns.
    live = {v["Key"] for v in versions(aws, PREFIX + "parts/")}
    assert set(named_parts(aws)) <= live
    assert sum(stored_record_ids(aws).values()) == len(found)
    assert api.request("DELETE", BASE).status == 204
    assert_nothing_left(aws)
    assert texts(api, "zebra") == []


def test_a_forget_all_between_a_saves_part_and_its_manifest_write(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed_texts(api)

    def forget_all_first(apply: Callable[[], Any], _event: str, _request: Any) -> Any:
        assert api.request("DELETE", BASE).status == 204  # lands between the save's two writes
        return apply()

    faults.add("PutObject", forget_all_first, when=only_if_match)
    reply = save(api, {"memories": [{"text": "adopted a cat named Miso"}]})
    assert reply.status == 200 and reply.body["saved"] == 1
    # The save met the new epoch and redid its part there: it is stored after the forget-all, once.
    assert texts(api, "peanuts Porto oboe cat Miso") == ["adopted a cat named Miso"]
    assert b"peanuts" not in stored_bytes(aws) and not orphans(aws)
    assert list(stored_record_ids(aws).values()) == [1]


def test_a_forget_all_that_fails_midway_is_finished_by_the_next_save(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed_texts(api)
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", BASE))
    assert texts(api, "peanuts Porto oboe") == []  # forgotten for every reader already
    assert manifest(aws)["purge"] is True and b"peanuts" in stored_bytes(aws)
    faults.clear()
    assert save(api, {"memories": [{"text": "learning Welsh"}]}).status == 200
    assert b"peanuts" not in stored_bytes(aws) and b"Porto" not in stored_bytes(aws)
    assert texts(api, "Welsh peanuts") == ["learning Welsh"]
    assert manifest(aws)["purge"] is False


@pytest.mark.usefixtures("parts_only")
def test_a_reader_repairs_a_manifest_naming_a_missing_part(api: Api, aws: dict[str, Any]) -> None:
    seed_texts(api)
    assert save(api, {"memories": [{"text": "collects stamps"}]}).status == 200
    lost = named_parts(aws)[-1]
    for v in versions(aws, lost):  # as a forget-all racing a save did before this change
        aws["s3"].delete_object(Bucket=BUCKET, Key=lost, VersionId=v["VersionId"])
    services.cache_clear()  # a cold container: nothing of that part cached
    assert sorted(texts(api, "peanuts Porto oboe stamps")) == sorted(FACTS)  # 200, not 409
    assert lost not in named_parts(aws)  # repaired for every later reader
    # Its claim still says "stored": forgetting it (idempotent, it is not there) lets the user add it again.
    assert api.request("DELETE", f"{BASE}/{text_memory_id('collects stamps')}").status == 204
    assert save(api, {"memories": [{"text": "collects stamps"}]}).body["saved"] == 1


# --- 3. a memory save commits exactly once ---------------------------------------------------------------------


EVENTS = [text_event(t, id=f"u{i}") for i, t in enumerate(FACTS)]


@pytest.mark.parametrize(
    ("kind", "name", "inline"),
    [("events", n, False) for n in SAVE_FAULTS]
    + [("texts", n, False) for n in SAVE_FAULTS if "forgotten" not in n]
    # small saves keep their records in the manifest: every fault but a part's (there is none)
    + [("events", n, True) for n in SAVE_FAULTS if "part" not in n]
    + [("texts", n, True) for n in SAVE_FAULTS if "forgotten" not in n and "part" not in n],
)
def test_a_save_retried_after_any_fault_stores_each_record_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, name: str, kind: str, inline: bool, request: Any
) -> None:
    if not inline:
        request.getfixturevalue("parts_only")
    # an existing manifest, so that its writes are conditional on its ETag (a direct text reads no mark)
    if kind == "texts":
        seed_texts(api, FACTS[:1])
        body: dict[str, Any] = {"memories": [{"text": t} for t in FACTS[1:]]}
    else:
        assert save(api, {"session_id": "s1", "events": EVENTS[:1]}).body["saved"] == 1
        body = {"session_id": "s1", "events": EVENTS[1:]}
    inject, status = SAVE_FAULTS[name]
    inject(faults)
    first = save(api, body)
    if status == 503:
        assert_unavailable(first)
    else:
        assert first.status == 200 and first.body["saved"] == 2, first.body
    faults.clear()
    retry = save(api, body)
    assert retry.status == 200
    counts = stored_record_ids(aws)
    assert len(counts) == 3 and set(counts.values()) == {1}  # each record held once across the parts
    assert sorted(texts(api, "peanuts Porto oboe sundays Ana")) == sorted(FACTS)  # and found once
    assert first.body.get("saved", 0) + retry.body["saved"] == 2  # each record counted saved once
    assert claims(aws) == {}  # a save writes no item to the table, whatever failed
    if inline:  # no part was ever written: all three records are in the manifest
        assert versions(aws, PREFIX + "parts/") == [] and len(inline_records(manifest(aws))) == 3


def test_a_forget_between_a_saves_read_and_its_write_is_never_undone(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """A save of events the memory holds (a redelivered batch) racing a forget of one of them: the forget lands
    after the save read the memory and before its conditional write, which loses and is redone over the view
    without the forgotten record; the mark, written before the forget's merge, keeps it out of the redone write
    and out of the other records' context."""
    assert save(api, {"session_id": "s1", "events": EVENTS[:2]}).body["saved"] == 2
    forgotten = event_memory_id("s1", "u0")

    def forget_first(apply: Callable[[], Any], _event: str, _request: Any) -> Any:
        assert api.request("DELETE", f"{BASE}/{forgotten}").status == 204
        return apply()

    rule = faults.add("PutObject", forget_first, when=only_if_match)
    reply = save(api, {"session_id": "s1", "events": EVENTS})
    assert reply.status == 200 and reply.body["saved"] == 1 and rule.hits == 1
    counts = stored_record_ids(aws)
    assert forgotten not in counts and set(counts.values()) == {1} and len(counts) == 2
    live = b"".join(aws["s3"].get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in named_parts(aws))
    assert b"peanuts" not in live  # neither as a memory nor as the context of the record stored after it
    assert claims(aws) == {"E#s1#u0": True}
    assert save(api, {"session_id": "s1", "events": EVENTS}).body["saved"] == 0  # and never later


# --- 4. orphans are reachable ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("parts_only")
def test_an_orphaned_part_is_deleted_by_forget_all(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    seed_texts(api, FACTS[:1])
    leave_an_orphan(faults)
    assert_unavailable(save(api, {"memories": [{"text": "secret diary entry"}]}))
    faults.clear()
    assert len(orphans(aws)) == 1 and b"secret diary" in stored_bytes(aws)
    assert texts(api, "secret diary") == []
    assert api.request("DELETE", BASE).status == 204
    assert_nothing_left(aws)


@pytest.mark.usefixtures("parts_only")
def test_forget_deletes_an_orphan_holding_the_forgotten_memory(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    # A save whose manifest write failed leaves an orphan holding the texts; its retry stores them anew.
    leave_an_orphan(faults)
    assert_unavailable(save(api, {"memories": [{"text": t} for t in FACTS]}))
    faults.clear()
    seed_texts(api)
    (orphan,) = orphans(aws)
    assert b"peanuts" in aws["s3"].get_object(Bucket=BUCKET, Key=orphan)["Body"].read()
    assert api.request("DELETE", f"{BASE}/{text_memory_id('allergic to peanuts')}").status == 204
    # Young as it is, the orphan held the forgotten text: it is gone too, every version of it.
    assert b"peanuts" not in stored_bytes(aws) and not orphans(aws)
    assert sorted(texts(api, "peanuts Porto oboe")) == sorted(FACTS[1:])


@pytest.mark.usefixtures("parts_only")
def test_merges_and_forgets_delete_old_orphans(
    api: Api, aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_texts(api, FACTS[:1])
    leave_an_orphan(faults)
    assert_unavailable(save(api, {"memories": [{"text": "never landed"}]}))
    faults.clear()
    (orphan,) = orphans(aws)
    api.request("DELETE", f"{BASE}/{text_memory_id('no such memory')}")
    assert orphans(aws) == {orphan}  # young: perhaps a save about to name it
    monkeypatch.setattr("agent_memory.stores.s3_memories.ORPHAN_GRACE_S", 0.0)
    assert api.request("DELETE", f"{BASE}/{text_memory_id('no such memory')}").status == 204
    assert orphans(aws) == set() and b"never landed" not in stored_bytes(aws)
    assert texts(api, "peanuts") == ["allergic to peanuts"]


# --- 5. auto-save ----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("parts_only")
def test_a_retried_autosave_batch_after_a_partial_fault_stores_each_record_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed_session(api, "s1")
    seed_session(api, "s2", user="bob")
    records = stream_records(aws)
    # bob's read of his forgotten events fails past botocore's retries and the write budget
    faults.fail("BatchGetItem", throttle(), times=-1, when=lambda r: b"M#app#bob" in (r.body or b""))
    result = autosave(records)
    bobs = {r["dynamodb"]["SequenceNumber"] for r in records if "#bob#" in r["dynamodb"]["Keys"]["PK"]["S"]}
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == bobs
    faults.clear()
    assert autosave([r for r in records if r["dynamodb"]["SequenceNumber"] in bobs]) == {"batchItemFailures": []}
    assert autosave(records) == {"batchItemFailures": []}  # and the whole batch redelivered
    for user in ("alice", "bob"):
        found = texts(api, "peanuts Porto sister", user=user)
        assert sorted(found) == ["I am allergic to peanuts", "My sister Ana lives in Porto"]
    bob_parts = [
        v["Key"] for v in versions(aws, "memories/app/bob/parts/") if v["IsLatest"]
    ]  # bob's records landed once, on the first retry; the redelivered batch added no part
    assert len(bob_parts) == 1


@pytest.mark.parametrize("bad", [math.nan, 1e20, -1e12, math.inf])
def test_an_event_timestamp_no_datetime_holds_does_not_block_autosave(
    api: Api, aws: dict[str, Any], bad: float
) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event("I collect vinyl records", id="u1")]})
    (record,) = [r for r in stream_records(aws) if r["dynamodb"]["Keys"]["SK"]["S"].startswith("V#")]
    image = record["dynamodb"]["NewImage"]
    body = json.loads(image["body"]["S"])
    body["timestamp"] = bad  # as old data stored it
    image["body"]["S"] = json.dumps(body)
    assert autosave([record]) == {"batchItemFailures": []}
    (hit,) = api.request("POST", f"{BASE}/search", json_body={"query": "vinyl"}).body["memories"]
    assert hit["timestamp"].endswith("Z")
    api.append("s1", {"events": [text_event("and I play the drums", id="u2")]})
    later = [r for r in stream_records(aws) if r["dynamodb"]["Keys"]["SK"]["S"].startswith("V#")][1:]
    assert autosave(later) == {"batchItemFailures": []}  # later batches of that session are not blocked
    assert len(texts(api, "vinyl drums")) == 2


def test_an_offloaded_event_s3_cannot_read_now_fails_only_its_session_and_lands_on_retry(
    api: Api, aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.config import settings

    monkeypatch.setenv("OFFLOAD_BYTES", "2000")  # bob's long event keeps its body in S3
    settings.cache_clear()
    services.cache_clear()
    seed_session(api, "s1")
    api.create(user="bob", session_id="b1")
    long_text = "My cat Miso sleeps on the piano " + "zz " * 1000
    assert api.append("b1", {"events": [text_event(long_text, id="b-long")]}, user="bob").status == 201
    records = stream_records(aws)
    bobs = {r["dynamodb"]["SequenceNumber"] for r in records if "#bob#" in r["dynamodb"]["Keys"]["PK"]["S"]}
    faults.fail("GetObject", s3_error(), times=-1, when=lambda r: "/sessions/" in r.url)
    result = autosave(records)
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == bobs  # alice's session is not held back
    assert sorted(texts(api, "peanuts Porto sister")) == ["I am allergic to peanuts", "My sister Ana lives in Porto"]
    faults.clear()
    assert texts(api, "Miso piano", user="bob") == []
    assert autosave([r for r in records if r["dynamodb"]["SequenceNumber"] in bobs]) == {"batchItemFailures": []}
    assert [t.split(" zz")[0] for t in texts(api, "Miso piano", user="bob")] == ["My cat Miso sleeps on the piano"]


# --- 6. throttling answers 503 within the budget ---------------------------------------------------------------

THROTTLES = {
    "save: forgotten read": ("save_events", "BatchGetItem", throttle()),
    "save: part": ("save", "PutObject", s3_error("SlowDown", 503)),
    "forget: read": ("forget", "GetObject", s3_error("SlowDown", 503)),
    "forget: list": ("forget", "ListObjectVersions", s3_error("SlowDown", 503)),
    "forget-all: write": ("forget_all", "PutObject", s3_error("SlowDown", 503)),
    "forget-all: delete": ("forget_all", "DeleteObjects", s3_error("SlowDown", 503)),
    "forget-all: marks": ("forget_all", "BatchWriteItem", throttle()),
}


def forget_route(api: Api, route: str) -> Any:
    """DELETE the first fact's memory ("forget") or all of the user's memories ("forget_all")."""
    return api.request("DELETE", f"{BASE}/{text_memory_id(FACTS[0])}" if route == "forget" else BASE)


@pytest.mark.parametrize("name", list(THROTTLES))
def test_throttling_answers_503_with_retry_after(
    api: Api, aws: dict[str, Any], faults: FaultInjector, name: str, real_backoff: None
) -> None:
    seed_texts(api)
    route, operation, reply = THROTTLES[name]
    if operation == "BatchWriteItem":  # forget-all marks the event memories it removes: one to mark
        assert save(api, {"session_id": "s1", "events": [text_event("I keep bees", id="u9")]}).body["saved"] == 1
    faults.fail(operation, reply, times=-1)
    started = time.monotonic()
    if route == "save":
        answer = save(api, {"memories": [{"text": "one more fact"}]})
    elif route == "save_events":
        answer = save(api, {"session_id": "s1", "events": [text_event("one more fact", id="u9")]})
    else:
        answer = forget_route(api, route)
    assert_unavailable(answer)
    # Never a hang: the answer comes well inside the API functions' 29 s timeout.
    assert time.monotonic() - started < 25.0
    faults.clear()
    assert sorted(t for t in texts(api, "peanuts Porto oboe") if t in FACTS) in (sorted(FACTS), sorted(FACTS[1:]), [])


FORGET_LOST_ANSWERS = {
    "forget: merge write": ("forget", "PutObject", on_key("manifest.json")),
    "forget: part delete": ("forget", "DeleteObjects", None),
    "forget-all: tombstone": ("forget_all", "PutObject", on_key("manifest.json")),
    "forget-all: delete": ("forget_all", "DeleteObjects", None),
    "forget-all: marks": ("forget_all", "BatchWriteItem", None),
}


@pytest.mark.parametrize("name", list(FORGET_LOST_ANSWERS))
def test_a_forget_whose_answer_was_lost_is_recognised(
    api: Api, aws: dict[str, Any], faults: FaultInjector, name: str
) -> None:
    seed_texts(api)
    assert save(api, {"session_id": "s1", "events": [text_event("I keep bees", id="u9")]}).body["saved"] == 1
    route, operation, when = FORGET_LOST_ANSWERS[name]
    faults.lose_answer(operation, when=when)
    assert forget_route(api, route).status == 204
    if route == "forget":
        assert b"peanuts" not in stored_bytes(aws) and b"Porto" in stored_bytes(aws)
        assert sorted(texts(api, "peanuts Porto oboe")) == sorted(FACTS[1:])
        assert not orphans(aws) and manifest(aws)["pending_delete"] == []
    else:
        assert_nothing_left(aws)
        assert texts(api, "peanuts Porto oboe bees") == [] and claims(aws) == {"E#s1#u9": True}
        assert save(api, {"session_id": "s1", "events": [text_event("I keep bees", id="u9")]}).body["saved"] == 0
    assert faults.rules[0].hits == 1  # the fault did happen


@pytest.mark.usefixtures("parts_only")
def test_a_lost_manifest_answer_followed_by_another_writer_is_still_recognised(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    from botocore.exceptions import ReadTimeoutError

    seed_texts(api, FACTS[:1])

    def applied_then_overtaken(apply: Callable[[], Any], _event: str, request: Any) -> Any:
        apply()  # the save's manifest write lands...
        assert save(api, {"memories": [{"text": "another writer's fact"}]}).status == 200  # ...another follows
        raise ReadTimeoutError(endpoint_url=request.url)  # ...and the first answer is lost

    faults.add("PutObject", applied_then_overtaken, when=only_if_match)
    reply = save(api, {"memories": [{"text": t} for t in FACTS[1:]]})
    assert reply.status == 200 and reply.body["saved"] == 2
    counts = stored_record_ids(aws)
    assert len(counts) == 4 and set(counts.values()) == {1}
    assert set(named_parts(aws)) == {v["Key"] for v in versions(aws, PREFIX + "parts/")}  # nothing discarded
    assert len(texts(api, "peanuts Porto oboe fact")) == 4
