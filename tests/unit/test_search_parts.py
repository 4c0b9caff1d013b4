"""The cold search's index work: a stored index carries its term order, so that its first search
gathers a query term's postings instead of sorting every entry; and ``combine`` of parts that share no id
searches them in place (``_PartedIndex``) instead of merging vocabularies, postings and vectors, with the same
rankings and scores, to the bit, as the one index built of them."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

from agent_memory.search import Doc, SearchConfig, SearchIndex, arrays
from agent_memory.search.index import _PartedIndex
from agent_memory.search.types import DEFAULT_CONFIG
from tests.support.embedders import HashEmbedder

WORDS = [
    "trip",
    "flight",
    "hotel",
    "lisbon",
    "porto",
    "sister",
    "cat",
    "dog",
    "allergy",
    "peanuts",
    "cello",
    "piano",
    "marathon",
    "garden",
    "tomatoes",
]
AUTHORS = ["Caroline", "Melanie", "Joanna"]
QUERIES = [
    "cat dog",
    "hotel in Lisbon",
    "What does Caroline play, cello or piano?",
    "When did Melanie go on a trip?",
    "garden tomatoes in May 2023",
    "peanuts allergy of Joanna",
    "nothing matches this xyzzy",
]
CONFIGS = [
    DEFAULT_CONFIG,
    SearchConfig(mode="lexical"),
    SearchConfig(mode="dense"),
    SearchConfig(fusion="rrf"),
]


def _docs(start: int, count: int, seed: int) -> list[Doc]:
    rng = random.Random(seed)
    return [
        Doc(
            f"m{i}",
            f"{rng.choice(AUTHORS)}: " + " ".join(rng.choice(WORDS) for _ in range(8)) + rng.choice(["", " yesterday"]),
            context=" ".join(rng.choice(WORDS) for _ in range(4)),
            author=rng.choice(AUTHORS),
            timestamp=1.68e9 + rng.random() * 3e7,
        )
        for i in range(start, start + count)
    ]


def _stored(index: SearchIndex) -> SearchIndex:
    return SearchIndex.from_bytes(index.to_bytes())


def _without_term_order(data: bytes) -> bytes:
    """The archive as written before the term order was stored."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files if name != "term_order"}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _results(index: SearchIndex, embedder: HashEmbedder, configs: list[SearchConfig] = CONFIGS) -> list[object]:
    out: list[object] = []
    for config in configs:
        for query in QUERIES:
            out.append(index.search(query, 5, embedder, config=config, min_score=None))
            out.append(index.search(query, 5, embedder, frozenset({"m3", "m40"}), config=config))
            # past the head: the learned rerank's features too (DEFAULT_CONFIG), from the parts' postings
            out.append(index.search(query, 12, embedder, config=config, min_score=None))
    return out


def test_a_stored_index_searches_without_sorting_its_entries() -> None:
    embedder = HashEmbedder()
    built = SearchIndex.build(_docs(0, 120, 1), embedder)
    expected = _results(built, embedder)  # built in memory: its first search sorts
    stored = _stored(built)
    assert stored._order is not None and stored._postings is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrays, "_stable_argsort", lambda *a: pytest.fail("sorted the entries"))
        assert stored.search(QUERIES[2], 5, embedder) == built.search(QUERIES[2], 5, embedder)
        assert stored._postings is None  # the query's terms were gathered from the stored order
        # after some searches the postings of every term are built from the order, still without a sort
        assert _results(stored, embedder) == expected
        assert stored._postings is not None
        assert all(np.array_equal(a, b) for a, b in zip(stored._postings, built._inverted(), strict=True))


def test_an_index_stored_before_the_term_order_reads_and_searches_the_same() -> None:
    embedder = HashEmbedder()
    built = SearchIndex.build(_docs(0, 120, 2), embedder)
    old = SearchIndex.from_bytes(_without_term_order(built.to_bytes()))
    assert old._order is None
    assert _results(old, embedder) == _results(built, embedder)
    assert old._postings is not None  # built on its first search, as before
    # and written again, it carries the order
    assert _stored(old)._order is not None


def test_a_term_order_that_points_outside_the_entries_is_refused() -> None:
    built = SearchIndex.build(_docs(0, 10, 3))
    with np.load(io.BytesIO(built.to_bytes()), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["term_order"] = arrays["term_order"] + np.int32(len(arrays["terms"]))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with pytest.raises(ValueError, match="term_order"):
        SearchIndex.from_bytes(buffer.getvalue())


def test_combined_stored_parts_are_searched_in_place_as_the_one_index_of_them() -> None:
    embedder = HashEmbedder()
    docs = _docs(0, 200, 4)
    parts = [_stored(SearchIndex.build(docs[s : s + 50], embedder)) for s in range(0, 200, 50)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrays, "_stable_argsort", lambda *a: pytest.fail("sorted the entries"))
        patch.setattr(SearchIndex, "_concatenate", lambda *a, **k: pytest.fail("concatenated the parts"))
        combined = SearchIndex.combine(parts)
        assert isinstance(combined, _PartedIndex) and combined._whole is None
        assert combined.ids == [d.id for d in docs] and len(combined) == 200 and combined.dim == embedder.dim
        got = _results(combined, embedder, CONFIGS)
        got_scores = [combined.lexical_match(q) for q in QUERIES] + [
            combined.dense_scores(q, embedder) for q in QUERIES
        ]
    # no vocabulary merged, no vector copied; the parts' postings built from their stored order (no sort)
    assert combined._whole is None
    for index in (SearchIndex._concatenate(parts, pruned=False), SearchIndex.build(docs, embedder)):
        assert _results(index, embedder, CONFIGS) == got
        whole_scores = [index.lexical_match(q) for q in QUERIES] + [index.dense_scores(q, embedder) for q in QUERIES]
        for mine, theirs in zip(got_scores, whole_scores, strict=True):
            assert mine is not None and theirs is not None and np.array_equal(mine, theirs)


def test_a_parted_index_ranks_and_scores_as_the_one_index_of_its_parts() -> None:
    embedder = HashEmbedder()
    docs = _docs(0, 200, 5)
    parts = [_stored(SearchIndex.build(docs[s : s + 50], embedder)) for s in range(0, 200, 50)]
    combined = SearchIndex.combine(parts)
    assert isinstance(combined, _PartedIndex)
    assert _results(combined, embedder) == _results(SearchIndex.build(docs, embedder), embedder)


def test_a_parted_index_forgets_stores_and_combines_as_one_index() -> None:
    embedder = HashEmbedder()
    docs = _docs(0, 160, 6)
    parts = [SearchIndex.build(docs[s : s + 40], embedder) for s in range(0, 120, 40)]
    combined = SearchIndex.combine(parts)
    assert isinstance(combined, _PartedIndex)
    reference = SearchIndex.build(docs[:120], embedder)

    forgotten = combined.without({"m5", "m77"})
    assert not isinstance(forgotten, _PartedIndex) and "m5" not in forgotten and len(forgotten) == 118
    assert _results(forgotten, embedder) == _results(reference.without({"m5", "m77"}), embedder)

    with pytest.MonkeyPatch.context() as patch:  # the parts' orders are merged, not the entries sorted again
        for part in parts:
            part._term_order()
        patch.setattr(arrays, "_stable_argsort", lambda *a: pytest.fail("sorted the entries"))
        restored = _stored(combined)  # a merge writes the combination as one part
    assert restored._order is not None and np.array_equal(restored._order, reference._term_order())
    assert not isinstance(restored, _PartedIndex) and restored.ids == reference.ids
    assert _results(restored, embedder) == _results(reference, embedder)

    # a save's segment joins the parts (flattened, not nested) ...
    grown = SearchIndex.combine([combined, SearchIndex.build(docs[120:], embedder)])
    assert isinstance(grown, _PartedIndex) and len(grown._parts) == 4
    assert _results(grown, embedder) == _results(SearchIndex.build(docs, embedder), embedder)
    # ... and a segment replacing a memory is combined into one index, the later part winning
    replaced = Doc("m7", "Joanna: a new text about the marathon", author="Joanna")
    replacing = SearchIndex.combine([combined, SearchIndex.build([replaced], embedder)])
    assert not isinstance(replacing, _PartedIndex) and len(replacing) == 120
    assert replacing.search("marathon new text", 1, embedder)[0][0] == "m7"


def test_parts_without_vectors_are_searched_in_place_and_a_mix_is_combined() -> None:
    docs = _docs(0, 90, 7)
    lexical = SearchIndex.combine([SearchIndex.build(docs[s : s + 30]) for s in range(0, 90, 30)])
    assert isinstance(lexical, _PartedIndex) and lexical.model is None and lexical.dim == 0
    assert lexical.missing_vectors() == [d.id for d in docs]
    reference = SearchIndex.build(docs)
    for query in QUERIES:
        assert lexical.search(query, 5, min_score=None) == reference.search(query, 5, min_score=None)
    embedder = HashEmbedder()
    mixed = SearchIndex.combine([SearchIndex.build(docs[:30], embedder), SearchIndex.build(docs[30:])])
    assert not isinstance(mixed, _PartedIndex) and mixed.missing_vectors() == [d.id for d in docs[30:]]


def test_a_merged_term_order_is_the_sorted_one_whichever_part_lends_its_vocabulary() -> None:
    # the last part has the largest vocabulary: the merged index numbers its terms first
    small = [Doc(f"s{i}", f"Caroline: cat dog {i}") for i in range(5)]
    large = _docs(100, 60, 8)
    parts = [SearchIndex.build(small), SearchIndex.build(large[:30]), SearchIndex.build(large[30:])]
    combined = SearchIndex.combine(parts)
    assert isinstance(combined, _PartedIndex)
    whole = combined._full()
    lender = max(parts, key=lambda part: len(part._vocab))
    assert lender is not parts[0] and whole._vocab[: len(lender._vocab)] == lender._vocab
    assert whole._order is not None
    assert np.array_equal(whole._order, arrays._stable_argsort(whole._terms, len(whole._vocab)))
    reference = SearchIndex.build(small + large)
    for query in [*QUERIES, "cat 3"]:
        assert _stored(combined).search(query, 5, min_score=None) == reference.search(query, 5, min_score=None)
