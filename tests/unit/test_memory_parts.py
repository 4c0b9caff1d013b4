"""The memory part format (``stores/memory_parts.py``): records read back, each decoded when read, broken parts
refused; the combined records of several parts; the index read without copying its arrays."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.memory_parts import (
    CombinedRecords,
    PartRecords,
    decode_part,
    encode_part,
    read_part,
)
from agent_memory.stores.ports import MemoryRecord


def record(i: int, **extra: object) -> MemoryRecord:
    return MemoryRecord(id=f"m{i}", text=f"fact {i} about tea", author="user", timestamp=1.0 + i, **extra)  # type: ignore[arg-type]


RECORDS = [
    record(0),
    record(1, context="user: earlier", facts=[{"category": "likes", "text": "tea"}]),
    record(2, session_id="s1", event_id="e2", custom_metadata={"k": ["v", 1]}, role="model"),
    MemoryRecord(id="m3", text='naïve café 東京 \u2028 "quoted"', author="Zoë", timestamp=-5.0),
]


def index_bytes(records: list[MemoryRecord]) -> bytes:
    return SearchIndex.build([Doc(r.id, r.text) for r in records]).to_bytes()


def test_a_part_reads_back_every_record_and_the_index() -> None:
    data = encode_part(RECORDS, index_bytes(RECORDS))
    records, index = read_part(data)
    assert dict(records) == {r.id: r for r in RECORDS}
    assert list(records) == [r.id for r in RECORDS]  # stored order
    assert [i for i, _ in SearchIndex.from_bytes(index).search("tea", 5)] == ["m0", "m1", "m2"]
    listed, again = decode_part(data)
    assert listed == RECORDS and bytes(again) == bytes(index)


def test_the_current_format_is_v2_and_decodes_only_the_records_read() -> None:
    data = encode_part(RECORDS, index_bytes(RECORDS))
    assert data.startswith(b"AMEM2")
    # Break record m2's JSON in place: the others still read, since each is decoded only when asked for.
    start = data.index(b'{"id":"m2"')
    broken = data[:start] + b"#" + data[start + 1 :]
    records, _ = read_part(broken)
    assert isinstance(records, PartRecords)
    assert "m2" in records and len(records) == 4  # the table alone answers these
    assert records["m1"] == RECORDS[1] and records["m3"] == RECORDS[3]
    with pytest.raises(ValueError):
        records["m2"]
    with pytest.raises(KeyError):
        records["m9"]


def v2_part(ids: list[str], blobs: list[bytes], offsets: list[int] | None = None, count: int | None = None) -> bytes:
    """An AMEM2 part assembled by hand (to break one thing at a time)."""
    if offsets is None:
        offsets = [0]
        for blob in blobs:
            offsets.append(offsets[-1] + len(blob))
    id_list = json.dumps(ids).encode()
    table = struct.pack(f"<{len(offsets)}Q", *offsets)
    n = len(ids) if count is None else count
    return b"AMEM2" + struct.pack(">QQ", n, len(id_list)) + id_list + table + b"".join(blobs) + index_bytes([])


def blob(r: MemoryRecord) -> bytes:
    return json.dumps(r.to_json(), separators=(",", ":")).encode()


def test_a_hand_assembled_part_reads_as_encode_part_writes_it() -> None:
    data = v2_part(["m0", "m1"], [blob(RECORDS[0]), blob(RECORDS[1])])
    assert dict(read_part(data)[0]) == {"m0": RECORDS[0], "m1": RECORDS[1]}


@pytest.mark.parametrize(
    "data",
    [
        b"AMEM3" + bytes(20),
        b"not a part",
        b"AMEM2" + struct.pack(">QQ", 1, 5),  # ends inside the ids
        v2_part(["m0", "m0"], [blob(RECORDS[0]), blob(RECORDS[0])]),  # an id twice
        v2_part(["m0", "m1"], [blob(RECORDS[0]), blob(RECORDS[1])], offsets=[0, 200, 100]),  # out of order
        v2_part(["m0"], [blob(RECORDS[0])], offsets=[0, 10**9]),  # beyond the end
        v2_part(["m0"], [blob(RECORDS[0])], count=2),  # the table disagrees with the ids
        b"AMEM1" + struct.pack(">Q", 2) + b"[]",  # a format no version of the store writes
    ],
)
def test_a_broken_part_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        read_part(data)


def test_a_record_stored_under_another_id_is_refused_when_read() -> None:
    records, _ = read_part(v2_part(["m0", "m1"], [blob(RECORDS[1]), blob(RECORDS[1])]))
    assert records["m1"] == RECORDS[1]
    with pytest.raises(ValueError):
        records["m0"]


def test_combined_records_let_a_later_part_win_and_hide_the_forgotten() -> None:
    first = read_part(encode_part(RECORDS[:3], index_bytes(RECORDS[:3])))[0]
    newer = MemoryRecord(id="m1", text="newer m1", author="user", timestamp=9.0)
    second = {"m1": newer, "m5": record(5)}
    combined = CombinedRecords([first, second], frozenset({"m0"}))
    assert combined["m1"] == newer and combined["m2"] == RECORDS[2]
    assert "m0" not in combined and combined.get("m0") is None
    with pytest.raises(KeyError):
        combined["m0"]
    expected = {"m1": newer, "m2": RECORDS[2], "m5": record(5)}
    assert list(combined) == list(expected) and len(combined) == 3 and combined == expected
    assert combined and not CombinedRecords([first], frozenset(first)) and not CombinedRecords([])
    # A save's view over a view: what the inner one hides stays hidden only for its own parts.
    again = CombinedRecords([combined, {"m0": record(0)}])
    assert again["m0"] == record(0) and len(again) == 4


def test_an_uncompressed_index_is_read_without_copying_its_arrays() -> None:
    docs = [Doc(f"m{i}", f"fact {i} about tea and cake") for i in range(50)]
    built = SearchIndex.build(docs)
    vectors = np.random.default_rng(1).integers(-127, 128, size=(50, 8), dtype=np.int8)
    built = built._replace(vectors=vectors, scales=np.full(50, 0.01, dtype=np.float32), model="test")
    data = built.to_bytes()
    loaded = SearchIndex.from_bytes(memoryview(data)[0:])
    assert loaded._vectors is not None and np.shares_memory(loaded._vectors, np.frombuffer(data, dtype=np.uint8))
    assert not loaded._vectors.flags.writeable
    assert np.array_equal(loaded._vectors, vectors) and loaded.ids == built.ids
    assert loaded.search("tea cake", 5) == built.search("tea cake", 5)
    # compressed (np.load reads it) and plain bytes give the same index
    for other in (SearchIndex.from_bytes(built.to_bytes(compress=True)), SearchIndex.from_bytes(data)):
        assert other.search("tea cake", 5) == built.search("tea cake", 5)
        assert other._vectors is not None and np.array_equal(other._vectors, vectors)


@pytest.mark.parametrize("cut", [1, 10, 100, -40, -1])
def test_a_truncated_index_is_refused(cut: int) -> None:
    data = SearchIndex.build([Doc("m1", "tea")]).to_bytes()
    with pytest.raises(ValueError):
        SearchIndex.from_bytes(data[cut:] if cut >= 0 else data[:cut])


def test_an_archive_of_other_arrays_is_refused() -> None:
    buffer = io.BytesIO()
    np.savez(buffer, header=np.frombuffer(b'{"format": "other"}', dtype=np.uint8))
    with pytest.raises(ValueError):
        SearchIndex.from_bytes(buffer.getvalue())
