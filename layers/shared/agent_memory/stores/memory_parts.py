"""The byte format of a long-term memory part (``S3MemoryStore``'s immutable objects), and record mappings that
decode a record only when it is read.

The format (``AMEM2``): the magic; the number of records ``n`` and the size of a JSON list of their ids
(big-endian u64 each); that list; ``n + 1`` offsets (little-endian u64) into the block of records that follows,
record ``i`` being the compact JSON object at ``[offsets[i], offsets[i + 1])`` of it; then the ``SearchIndex``
bytes. A reader decodes the ids and the offsets only (at 100,000 records some 15 ms, where decoding every record
of one JSON list took half a second of CPU); a search then decodes the records of its hits, a save or a profile
read all of them.

A part whose structure is broken (sizes beyond its end, offsets out of order, an id twice, a record whose id is
not the one listed for it) raises ``ValueError``, at load for the structure and when read for a record.
"""

from __future__ import annotations

import itertools
import json
import struct
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .ports import MemoryRecord

__all__ = ["CombinedRecords", "PartRecords", "decode_part", "encode_part", "read_part"]

MAGIC_V2 = b"AMEM2"
_COUNTS = struct.Struct(">QQ")
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode_part(records: Sequence[MemoryRecord], index_bytes: bytes) -> bytes:
    """A part holding ``records`` (ids unique) and their index, in the current format (``AMEM2``)."""
    ids = [r.id for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError("a memory part holds each record once")
    blobs = [_ENCODER.encode(r.to_json()).encode() for r in records]
    offsets = array("Q", [0])
    total = 0
    for blob in blobs:
        total += len(blob)
        offsets.append(total)
    if sys.byteorder != "little":  # pragma: no cover - Lambda and every CI runner are little-endian
        offsets.byteswap()
    id_list = _ENCODER.encode(ids).encode()
    return b"".join([MAGIC_V2, _COUNTS.pack(len(ids), len(id_list)), id_list, offsets.tobytes(), *blobs, index_bytes])


def read_part(data: bytes) -> tuple[Mapping[str, MemoryRecord], memoryview]:
    """The records of a part (each decoded when read) and its index bytes (a view into ``data``, no copy).
    ValueError when ``data`` is not a memory part."""
    if data.startswith(MAGIC_V2):
        return _read_v2(memoryview(data))
    raise ValueError("not a memory part")


def decode_part(data: bytes) -> tuple[list[MemoryRecord], memoryview]:
    """Every record of a part, in stored order, and its index bytes."""
    records, index_bytes = read_part(data)
    return list(records.values()), index_bytes


def _read_v2(view: memoryview) -> tuple[PartRecords, memoryview]:
    pos = len(MAGIC_V2) + _COUNTS.size
    if len(view) < pos:
        raise ValueError("a memory part ends inside its header")
    count, ids_size = _COUNTS.unpack(view[len(MAGIC_V2) : pos])
    table = pos + ids_size
    blob_start = table + 8 * (count + 1)
    if blob_start > len(view):
        raise ValueError("a memory part ends inside its table")
    ids = json.loads(view[pos:table].tobytes())
    offsets = array("Q")
    offsets.frombytes(view[table:blob_start])
    if sys.byteorder != "little":  # pragma: no cover
        offsets.byteswap()
    if not isinstance(ids, list) or len(ids) != count or not all(isinstance(i, str) for i in ids):
        raise ValueError("a memory part's ids do not match its table")
    end = blob_start + offsets[-1]
    if offsets[0] != 0 or end > len(view) or any(a > b for a, b in itertools.pairwise(offsets)):
        raise ValueError("a memory part's record offsets are out of order or beyond its end")
    return PartRecords(ids, view[blob_start:end], offsets), view[end:]


class PartRecords(Mapping[str, MemoryRecord]):
    """The records of one part by id, each decoded from its JSON when first read (then kept)."""

    def __init__(self, ids: list[str], blob: memoryview, offsets: Sequence[int]) -> None:
        self._ids = ids
        self._positions = dict(zip(ids, range(len(ids)), strict=True))
        if len(self._positions) != len(ids) or len(offsets) != len(ids) + 1:
            raise ValueError("a memory part lists an id twice, or not one offset per record")
        self._blob = blob
        self._offsets = offsets
        self._decoded: dict[int, MemoryRecord] = {}

    def __getitem__(self, key: str) -> MemoryRecord:
        i = self._positions[key]
        record = self._decoded.get(i)
        if record is None:
            data: Any = json.loads(self._blob[self._offsets[i] : self._offsets[i + 1]].tobytes())
            if not isinstance(data, dict) or data.get("id") != key:
                raise ValueError(f"memory part record {i} is not the record {key!r} its table names")
            record = self._decoded[i] = MemoryRecord.from_json(data)  # a racing read decodes an equal one
        return record

    def __contains__(self, key: object) -> bool:
        return key in self._positions

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"PartRecords({len(self)} records, {len(self._decoded)} decoded)"


class CombinedRecords(Mapping[str, MemoryRecord]):
    """The records of several parts by id, a later part's record replacing an earlier one's, without the ids in
    ``hidden`` (forgotten, not merged out yet). Reads no record until it is asked for; the ids are gathered on
    the first ``len`` or iteration (in the order a ``dict.update`` of the parts would give)."""

    _parts: list[Mapping[str, MemoryRecord]]
    _hidden: frozenset[str]

    def __init__(self, parts: Sequence[Mapping[str, MemoryRecord]], hidden: frozenset[str] = frozenset()) -> None:
        flat: list[Mapping[str, MemoryRecord]] = []
        for part in parts:
            if isinstance(part, CombinedRecords) and not part._hidden:
                flat += part._parts  # what it hides applies to its own parts only: nested, not flattened
            else:
                flat.append(part)
        self._parts = flat
        self._hidden = hidden
        self._order: dict[str, None] | None = None

    def __getitem__(self, key: str) -> MemoryRecord:
        if key not in self._hidden:
            for part in reversed(self._parts):
                if key in part:
                    return part[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key not in self._hidden and any(key in part for part in self._parts)

    def _ids(self) -> dict[str, None]:
        if self._order is None:
            order: dict[str, None] = {}
            for part in self._parts:
                order.update(dict.fromkeys(part))
            for key in self._hidden:
                order.pop(key, None)
            self._order = order
        return self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())

    def __bool__(self) -> bool:  # without gathering every id: a search asks only whether there is one
        return any(key not in self._hidden for part in self._parts for key in part)

    def __repr__(self) -> str:
        return f"CombinedRecords({len(self._parts)} parts, {len(self._hidden)} hidden)"
