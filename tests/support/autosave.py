"""Auto-save from the table's stream: a session to save memories from, the stream's records as Lambda would
deliver them to the auto-save function, and that function run on them."""

from __future__ import annotations

from typing import Any

from local.apigw import LambdaContext
from local.streams import stream_mappings
from local.template import load_handler, load_template
from tests.support.api import Api, text_event
from tests.support.aws import TABLE


def seed_session(api: Api, sid: str = "s1", user: str = "alice") -> None:
    api.create(session_id=sid, user=user)
    api.append(
        sid,
        {
            "events": [
                text_event("I am allergic to peanuts", id="u1", custom_metadata={"dia_id": "D1:1"}),
                text_event("Noted: no peanuts.", author="assistant", id="a1"),
                text_event("My sister Ana lives in Porto", id="u2", custom_metadata={"dia_id": "D1:3"}),
                {
                    "author": "user",
                    "id": "u3",
                    "content": {"role": "user", "parts": [{"text": "hmm", "thought": True}]},
                },
            ]
        },
        user=user,
    )


def stream_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record of the table's stream in moto that the auto-save mapping's filter passes, as Lambda would
    deliver them (not, e.g., the writes of a session's state item)."""
    from local.streams import _json_record, admits

    (mapping,) = stream_mappings(load_template(), {"AutoSaveBatchSize": "10", "AutoSaveBatchingWindowSeconds": "60"})
    streams = __import__("agent_memory.runtime.aws", fromlist=["client"]).client("dynamodbstreams")
    arn = aws["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
        records += [_json_record(r) for r in streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]]
    return [r for r in records if admits(mapping.patterns, r)]


def autosave(records: list[dict[str, Any]]) -> dict[str, Any]:
    (mapping,) = stream_mappings(load_template(), {"AutoSaveBatchSize": "10", "AutoSaveBatchingWindowSeconds": "60"})
    result: dict[str, Any] = load_handler(mapping)({"Records": records}, LambdaContext())
    return result
