"""The query's embedding with the memories' authors named "they" (``SearchConfig.dense_names``)."""

from __future__ import annotations

import pytest

from agent_memory.search import Doc, SearchConfig, SearchIndex
from agent_memory.search.lexical import neutral_names
from agent_memory.search.types import DEFAULT_CONFIG
from tests.support.embedders import RecordingHashEmbedder

NAMES = {"melanie", "caroline", "ann", "lee", "dr"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What do Melanie's kids like?", "What do their kids like?"),
        ("When did Caroline meet Jean?", "When did they meet Jean?"),  # Jean is no author: kept
        ("What did Caroline say about Melanie’s store?", "What did they say about their store?"),
        ("Did Dr. Ann Lee's cat see Ann?", "Did their cat see they?"),  # one pronoun for a whole name
        ("Caroline and Melanie went", "they and they went"),
        ("melanie", "they"),
        ("Melanies and Carolines", "Melanies and Carolines"),  # not the name as a word
        ("What are the kids' hobbies?", "What are the kids' hobbies?"),
        ("", ""),
    ],
)
def test_neutral_names(text: str, expected: str) -> None:
    assert neutral_names(text, NAMES) == expected


def test_neutral_names_without_names_is_the_text() -> None:
    assert neutral_names("What do Melanie's kids like?", []) == "What do Melanie's kids like?"


# The greeting holds the name twice and nothing the question asks about; the answer holds the name once among
# other words. With the name in the query's vector the greeting is the nearest memory, without it the answer.
DOCS = [
    Doc("greeting", "Caroline: Hey Melanie, Melanie!", author="Caroline"),
    Doc("answer", "Melanie: the kids love dinosaurs and bones and museums", author="Melanie"),
]
QUERY = "What do Melanie's kids like?"


def test_the_querys_embedding_names_the_author_they_and_that_changes_the_dense_order() -> None:
    embedder = RecordingHashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    kept = SearchConfig(mode="dense", dense_names="keep")
    neutral = SearchConfig(mode="dense", dense_names="neutral")

    assert [i for i, _ in index.search(QUERY, 2, embedder, config=kept)] == ["greeting", "answer"]
    assert embedder.seen[-1] == QUERY
    assert [i for i, _ in index.search(QUERY, 2, embedder, config=neutral)] == ["answer", "greeting"]
    assert embedder.seen[-1] == "What do their kids like?"


def test_the_service_searches_with_neutral_names_and_the_lexical_side_keeps_the_query() -> None:
    assert DEFAULT_CONFIG.dense_names == "neutral"
    assert SearchConfig().dense_names == "keep"  # components start from the query as typed (bench.quality.locomo)
    embedder = RecordingHashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    index.search(QUERY, 2, embedder)
    assert embedder.seen[-1] == "What do their kids like?"
    # the name still counts as a word, and a name that is no author's is left alone
    assert index.lexical_scores(QUERY)[0] > 0
    index.search("What does Jean like?", 2, embedder)
    assert embedder.seen[-1] == "What does Jean like?"
    # the cosine the calibration is fitted on (bench.tuning.calibrate) is the query's as typed
    index.dense_scores(QUERY, embedder)
    assert embedder.seen[-1] == QUERY


def test_the_score_and_the_cut_keep_the_cosine_of_the_query_as_typed() -> None:
    embedder = RecordingHashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    kept = dict(index.search(QUERY, 2, embedder, config=SearchConfig(dense_names="keep"), min_score=0.0))
    seen = len(embedder.seen)
    neutral = dict(index.search(QUERY, 2, embedder, config=SearchConfig(dense_names="neutral"), min_score=0.0))
    assert embedder.seen[seen:] == [QUERY, "What do their kids like?"]  # one call, both queries
    assert neutral == kept  # the same memories, each with the same score: only the order may differ
    # the cut compares the same scores: a cut between the two memories' scores keeps the same one either way
    low, high = sorted(kept.values())
    cut = round((low + high) / 2, 4)
    for names in ("keep", "neutral"):
        found = index.search(QUERY, 2, embedder, config=SearchConfig(dense_names=names), min_score=cut)
        assert [i for i, _ in found] == [max(kept, key=lambda k: kept[k])]


def test_a_role_author_is_never_rewritten() -> None:
    embedder = RecordingHashEmbedder()
    index = SearchIndex.build([Doc("u", "user: I like the model trains", author="user")], embedder)
    index.search("What does the user like about the model?", 1, embedder)
    assert embedder.seen[-1] == "What does the user like about the model?"


def test_unknown_dense_names_is_rejected() -> None:
    with pytest.raises(ValueError, match="dense_names"):
        SearchConfig(dense_names="drop")
