"""The learned rerank below the top 5 (``SearchConfig.rerank_depth``, ``search.scoring.RERANK``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from agent_memory.search import Doc, SearchConfig, SearchIndex, scoring
from agent_memory.search.scoring import RERANK_FEATURES, Rerank
from agent_memory.search.types import DEFAULT_CONFIG
from tests.support.embedders import RecordingHashEmbedder

WORDS = [
    "garden",
    "tomato",
    "soil",
    "seeds",
    "water",
    "sunny",
    "rain",
    "dog",
    "walk",
    "park",
    "painting",
    "lake",
    "sunrise",
    "camping",
    "mountains",
    "kids",
    "school",
    "book",
    "library",
    "guitar",
    "concert",
    "race",
    "charity",
    "running",
    "adoption",
    "agency",
    "home",
    "car",
    "bus",
    "highway",
    "work",
]
AUTHORS = ("Caroline", "Melanie")


def corpus(size: int = 80, seed: int = 13) -> list[Doc]:
    """Memories of two authors, of one to twenty words each, so that candidates differ in length, words and
    author: a deterministic stand-in for a conversation."""
    rng = random.Random(seed)
    docs = []
    for i in range(size):
        author = AUTHORS[i % 2]
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 20)))
        docs.append(Doc(f"m{i:02d}", f"{author}: {words}.", author=author, timestamp=1_683_504_000.0 + 86_400 * i))
    return docs


QUERIES = [
    "What did Caroline plant in the garden?",
    "When did Melanie go camping in the mountains?",
    "Which book did the kids read at the library?",
    "How did Caroline get to work when the car broke?",
    "What does Melanie paint at the lake?",
    "Did they run the charity race in the rain?",
]

FIRST_PASS = dataclasses.replace(DEFAULT_CONFIG, rerank_depth=0)


@pytest.fixture(scope="module")
def embedder() -> RecordingHashEmbedder:
    return RecordingHashEmbedder()


@pytest.fixture(scope="module")
def index(embedder: RecordingHashEmbedder) -> SearchIndex:
    return SearchIndex.build(corpus(), embedder)


def test_the_service_reranks_below_the_top_5_by_default() -> None:
    assert DEFAULT_CONFIG.rerank_depth > 10 and DEFAULT_CONFIG.rerank_keep == 5
    assert len(scoring.RERANK.weights) == len(RERANK_FEATURES) and RERANK_FEATURES[-1] == "bias"


def test_a_model_preferring_long_texts_orders_positions_6_on_by_length_and_leaves_the_top_5(
    index: SearchIndex, embedder: RecordingHashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rerank is wired as documented: with a model that only reads the text's length, the first pass's top
    5 stay where they were and the rest of its top 30 come in order of length, longest first."""
    weights = tuple(1.0 if name == "log_len" else 0.0 for name in RERANK_FEATURES)
    monkeypatch.setattr(scoring, "RERANK", Rerank(weights=weights))
    config = dataclasses.replace(DEFAULT_CONFIG, rerank_depth=30)
    length = {doc.id: len(doc.text.split()) for doc in corpus()}
    for query in QUERIES:
        first = [i for i, _ in index.search(query, 30, embedder, config=FIRST_PASS, min_score=0)]
        reranked = [i for i, _ in index.search(query, 10, embedder, config=config, min_score=0)]
        assert reranked[:5] == first[:5]
        tail = sorted(first[5:], key=lambda i: -length[i])  # stable: equal lengths keep the first pass's order
        assert reranked[5:] == tail[:5]
        assert reranked[5:] != first[5:10]  # the case reorders: nothing holds by accident


def test_the_shipped_rerank_reorders_below_the_top_5_and_never_the_top_5(
    index: SearchIndex, embedder: RecordingHashEmbedder
) -> None:
    moved = 0
    for query in QUERIES:
        first = [i for i, _ in index.search(query, 50, embedder, config=FIRST_PASS)]
        reranked = [i for i, _ in index.search(query, 10, embedder)]
        assert reranked[:5] == first[:5]
        assert set(reranked[5:]) <= set(first[5:])  # from the first pass's candidates above the cut only
        moved += reranked[5:] != first[5:10]
    assert moved >= 3


def test_top_k_of_5_or_fewer_is_the_first_pass(index: SearchIndex, embedder: RecordingHashEmbedder) -> None:
    for query in QUERIES:
        for k in (1, 5):
            assert index.search(query, k, embedder) == index.search(query, k, embedder, config=FIRST_PASS)


def test_scores_never_rise_below_the_head_never_exceed_a_memorys_own_and_hold_the_cut(
    index: SearchIndex, embedder: RecordingHashEmbedder
) -> None:
    cut = scoring.HYBRID_CALIBRATION.min_score
    for query in QUERIES:
        own = dict(index.search(query, len(index), embedder, config=FIRST_PASS, min_score=0))
        hits = index.search(query, 10, embedder)
        head, tail = hits[:5], hits[5:]
        assert tail, query
        assert [s for _, s in head] == [own[i] for i, _ in head]  # the head's scores are its own, as before
        shown = [s for _, s in hits[4:]]
        assert shown == sorted(shown, reverse=True)  # from the 5th on, non-increasing
        assert all(cut <= s <= own[i] for i, s in tail)
        # a client's own min_score still means what it says: nothing below it comes back
        strict = index.search(query, 10, embedder, min_score=0.2)
        assert all(own[i] >= 0.2 and s >= 0.2 for i, s in strict)


def test_off_topic_queries_are_still_answered_with_nothing(index: SearchIndex, embedder: RecordingHashEmbedder) -> None:
    for query in ("What is the capital of Australia?", "Explain quantum chromodynamics", "zebra xylophone"):
        assert index.search(query, 10, embedder, config=FIRST_PASS, min_score=None) == []
        assert index.search(query, 10, embedder, min_score=None) == []


def test_lexical_search_is_not_reranked(index: SearchIndex) -> None:
    for query in QUERIES:
        assert index.search(query, 10, None) == index.search(query, 10, None, config=FIRST_PASS)


def test_excluded_memories_stay_out_of_the_reranked_tail(index: SearchIndex, embedder: RecordingHashEmbedder) -> None:
    query = QUERIES[0]
    hits = [i for i, _ in index.search(query, 10, embedder)]
    gone = frozenset(hits[5:])
    again = [i for i, _ in index.search(query, 10, embedder, exclude=gone)]
    assert not gone & set(again) and again[:5] == hits[:5]


def test_rerank_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="rerank"):
        SearchConfig(rerank_depth=-1)
    with pytest.raises(ValueError, match="rerank"):
        SearchConfig(rerank_keep=-1)
