"""The long-term memory search index: BM25F over a memory's text and its context, fused with dense vectors.

One ``SearchIndex`` is immutable. It holds, per document (a saved memory): its term frequencies in two fields
(the memory's own text, and its context: the turns just before it and the session date), and optionally one
int8-quantised embedding with a per-row scale. Build it with ``build``, forget memories with ``without``, merge
parts with ``combine``, store it with ``to_bytes`` / ``from_bytes``. ``combine`` of parts that share no id
searches them in place (``_PartedIndex``), with the same rankings and scores as the one index of them.

The modules beside it: ``types`` (``Doc``, ``SearchConfig``, ``DEFAULT_CONFIG``), ``stored`` (the arrays' layout
and their bytes), ``arrays`` (what is derived from the arrays: postings, norms), ``ranking`` (the search:
``RankedIndex``, which this class is), ``scoring`` (the formulas, calibration and rerank) and ``lexical``
(tokens and the query's signals).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agent_memory.search import stored
from agent_memory.search.ranking import RankedIndex, checked_embeddings, model_name
from agent_memory.search.types import Doc

if TYPE_CHECKING:
    from agent_memory.providers.embedders import Embedder

__all__ = ["SearchIndex"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
Bool = npt.NDArray[np.bool_]


class SearchIndex(RankedIndex):
    """An immutable hybrid index over saved memories. Build with :meth:`build`, merge with :meth:`combine`."""

    # ----------------------------------------------------------------------------------------------------------
    # Construction
    # ----------------------------------------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> SearchIndex:
        return cls.build([])

    @classmethod
    def build(cls, docs: Sequence[Doc], embedder: Embedder | None = None) -> SearchIndex:
        """Index ``docs`` (a later duplicate id replaces the earlier one); embed them if ``embedder`` is given.

        Raises ``EmbedderError`` when the embedder fails: the caller decides whether to retry or to index the
        documents without vectors (``build(docs, None)``), which then compete on lexical scores only.
        """
        latest = {doc.id: i for i, doc in enumerate(docs)}
        if len(latest) < len(docs):
            docs = [docs[i] for i in sorted(latest.values())]
        rows = stored.rows_of(docs)
        index = cls(
            rows.ids,
            rows.vocab,
            rows.doc_ptr,
            rows.terms,
            rows.tf_text,
            rows.tf_ctx,
            rows.len_text,
            rows.len_ctx,
        )
        index._term_ids = rows.term_ids
        if embedder is None or not docs:
            return index
        matrix = checked_embeddings(embedder, [stored.embedding_text(doc) for doc in docs], len(docs))
        vectors, scales = stored.quantise(matrix)
        return index._replace(vectors=vectors, scales=scales, model=model_name(embedder))

    def _replace(self, **changes: Any) -> SearchIndex:
        fields: dict[str, Any] = {
            "ids": self._ids,
            "vocab": self._vocab,
            "doc_ptr": self._doc_ptr,
            "terms": self._terms,
            "tf_text": self._tf_text,
            "tf_ctx": self._tf_ctx,
            "len_text": self._len_text,
            "len_ctx": self._len_ctx,
            "vectors": self._vectors,
            "scales": self._scales,
            "model": self._model,
        }
        fields.update(changes)
        return SearchIndex(**fields)

    # ----------------------------------------------------------------------------------------------------------
    # Set operations
    # ----------------------------------------------------------------------------------------------------------

    def without(self, ids: Iterable[str]) -> SearchIndex:
        """A copy without the given ids (forgotten memories); unknown ids are ignored."""
        positions = self._position_map()
        drop = [positions[i] for i in set(ids) if i in positions]
        if not drop:
            return self
        keep = np.ones(len(self), dtype=bool)
        keep[drop] = False
        # Always prune here: a word only a forgotten memory used must not stay in the stored vocabulary.
        return self._select(keep)._pruned(force=True)

    def _select(self, keep: Bool) -> SearchIndex:
        lengths = np.diff(self._doc_ptr)
        entry_keep = np.repeat(keep, lengths)
        doc_ptr = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(lengths[keep], out=doc_ptr[1:])
        dropped = np.flatnonzero(~keep)
        if len(dropped) <= 1024:  # few deletions: copy the list and delete in place (memmove, no per-id work)
            ids = list(self._ids)
            for i in dropped[::-1].tolist():
                del ids[i]
        else:
            ids = [self._ids[i] for i in np.flatnonzero(keep).tolist()]
        return self._replace(
            ids=ids,
            doc_ptr=doc_ptr,
            terms=self._terms[entry_keep],
            tf_text=self._tf_text[entry_keep],
            tf_ctx=self._tf_ctx[entry_keep],
            len_text=self._len_text[keep],
            len_ctx=self._len_ctx[keep],
            vectors=None if self._vectors is None else self._vectors[keep],
            scales=None if self._scales is None else self._scales[keep],
        )

    @classmethod
    def combine(cls, parts: Sequence[SearchIndex]) -> SearchIndex:
        """One index over all ``parts`` (e.g. a snapshot and the segments written since); for an id in several
        parts the last part wins. Costs array concatenation and a vocabulary merge of the smaller parts, no
        re-tokenising. Vectors come from the model of the last part that has vectors; documents of parts
        without vectors, or of another model, keep none (lexical only) and are listed by ``missing_vectors``."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        # later parts win: drop, from each part, the ids that a later part has
        keeps: list[Bool | None] = [None] * len(parts)
        seen: set[str] = set()
        for k in range(len(parts) - 1, -1, -1):
            part = parts[k]
            if seen and not seen.isdisjoint(part._ids):  # parts seldom share ids: one C-level pass says so
                positions = part._position_map() if len(seen) < len(part) else None
                if positions is not None:
                    drop = [positions[i] for i in seen if i in positions]
                else:
                    drop = [i for i, doc_id in enumerate(part._ids) if doc_id in seen]
                if drop:
                    keep = np.ones(len(part), dtype=bool)
                    keep[drop] = False
                    keeps[k] = keep
            if k:
                seen.update(part._ids)
        selected = [p if keep is None else p._select(keep) for p, keep in zip(parts, keeps, strict=True)]
        selected = [p for p in selected if len(p)]
        if len(selected) == 1:
            return selected[0]
        pruned = any(keep is not None for keep in keeps)
        if not pruned and _PartedIndex.fits(selected):
            return _PartedIndex(selected)
        return cls._concatenate(selected, pruned=pruned)

    @classmethod
    def _concatenate(cls, selected: Sequence[SearchIndex], *, pruned: bool) -> SearchIndex:
        """One index of the documents of ``selected`` (no id in two of them), in their order; with ``pruned``,
        without the vocabulary terms no document uses any more."""
        # vocabulary: extend the largest part's vocabulary with the others' new terms
        base = max(range(len(selected)), key=lambda k: len(selected[k]._vocab))
        vocab = list(selected[base]._vocab)
        term_ids = dict(selected[base]._term_map())
        term_arrays: list[I32] = []
        for k, part in enumerate(selected):
            if k == base:
                term_arrays.append(part._terms)
                continue
            # new terms first, then every term's id: loops in C (a cold search at 100,000 memories merges some
            # 75,000 terms of three parts' vocabularies)
            new_terms = [term for term in dict.fromkeys(part._vocab) if term not in term_ids]
            term_ids.update(zip(new_terms, range(len(vocab), len(vocab) + len(new_terms)), strict=True))
            vocab += new_terms
            mapping = np.fromiter(map(term_ids.__getitem__, part._vocab), dtype=np.int32, count=len(part._vocab))
            term_arrays.append(mapping[part._terms])

        lengths = np.concatenate([np.diff(p._doc_ptr) for p in selected])
        doc_ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_ptr[1:])
        ids = [doc_id for p in selected for doc_id in p._ids]

        vectors: I8 | None = None
        scales: F32 | None = None
        with_vectors = [p for p in selected if p._vectors is not None]
        model = with_vectors[-1]._model if with_vectors else None
        if with_vectors:
            dim = with_vectors[-1].dim
            blocks: list[I8] = []
            scale_blocks: list[F32] = []
            for p in selected:
                if p._vectors is not None and p._scales is not None and p._model == model and p.dim == dim:
                    blocks.append(p._vectors)
                    scale_blocks.append(p._scales)
                else:
                    if p._vectors is not None:
                        logger.warning(
                            "search index part of model %s (%d dims) combined into one of %s (%d dims): "
                            "its %d documents lose their vectors",
                            p._model,
                            p.dim,
                            model,
                            dim,
                            len(p),
                        )
                    blocks.append(np.zeros((len(p), dim), dtype=np.int8))
                    scale_blocks.append(np.zeros(len(p), dtype=np.float32))
            vectors = np.concatenate(blocks)
            scales = np.concatenate(scale_blocks)

        combined = cls(
            ids,
            vocab,
            doc_ptr,
            np.concatenate(term_arrays),
            np.concatenate([p._tf_text for p in selected]),
            np.concatenate([p._tf_ctx for p in selected]),
            np.concatenate([p._len_text for p in selected]),
            np.concatenate([p._len_ctx for p in selected]),
            vectors,
            scales,
            model,
        )
        combined._term_ids = term_ids
        # an id replaced by a later part may leave terms no document uses; check only then (a bincount)
        return combined._pruned() if pruned else combined

    def _pruned(self, *, force: bool = False) -> SearchIndex:
        """Drop vocabulary terms no document uses any more: always with ``force`` (forgetting), else when they
        are many (after merges)."""
        used = np.bincount(self._terms, minlength=len(self._vocab)) > 0
        unused = len(self._vocab) - int(used.sum())
        if unused == 0 or (not force and unused < max(1024, len(self._vocab) // 4)):
            return self
        mapping = np.cumsum(used, dtype=np.int64).astype(np.int32) - 1
        vocab = [term for term, keep in zip(self._vocab, used.tolist(), strict=True) if keep]
        return self._replace(vocab=vocab, terms=mapping[self._terms])

    # ----------------------------------------------------------------------------------------------------------
    # Serialisation (npz of plain arrays + a JSON header; never pickle)
    # ----------------------------------------------------------------------------------------------------------

    def to_bytes(self, compress: bool = False) -> bytes:
        """The index as bytes (``stored``: an ``.npz`` of plain arrays and a JSON header)."""
        arrays: dict[str, Any] = {
            "doc_ptr": self._doc_ptr,
            "terms": self._terms,
            "tf_text": self._tf_text,
            "tf_ctx": self._tf_ctx,
            "len_text": self._len_text,
            "len_ctx": self._len_ctx,
        }
        if self._vectors is not None and self._scales is not None:
            arrays["vectors"] = self._vectors
            arrays["scales"] = self._scales
        # the term-major order of the entries, so that a reader's first search does not sort them (a reader that
        # does not know it ignores it)
        arrays["term_order"] = self._term_order()
        return stored.dump(self._model, self._ids, self._vocab, arrays, compress=compress)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> SearchIndex:
        """The index ``to_bytes`` wrote (compressed or not). ValueError when ``data`` is not one. The arrays of an
        uncompressed archive are views into ``data`` (read-only; ``data`` stays alive with them), not copies."""
        header, arrays = stored.load(data)
        return cls(
            header["ids"],
            header["vocab"],
            arrays["doc_ptr"],
            arrays["terms"],
            arrays["tf_text"],
            arrays["tf_ctx"],
            arrays["len_text"],
            arrays["len_ctx"],
            arrays.get("vectors"),
            arrays.get("scales"),
            header.get("model"),
            arrays.get("term_order"),
        )


class _PartedIndex(SearchIndex):
    """The combination of parts that share no document id, searched through its parts: what ``combine`` returns
    for a cold search's snapshot and segments. A search asks for the postings of its few terms (each part's,
    concatenated: the same arrays a combined index's postings would give, documents ascending) and scores the
    vectors part by part, so no vocabulary is merged, no postings of every term are built and no vector is
    copied; what needs whole arrays (forgetting, serialising, feedback, a merge) reads them from the one index
    built of the parts on first use (``_full``). Its documents, lengths and scales are the parts', in order."""

    # what only the whole index has: read from it (``__getattr__`` is consulted only for attributes this object
    # does not hold)
    _WHOLE = frozenset({"_vocab", "_doc_ptr", "_terms", "_tf_text", "_tf_ctx", "_vectors"})

    _parts: list[SearchIndex]

    def __init__(self, parts: Sequence[SearchIndex]) -> None:  # not super().__init__: it takes the whole arrays
        flat: list[SearchIndex] = []
        for part in parts:
            flat += part._parts if isinstance(part, _PartedIndex) else [part]
        self._parts = flat
        self._offsets = [0]
        for part in flat:
            self._offsets.append(self._offsets[-1] + len(part))
        self._ids = [doc_id for part in flat for doc_id in part._ids]
        self._len_text = np.concatenate([p._len_text for p in flat])
        self._len_ctx = np.concatenate([p._len_ctx for p in flat])
        self._model = flat[-1]._model
        self._scales = None if self._model is None else np.concatenate([p._scales for p in flat])  # type: ignore[misc]
        self._positions = None
        self._term_ptr = None
        self._norms = {}
        self._whole: SearchIndex | None = None

    @staticmethod
    def fits(parts: Sequence[SearchIndex]) -> bool:
        """Whether ``parts`` (sharing no id) can be searched as they are: all with vectors of one model and
        dimension, or none with vectors (a mix loses some parts' vectors: ``combine`` copies those)."""
        models = {(p._model, p.dim) for p in parts}
        return len(models) == 1

    def __getattr__(self, name: str) -> Any:
        if name in _PartedIndex._WHOLE:
            return getattr(self._full(), name)
        raise AttributeError(name)

    def _full(self) -> SearchIndex:
        whole = self._whole
        if whole is None:
            whole = SearchIndex._concatenate(self._parts, pruned=False)
            whole._order = self._merged_order(whole)
            self._whole = whole
        return whole

    def _merged_order(self, whole: SearchIndex) -> I32:
        """The term order of ``whole`` (the parts' entries in order, their terms renumbered) from the parts' own:
        within a term, part after part, each part's entries already by document. A merge's snapshot stores it
        without sorting the 1.75 million entries of 100,000 memories."""
        term_map = whole._term_map()
        ptr = whole._ptr()
        order = np.empty(len(whole._terms), dtype=np.int32)
        start = ptr[:-1].copy()  # where the next part's entries of each term go
        entry_offset = 0
        for part in self._parts:
            mapping = np.fromiter(map(term_map.__getitem__, part._vocab), dtype=np.int64, count=len(part._vocab))
            local_order = part._term_order()
            local_ptr = part._ptr()
            local_terms = part._terms[local_order]  # each entry's term, in the part's term order
            rank = np.arange(len(local_order), dtype=np.int64) - local_ptr[local_terms]
            order[start[mapping[local_terms]] + rank] = local_order + np.int32(entry_offset)
            start[mapping] += np.diff(local_ptr)
            entry_offset += len(part._terms)
        return order

    def __repr__(self) -> str:
        return f"SearchIndex(docs={len(self)}, parts={len(self._parts)}, model={self._model!r})"

    # by term id: the whole index's ids (feedback, tests)
    def _term_map(self) -> dict[str, int]:
        return self._full()._term_map()

    def _ptr(self) -> I64:
        return self._full()._ptr()

    def _postings_of(self, term: int) -> tuple[I32, U16, U16]:
        return self._full()._postings_of(term)

    def _inverted(self) -> tuple[I64, I32, U16, U16]:
        return self._full()._inverted()

    def _term_order(self) -> I32:
        return self._full()._term_order()

    @property
    def dim(self) -> int:
        return self._parts[-1].dim

    def _has_token(self, token: str) -> bool:
        return any(part._has_token(token) for part in self._parts)

    def _token_df(self, token: str) -> int:
        return sum(part._token_df(token) for part in self._parts)

    def _token_postings(self, token: str) -> tuple[I32, U16, U16] | None:
        found = [
            (offset, postings)
            for offset, part in zip(self._offsets, self._parts, strict=False)
            if (postings := part._token_postings(token)) is not None
        ]
        if not found:
            return None
        docs = np.concatenate([postings[0] + np.int32(offset) for offset, postings in found])
        return docs, np.concatenate([p[1] for _, p in found]), np.concatenate([p[2] for _, p in found])

    def _vector_blocks(self) -> list[tuple[int, I8]]:
        blocks = [(offset, part._vectors) for offset, part in zip(self._offsets, self._parts, strict=False)]
        return [(offset, vectors) for offset, vectors in blocks if vectors is not None]  # all, when searched
