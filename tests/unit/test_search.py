"""Search: tokenizer and stemmer, the hybrid index (build, search, serialisation, combine, without, exclude),
and degradation to lexical search when the embedder fails."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import numpy.typing as npt
import pytest

from agent_memory.providers.embedders import EmbedderError, MiniLMEmbedder
from agent_memory.search import Doc, SearchConfig, SearchIndex, scoring, stored, tokenize
from agent_memory.search.lexical import (
    asked_months,
    author_words,
    mentions_time,
    named_words,
    stem,
    temporal_question,
)
from tests.support.embedders import HashEmbedder, RecordingEmbedder
from tests.unit.search_corpus import DOCS, ids

# --------------------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------------------


class BrokenEmbedder(HashEmbedder):
    """Embeds documents, then fails on every query."""

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self.calls:
            raise EmbedderError("throttled")
        return super().embed(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


# --------------------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------------------


def test_tokenize_drops_stop_words_and_question_words() -> None:
    tokens = tokenize("What did she do when the Support Group met?")
    assert tokens == ["support", "group", "met"]


def test_stems_of_inflections_are_equal() -> None:
    assert tokenize("running") == tokenize("runs") == tokenize("run") == ["run"]
    assert tokenize("adoption agencies") == tokenize("adopt agency")
    assert stem("relational") == "relat" and stem("ponies") == "poni" and stem("sky") == "sky"


def test_tokenize_is_unicode_aware() -> None:
    assert tokenize("Café NAÏVE") == ["cafe", "naiv"]
    assert tokenize("Melanie's kids can't") == ["melani", "kid"]
    assert tokenize("東京都") == ["東京", "京都"]  # CJK runs become overlapping bigrams
    assert tokenize("हिन्दी") == ["हिन्दी"]  # combining vowel signs stay inside the word
    assert tokenize("") == [] and tokenize("the and of") == []


# --------------------------------------------------------------------------------------------------------------
# Build and search
# --------------------------------------------------------------------------------------------------------------


def test_lexical_search_finds_the_right_doc() -> None:
    index = SearchIndex.build(DOCS, None)
    assert len(index) == 6 and index.ids == [d.id for d in DOCS] and index.model is None
    results = index.search("Which adoption agency did Caroline research?", 3)
    assert ids(results)[0] == "m3"
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(results))
    assert ids(index.search("ran", 5)) == ["m6"]
    assert ids(index.search("she runs", 5)) == ["m6"]  # stemming: "runs" finds "Running"


def test_context_is_searchable_but_weighs_less_than_text() -> None:
    docs = [Doc("a", "Caroline: it was powerful", "Caroline: the support group met"), Doc("b", "support group")]
    results = SearchIndex.build(docs).search("support group", 2)
    assert ids(results) == ["b", "a"]
    lexical_without_context = SearchIndex.build(docs).search("support group", 2, config=SearchConfig(context_weight=0))
    assert ids(lexical_without_context) == ["b"]


def test_build_keeps_the_last_of_duplicate_ids() -> None:
    index = SearchIndex.build([Doc("x", "old camping trip"), Doc("y", "pottery"), Doc("x", "new violin lesson")])
    assert index.ids == ["y", "x"]
    assert index.search("camping", 5) == []
    assert ids(index.search("violin", 5)) == ["x"]


def test_blank_query_and_empty_index_give_nothing() -> None:
    index = SearchIndex.build(DOCS, HashEmbedder())
    assert index.search("", 5, HashEmbedder()) == []
    assert index.search("   \n", 5, HashEmbedder()) == []
    assert index.search("support group", 0, HashEmbedder()) == []
    assert SearchIndex.empty().search("support group", 5) == []
    assert index.search("the of and", 5) == []  # only stop words: no lexical match


def test_hybrid_finds_a_paraphrase_that_lexical_misses(minilm: MiniLMEmbedder) -> None:
    docs = [
        Doc("nuts", "Priya: I can't eat nuts, they make me really sick."),
        Doc("car", "Priya: My car broke down on the highway last Friday."),
        Doc("violin", "Tom: I started learning to play the violin this spring."),
        Doc("group", "Priya: I went to the support group yesterday."),
        Doc("dog", "Tom: We adopted a puppy and named him Max."),
    ]
    index = SearchIndex.build(docs, minilm)
    assert index.model == "minilm" and index.dim == 384
    for query, expected in (("peanut allergy", "nuts"), ("musical instrument lessons", "violin")):
        lexical = ids(index.search(query, 3))
        hybrid = ids(index.search(query, 3, minilm))
        assert expected not in lexical
        assert hybrid[0] == expected
    # and where lexical already finds it, hybrid keeps it first
    assert ids(index.search("support group", 1, minilm)) == ids(index.search("support group", 1)) == ["group"]


def test_dense_and_rrf_modes() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    dense = index.search("charity race", 6, embedder, config=SearchConfig(mode="dense"))
    assert len(dense) == 6 and ids(dense)[0] == "m6"
    rrf = index.search("charity race", 3, embedder, config=SearchConfig(fusion="rrf"))
    assert ids(rrf)[0] == "m6" and all(a[1] >= b[1] for a, b in itertools.pairwise(rrf))
    with pytest.raises(ValueError):
        SearchConfig(mode="fuzzy")


# --------------------------------------------------------------------------------------------------------------
# Serialisation, combine, without, exclude
# --------------------------------------------------------------------------------------------------------------

QUERIES = ["support group", "Caroline adoption", "kids camping", "car bus work", "sunrise painting", "zzz"]


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("with_vectors", [False, True])
def test_to_bytes_from_bytes_round_trip(compress: bool, with_vectors: bool) -> None:
    embedder = HashEmbedder() if with_vectors else None
    index = SearchIndex.build(DOCS, embedder)
    data = index.to_bytes(compress=compress)
    assert b"pickle" not in data
    copy = SearchIndex.from_bytes(data)
    assert copy.ids == index.ids and copy.model == index.model and len(copy) == len(index)
    for query in QUERIES:
        assert copy.search(query, 6, embedder) == index.search(query, 6, embedder)
    assert copy.to_bytes(compress=compress) == data


def test_from_bytes_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        SearchIndex.from_bytes(b"not an index")
    with pytest.raises(ValueError):
        SearchIndex.from_bytes(b"")


def test_vectors_are_int8_with_small_error() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    assert index._vectors is not None and index._vectors.dtype == np.int8
    exact = embedder.embed([stored.embedding_text(d) for d in DOCS]) @ embedder.embed(["kids camping"])[0]
    approx = index.dense_scores("kids camping", embedder)
    assert approx is not None
    np.testing.assert_allclose(approx, exact, atol=0.02)


def test_combine_later_parts_win_for_duplicate_ids() -> None:
    embedder = HashEmbedder()
    snapshot = SearchIndex.build(DOCS, embedder)
    segment = SearchIndex.build([Doc("m4", "Melanie: we sold the tent, no more camping trips"), Doc("m7", "violin")])
    newer = SearchIndex.build([Doc("m7", "Caroline: I started pottery classes")], embedder)
    combined = SearchIndex.combine([snapshot, segment, newer])
    assert combined.ids == ["m1", "m2", "m3", "m5", "m6", "m4", "m7"]
    assert combined.search("violin", 5) == []
    assert ids(combined.search("pottery classes", 1, embedder)) == ["m7"]
    assert ids(combined.search("tent", 5)) == ["m4"]
    assert combined.missing_vectors() == ["m4"]  # the segment was indexed without vectors
    # same results as building everything at once (lexically: the same statistics)
    rebuilt = SearchIndex.build(
        [d for d in DOCS if d.id != "m4"]
        + [
            Doc("m4", "Melanie: we sold the tent, no more camping trips"),
            Doc("m7", "Caroline: I started pottery classes"),
        ]
    )
    for query in [*QUERIES, "tent camping", "pottery"]:
        assert combined.search(query, 7) == rebuilt.search(query, 7)
    assert SearchIndex.combine([]).ids == [] and SearchIndex.combine([snapshot]) is snapshot


def test_combine_does_not_retokenize(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [SearchIndex.build(DOCS[:4]), SearchIndex.build(DOCS[3:])]

    def no_tokenize(text: str) -> list[str]:
        raise AssertionError("combine must not tokenize")

    monkeypatch.setattr(stored, "tokenize", no_tokenize)  # where documents are tokenised
    combined = SearchIndex.combine(parts)
    assert combined.ids == [d.id for d in DOCS]


def test_combine_of_another_model_drops_those_vectors(caplog: pytest.LogCaptureFixture) -> None:
    class OtherEmbedder(HashEmbedder):
        name = "other"

    old = SearchIndex.build(DOCS[:3], OtherEmbedder())
    new = SearchIndex.build(DOCS[3:], HashEmbedder())
    with caplog.at_level(logging.WARNING):
        combined = SearchIndex.combine([old, new])
    assert combined.model == "hash" and combined.missing_vectors() == ["m1", "m2", "m3"]
    assert "lose their vectors" in caplog.text


def test_without_removes_ids() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    smaller = index.without({"m3", "unknown"})
    assert len(smaller) == 5 and "m3" not in smaller.ids and "m3" in index.ids
    assert "m3" not in ids(smaller.search("Caroline adoption agencies", 6, embedder))
    assert ids(index.search("adoption agencies", 1)) == ["m3"]
    assert index.without(set()) is index
    assert SearchIndex.from_bytes(smaller.to_bytes()).search("kids", 6, embedder) == smaller.search("kids", 6, embedder)


def test_exclude_skips_ids() -> None:
    embedder = HashEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    assert ids(index.search("Caroline", 6))[:1] != []
    for use in (None, embedder):
        results = ids(index.search("Caroline went kids", 6, use, exclude=frozenset({"m1", "m4"})))
        assert results and "m1" not in results and "m4" not in results
    assert index.search("adoption", 5, exclude=frozenset({"m3"})) == []


# --------------------------------------------------------------------------------------------------------------
# Degradation
# --------------------------------------------------------------------------------------------------------------


def test_failing_embedder_degrades_to_lexical(caplog: pytest.LogCaptureFixture) -> None:
    embedder = BrokenEmbedder()
    index = SearchIndex.build(DOCS, embedder)
    assert index.model == "hash"
    with caplog.at_level(logging.WARNING, logger="agent_memory.search.ranking"):
        results = index.search("adoption agencies", 3, embedder)
    assert results == index.search("adoption agencies", 3)
    assert ids(results) == ["m3"]
    assert "could not embed the query" in caplog.text and "throttled" in caplog.text


def test_embedder_raising_anything_degrades(caplog: pytest.LogCaptureFixture) -> None:
    class Crashing(HashEmbedder):
        def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
            if self.calls:
                raise RuntimeError("segfault-ish")
            return super().embed(texts)

    embedder = Crashing()
    index = SearchIndex.build(DOCS, embedder)
    with caplog.at_level(logging.WARNING):
        assert ids(index.search("charity race", 2, embedder)) == ["m6"]
    assert "RuntimeError" in caplog.text


def test_no_embedder_for_an_index_with_vectors_degrades(caplog: pytest.LogCaptureFixture) -> None:
    index = SearchIndex.build(DOCS, HashEmbedder())
    with caplog.at_level(logging.WARNING):
        assert ids(index.search("charity race", 2)) == ["m6"]
    assert "no embedder" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # an index built lexical-only is searched lexically, quietly
        assert ids(SearchIndex.build(DOCS).search("charity race", 2)) == ["m6"]
    assert caplog.text == ""


def test_index_without_vectors_or_with_another_model_degrades(caplog: pytest.LogCaptureFixture) -> None:
    lexical_only = SearchIndex.build(DOCS, None)
    with caplog.at_level(logging.WARNING):
        assert ids(lexical_only.search("charity race", 2, HashEmbedder())) == ["m6"]
    assert "no vectors" in caplog.text
    caplog.clear()

    class Other(HashEmbedder):
        name = "other"

    index = SearchIndex.build(DOCS, HashEmbedder())
    with caplog.at_level(logging.WARNING):
        assert ids(index.search("charity race", 2, Other())) == ["m6"]
    assert "does not match" in caplog.text


def test_build_raises_embedder_error_when_documents_cannot_be_embedded() -> None:
    class Down(HashEmbedder):
        def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
            raise ConnectionError("no route")

    with pytest.raises(EmbedderError, match="ConnectionError"):
        SearchIndex.build(DOCS, Down())


def test_a_short_memory_is_embedded_with_its_whole_context() -> None:
    embedder = RecordingEmbedder()
    doc = Doc("m1", "user: yes, that one", context="user: the blue tent or the red one? 8 May 2023")
    SearchIndex.build([doc], embedder)
    assert embedder.seen == ["user: yes, that one\nuser: the blue tent or the red one? 8 May 2023"]


def test_a_long_context_is_cut_from_its_start_keeping_the_nearest_turn_and_the_date() -> None:
    embedder = RecordingEmbedder()
    older = "user: " + "an older turn about harbours " * 20
    nearest = "user: the nearest turn mentions Lisbon."
    doc = Doc("m1", "user: " + "tell me more " * 20, context=f"{older} {nearest} 8 May 2023")
    index = SearchIndex.build([doc], embedder)
    (embedded,) = embedder.seen
    assert len(embedded) <= stored.EMBED_CHARS
    assert embedded.startswith(doc.text + "\n") and embedded.endswith(f"{nearest} 8 May 2023")
    assert not embedded.split("\n", 1)[1].startswith("arbours")  # cut at a word boundary
    # The lexical field keeps every word of the context.
    assert index.search("harbours", 1, config=SearchConfig(mode="lexical"))[0][0] == "m1"


def test_a_reply_is_embedded_after_the_context_and_kept_by_the_cut_but_never_matched_as_words() -> None:
    embedder = RecordingEmbedder()
    older = "Ana: " + "an older turn about harbours " * 20
    reply = "Ben: are they yours at the festival?"
    doc = Doc("m1", "Ana: look at the dancers", context=f"{older} Ana: nearest 8 May 2023", reply=reply)
    other = Doc("m2", "Ben: the festival was fun", context="8 May 2023")
    index = SearchIndex.build([doc, other], embedder)
    first, second = embedder.seen
    assert len(first) <= stored.EMBED_CHARS
    assert first.startswith(doc.text + "\n") and first.endswith(f"Ana: nearest 8 May 2023 {reply}")
    assert second == "Ben: the festival was fun\n8 May 2023"  # no reply: as before
    # The reply's words are in neither lexical field: a word only it holds finds the memory that said it.
    lexical = SearchConfig(mode="lexical")
    assert [i for i, _ in index.search("festival", 5, config=lexical)] == ["m2"]
    assert [i for i, _ in index.search("harbours", 5, config=lexical)] == ["m1"]


def test_a_text_longer_than_the_budget_still_gets_the_end_of_its_context() -> None:
    embedder = RecordingEmbedder()
    doc = Doc("m1", "user: " + "a very long message " * 40, context="user: earlier words here 8 May 2023")
    SearchIndex.build([doc], embedder)
    (embedded,) = embedder.seen
    assert embedded == doc.text + "\nuser: earlier words here 8 May 2023"


# --------------------------------------------------------------------------------------------------------------
# Calibrated scores and the default cut
# --------------------------------------------------------------------------------------------------------------


def test_a_score_is_the_memorys_own_not_relative_to_the_other_candidates(minilm: MiniLMEmbedder) -> None:
    query = "charity race for mental health"
    alone = SearchIndex.build([DOCS[5]], minilm).search(query, 3, minilm)
    among = dict(SearchIndex.build(DOCS, minilm).search(query, 6, minilm))
    # min-max fusion gave a lone memory 0.0 and the top hit 1.0 whatever they matched; a calibrated score moves
    # only with the index's term statistics
    assert alone[0][0] == "m6" and 0.2 < alone[0][1] < 0.6
    assert abs(among["m6"] - alone[0][1]) < 0.05
    assert all(0 <= score <= 1 for score in among.values())


def test_a_query_that_matches_nothing_finds_nothing_by_default(minilm: MiniLMEmbedder) -> None:
    index = SearchIndex.build(DOCS, minilm)
    for query in ("What is the boiling point of tungsten?", "Which PostgreSQL isolation level prevents phantom reads?"):
        assert index.search(query, 5, minilm, min_score=None) == []
        assert len(index.search(query, 5, minilm, min_score=0)) == 5  # 0: the top_k whatever they score
    assert ids(index.search("support group", 5, minilm, min_score=None)) == ["m1"]
    assert ids(index.search("who adopted kids", 5, minilm, min_score=None))[0] == "m3"


def test_min_score_keeps_only_memories_scoring_at_least_that(minilm: MiniLMEmbedder) -> None:
    index = SearchIndex.build(DOCS, minilm)
    everything = index.search("kids", 6, minilm)
    threshold = sorted(score for _, score in everything)[3]
    kept = index.search("kids", 6, minilm, min_score=threshold)
    assert kept and all(score >= threshold for _, score in kept)
    assert {i for i, _ in kept} == {i for i, s in everything if s >= threshold}
    assert index.search("kids", 6, minilm, min_score=1.0) == []


def test_lexical_only_scores_are_calibrated_too() -> None:
    index = SearchIndex.build(DOCS)
    hits = index.search("charity race", 6, min_score=None)
    assert ids(hits) == ["m6"] and 0 < hits[0][1] < 1
    assert index.search("tungsten boiling point", 6, min_score=None) == []
    # the lexical match of a memory: its BM25F score as a share of the query's ceiling
    match = index.lexical_match("charity race")
    assert match.shape == (6,) and 0 < match[5] < 1 and float(match.max()) == float(match[5])
    assert float(index.lexical_match("tungsten").max()) == 0.0


def test_the_documented_default_cuts_are_the_calibrations() -> None:
    from agent_memory.edge.requests import SCORE_CUT_DESCRIPTION

    assert f"Default {scoring.HYBRID_CALIBRATION.min_score:g} " in SCORE_CUT_DESCRIPTION
    assert f"`EMBEDDER=none`), {scoring.LEXICAL_CALIBRATION.min_score:g}:" in SCORE_CUT_DESCRIPTION


# --------------------------------------------------------------------------------------------------------------
# Signals beyond the words: the author a query names, and "when" questions
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to the support group yesterday", True),
        ("We ran a charity race last Saturday", True),
        ("I painted it in 2022", True),
        ("a friend made it ten years ago", True),
        ("I have known them for 4 years", True),
        ("We're going camping next month", True),
        ("I love painting sunsets", False),
        ("the last thing I want", False),
    ],
)
def test_mentions_time(text: str, expected: bool) -> None:
    assert mentions_time(text) is expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Caroline go to the support group?", True),
        ("How long has Caroline had her friends?", True),
        ("In what year did Melanie paint the sunrise?", True),
        ("What did Caroline paint?", False),
        ("Where does Melanie go when she is sad?", False),
    ],
)
def test_temporal_question(query: str, expected: bool) -> None:
    assert temporal_question(query) is expected


def test_author_words_and_named_words() -> None:
    assert author_words("Caroline") == ["caroline"]
    assert author_words("Dr. Ann Lee") == ["dr", "ann", "lee"]
    # roles and programs are no one a query names: "travel" must not prefer everything travel_agent said
    assert author_words("user") == author_words("model") == author_words("travel_agent") == []
    assert author_words("bot2") == author_words("") == []
    assert named_words("What is Caroline's job?") == ["what", "is", "caroline", "job"]


SPEAKERS = [
    Doc("c1", "Caroline: camping is fine by me.", author="Caroline"),
    Doc("m1", "Melanie: Caroline and I love camping in the mountains.", author="Melanie"),
    Doc("c2", "Caroline: I went to a pottery class yesterday.", author="Caroline"),
    Doc("m2", "Melanie: I took a pottery class; the class was fun.", author="Melanie"),
]


def test_a_query_naming_an_author_prefers_that_authors_memories() -> None:
    index = SearchIndex.build(SPEAKERS)
    plain = SearchConfig(author_boost=0.0)
    assert ids(index.search("Where does Melanie like camping?", 2, config=plain))[0] == "m1"
    assert ids(index.search("Where does Melanie like camping?", 2, config=SearchConfig(author_boost=0.3)))[0] == "m1"
    # Melanie's memory wins without the boost (it holds more of the words), Caroline's own with it
    query = "Does Caroline love camping in the mountains?"
    assert ids(index.search(query, 2, config=plain))[0] == "m1"
    assert ids(index.search(query, 2, config=SearchConfig(author_boost=1.0)))[0] == "c1"


def test_a_named_authors_memories_score_higher_and_pass_the_cut(
    minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SearchIndex.build(SPEAKERS, minilm)
    query = "What did Caroline do yesterday?"
    with_term = dict(index.search(query, 4, minilm))
    shift = scoring.HYBRID_CALIBRATION.author
    assert shift > 0
    without = scoring.Calibration(**{**vars(scoring.HYBRID_CALIBRATION), "author": 0.0})
    monkeypatch.setattr(scoring, "HYBRID_CALIBRATION", without)
    plain = dict(index.search(query, 4, minilm))
    # Caroline's memories gain the author term's logit, Melanie's (which name her, but are not hers) do not
    for doc_id in ("c1", "c2"):
        logit = np.log(plain[doc_id] / (1 - plain[doc_id]))
        assert with_term[doc_id] == pytest.approx(1 / (1 + np.exp(-(logit + shift))), abs=2e-4)
    assert with_term["m1"] == plain["m1"] and with_term["m2"] == plain["m2"]
    # so a cut between the two scores keeps the named author's memory only with the term
    cut = (plain["c1"] + with_term["c1"]) / 2
    assert "c1" not in ids(index.search(query, 4, minilm, min_score=cut))
    monkeypatch.undo()
    assert "c1" in ids(index.search(query, 4, minilm, min_score=cut))
    # a query naming no author is scored as before
    unnamed = index.search("pottery class", 4, minilm)
    monkeypatch.setattr(scoring, "HYBRID_CALIBRATION", without)
    assert index.search("pottery class", 4, minilm) == unnamed


def test_a_when_question_prefers_memories_that_say_when() -> None:
    index = SearchIndex.build(SPEAKERS)
    plain, timed = SearchConfig(time_boost=0.0), SearchConfig(time_boost=1.0)
    assert ids(index.search("What pottery class did Melanie take?", 2, config=plain))[0] == "m2"
    assert ids(index.search("When was the pottery class?", 2, config=plain))[0] == "m2"
    assert ids(index.search("When was the pottery class?", 2, config=timed))[0] == "c2"  # "yesterday"
    assert ids(index.search("What pottery class did Melanie take?", 2, config=timed))[0] == "m2"  # not a "when"


def test_tags_change_no_lexical_score_and_survive_storage_merges_and_forgetting() -> None:
    tagged = SearchIndex.build(SPEAKERS)
    untagged = SearchIndex.build([Doc(d.id, d.text, d.context) for d in SPEAKERS])
    for query in ("pottery class yesterday", "Caroline camping", "When was the pottery class?"):
        assert np.array_equal(tagged.lexical_scores(query), untagged.lexical_scores(query))
        assert np.array_equal(tagged.lexical_match(query), untagged.lexical_match(query))
    boosted = SearchConfig(author_boost=0.5, time_boost=0.5)
    query = "When did Caroline go camping in the mountains we love?"
    expected = tagged.search(query, 4, config=boosted)
    assert SearchIndex.from_bytes(tagged.to_bytes()).search(query, 4, config=boosted) == expected
    halves = SearchIndex.combine([SearchIndex.build(SPEAKERS[:2]), SearchIndex.build(SPEAKERS[2:])])
    assert ids(halves.search(query, 4, config=boosted)) == ids(expected)
    forgotten = tagged.without(["c1", "c2"])  # Caroline's memories gone: so is her tag
    assert "@a:caroline" not in forgotten._term_map()
    assert ids(forgotten.search(query, 4, config=boosted))[0] == "m1"


def test_an_agent_author_is_not_named_by_a_word_of_its_identifier() -> None:
    docs = [
        Doc("a", "travel_agent: Your flight to Lisbon is booked.", author="travel_agent"),
        Doc("u", "user: I want to plan travel to Lisbon next spring, flights and hotels.", author="user"),
    ]
    index = SearchIndex.build(docs)
    assert not any(term.startswith("@a:") for term in index._term_map())
    boosted = SearchConfig(author_boost=1.0)
    assert ids(index.search("travel plans Lisbon", 2, config=boosted)) == ids(index.search("travel plans Lisbon", 2))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Melanie go camping in June?", [(None, 6)]),
        ("What did Gina find on 1 February, 2023?", [(2023, 2)]),
        ("What happened on May 23, 2023?", [(2023, 5)]),
        ("What happened in December 2023 and in January 2024?", [(2023, 12), (2024, 1)]),
        ("May I ask what Caroline painted?", []),  # the verb, not the month
        ("What did Caroline paint?", []),
    ],
)
def test_asked_months(query: str, expected: list[tuple[int | None, int]]) -> None:
    assert asked_months(query) == expected


def test_a_query_naming_a_month_prefers_memories_of_that_month() -> None:
    july, august = 1688688000.0, 1691366400.0  # 7 July 2023, 7 August 2023 (UTC)
    docs = [
        Doc("jul", "Melanie: we went to the beach, so much fun at the beach", timestamp=july),
        Doc("aug", "Melanie: we went to the beach", timestamp=august),
        Doc("old", "Melanie: the beach was lovely", timestamp=float("nan")),  # no month, no failure
    ]
    index = SearchIndex.build(docs)
    dated = SearchConfig(date_boost=1.0)
    assert ids(index.search("beach in August", 3, config=SearchConfig()))[0] == "jul"  # more beach
    assert ids(index.search("beach in August", 3, config=dated))[0] == "aug"
    assert ids(index.search("beach on 7 August, 2023", 3, config=dated))[0] == "aug"
    assert ids(index.search("beach on 7 August, 2022", 3, config=dated))[0] == "jul"  # another year's August
    assert ids(SearchIndex.from_bytes(index.to_bytes()).search("beach in August", 3, config=dated))[0] == "aug"


def test_the_boosts_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="boost"):
        SearchConfig(author_boost=-0.1)
    with pytest.raises(ValueError, match="boost"):
        SearchConfig(time_boost=-0.1)
    with pytest.raises(ValueError, match="boost"):
        SearchConfig(date_boost=-0.1)
