"""Auto-save's write of a user's memory, under faults injected below botocore's retries: one save per user per
batch, partial-batch failures per user, and the deletion of the parts a merge replaces by key and version id.
Each test asserts storage afterwards (every object version under the user's prefix, the manifest, the records
the named parts hold, the claims) and the batch response."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from agent_memory.stores.s3_memories import decode_part
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, stream_records
from tests.support.aws import BUCKET
from tests.support.memory_objects import inline_records

from .injector import FaultInjector, Reply, s3_error, throttle
from .memory_storage import claims, on_key, save, texts, versions

# The memory tier's fixtures (tests/faults/conftest.py): a 3 s write budget, lexical search, the default policy.
pytestmark = pytest.mark.usefixtures("memory_write_budget", "lexical_default_policy")


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    return Api()


def prefix(user: str) -> str:
    return f"memories/app/{user}/"


def manifest_of(aws: dict[str, Any], user: str) -> dict[str, Any]:
    try:
        body = aws["s3"].get_object(Bucket=BUCKET, Key=prefix(user) + "manifest.json")["Body"].read()
    except aws["s3"].exceptions.NoSuchKey:
        return {}
    data: dict[str, Any] = json.loads(body)
    return data


def named(aws: dict[str, Any], user: str) -> list[str]:
    m = manifest_of(aws, user)
    return ([m["snapshot"]] if m.get("snapshot") else []) + list(m.get("segments", []))


def records_of(aws: dict[str, Any], user: str) -> dict[str, Any]:
    """The records the user's named parts and manifest (inline) hold, by id; each id held once (asserted)."""
    found: list[Any] = list(inline_records(manifest_of(aws, user)))
    for key in named(aws, user):
        found += decode_part(aws["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())[0]
    counts = Counter(r.id for r in found)
    assert all(n == 1 for n in counts.values()), counts
    return {r.id: r for r in found}


def part_versions(aws: dict[str, Any], user: str) -> list[dict[str, Any]]:
    return versions(aws, prefix(user) + "parts/")


def assert_no_stray_part(aws: dict[str, Any], user: str) -> None:
    """Every part version under the user's prefix is the one version of a part the manifest names."""
    held = part_versions(aws, user)
    assert sorted(v["Key"] for v in held) == sorted(named(aws, user)), (held, named(aws, user))
    assert not manifest_of(aws, user).get("pending_delete")


def chat(api: Api, user: str, sid: str, texts_: list[str]) -> None:
    api.create(session_id=sid, user=user)
    events = [text_event(t, id=f"{sid}-u{i}") for i, t in enumerate(texts_)]
    assert api.append(sid, {"events": events}, user=user).status in {200, 201}


def event_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in stream_records(aws) if r["dynamodb"]["Keys"]["SK"]["S"].startswith("V#")]


def sequences(records: list[dict[str, Any]], user: str) -> set[str]:
    return {r["dynamodb"]["SequenceNumber"] for r in records if f"#{user}#" in r["dynamodb"]["Keys"]["PK"]["S"]}


class Requests:
    """The S3 requests that reached moto (or a fault), with the key they name."""

    def __init__(self, faults: FaultInjector) -> None:
        self.seen: list[tuple[str, str]] = []
        for operation in ("GetObject", "PutObject", "ListObjectVersions", "DeleteObjects"):
            faults.add(operation, self._recorder(operation), times=-1)

    def _recorder(self, operation: str) -> Callable[[Callable[[], Any], str, Any], Any]:
        def action(apply: Callable[[], Any], _event: str, request: Any) -> Any:
            self.seen.append((operation, request.url))
            return apply()

        return action

    def count(self, operation: str, fragment: str = "") -> int:
        return sum(1 for op, url in self.seen if op == operation and fragment in url)


TEA = ["I drink green tea every morning", "I live in Oslo near the fjord"]
CHESS = ["I play chess on tuesdays", "I own a grey cat called Miso"]
TRUCK = ["I drive a red truck to work", "I grow tomatoes on my balcony"]


# --- one save per user per batch ------------------------------------------------------------------------------


@pytest.mark.usefixtures("parts_only")
def test_a_batch_writes_each_users_memory_once_whatever_the_number_of_their_sessions(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    chat(api, "alice", "s1", TEA)
    chat(api, "alice", "s2", CHESS)
    chat(api, "bob", "s3", TRUCK)
    records = event_records(aws)
    requests = Requests(faults)
    assert autosave(records) == {"batchItemFailures": []}
    # alice: one manifest read, one part and one manifest write for her two sessions; bob the same
    for user in ("alice", "bob"):
        assert requests.count("GetObject", f"/{user}/manifest.json") == 1
        assert requests.count("PutObject", f"/{user}/parts/") == 1
        assert requests.count("PutObject", f"/{user}/manifest.json") == 1
    assert requests.count("ListObjectVersions") == 0
    alice = records_of(aws, "alice")
    assert sorted(r.text for r in alice.values()) == sorted(TEA + CHESS) and len(named(aws, "alice")) == 1
    assert sorted(r.text for r in records_of(aws, "bob").values()) == sorted(TRUCK)
    # each memory's retrieval context comes from its own session only
    (cat,) = [r for r in alice.values() if "Miso" in r.text]
    assert "chess" in cat.context and "tea" not in cat.context and "Oslo" not in cat.context
    assert claims(aws, "alice") == {}  # a save writes nothing to the table: it only reads forgotten events
    # the next batch of alice's reads her manifest once, conditionally, and no part again
    api.append("s2", {"events": [text_event("I collect old maps", id="s2-u9")]})
    requests.seen.clear()
    assert autosave(event_records(aws)[len(records) :]) == {"batchItemFailures": []}
    assert requests.count("GetObject") == 1 and requests.count("PutObject") == 2
    assert len(texts(api, "maps chess tea Oslo Miso")) == 5
    assert_no_stray_part(aws, "alice")


def s3_throttle() -> Reply:
    return s3_error("SlowDown", 503)


# (operation, reply or None for a lost answer, fragment of the key it hits)
USER_FAULTS = {
    "part PUT fails": ("PutObject", s3_error, "/bob/parts/"),
    "part PUT throttled": ("PutObject", s3_throttle, "/bob/parts/"),
    "manifest PUT fails": ("PutObject", s3_error, "/bob/manifest.json"),
    "manifest read fails": ("GetObject", s3_error, "/bob/manifest.json"),
}


@pytest.mark.usefixtures("parts_only")
@pytest.mark.parametrize("fault", sorted(USER_FAULTS))
def test_a_users_failed_save_fails_exactly_that_users_records(
    api: Api, aws: dict[str, Any], faults: FaultInjector, fault: str
) -> None:
    chat(api, "alice", "s1", TEA)
    chat(api, "bob", "s2", TRUCK)
    chat(api, "bob", "s3", CHESS)
    chat(api, "alice", "s4", ["I speak Portuguese at home"])
    records = event_records(aws)
    operation, reply, fragment = USER_FAULTS[fault]
    faults.fail(operation, reply(), times=-1, when=on_key(fragment))
    result = autosave(records)
    faults.clear()
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == sequences(records, "bob")
    # alice's records landed once; bob has nothing stored and no part left
    assert len(records_of(aws, "alice")) == 3
    assert named(aws, "bob") == [] and part_versions(aws, "bob") == []
    # Lambda retries from bob's first failed record on: alice's later records come again, and nothing doubles
    retried = records[
        min(i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] in sequences(records, "bob")) :
    ]
    assert autosave(retried) == {"batchItemFailures": []}
    assert len(records_of(aws, "alice")) == 3 and len(records_of(aws, "bob")) == 4
    assert claims(aws, "alice") == claims(aws, "bob") == {}
    for user in ("alice", "bob"):
        assert_no_stray_part(aws, user)


@pytest.mark.parametrize("inline", [False, True])
def test_a_manifest_write_applied_with_its_answer_lost_is_one_save(
    api: Api, aws: dict[str, Any], faults: FaultInjector, inline: bool, request: Any
) -> None:
    if not inline:
        request.getfixturevalue("parts_only")
    chat(api, "bob", "s2", TRUCK)
    chat(api, "bob", "s3", CHESS)
    records = event_records(aws)
    faults.lose_answer("PutObject", when=on_key("/bob/manifest.json"))
    assert autosave(records) == {"batchItemFailures": []}
    # one part, or (a small save) none: the records in the manifest
    assert len(records_of(aws, "bob")) == 4 and len(named(aws, "bob")) == (0 if inline else 1)
    assert len(inline_records(manifest_of(aws, "bob"))) == (4 if inline else 0)
    assert autosave(records) == {"batchItemFailures": []}  # redelivered: nothing stored twice
    assert len(records_of(aws, "bob")) == 4
    assert_no_stray_part(aws, "bob")


# --- merges delete what they replace by version id ----------------------------------------------------------------


def save_text(api: Api, text: str) -> None:
    assert save(api, {"memories": [{"text": text}]}).status == 200


@pytest.mark.usefixtures("parts_only")
def test_a_merge_deletes_the_parts_it_replaced_by_version_without_listing(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    for i in range(8):
        save_text(api, f"fact {i} about kites")
    replaced = named(aws, "alice")
    assert set(manifest_of(aws, "alice")["v"]) == set(replaced)  # each part's one version is recorded
    requests = Requests(faults)
    save_text(api, "fact 8 about kites")  # the 9th segment: a merge
    assert requests.count("ListObjectVersions") == 0 and requests.count("DeleteObjects") == 1
    m = manifest_of(aws, "alice")
    assert m["segments"] == [] and m["snapshot"] and m["m"] == 1
    assert not {v["Key"] for v in part_versions(aws, "alice")} & set(replaced)
    assert_no_stray_part(aws, "alice")
    assert len(texts(api, "kites")) == 9


@pytest.mark.usefixtures("parts_only")
@pytest.mark.parametrize("lost", ["PutObject", "DeleteObjects"])
def test_a_merge_leaves_no_version_behind_after_a_lost_answer(
    api: Api, aws: dict[str, Any], faults: FaultInjector, lost: str
) -> None:
    """A part PUT applied with its answer lost is stored twice (botocore retries it under the same key): its
    version is not recorded, and the merge lists that part's versions. A DeleteObjects whose answer was lost is
    retried over versions already gone."""
    if lost == "PutObject":
        save_text(api, "fact 0 about kites")
        faults.lose_answer("PutObject", when=on_key("/parts/"))
        save_text(api, "fact 1 about kites")
        faults.clear()
        doubled = named(aws, "alice")[-1]
        assert len([v for v in part_versions(aws, "alice") if v["Key"] == doubled]) == 2
        assert doubled not in manifest_of(aws, "alice")["v"]
        start = 2
    else:
        faults.lose_answer("DeleteObjects")
        start = 0
    for i in range(start, 8):
        save_text(api, f"fact {i} about kites")
    requests = Requests(faults)
    save_text(api, "fact 8 about kites")
    assert requests.count("ListObjectVersions") == (1 if lost == "PutObject" else 0)
    assert_no_stray_part(aws, "alice")
    assert len(texts(api, "kites")) == 9


@pytest.mark.usefixtures("parts_only")
def test_a_merge_whose_deletes_fail_leaves_them_to_the_next_save(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    for i in range(8):
        save_text(api, f"fact {i} about kites")
    faults.fail("DeleteObjects", s3_throttle(), times=-1)
    save_text(api, "fact 8 about kites")
    m = manifest_of(aws, "alice")
    assert len(m["pending_delete"]) == 9 and set(m["v"]) >= set(m["pending_delete"])
    faults.clear()
    requests = Requests(faults)
    save_text(api, "fact 9 about kites")
    assert requests.count("ListObjectVersions") == 0 and requests.count("DeleteObjects") == 1
    assert_no_stray_part(aws, "alice")
    assert len(texts(api, "kites")) == 10


@pytest.mark.usefixtures("parts_only")
def test_every_few_merges_sweep_the_orphans_a_dead_save_left(
    api: Api, aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent_memory.stores.s3_memories.ORPHAN_SWEEP_EVERY", 2)
    monkeypatch.setattr("agent_memory.stores.s3_memories.ORPHAN_GRACE_S", 0.0)
    save_text(api, "fact 0 about kites")
    epoch = manifest_of(aws, "alice").get("epoch", "")
    orphan = f"{prefix('alice')}parts/{epoch + '/' if epoch else ''}{'0' * 32}.mem"
    aws["s3"].put_object(Bucket=BUCKET, Key=orphan, Body=b"the part of a save that died")
    for i in range(1, 9):  # the first merge
        save_text(api, f"fact {i} about kites")
    assert manifest_of(aws, "alice")["m"] == 1
    assert orphan in {v["Key"] for v in part_versions(aws, "alice")}  # merges between sweeps do not list
    for i in range(9, 18):  # the second merge sweeps
        save_text(api, f"fact {i} about kites")
    assert manifest_of(aws, "alice")["m"] == 2
    assert_no_stray_part(aws, "alice")
    assert len(texts(api, "kites")) == 18


# --- large batches (the window cuts them): hundreds of records, many users, faults in the middle -----------------


class Killed(BaseException):
    """Lambda stopping the function at its timeout: nothing in the function catches it (not an ``Exception``)."""


USERS = [f"u{i}" for i in range(25)]


def window_of_turns(api: Api, aws: dict[str, Any], rounds: int = 2, per_round: int = 4) -> list[dict[str, Any]]:
    """A window's worth of the stream: ``rounds`` appends of ``per_round`` turns by each of 25 users in turn
    (200 records), as many users' conversations interleave in one shard."""
    for user in USERS:
        api.create(session_id=f"s-{user}", user=user)
    for r in range(rounds):
        for user in USERS:
            events = [
                text_event(f"{user} fact {r * per_round + i} about kites", id=f"{user}-{r}-{i}")
                for i in range(per_round)
            ]
            assert api.append(f"s-{user}", {"events": events}, user=user).status in {200, 201}
    records = event_records(aws)
    assert len(records) == len(USERS) * rounds * per_round
    return records


def from_first_failed(records: list[dict[str, Any]], result: dict[str, Any]) -> list[dict[str, Any]]:
    """What Lambda hands over again after a partial failure: every record from the first failed one on."""
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    return records[min(i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] in failed) :]


def assert_every_user_stored_once(aws: dict[str, Any], rounds: int = 2, per_round: int = 4) -> None:
    for user in USERS:
        held = records_of(aws, user)  # each id once
        assert sorted(r.text for r in held.values()) == sorted(
            f"{user} fact {n} about kites" for n in range(rounds * per_round)
        ), user
        assert_no_stray_part(aws, user)


def on_claims_of(user: str) -> Callable[[Any], bool]:
    return lambda request: f"M#app#{user}".encode() in (request.body or b"")


def test_a_large_batch_with_a_throttle_mid_batch_fails_only_the_throttled_users_records(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    records = window_of_turns(api, aws)
    # u12's read of its forgotten events, throttled past botocore's retries and the write budget
    faults.fail("BatchGetItem", throttle(), times=-1, when=on_claims_of("u12"))
    result = autosave(records)
    faults.clear()
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == sequences(records, "u12")
    assert named(aws, "u12") == [] and part_versions(aws, "u12") == []
    for user in USERS[:12] + USERS[13:]:
        assert len(records_of(aws, user)) == 8
    assert autosave(from_first_failed(records, result)) == {"batchItemFailures": []}
    assert_every_user_stored_once(aws)


@pytest.mark.usefixtures("parts_only")
def test_a_large_batch_with_an_s3_error_on_one_users_save_fails_exactly_that_user(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    records = window_of_turns(api, aws)
    faults.fail("PutObject", s3_error(), times=-1, when=on_key("/u7/parts/"))
    result = autosave(records)
    faults.clear()
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == sequences(records, "u7")
    assert named(aws, "u7") == [] and part_versions(aws, "u7") == []
    assert autosave(from_first_failed(records, result)) == {"batchItemFailures": []}
    assert_every_user_stored_once(aws)


def test_a_large_batch_stopped_by_the_timeout_after_a_users_write_applied_loses_and_doubles_nothing(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    records = window_of_turns(api, aws)

    def die_after(apply: Callable[[], Any], _event: str, _request: Any) -> Any:
        apply()  # u9's manifest is written ...
        raise Killed  # ... and the function is stopped before it hears back

    faults.add("PutObject", die_after, times=1, when=on_key("/u9/manifest.json"))
    with pytest.raises(Killed):
        autosave(records)
    assert len(records_of(aws, "u9")) == 8  # landed
    assert named(aws, "u10") == []
    # Lambda retries the whole batch (bisected or not): the saved users' records, u9's included, are skipped by
    # the memory's own view, the rest stored; nothing was left held to block them
    assert autosave(records) == {"batchItemFailures": []}
    assert_every_user_stored_once(aws)
    assert all(claims(aws, user) == {} for user in USERS)


@pytest.mark.usefixtures("parts_only")
def test_a_large_batch_the_function_has_no_time_left_for_hands_the_rest_over_again(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """Through the handler: its Lambda context's remaining time falls with each user's manifest written (as a
    batch of many users would use up 300 s); the users it has no time for are reported, none is stopped mid-save."""
    from local.apigw import LambdaContext
    from local.streams import stream_mappings
    from local.template import load_handler, load_template

    records = window_of_turns(api, aws)
    requests = Requests(faults)

    class Clock(LambdaContext):
        def get_remaining_time_in_millis(self) -> int:
            return 300_000 - 25_000 * requests.count("PutObject", "/manifest.json")

    (mapping,) = stream_mappings(load_template(), {"AutoSaveBatchSize": "1000", "AutoSaveBatchingWindowSeconds": "300"})
    result = load_handler(mapping)({"Records": records}, Clock())
    # ten saves leave 50 s, under the 60 s a save is started with: u10 on are reported, all their records
    saved = {u for u in USERS if named(aws, u)}
    assert saved == set(USERS[:10])
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == set().union(
        *(sequences(records, u) for u in USERS[10:])
    )
    assert autosave(from_first_failed(records, result)) == {"batchItemFailures": []}
    assert_every_user_stored_once(aws)
