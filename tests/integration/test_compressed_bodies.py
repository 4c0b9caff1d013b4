"""Event bodies stored zlib-compressed (``bz``) when that saves a write unit, on moto: both append
paths, imports, resends, the stream record auto-save reads, and what a corrupt one reads as."""

from __future__ import annotations

import base64
import json
import math
import zlib
from typing import Any

import pytest

from agent_memory.errors import EventIdConflict
from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.items import ZDICT
from agent_memory.stores.dynamo.sizes import item_size
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import EventQuery, NewEvent, SessionKey, SessionRecord
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.wire.jsonio import dumps
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, stream_records
from tests.support.aws import BUCKET, TABLE
from tests.support.memories_api import search

KEY = SessionKey("app", "alice", "s1")
# A compaction summary's kind of text: ~2.6 KB of prose, three write units as JSON text, fewer compressed.
SUMMARY = " ".join(
    f"The user mentioned that {name} visited {city} on day {day} and asked to be reminded about it."
    for day, (name, city) in enumerate(
        [("Ana", "Porto"), ("Ben", "Lyon"), ("Caro", "Oslo"), ("Dan", "Kyoto"), ("Eve", "Quito")] * 6
    )
)
CHAT = "Sure — here is what I found about the train times to Porto this weekend. " * 4  # ~300 characters


@pytest.fixture
def store(aws: dict[str, Any]) -> DynamoSessionStore:
    s = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    s.create_session(SessionRecord("app", "alice", "s1", 1000.0, 1000.0), ScopedDelta())
    return s


def new_event(event_id: str, ts: float, text: str, **extra: Any) -> NewEvent:
    body = {"id": event_id, "author": "user", "timestamp": ts, "content": {"role": "user", "parts": [{"text": text}]}}
    return NewEvent(id=event_id, timestamp=ts, body=body | extra, delta=ScopedDelta())


def raw_item(aws: dict[str, Any], event_id: str, session: str = "s1") -> dict[str, Any]:
    item: dict[str, Any] = aws["dynamodb"].get_item(
        TableName=TABLE, Key={"PK": {"S": f"E#app#alice#{session}"}, "SK": {"S": f"V#{event_id}"}}
    )["Item"]
    return item


def units(item: dict[str, Any]) -> int:
    return math.ceil(item_size(item) / 1024)


def inflate(packed: bytes) -> bytes:
    return zlib.decompressobj(zdict=ZDICT).decompress(packed)


def as_plain(item: dict[str, Any]) -> dict[str, Any]:
    """The same item with its body as JSON text: what it would have been without compression."""
    plain = {k: v for k, v in item.items() if k != "bz"}
    plain["body"] = {"S": inflate(item["bz"]["B"]).decode()}
    return plain


def assert_compressed(aws: dict[str, Any], event_id: str, sent: dict[str, Any]) -> dict[str, Any]:
    item = raw_item(aws, event_id)
    assert "body" not in item and isinstance(item["bz"]["B"], bytes)
    assert json.loads(inflate(item["bz"]["B"])) == sent
    assert units(item) < units(as_plain(item)), (item_size(item), item_size(as_plain(item)))
    return item


def test_a_large_single_append_is_stored_compressed_and_reads_back_byte_identical(
    store: DynamoSessionStore, aws: dict[str, Any]
) -> None:
    meta = {"é": "ü" * 40, "n": 1.5e300}
    big = new_event("big", 1001.0, SUMMARY, custom_metadata=meta)
    stored = store.append_events(KEY, [big], None)  # one event, no delta, no If-Match: the claim-first path
    assert stored.created == [True]
    assert_compressed(aws, "big", big.body)
    (read,) = store.read_events(KEY, EventQuery())
    assert dumps(read) == dumps(stored.events[0]) == dumps(dict(big.body, seq=1))
    # A resend is recognised through the compressed body; another body under the id conflicts.
    again = store.append_events(KEY, [new_event("big", 1001.0, SUMMARY, custom_metadata=dict(meta))], None)
    assert again.created == [False] and dumps(again.events[0]) == dumps(read)
    with pytest.raises(EventIdConflict):
        store.append_events(KEY, [new_event("big", 1001.0, SUMMARY + ".")], None)


def test_the_transaction_path_and_a_compaction_store_large_bodies_compressed(
    store: DynamoSessionStore, aws: dict[str, Any]
) -> None:
    first, second = new_event("t1", 1001.0, SUMMARY), new_event("t2", 1002.0, SUMMARY[::-1])
    stored = store.append_events(KEY, [first, second], 0)  # If-Match: the transaction path
    assert stored.created == [True, True]
    assert_compressed(aws, "t1", first.body)
    assert_compressed(aws, "t2", second.body)
    summary = new_event("c1", 1003.0, SUMMARY)
    summary.body["actions"] = {"compaction": {"start_timestamp": 1001.0, "end_timestamp": 1002.0}}
    assert store.append_compaction(KEY, summary, 2, 0) is not None
    assert_compressed(aws, "c1", summary.body)
    read = store.read_events(KEY, EventQuery())
    assert [dumps(e) for e in read] == [dumps(dict(e.body, seq=i)) for i, e in enumerate([first, second, summary], 1)]
    # A batch resending a compressed event and adding one: only the new one is stored.
    again = store.append_events(KEY, [new_event("t2", 1002.0, SUMMARY[::-1]), new_event("t3", 1004.0, "hi")], None)
    assert again.created == [False, True] and dumps(again.events[0]) == dumps(read[1])


def test_a_chat_turn_or_an_incompressible_body_stays_plain_text(store: DynamoSessionStore, aws: dict[str, Any]) -> None:
    store.append_events(KEY, [new_event("chat", 1001.0, CHAT)], None)
    chat = raw_item(aws, "chat")
    assert "bz" not in chat and units(chat) == 1
    noise = base64.b64encode(zlib.compress(SUMMARY.encode(), 9) * 2).decode()  # ~2.6 KB that does not compress
    store.append_events(KEY, [new_event("noise", 1002.0, noise)], None)
    assert "bz" not in raw_item(aws, "noise")
    assert [e["content"]["parts"][0]["text"] for e in store.read_events(KEY, EventQuery())] == [CHAT, noise]


def test_an_imported_large_event_is_stored_compressed_and_exports_unchanged(
    store: DynamoSessionStore, aws: dict[str, Any]
) -> None:
    events = [dict(new_event("i1", 1001.0, SUMMARY).body, seq=1), dict(new_event("i2", 1002.0, CHAT).body, seq=2)]
    store.import_session(SessionRecord("app", "alice", "s2", 1000.0, 1002.0), events, replace=False)
    item = raw_item(aws, "i1", "s2")
    assert "body" not in item and units(item) < units(as_plain(item))
    assert "body" in raw_item(aws, "i2", "s2")
    exported = store.read_events(SessionKey("app", "alice", "s2"), EventQuery())
    assert [dumps(e) for e in exported] == [dumps(e) for e in events]


def test_the_stream_record_of_a_compressed_event_is_read_by_auto_save(
    api: Api, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
    assert api.create(session_id="s1").status == 201
    reply = api.append("s1", text_event(SUMMARY + " My sister Zelda lives in Quito.", id="u1"))
    assert reply.status == 201, reply.body
    assert "bz" in raw_item(aws, "u1")
    records = stream_records(aws)
    (record,) = [r for r in records if r["dynamodb"]["Keys"]["SK"]["S"] == "V#u1"]
    image = record["dynamodb"]["NewImage"]
    assert isinstance(image["bz"]["B"], str)  # Lambda delivers binary attributes base64-encoded
    json.dumps(records)  # and the whole record is JSON, as in Lambda's event
    assert autosave(records) == {"batchItemFailures": []}
    (hit,) = search(api, "sister Zelda Quito", top_k=1)
    assert hit["content"]["parts"][0]["text"].endswith("My sister Zelda lives in Quito.")


def deflate(data: bytes, zdict: bytes | None = None) -> bytes:
    deflater = zlib.compressobj(zdict=zdict) if zdict else zlib.compressobj()
    return deflater.compress(data) + deflater.flush()


def test_a_compressed_body_without_the_preset_dictionary_reads_too(
    store: DynamoSessionStore, aws: dict[str, Any]
) -> None:
    sent = new_event("big", 1001.0, SUMMARY)
    store.append_events(KEY, [sent], None)
    assert zlib.adler32(ZDICT) == 1783504277  # the dictionary of stored items never changes
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": "E#app#alice#s1"}, "SK": {"S": "V#big"}},
        UpdateExpression="SET bz = :bz",
        ExpressionAttributeValues={":bz": {"B": deflate(json.dumps(sent.body).encode())}},
    )
    assert dumps(store.read_events(KEY, EventQuery())[0]) == dumps(dict(sent.body, seq=1))


@pytest.mark.parametrize(
    "bz",
    [
        {"B": b"not zlib at all"},
        {"B": deflate(b'{"id": "x"}', zdict=b"another dictionary")},  # a dictionary this version does not know
        {"B": zlib.compress(b"[1, 2]")},  # inflates, but not to a JSON object
        {"B": zlib.compress(b'{"id": "x", "content": "cut short"}')[:-6]},  # truncated
    ],
)
def test_a_corrupt_compressed_body_reads_as_the_unreadable_event_marker(
    store: DynamoSessionStore, aws: dict[str, Any], bz: dict[str, Any]
) -> None:
    store.append_events(KEY, [new_event("big", 1001.0, SUMMARY)], None)
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": "E#app#alice#s1"}, "SK": {"S": "V#big"}},
        UpdateExpression="SET bz = :bz",
        ExpressionAttributeValues={":bz": bz},
    )
    (read,) = store.read_events(KEY, EventQuery())
    assert read["id"] == "big" and read["seq"] == 1 and read["error_code"] == "unreadable_event"
    assert "content" not in read


def test_a_stream_record_whose_compressed_body_is_not_base64_reads_as_the_marker(
    store: DynamoSessionStore, aws: dict[str, Any]
) -> None:
    store.append_events(KEY, [new_event("big", 1001.0, SUMMARY)], None)
    image = raw_item(aws, "big")
    good = dict(image, bz={"B": base64.b64encode(image["bz"]["B"]).decode()})
    bad = dict(image, bz={"B": "%%% not base64 %%%"})
    records = [
        {
            "eventName": "INSERT",
            "dynamodb": {"Keys": {"PK": image["PK"], "SK": image["SK"]}, "NewImage": img, "SequenceNumber": str(i)},
        }
        for i, img in enumerate([good, bad])
    ]
    ok, marker = store.changes(records)
    assert ok.event["content"]["parts"][0]["text"] == SUMMARY
    assert marker.event["id"] == "big" and marker.event["error_code"] == "unreadable_event"
