"""The search index's stored format: what its arrays hold, and how they are written to and read from bytes.

An index is doc-major (CSR): per document, its row of distinct terms (``doc_ptr`` into ``terms``) with their
counts in the memory's text (``tf_text``) and in its context (``tf_ctx``), its two field lengths, and optionally
one int8-quantised embedding with a per-row scale (``quantise``). Tags (``tags``: the author's words, whether
the memory places something in time, its month) are terms no query word can produce, with zero counts, so they
ride the postings, merges, forgetting and serialisation of the words at no cost to BM25. The term-major order of
the entries (``term_order``) is stored with them, so that a reader's first search does not sort them.

Bytes are an ``.npz`` archive of plain arrays plus a JSON header (format, ids, vocabulary, model): no pickle.
An uncompressed archive is read as views into its buffer (``_stored_arrays``), not copies.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from agent_memory.limits import MAX_TERM_FREQUENCY
from agent_memory.search.lexical import author_words, mentions_time, tokenize
from agent_memory.search.types import Doc

__all__ = [
    "AUTHOR_TAG",
    "EMBED_CHARS",
    "FORMAT",
    "MONTH_TAG",
    "TIME_TAG",
    "Rows",
    "dump",
    "embedding_text",
    "load",
    "quantise",
    "rows_of",
    "tags",
]

FORMAT = "agent-memory-search-index/1"

F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
U32 = npt.NDArray[np.uint32]

# Each array's type, checked on read.
DTYPES: dict[str, type[np.generic]] = {
    "doc_ptr": np.int64,
    "terms": np.int32,
    "tf_text": np.uint16,
    "tf_ctx": np.uint16,
    "len_text": np.uint32,
    "len_ctx": np.uint32,
    "vectors": np.int8,
    "scales": np.float32,
    "term_order": np.int32,
}

# Tags: terms no query word can produce (``tokenize`` yields letters and digits only), with zero counts in both
# fields. ``@a:<word>`` for each word of the memory's author, ``@t`` for a memory that places something in time.
AUTHOR_TAG = "@a:"
TIME_TAG = "@t"
MONTH_TAG = "@m:"  # @m:2023-07 and @m:07, from the memory's timestamp (UTC)


def tags(doc: Doc) -> list[str]:
    out = [AUTHOR_TAG + word for word in dict.fromkeys(author_words(doc.author))] if doc.author else []
    if mentions_time(doc.text):
        out.append(TIME_TAG)
    if doc.timestamp is not None and math.isfinite(doc.timestamp):
        try:
            when = datetime.fromtimestamp(doc.timestamp, tz=UTC)
        except (OverflowError, OSError, ValueError):  # a timestamp no datetime holds: no month
            return out
        out += [f"{MONTH_TAG}{when.year:04d}-{when.month:02d}", f"{MONTH_TAG}{when.month:02d}"]
    return out


class Rows(NamedTuple):
    """The doc-major arrays of some documents, and the vocabulary's term ids (``rows_of``)."""

    ids: list[str]
    vocab: list[str]
    term_ids: dict[str, int]
    doc_ptr: I64
    terms: I32
    tf_text: U16
    tf_ctx: U16
    len_text: U32
    len_ctx: U32


def rows_of(docs: Sequence[Doc]) -> Rows:
    """The doc-major arrays of ``docs`` (ids unique), tokenised: each document's distinct terms in the order of
    their first occurrence (text, then context, then tags), the vocabulary in the order terms were first met."""
    vocab: list[str] = []
    term_ids: dict[str, int] = {}
    terms: list[int] = []
    tf_text: list[int] = []
    tf_ctx: list[int] = []
    row_lengths: list[int] = []
    len_text: list[int] = []
    len_ctx: list[int] = []
    for doc in docs:
        if not isinstance(doc.id, str) or not doc.id:
            raise ValueError("every document needs a non-empty string id")
        text_tokens = tokenize(doc.text)
        ctx_tokens = tokenize(doc.context) if doc.context else []
        counts: dict[str, list[int]] = {}
        for token in text_tokens:
            counts.setdefault(token, [0, 0])[0] += 1
        for token in ctx_tokens:
            counts.setdefault(token, [0, 0])[1] += 1
        for tag in tags(doc):  # zero counts: a tag is in the postings, never in a BM25 score or a length
            counts.setdefault(tag, [0, 0])
        for token, (in_text, in_ctx) in counts.items():
            tid = term_ids.get(token)
            if tid is None:
                tid = term_ids[token] = len(vocab)
                vocab.append(token)
            terms.append(tid)
            tf_text.append(in_text)
            tf_ctx.append(in_ctx)
        row_lengths.append(len(counts))
        len_text.append(len(text_tokens))
        len_ctx.append(len(ctx_tokens))
    doc_ptr = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(np.asarray(row_lengths, dtype=np.int64), out=doc_ptr[1:])
    return Rows(
        [doc.id for doc in docs],
        vocab,
        term_ids,
        doc_ptr,
        np.asarray(terms, dtype=np.int32),
        np.minimum(np.asarray(tf_text, dtype=np.int64), MAX_TERM_FREQUENCY).astype(np.uint16),
        np.minimum(np.asarray(tf_ctx, dtype=np.int64), MAX_TERM_FREQUENCY).astype(np.uint16),
        np.asarray(len_text, dtype=np.uint32),
        np.asarray(len_ctx, dtype=np.uint32),
    )


# What a document's vector is computed from: its text, then as much of its context and reply as fits in about
# 512 characters (some 128 word pieces, the sequence length all-MiniLM-L6-v2 was trained on), keeping the end:
# the reply, the date and the nearest turn. An embedder's cost grows with its input (MiniLM on two cores: ~10 ms for
# 300 characters, ~29 ms for 900), and auto-save embeds every saved turn; the context's words stay whole in
# the lexical field.
EMBED_CHARS = 512
EMBED_MIN_CONTEXT = 64  # a long text still gets the end of its context (the date, a few words)


def embedding_text(doc: Doc) -> str:
    context = " ".join(part for part in (doc.context.strip(), doc.reply.strip()) if part)
    if not context:
        return doc.text
    room = max(EMBED_MIN_CONTEXT, EMBED_CHARS - len(doc.text) - 1)
    if len(context) > room:
        cut = context[-room:]
        space = cut.find(" ")
        context = cut[space + 1 :] if 0 <= space < len(cut) - 1 else cut
    return f"{doc.text}\n{context}"


def quantise(matrix: F32) -> tuple[I8, F32]:
    """int8 rows with a per-row scale: row ~= int8 row * scale (max abs error scale / 2)."""
    peak = np.abs(matrix).max(axis=1)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    vectors = np.clip(np.rint(matrix / safe[:, None]), -127, 127).astype(np.int8)
    return vectors, scales


# ----------------------------------------------------------------------------------------------------------------
# Bytes (npz of plain arrays + a JSON header; never pickle)
# ----------------------------------------------------------------------------------------------------------------


def dump(model: str | None, ids: list[str], vocab: list[str], arrays: dict[str, Any], *, compress: bool) -> bytes:
    """The archive of an index's header and ``arrays`` (written in their order, after the header)."""
    header = {"format": FORMAT, "model": model, "ids": ids, "vocab": vocab}
    members: dict[str, Any] = {
        "header": np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        **arrays,
    }
    buffer = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buffer, **members)
    return buffer.getvalue()


def load(data: bytes | memoryview) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The header (with ``ids`` and ``vocab`` lists) and arrays ``dump`` wrote (compressed or not), each array of its
    type. ValueError when ``data`` is not such an archive. The arrays of an uncompressed archive are views into
    ``data`` (read-only; ``data`` stays alive with them), not copies."""
    try:
        arrays = _stored_arrays(data)
        if arrays is None:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        header = json.loads(arrays.pop("header").tobytes().decode("utf-8"))
    except Exception as exc:
        raise ValueError(f"not a search index: {type(exc).__name__}: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("not a search index of format " + FORMAT)
    for name, dtype in DTYPES.items():
        if name in arrays and arrays[name].dtype != dtype:
            raise ValueError(f"search index array {name} has dtype {arrays[name].dtype}, expected {dtype}")
    if not isinstance(header.get("ids"), list) or not isinstance(header.get("vocab"), list):
        raise ValueError("search index header lacks ids or vocab")
    return header, arrays


class _BufferReader:
    """A read-only file over a buffer, without copying it (``io.BytesIO`` copies a memoryview): what ``zipfile``
    needs to list an archive's members."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(len(self._view), self._pos + size)
        out = self._view[self._pos : end].tobytes()
        self._pos = max(self._pos, end)
        return out


_LOCAL_HEADER = 30  # a zip member's local header before its name and extra field
_NPY_MAGIC = b"\x93NUMPY"


def _stored_arrays(data: bytes | memoryview) -> dict[str, npt.NDArray[Any]] | None:
    """The arrays of an ``.npz`` written without compression (``to_bytes``' default) as views into ``data``: no
    copy of the 38 MB of vectors of 100,000 memories, and no CRC pass over them (``np.load`` does both; the part
    came whole from S3, whose transfer is checksummed). An array not aligned for its type is copied. None when a
    member is compressed or not a plain ``.npy`` array of version 1 or 2: ``np.load`` then reads the archive."""
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    with zipfile.ZipFile(_BufferReader(view)) as archive:  # type: ignore[arg-type]
        members = archive.infolist()
    arrays: dict[str, npt.NDArray[Any]] = {}
    for info in members:
        if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
            return None
        at = info.header_offset
        local = view[at : at + _LOCAL_HEADER].tobytes()
        if len(local) < _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
            raise ValueError(f"archive member {info.filename} has no local header")
        start = at + _LOCAL_HEADER + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
        member = view[start : start + info.file_size]
        preamble = member[:12].tobytes()
        if preamble[:6] != _NPY_MAGIC or preamble[6] not in (1, 2):
            return None
        length, end = (
            (int.from_bytes(preamble[8:10], "little"), 10)
            if preamble[6] == 1
            else (int.from_bytes(preamble[8:12], "little"), 12)
        )
        header = io.BytesIO(member[: end + length].tobytes())
        version = np.lib.format.read_magic(header)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(header)
        if fortran_order or dtype.hasobject:
            return None
        count = math.prod(shape)
        array = np.frombuffer(member, dtype=dtype, count=count, offset=end + length).reshape(shape)
        arrays[info.filename[: -len(".npy")]] = array if array.flags.aligned else array.copy()
    return arrays
