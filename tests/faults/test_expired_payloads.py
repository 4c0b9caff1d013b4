"""With a retention (``SessionRetentionDays``), DynamoDB's TTL removes expired event items but not their payloads
offloaded to S3: the change feed's function deletes every version of those, on the REMOVE records the TTL
service makes (and on no other deletion's). The TTL's deletion is played by a DeleteItem against moto, whose
stream record is then marked as TTL marks its own (``userIdentity``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agent_memory.stores.dynamo.keys import TTL_IDENTITY, events_pk
from agent_memory.stores.ports import SessionKey
from local.streams import _json_record, admits, stream_mappings
from local.template import load_template
from tests.support.api import Api
from tests.support.autosave import autosave
from tests.support.aws import BUCKET, TABLE

from .injector import FaultInjector, s3_error

MAPPING = {"AutoSaveBatchSize": "10", "AutoSaveBatchingWindowSeconds": "60"}


@pytest.fixture(autouse=True)
def _setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETENTION_DAYS", "30")
    monkeypatch.setenv("OFFLOAD_BYTES", "5000")  # the long events below keep their bodies in S3
    monkeypatch.setenv("EMBEDDER", "none")


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector) -> Api:
    return Api()


def long_event(api: Api, sid: str, event_id: str) -> dict[str, Any]:
    """Append a 20 KB event (offloaded) and return its stored item."""
    body = {"id": event_id, "author": "user", "content": {"role": "user", "parts": [{"text": "x" * 20_000}]}}
    assert api.append(sid, body).status == 201
    return event_item(sid, event_id)


def event_item(sid: str, event_id: str) -> dict[str, Any]:
    from agent_memory.runtime.aws import client

    item: dict[str, Any] = client("dynamodb").get_item(
        TableName=TABLE,
        Key={"PK": {"S": events_pk(SessionKey("app", "alice", sid))}, "SK": {"S": f"V#{event_id}"}},
        ConsistentRead=True,
    )["Item"]
    return item


def versions(aws: dict[str, Any], key: str) -> list[str]:
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix=key)
    return [v["VersionId"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])]


def removal_of(aws: dict[str, Any], item: dict[str, Any], *, by_ttl: bool) -> dict[str, Any]:
    """Delete ``item`` and return its REMOVE record from the stream, as Lambda delivers it (by TTL: marked so)."""
    aws["dynamodb"].delete_item(TableName=TABLE, Key={"PK": item["PK"], "SK": item["SK"]})
    from agent_memory.runtime.aws import client

    streams = client("dynamodbstreams")
    arn = aws["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    found = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        start = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
        for record in streams.get_records(ShardIterator=start["ShardIterator"])["Records"]:
            if record["eventName"] == "REMOVE" and record["dynamodb"]["Keys"]["SK"] == item["SK"]:
                found.append(_json_record(record))
    (record,) = found
    if by_ttl:
        record = copy.deepcopy(record) | {"userIdentity": dict(TTL_IDENTITY)}
    return record


def test_ttl_removal_of_an_offloaded_event_deletes_every_version_of_its_payload(api: Api, aws: dict[str, Any]) -> None:
    assert api.create(session_id="s1").status == 201
    item = long_event(api, "s1", "e1")
    blob = item["blob"]["S"]
    assert versions(aws, blob)
    record = removal_of(aws, item, by_ttl=True)
    (mapping,) = stream_mappings(load_template(), MAPPING)
    assert admits(mapping.patterns, record)  # the mapping hands it to the function
    assert autosave([record]) == {"batchItemFailures": []}
    assert versions(aws, blob) == []
    assert autosave([record]) == {"batchItemFailures": []}  # delivered again: nothing left, nothing fails


def test_a_deletion_that_is_not_the_ttl_s_leaves_payloads_to_its_own_purge(api: Api, aws: dict[str, Any]) -> None:
    """Only the TTL service's REMOVEs: the mapping never delivers another deletion's, and the function ignores one
    (a request's deletion purges its payloads itself; the record alone cannot tell what it still needs)."""
    assert api.create(session_id="s1").status == 201
    item = long_event(api, "s1", "e1")
    record = removal_of(aws, item, by_ttl=False)
    (mapping,) = stream_mappings(load_template(), MAPPING)
    assert not admits(mapping.patterns, record)
    assert autosave([record]) == {"batchItemFailures": []}
    assert versions(aws, item["blob"]["S"])
    other = copy.deepcopy(record) | {"userIdentity": {"type": "Service", "principalId": "someone.amazonaws.com"}}
    assert not admits(mapping.patterns, other)
    assert autosave([other]) == {"batchItemFailures": []}
    assert versions(aws, item["blob"]["S"])


def test_an_expired_event_without_a_payload_is_not_delivered(api: Api, aws: dict[str, Any]) -> None:
    assert api.create(session_id="s1").status == 201
    body = {"id": "small", "author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}}
    assert api.append("s1", body).status == 201
    record = removal_of(aws, event_item("s1", "small"), by_ttl=True)
    (mapping,) = stream_mappings(load_template(), MAPPING)
    assert not admits(mapping.patterns, record)


def test_a_payload_s3_fails_to_delete_is_reported_and_deleted_on_redelivery(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    assert api.create(session_id="s1").status == 201
    kept, gone = long_event(api, "s1", "e1"), long_event(api, "s1", "e2")
    records = [removal_of(aws, kept, by_ttl=True), removal_of(aws, gone, by_ttl=True)]
    key = kept["blob"]["S"].encode()
    # Every attempt botocore makes (its retries included) fails, for that payload only.
    faults.fail("DeleteObjects", s3_error(), times=10, when=lambda request: key in (request.body or b""))
    result = autosave(records)
    assert result == {"batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]}
    assert versions(aws, kept["blob"]["S"]) and versions(aws, gone["blob"]["S"]) == []
    faults.clear()
    assert autosave(records[:1]) == {"batchItemFailures": []}  # the feed delivers it again: deleted now
    assert versions(aws, kept["blob"]["S"]) == []
