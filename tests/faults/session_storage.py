"""What a session's storage holds (its table items, bucket object versions and tags) and the fault tier's
conversation for compaction, for the session, transfer, quota and sweep fault tests."""

from __future__ import annotations

from typing import Any

from agent_memory.stores.dynamo.keys import events_pk, session_pk
from agent_memory.stores.ports import SessionKey
from tests.support.api import Api
from tests.support.aws import BUCKET, TABLE


def event_items(aws: dict[str, Any], sid: str = "s1") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :v)",  # the events, not the session's state item
        ExpressionAttributeValues={":pk": {"S": events_pk(SessionKey("app", "alice", sid))}, ":v": {"S": "V#"}},
        ConsistentRead=True,
    )["Items"]
    return items


def session_item(aws: dict[str, Any], sid: str = "s1") -> dict[str, Any] | None:
    item: dict[str, Any] | None = (
        aws["dynamodb"]
        .get_item(
            TableName=TABLE,
            Key={"PK": {"S": session_pk("app", "alice")}, "SK": {"S": f"S#{sid}"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item


def object_versions(aws: dict[str, Any], prefix: str = "sessions/") -> list[dict[str, Any]]:
    response = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix=prefix)
    return list(response.get("Versions", [])) + list(response.get("DeleteMarkers", []))


def tags(aws: dict[str, Any], key: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in aws["s3"].get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]}


def retry_after(reply: Any) -> int:
    return int(reply.headers["retry-after"])


def chat(api: Api, sid: str, turns: int) -> None:
    events = []
    for i in range(turns):
        events += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    assert api.append(sid, {"events": events}).status == 201


def summaries(api: Api, sid: str = "s1") -> list[dict[str, Any]]:
    return [e for e in api.get(sid).body["events"] if "compaction" in (e.get("actions") or {})]
