"""Long-term memory retrieval on LoCoMo: recall@5 and recall@10 of each retriever, fully in process.

    .venv/bin/python -m bench.quality.locomo [--sweep] [--by-category] [--only NAME-PART ...]

Data: /work/shared/data/locomo/*.json (5 conversations; see its README). Every turn is one memory,
``"{speaker}: {text}"`` plus ``" [image: {blip_caption}]"`` where the turn shared an image, with its ``dia_id``
as the memory id (the README's protocol); the questions of categories 1-4 are searched as they are, and
recall@k is the share of a question's evidence turns found in the top k, averaged over questions. Each row
gives it over all five conversations, then over the tuning (26, 30, 41) and validation (42, 43) conversations:
every parameter and component is chosen on the tuning figure; the validation one is what an unseen
conversation can expect.

Contextual retrieval indexes each memory with a context: the session date and the one or two turns just
before it in the same session (a second, lower-weighted BM25F field, and part of the embedded text). Every
result is still one memory ranked by its own score (no neighbour expansion).

``evaluate(search_fn)`` runs the same evaluation through any retriever, e.g. the HTTP service:
``search_fn(conversation_index, question, k) -> list of dia_ids``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.providers.embedders import MiniLMEmbedder
from agent_memory.search import Doc, SearchConfig, SearchIndex, lexical, ranking, stored
from agent_memory.search.types import DEFAULT_CONFIG
from bench.tuning.feedback import Feedback, SecondPassConfig


def _data_dir() -> Path:
    """The shared data folder: ``LOCOMO_DATA`` when set, else ``shared/data/locomo`` beside the repository (as on
    the development machines and in CI) or beside the folder holding it (a worktree under ``wt/``)."""
    if os.environ.get("LOCOMO_DATA"):
        return Path(os.environ["LOCOMO_DATA"])
    parents = Path(__file__).resolve().parents
    candidates = [parents[i] / "shared" / "data" / "locomo" for i in (3, 4) if i < len(parents)]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DATA_DIR = _data_dir()
# Method discipline: every choice is made on the TUNING conversations; the VALIDATION ones are only reported beside
# them (never chosen by). The same split as bench/tuning/calibrate.py and bench/quality/profile_facts.py.
TUNING = ("26", "30", "41")
VALIDATION = ("42", "43")
SPLITS = (("tuning", TUNING), ("validation", VALIDATION))
CATEGORIES = (1, 2, 3, 4)
KS = (5, 10)
_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")

SearchFn = Callable[[int, str, int], Sequence[str]]


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    session: int
    date: str

    @property
    def memory(self) -> str:
        """The memory text: ``"{speaker}: {text}"`` plus the image caption where the turn shared an image."""
        caption = f" [image: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{caption}"


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped_evidence: tuple[str, ...]  # evidence entries naming no turn of the conversation


def load_conversations(data_dir: Path = DATA_DIR) -> list[Conversation]:
    """The conversations, in file-name order. Malformed evidence is repaired where it is unambiguous
    (``"D8:6; D9:17"`` is two turns, ``"D:11:26"`` is ``D11:26``); entries naming no turn are dropped."""
    conversations = []
    for path in sorted(data_dir.glob("*.json")):
        raw = json.loads(path.read_text())
        sessions = sorted(int(m.group(1)) for key in raw if (m := _SESSION.fullmatch(key)))
        turns = [
            Turn(
                dia_id=t["dia_id"],
                speaker=t["speaker"],
                text=t["text"],
                caption=t.get("blip_caption") or "",
                session=s,
                date=raw.get(f"session_{s}_date_time", ""),
            )
            for s in sessions
            for t in raw[f"session_{s}"]
        ]
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        dropped: list[str] = []
        for qa in raw["qa"]:
            evidence: list[str] = []
            for entry in qa.get("evidence", []):
                found = [f"D{a}:{b}" for a, b in _EVIDENCE.findall(entry)]
                dropped.extend(e for e in found if e not in known)
                if not found:
                    dropped.append(entry)
                evidence.extend(e for e in found if e in known and e not in evidence)
            questions.append(Question(qa["question"], str(qa.get("answer", "")), tuple(evidence), qa["category"]))
        conversations.append(Conversation(path.stem, tuple(turns), tuple(questions), tuple(dropped)))
    return conversations


def recall_at_k(retrieved: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """The share of ``evidence`` found in the first ``k`` of ``retrieved``."""
    wanted = set(evidence)
    if not wanted:
        raise ValueError("a question without evidence has no recall")
    return len(wanted & set(retrieved[:k])) / len(wanted)


def evaluate(
    search_fn: SearchFn,
    conversations: Sequence[Conversation] | None = None,
    categories: Sequence[int] = CATEGORIES,
    ks: Sequence[int] = KS,
) -> dict[str, Any]:
    """Mean recall@k over the questions of ``categories`` that have evidence, overall and by category.

    Returns ``{"questions": n, "recall@5": ..., "recall@10": ..., "by_category": {c: {"questions", "recall@k"}},
    "by_split": {"tuning" | "validation": {"questions", "recall@k"}}}`` (a split with none of its conversations
    here is absent).
    """
    conversations = load_conversations() if conversations is None else conversations
    depth = max(ks)
    per_question: list[tuple[int, str, list[float]]] = []
    for c, conversation in enumerate(conversations):
        for q in conversation.questions:
            if q.category not in categories or not q.evidence:
                continue
            retrieved = list(search_fn(c, q.question, depth))
            per_question.append((q.category, conversation.name, [recall_at_k(retrieved, q.evidence, k) for k in ks]))

    def summary(rows: list[list[float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"questions": len(rows)}
        for i, k in enumerate(ks):
            out[f"recall@{k}"] = float(np.mean([r[i] for r in rows])) if rows else 0.0
        return out

    result = summary([r for _, _, r in per_question])
    result["by_category"] = {cat: summary([r for c, _, r in per_question if c == cat]) for cat in categories}
    names = {c.name for c in conversations}
    result["by_split"] = {
        split: summary([r for _, name, r in per_question if name in members])
        for split, members in SPLITS
        if names & set(members)
    }
    return result


# --------------------------------------------------------------------------------------------------------------
# In-process retrievers on SearchIndex
# --------------------------------------------------------------------------------------------------------------


def context_of(turns: Sequence[Turn], i: int, previous: int = 2, date: bool = True) -> str:
    """The context of turn ``i``: its session date and the ``previous`` turns before it in the same session."""
    turn = turns[i]
    before = [t.memory for t in turns[max(0, i - previous) : i] if t.session == turn.session]
    return "\n".join(([turn.date] if date and turn.date else []) + before)


def reply_of(turns: Sequence[Turn], i: int) -> str:
    """The turn after turn ``i`` in its session when the other speaker said it (the service's ``Doc.reply``)."""
    turn, after = turns[i], turns[i + 1 : i + 2]
    return next((t.memory for t in after if t.session == turn.session and t.speaker != turn.speaker), "")


def documents(conversation: Conversation, previous: int = 0, date: bool = False, reply: bool = False) -> list[Doc]:
    turns = conversation.turns
    return [
        Doc(
            t.dia_id,
            t.memory,
            context_of(turns, i, previous, date),
            t.speaker,
            session_time(t.date) if t.date else None,
            reply_of(turns, i) if reply else "",
        )
        for i, t in enumerate(turns)
    ]


def session_time(text: str) -> float:
    """LoCoMo's "1:56 pm on 8 May, 2023" as epoch seconds (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


class CachingEmbedder:
    """Memoises a wrapped embedder by text, so that retriever variants embed each text once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self._cache: dict[str, npt.NDArray[np.float32]] = {}

    def load(self, path: Path) -> None:
        """Add the vectors ``save`` wrote (a rerun then embeds only texts it has not seen)."""
        if path.exists():
            with np.load(path, allow_pickle=False) as archive:
                texts, vectors = archive["texts"].tolist(), archive["vectors"]
            self._cache.update(zip(texts, vectors, strict=True))

    def save(self, path: Path) -> None:
        texts = list(self._cache)
        vectors = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        np.savez(path, texts=np.array(texts, dtype=str), vectors=vectors)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, row in zip(missing, self.inner.embed(missing), strict=True):
                self._cache[text] = row
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


@dataclass(frozen=True)
class Variant:
    name: str
    config: SearchConfig
    previous: int = 0  # context turns
    date: bool = False  # session date in the context
    tokenizer: Callable[[str], list[str]] | None = None  # ablations: replaces agent_memory.search.lexical.tokenize
    reply: bool = False  # the next turn, when the other speaker said it, in the embedded text (``Doc.reply``)
    second: SecondPassConfig | None = None  # a second-pass experiment after the first pass (bench/tuning/feedback.py)


@contextlib.contextmanager
def _tokenizer(tokenizer: Callable[[str], list[str]] | None) -> Iterator[None]:
    """Swap the index's tokenizer for an ablation (bench only; the service always uses ``tokenize``)."""
    if tokenizer is None:
        yield
        return
    # the documents are tokenised where their arrays are made, the queries where they are searched
    modules = (stored, ranking)
    originals = [getattr(module, "tokenize") for module in modules]  # noqa: B009
    for module in modules:
        setattr(module, "tokenize", tokenizer)  # noqa: B010
    try:
        yield
    finally:
        for module, original in zip(modules, originals, strict=True):
            setattr(module, "tokenize", original)  # noqa: B010


def index_search_fn(conversations: Sequence[Conversation], variant: Variant, embedder: Any) -> SearchFn:
    """A search_fn over one SearchIndex per conversation."""
    use = embedder if variant.config.mode != "lexical" else None
    with _tokenizer(variant.tokenizer):
        indexes = [
            SearchIndex.build(documents(c, variant.previous, variant.date, variant.reply), use) for c in conversations
        ]

    second = None if variant.second is None else Feedback(variant.second)

    def search(c: int, question: str, k: int) -> list[str]:
        with _tokenizer(variant.tokenizer):
            found = indexes[c].search(question, k, use, config=variant.config, second_pass=second)
            return [doc_id for doc_id, _ in found]

    return search


def plain_tokens(text: str) -> list[str]:
    """The README baseline's tokens: lowercase words, no stop words, no stemming."""
    return re.findall(r"\w+", text.lower())


def unstemmed_tokens(text: str) -> list[str]:
    """Our tokens without the stemmer (stop words still dropped)."""
    words = (w.replace("'", "") for w in lexical._WORD.findall(lexical._fold(text)))
    return [w for w in words if w and w not in lexical.STOP_WORDS]


DEFAULT = SearchConfig()  # the components below start from this: no author or time boost
SERVICE = DEFAULT_CONFIG  # what the service searches with
FIRST_PASS = replace(SERVICE, rerank_depth=0)  # the service before the learned rerank: the rows built before it
LEXICAL = replace(DEFAULT, mode="lexical", context_weight=0.0)
DENSE = replace(DEFAULT, mode="dense")
HYBRID = replace(DEFAULT, context_weight=0.0)
RRF = replace(DEFAULT, fusion="rrf")
CONTEXT = 2


def variants() -> list[Variant]:
    """What the table compares: the baseline, each component on its own, then the default configuration."""
    return [
        Variant("BM25, plain lowercase word tokens", replace(LEXICAL, k1=1.5), tokenizer=plain_tokens),
        Variant("BM25 + stop words", LEXICAL, tokenizer=unstemmed_tokens),
        Variant("BM25 + stop words + stemming (lexical)", LEXICAL),
        Variant("dense (MiniLM int8, cosine)", DENSE),
        Variant("hybrid, reciprocal-rank fusion (k=60)", replace(RRF, context_weight=0.0)),
        Variant("hybrid, weighted score fusion", HYBRID),
        Variant("lexical + context", replace(LEXICAL, context_weight=DEFAULT.context_weight), CONTEXT, True),
        Variant(
            "lexical + context + speaker + time + month (EMBEDDER=none)",
            replace(FIRST_PASS, mode="lexical"),
            CONTEXT,
            True,
        ),
        Variant("dense + context", DENSE, CONTEXT, True),
        Variant("hybrid rrf + context", RRF, CONTEXT, True),
        Variant("hybrid + context without the date", DEFAULT, CONTEXT, False),
        Variant("hybrid + context of 1 previous turn", DEFAULT, 1, True),
        Variant("hybrid + context, plain tokens", DEFAULT, CONTEXT, True, plain_tokens),
        Variant("hybrid + context (no author, time or rerank signals)", DEFAULT, CONTEXT, True),
        Variant("hybrid + context + speaker", replace(FIRST_PASS, time_boost=0.0, date_boost=0.0), CONTEXT, True),
        Variant("hybrid + context + time", replace(FIRST_PASS, author_boost=0.0, date_boost=0.0), CONTEXT, True),
        Variant("hybrid + context + speaker + time", replace(FIRST_PASS, date_boost=0.0), CONTEXT, True),
        Variant(
            "hybrid + context + speaker + time + month (before neutral names)",
            replace(FIRST_PASS, dense_names="keep"),
            CONTEXT,
            True,
        ),
        Variant(
            "hybrid + context + speaker + time + month + neutral names (the service's before the rerank)",
            FIRST_PASS,
            CONTEXT,
            True,
        ),
        Variant("+ learned rerank below the top 5 (the service's before the reply)", SERVICE, CONTEXT, True),
        Variant("+ the reply in the vector (the service's)", SERVICE, CONTEXT, True, reply=True),
    ]


def sweep() -> list[Variant]:
    """Parameter sweeps around the default (hybrid + context of 2 turns and the date)."""
    out: list[Variant] = []
    for k1 in (0.9, 1.2, 1.5, 2.0):
        for b in (0.5, 0.75, 0.9):
            out.append(Variant(f"hybrid + context, k1={k1} b={b}", replace(DEFAULT, k1=k1, b=b), CONTEXT, True))
    for w in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0):
        out.append(Variant(f"hybrid + context, context_weight={w}", replace(DEFAULT, context_weight=w), CONTEXT, True))
    for dw in (0.3, 0.4, 0.6, 0.7):
        out.append(Variant(f"hybrid + context, dense_weight={dw}", replace(DEFAULT, dense_weight=dw), CONTEXT, True))
    for previous in (3, 4):
        out.append(Variant(f"hybrid + context of {previous} previous turns", DEFAULT, previous, True))
    for k in (10, 30):
        out.append(Variant(f"hybrid rrf + context, k={k}", replace(RRF, rrf_k=float(k)), CONTEXT, True))
    for boost in (0.05, 0.1, 0.2, 0.3, 0.5):
        config = replace(DEFAULT, author_boost=boost, time_boost=0.0)
        out.append(Variant(f"hybrid + context + speaker, author_boost={boost}", config, CONTEXT, True))
    for boost in (0.05, 0.1, 0.2, 0.3):
        config = replace(DEFAULT, author_boost=0.0, time_boost=boost)
        out.append(Variant(f"hybrid + context + time, time_boost={boost}", config, CONTEXT, True))
    # the two together, on a grid widened until the tuning figure stopped rising: 0.3 / 0.3 is its best (the
    # service's), and every pair here is within 0.01 of it on tuning recall@5
    pairs = [(a, w) for a in (0.2, 0.3) for w in (0.1, 0.2, 0.3)] + [(0.3, 0.4), (0.3, 0.5), (0.4, 0.3), (0.4, 0.4)]
    for author, when in pairs:
        config = replace(DEFAULT, author_boost=author, time_boost=when)
        out.append(Variant(f"hybrid + context + speaker + time, boosts {author} / {when}", config, CONTEXT, True))
    for boost in (0.05, 0.1, 0.2, 0.3, 0.5):
        config = replace(FIRST_PASS, date_boost=boost)
        out.append(Variant(f"hybrid + context + speaker + time + month, date_boost={boost}", config, CONTEXT, True))
    out += second_pass_sweep()
    out += neighbour_sweep()
    return out


def neighbour_sweep() -> list[Variant]:
    """The recall@10 candidates chosen on tuning: the query's embedding with the named authors as "they"
    (the service's now) against the query as typed, and its neighbouring parameters (dense weight, context
    weight, author boost), each on the service's configuration."""
    out = [
        Variant("service, names kept in the query's embedding", replace(FIRST_PASS, dense_names="keep"), CONTEXT, True)
    ]
    for names in ("keep", "neutral"):
        for dw in (0.4, 0.6):
            config = replace(FIRST_PASS, dense_names=names, dense_weight=dw)
            out.append(Variant(f"service, names {names}, dense_weight={dw}", config, CONTEXT, True))
        for boost in (0.2, 0.4):
            config = replace(FIRST_PASS, dense_names=names, author_boost=boost)
            out.append(Variant(f"service, names {names}, author_boost={boost}", config, CONTEXT, True))
        for w in (0.3, 0.5):
            config = replace(FIRST_PASS, dense_names=names, context_weight=w)
            out.append(Variant(f"service, names {names}, context_weight={w}", config, CONTEXT, True))
    return out


def second_pass_sweep() -> list[Variant]:
    """The second-pass candidates (``bench/tuning/feedback.py``) on top of the service's first pass: lexical
    pseudo-relevance feedback (seed memories, expansion words, weight), dense feedback, and diversification of
    the top 10 (MMR penalty)."""
    out: list[Variant] = []
    for docs in (3, 5, 10):
        for weight in (0.1, 0.2, 0.3):
            second = SecondPassConfig(feedback_docs=docs, feedback_terms=10, feedback_weight=weight)
            out.append(
                Variant(
                    f"service + feedback, {docs} docs 10 terms weight {weight}",
                    FIRST_PASS,
                    CONTEXT,
                    True,
                    second=second,
                )
            )
    # around the best lexical-feedback row on tuning recall@10 at small weights: fewer or more words, one seed
    for docs, terms, weight in ((1, 10, 0.1), (3, 5, 0.1), (3, 20, 0.1), (3, 10, 0.05), (5, 5, 0.05)):
        second = SecondPassConfig(feedback_docs=docs, feedback_terms=terms, feedback_weight=weight)
        out.append(
            Variant(
                f"service + feedback, {docs} docs {terms} terms weight {weight}",
                FIRST_PASS,
                CONTEXT,
                True,
                second=second,
            )
        )
    # feedback on the tail only: the first pass's top 5 stay, feedback reorders the rest (recall@5 unchanged)
    for docs, terms, weight in ((3, 10, 0.1), (3, 5, 0.1), (10, 10, 0.3), (5, 10, 0.2)):
        second = SecondPassConfig(feedback_docs=docs, feedback_terms=terms, feedback_weight=weight, feedback_keep=5)
        name = f"service + feedback below the top 5, {docs} docs {terms} terms weight {weight}"
        out.append(Variant(name, FIRST_PASS, CONTEXT, True, second=second))
    for docs in (3, 5):
        for weight in (0.1, 0.2, 0.3):
            second = SecondPassConfig(feedback_docs=docs, feedback_dense=weight)
            out.append(
                Variant(
                    f"service + dense feedback, {docs} docs weight {weight}", FIRST_PASS, CONTEXT, True, second=second
                )
            )
    for penalty in (0.05, 0.1, 0.2, 0.3):
        second = SecondPassConfig(diversity=penalty)
        out.append(Variant(f"service + diversity, MMR penalty {penalty}", FIRST_PASS, CONTEXT, True, second=second))
    second = SecondPassConfig(diversity=0.05, diversity_depth=15)
    out.append(
        Variant("service + diversity, MMR penalty 0.05 over the top 15", FIRST_PASS, CONTEXT, True, second=second)
    )
    return out


def table(
    rows: Sequence[Variant], conversations: Sequence[Conversation], by_category: bool, cache: Path | None = None
) -> None:
    """One line per variant: recall@5 and @10 over every conversation, then on the tuning and the validation
    conversations side by side (choose on tuning; validation is only reported)."""
    embedder = CachingEmbedder(MiniLMEmbedder())
    if cache is not None:
        embedder.load(cache)
    width = max(len(v.name) for v in rows)
    header = f"| {'retriever':<{width}} | recall@5 | recall@10 | tuning r@5 | tuning r@10 | valid. r@5 | valid. r@10 |"
    rule = "|" + "-" * (width + 2) + "|---------:|----------:|-----------:|------------:|-----------:|------------:|"
    if by_category:
        header += "".join(f" r@5 c{c} |" for c in CATEGORIES) + "".join(f" r@10 c{c} |" for c in CATEGORIES)
        rule += "-------:|" * len(CATEGORIES) + "--------:|" * len(CATEGORIES)
    print(header)
    print(rule)
    for variant in rows:
        result = evaluate(index_search_fn(conversations, variant, embedder), conversations)
        line = f"| {variant.name:<{width}} | {result['recall@5']:8.3f} | {result['recall@10']:9.3f} |"
        splits = result["by_split"]
        for split, _ in SPLITS:
            cell = splits.get(split)
            line += (
                " —          | —           |"
                if cell is None
                else (f" {cell['recall@5']:10.3f} | {cell['recall@10']:11.3f} |")
            )
        if by_category:
            line += "".join(f" {result['by_category'][c]['recall@5']:6.3f} |" for c in CATEGORIES)
            line += "".join(f" {result['by_category'][c]['recall@10']:7.3f} |" for c in CATEGORIES)
        print(line, flush=True)
        if cache is not None:
            embedder.save(cache)


# --------------------------------------------------------------------------------------------------------------
# Latency: warm search on synthetic indexes of LoCoMo-like memories
# --------------------------------------------------------------------------------------------------------------


class _FixedEmbedder:
    """Random unit vectors for documents (embedding 100,000 texts with MiniLM would take minutes), and the real
    MiniLM vector for queries, precomputed, so the timing is the index's alone."""

    name = "minilm"
    dim = 384

    def __init__(self, queries: dict[str, npt.NDArray[np.float32]], seed: int = 7) -> None:
        self.queries = queries
        self.rng = np.random.default_rng(seed)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if len(texts) == 1 and texts[0] in self.queries:
            row: npt.NDArray[np.float32] = self.queries[texts[0]].reshape(1, -1)
            return row
        matrix = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        unit: npt.NDArray[np.float32] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return unit


def latency(sizes: Sequence[int] = (1_000, 10_000, 100_000), runs: int = 200) -> None:
    """Build, load and search indexes of the LoCoMo memories (with their context) repeated up to ``sizes``,
    with the first ``runs`` LoCoMo questions as queries."""
    conversations = load_conversations()
    memories = [(t.memory, context_of(c.turns, i), t.speaker) for c in conversations for i, t in enumerate(c.turns)]
    questions = [q.question for c in conversations for q in c.questions if q.category in CATEGORIES][:runs]
    minilm = MiniLMEmbedder()
    minilm.embed(questions[:1])
    started = time.perf_counter()
    query_vectors = minilm.embed(questions)
    per_query_batch = (time.perf_counter() - started) / len(questions)
    single = []
    for q in questions[:50]:
        t = time.perf_counter()
        minilm.embed([q])
        single.append(time.perf_counter() - t)
    embedder = _FixedEmbedder(dict(zip(questions, query_vectors, strict=True)))
    print(
        f"MiniLM query embedding: {1000 * float(np.median(single)):.1f} ms median alone "
        f"({1000 * per_query_batch:.1f} ms each in a batch); not included below\n"
    )
    print(
        "| docs | build s | bytes MB | load ms | first search ms | warm hybrid p50 / p95 ms | "
        "warm hybrid, no speaker or time boost, p50 / p95 ms | warm lexical p50 / p95 ms | combine +100 docs ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        docs = [Doc(f"m{i}", *memories[i % len(memories)]) for i in range(size)]
        t = time.perf_counter()
        built = SearchIndex.build(docs, embedder)
        build_s = time.perf_counter() - t
        data = built.to_bytes()
        t = time.perf_counter()
        index = SearchIndex.from_bytes(data)
        load_ms = 1000 * (time.perf_counter() - t)
        t = time.perf_counter()
        index.search(questions[0], 10, embedder)
        first_ms = 1000 * (time.perf_counter() - t)
        timings = {}
        for label, use, config in (
            ("hybrid", embedder, SERVICE),
            ("hybrid, no boost", embedder, DEFAULT),
            ("lexical", None, SERVICE),
        ):
            samples = []
            for q in questions:
                t = time.perf_counter()
                index.search(q, 10, use, config=config)
                samples.append(1000 * (time.perf_counter() - t))
            timings[label] = (float(np.percentile(samples, 50)), float(np.percentile(samples, 95)))
        segment = SearchIndex.build(docs[:50] + [Doc(f"new{i}", docs[i].text) for i in range(50)], embedder)
        t = time.perf_counter()
        SearchIndex.combine([index, segment])
        combine_ms = 1000 * (time.perf_counter() - t)
        print(
            f"| {size:,} | {build_s:.2f} | {len(data) / 1e6:.1f} | {load_ms:.0f} | {first_ms:.0f} | "
            f"{timings['hybrid'][0]:.1f} / {timings['hybrid'][1]:.1f} | "
            f"{timings['hybrid, no boost'][0]:.1f} / {timings['hybrid, no boost'][1]:.1f} | "
            f"{timings['lexical'][0]:.1f} / {timings['lexical'][1]:.1f} | {combine_ms:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true", help="also sweep BM25, context and fusion parameters")
    parser.add_argument("--by-category", action="store_true", help="recall@5 and @10 by question category too")
    parser.add_argument("--latency", action="store_true", help="measure search latency at 1k, 10k and 100k docs")
    parser.add_argument("--only", action="append", default=[], help="run only the variants whose name has this")
    parser.add_argument("--cache", type=Path, help="an .npz file keeping the embeddings across runs")
    args = parser.parse_args()
    if args.latency:
        latency()
        return
    conversations = load_conversations()
    questions = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES and q.evidence)
    dropped = [e for c in conversations for e in c.dropped_evidence]
    memories = sum(len(c.turns) for c in conversations)
    print(f"LoCoMo: {len(conversations)} conversations, {memories} memories, {questions} questions of categories")
    print(f"1-4 with evidence (evidence entries naming no turn, dropped: {dropped})\n")
    rows = variants() + (sweep() if args.sweep else [])
    if args.only:
        rows = [v for v in rows if any(part in v.name for part in args.only)]
    table(rows, conversations, args.by_category, args.cache)


if __name__ == "__main__":
    main()
