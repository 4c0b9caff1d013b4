"""Second-pass ranking experiments (bench/tuning/feedback.py): pseudo-relevance feedback and diversification,
through the index's ``SecondPass`` seam."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agent_memory.search import Doc, SearchConfig, SearchIndex, tokenize
from agent_memory.search.index import _PartedIndex
from bench.tuning.feedback import Feedback, SecondPassConfig, diversify, expansion_terms
from tests.support.embedders import HashEmbedder
from tests.unit.search_corpus import DOCS, ids

FEEDBACK = SecondPassConfig(feedback_docs=1, feedback_terms=5, feedback_weight=0.5)


def search(index: SearchIndex, query: str, k: int, embedder: Any = None, **kwargs: Any) -> list[tuple[str, float]]:
    """``index.search`` with the second pass of the ``SecondPassConfig`` fields among ``kwargs``."""
    names = SecondPassConfig.__dataclass_fields__
    second = SecondPassConfig(**{k: v for k, v in kwargs.items() if k in names})
    config = SearchConfig(**{k: v for k, v in kwargs.items() if k not in names})
    return index.search(query, k, embedder, config=config, second_pass=Feedback(second))


# "adopt" finds only a1; a2 shares a1's other words (agency, interview, paperwork) but not the query's; the
# others share nothing with either.
ADOPTION = [
    Doc("a1", "Caroline: the adoption agency interview and the paperwork went well"),
    Doc("x1", "Melanie: we went camping in the mountains"),
    Doc("x2", "Melanie: my pottery class made bowls"),
    Doc("x3", "Caroline: I ran a charity race for mental health"),
    Doc("a2", "Caroline: finished the agency paperwork after the interview"),
]


def test_expansion_terms_come_from_the_seed_memories_only_and_never_repeat_the_query() -> None:
    index = SearchIndex.build([*ADOPTION, Doc("other", "violin lessons every spring")], None)
    seed = np.array([0], dtype=np.int64)  # a1
    terms = expansion_terms(index, "Caroline adoption", seed, np.ones(1, dtype=np.float32), 10)
    words = set(terms)
    assert words and words <= set(tokenize(ADOPTION[0].text)) - set(tokenize("Caroline adoption"))
    assert not {w for w in words if w.startswith("@")}  # tags never expand
    assert abs(sum(terms.values()) - 1.0) < 1e-6
    assert len(expansion_terms(index, "adoption", seed, np.ones(1, dtype=np.float32), 2)) == 2


def test_expansion_terms_of_a_user_never_come_from_another_users_index() -> None:
    mine = SearchIndex.build(ADOPTION, None)
    theirs = SearchIndex.build([Doc("t", "adoption violin orchestra rehearsal")], None)
    seeds = np.array([0], dtype=np.int64)
    words = set(expansion_terms(mine, "adoption", seeds, np.ones(1, dtype=np.float32), 10))
    assert "violin" not in words and "orchestra" not in words
    assert set(expansion_terms(theirs, "adoption", seeds, np.ones(1, np.float32), 10)) == {
        "violin",
        "orchestra",
        "rehears",
    }


def test_feedback_brings_up_a_memory_that_shares_the_top_hits_words() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(ADOPTION, embedder)
    plain = ids(index.search("adoption", 5, embedder, config=SearchConfig(dense_weight=0.0)))
    fed = ids(search(index, "adoption", 5, embedder, dense_weight=0.0, **_feedback()))
    assert plain[0] == fed[0] == "a1"
    assert plain[1] != "a2" and fed[1] == "a2"


def test_feedback_keeps_each_memorys_calibrated_score() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(ADOPTION, embedder)
    plain = dict(index.search("adoption", 5, embedder))
    fed = dict(index.search("adoption", 5, embedder, config=SearchConfig(), second_pass=Feedback(FEEDBACK)))
    assert set(plain) == set(fed) and plain == fed
    rocchio = SecondPassConfig(feedback_docs=1, feedback_dense=0.5)
    assert dict(index.search("adoption", 5, embedder, config=SearchConfig(), second_pass=Feedback(rocchio))) == plain


def test_dense_feedback_prefers_memories_like_the_top_hit() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(ADOPTION, embedder)
    assert ids(search(index, "adoption", 5, embedder, dense_weight=0.0, feedback_docs=1, feedback_dense=1.0))[:2] == [
        "a1",
        "a2",
    ]


def test_lexical_feedback_still_needs_a_query_word() -> None:
    index = SearchIndex.build(ADOPTION, None)
    assert ids(index.search("adoption", 5, config=SearchConfig(), second_pass=Feedback(FEEDBACK))) == ["a1"]


def test_diversify_keeps_the_top_hit_first_and_demotes_a_near_duplicate() -> None:
    docs = [
        Doc("d1", "Melanie: we went camping at the lake with the kids"),
        Doc("d2", "Melanie: we went camping at the lake with the kids"),  # the same words: cosine 1
        Doc("d3", "Melanie: the kids loved the lake"),
        Doc("d4", "Caroline: my pottery class made bowls"),
    ]
    embedder = HashEmbedder()
    index = SearchIndex.build(docs, embedder)
    plain = ids(index.search("camping lake kids", 4, embedder))
    assert plain == ["d1", "d2", "d3", "d4"]
    diverse = ids(search(index, "camping lake kids", 4, embedder, diversity=2.0))
    assert diverse[0] == "d1" and diverse[-1] == "d2"  # the duplicate of the top hit goes last
    assert sorted(diverse) == sorted(plain)


def test_diversify_without_vectors_or_penalty_is_a_cut() -> None:
    index = SearchIndex.build(DOCS, None)
    candidates = np.array([3, 1, 2], dtype=np.int64)
    ranking = np.ones(len(index), dtype=np.float32)
    assert diversify(index, ranking, candidates, 2, 1.0).tolist() == [3, 1]
    with_vectors = SearchIndex.build(DOCS, HashEmbedder())
    assert diversify(with_vectors, ranking, candidates, 2, 0.0).tolist() == [3, 1]


@pytest.mark.parametrize(
    "bad", [{"feedback_docs": -1}, {"feedback_weight": -0.1}, {"diversity": -1.0}, {"diversity_depth": -5}]
)
def test_negative_second_pass_parameters_are_rejected(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SecondPassConfig(**bad)  # type: ignore[arg-type]


def _feedback() -> dict[str, float]:
    return {"feedback_docs": 1, "feedback_terms": 5, "feedback_weight": 0.5}


def test_feedback_below_the_head_keeps_the_first_pass_head_in_place() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(ADOPTION, embedder)
    base = SearchConfig(dense_weight=0.0)
    plain = ids(index.search("adoption", 5, embedder, config=base))
    held = search(index, "adoption", 5, embedder, dense_weight=0.0, feedback_keep=5, **_feedback())
    assert ids(held) == plain
    tail = search(index, "adoption", 5, embedder, dense_weight=0.0, feedback_keep=1, **_feedback())
    assert ids(tail)[:2] == ["a1", "a2"]


def test_the_layers_config_has_no_second_pass_fields() -> None:
    """The service ships only what runs: the experiments' parameters are bench's."""
    for name in SecondPassConfig.__dataclass_fields__:
        with pytest.raises(TypeError):
            SearchConfig(**{name: 1})  # type: ignore[arg-type]


def test_a_second_pass_over_combined_parts_ranks_as_over_the_one_index_of_them() -> None:
    embedder = HashEmbedder()
    docs = [*ADOPTION, *DOCS]
    whole = SearchIndex.build(docs, embedder)
    combined = SearchIndex.combine([SearchIndex.build(docs[:4], embedder), SearchIndex.build(docs[4:], embedder)])
    assert isinstance(combined, _PartedIndex)
    second = Feedback(SecondPassConfig(feedback_docs=3, feedback_weight=0.3, feedback_dense=0.2, diversity=0.2))
    for query in ("adoption", "camping with the kids", "When did Melanie paint?"):
        for config in (SearchConfig(), SearchConfig(mode="lexical")):
            assert combined.search(query, 5, embedder, config=config, second_pass=second) == whole.search(
                query, 5, embedder, config=config, second_pass=second
            )
