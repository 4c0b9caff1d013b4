"""A user's long-term memory under faults: what its S3 objects and claim items hold, saves and searches through
the API, the save-fault matrix, for the memory, auto-save, profile and delete fault tests."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from agent_memory.stores.s3_memories import decode_part
from tests.support.api import Api
from tests.support.aws import BUCKET, TABLE
from tests.support.memory_objects import inline_records, version_bytes

from .injector import FaultInjector, Reply, s3_error, throttle

PREFIX = "memories/app/alice/"
BASE = "/apps/app/users/alice/memories"
MANIFEST = PREFIX + "manifest.json"


def versions(aws: dict[str, Any], prefix: str = PREFIX) -> list[dict[str, Any]]:
    """Every object version under ``prefix`` (the bucket is versioned)."""
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix=prefix)
    return list(listed.get("Versions", []))


def stored_bytes(aws: dict[str, Any]) -> bytes:
    """The content of every object version under the user's prefix (a manifest's inline records decompressed)."""
    return version_bytes(aws["s3"], BUCKET, PREFIX)


def manifest(aws: dict[str, Any]) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=MANIFEST)["Body"].read())
    except aws["s3"].exceptions.NoSuchKey:
        return {}
    return data


def named_parts(aws: dict[str, Any]) -> list[str]:
    m = manifest(aws)
    return ([m["snapshot"]] if m.get("snapshot") else []) + list(m.get("segments", []))


def stored_record_ids(aws: dict[str, Any]) -> Counter[str]:
    """How many times each record id is held across the parts the manifest names and its inline records."""
    counts: Counter[str] = Counter(r.id for r in inline_records(manifest(aws)))
    for key in named_parts(aws):
        records, _ = decode_part(aws["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())
        counts.update(r.id for r in records)
    return counts


def claims(aws: dict[str, Any], user: str = "alice") -> dict[str, bool]:
    """The user's claim items (forgotten-event marks): key -> committed."""
    items = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"M#app#{user}"}},
    )["Items"]
    return {item["SK"]["S"][2:]: item["committed"]["BOOL"] for item in items}


def save(api: Api, body: Any, user: str = "alice") -> Any:
    return api.request("POST", f"/apps/app/users/{user}/memories", json_body=body)


def texts(api: Api, query: str, user: str = "alice") -> list[str]:
    reply = api.request("POST", f"/apps/app/users/{user}/memories/search", json_body={"query": query, "top_k": 100})
    assert reply.status == 200, reply.body
    return [h["content"]["parts"][0]["text"] for h in reply.body["memories"]]


def assert_unavailable(reply: Any) -> None:
    assert reply.status == 503, (reply.status, reply.body)
    assert (
        reply.error["code"] == "service_unavailable"
        and int({k.lower(): v for k, v in reply.headers.items()}["retry-after"]) >= 1
    )


def on_key(fragment: str) -> Callable[[Any], bool]:
    """Match S3 requests whose URL names ``fragment`` (a part: "/parts/", the manifest: "manifest.json")."""
    return lambda request: fragment in request.url


def only_if_match(request: Any) -> bool:
    """A conditional manifest write over an existing manifest (not the first one)."""
    return "manifest.json" in request.url and "If-Match" in request.headers


FACTS = ["allergic to peanuts", "sister Ana lives in Porto", "plays the oboe on sundays"]


def seed_texts(api: Api, facts: list[str] = FACTS) -> None:
    reply = save(api, {"memories": [{"text": t} for t in facts]})
    assert reply.status == 200 and reply.body["saved"] == len(facts)


def _fail(op: str, reply: Reply, when: Callable[[Any], bool] | None = None) -> Callable[[FaultInjector], None]:
    def inject(faults: FaultInjector) -> None:
        faults.fail(op, reply, times=-1, when=when)

    return inject


def _lose(op: str, when: Callable[[Any], bool] | None = None) -> Callable[[FaultInjector], None]:
    def inject(faults: FaultInjector) -> None:
        faults.lose_answer(op, when=when)

    return inject


SAVE_FAULTS = {
    "part put fails": (_fail("PutObject", s3_error(), on_key("/parts/")), 503),
    "part put answer lost": (_lose("PutObject", on_key("/parts/")), 200),
    "manifest write fails": (_fail("PutObject", s3_error(), on_key("manifest.json")), 503),
    "manifest write answer lost": (_lose("PutObject", on_key("manifest.json")), 200),
    "manifest read throttled": (_fail("GetObject", s3_error("SlowDown", 503), on_key("manifest.json")), 503),
    # events only (a text has no forgotten mark to read): the read of the events' marks
    "forgotten read throttled": (_fail("BatchGetItem", throttle()), 503),
    "forgotten read answer lost": (_lose("BatchGetItem"), 200),
}
