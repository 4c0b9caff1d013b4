"""Long-term memory retrieval on LoCoMo: recall@5 and recall@10 of each retriever, fully in process.

    .venv/bin/python -m bench.locomo [--sweep]

Data: /work/shared/data/locomo/*.json (5 conversations; see its README). Every turn is one memory,
``"{speaker}: {text}"`` plus ``" [image: {blip_caption}]"`` where the turn shared an image, with its ``dia_id``
as the memory id (the README's protocol); the questions of categories 1-4 are searched as they are, and
recall@k is the share of a question's evidence turns found in the top k, averaged over questions.

Contextual retrieval indexes each memory with a context: the session date and the one or two turns just
before it in the same session (a second, lower-weighted BM25F field, and part of the embedded text). Every
result is still one memory ranked by its own score (no neighbour expansion).

``evaluate(search_fn)`` runs the same evaluation through any retriever, e.g. the HTTP service:
``search_fn(conversation_index, question, k) -> list of dia_ids``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.providers.embedders import MiniLMEmbedder
from agent_memory.search import Doc, SearchConfig, SearchIndex

DATA_DIR = Path("/work/shared/data/locomo")
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
        questions, dropped = [], []
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

    Returns ``{"questions": n, "recall@5": ..., "recall@10": ..., "by_category": {c: {"questions", "recall@k"}}}``.
    """
    conversations = load_conversations() if conversations is None else conversations
    depth = max(ks)
    per_question: list[tuple[int, list[float]]] = []
    for c, conversation in enumerate(conversations):
        for q in conversation.questions:
            if q.category not in categories or not q.evidence:
                continue
            retrieved = list(search_fn(c, q.question, depth))
            per_question.append((q.category, [recall_at_k(retrieved, q.evidence, k) for k in ks]))

    def summary(rows: list[list[float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"questions": len(rows)}
        for i, k in enumerate(ks):
            out[f"recall@{k}"] = float(np.mean([r[i] for r in rows])) if rows else 0.0
        return out

    result = summary([r for _, r in per_question])
    result["by_category"] = {cat: summary([r for c, r in per_question if c == cat]) for cat in categories}
    return result


# --------------------------------------------------------------------------------------------------------------
# In-process retrievers on SearchIndex
# --------------------------------------------------------------------------------------------------------------


def context_of(turns: Sequence[Turn], i: int, previous: int = 2, date: bool = True) -> str:
    """The context of turn ``i``: its session date and the ``previous`` turns before it in the same session."""
    turn = turns[i]
    before = [t.memory for t in turns[max(0, i - previous) : i] if t.session == turn.session]
    return "\n".join(([turn.date] if date and turn.date else []) + before)


def documents(conversation: Conversation, previous: int = 0, date: bool = False) -> list[Doc]:
    turns = conversation.turns
    return [Doc(t.dia_id, t.memory, context_of(turns, i, previous, date)) for i, t in enumerate(turns)]


class CachingEmbedder:
    """Memoises a wrapped embedder by text, so that retriever variants embed each text once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self._cache: dict[str, npt.NDArray[np.float32]] = {}

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
    dense: bool = True  # build vectors (and embed queries)


def index_search_fn(
    conversations: Sequence[Conversation], variant: Variant, embedder: Any
) -> tuple[SearchFn, float]:
    """A search_fn over one SearchIndex per conversation, and the time taken to build the indexes."""
    use = embedder if variant.dense and variant.config.mode != "lexical" else None
    started = time.perf_counter()
    indexes = [SearchIndex.build(documents(c, variant.previous, variant.date), use) for c in conversations]
    elapsed = time.perf_counter() - started

    def search(c: int, question: str, k: int) -> list[str]:
        return [doc_id for doc_id, _ in indexes[c].search(question, k, use, config=variant.config)]

    return search, elapsed


LEXICAL = SearchConfig(mode="lexical", context_weight=0.0)
DENSE = SearchConfig(mode="dense")
HYBRID = SearchConfig(context_weight=0.0)
CONTEXT = 2


def variants() -> list[Variant]:
    """What the table compares: each component added on its own, then the default configuration."""
    default = SearchConfig()
    return [
        Variant("lexical (BM25, stemming, stop words)", LEXICAL),
        Variant("dense (MiniLM int8, cosine)", DENSE),
        Variant("hybrid, reciprocal-rank fusion (k=60)", replace(HYBRID, fusion="rrf")),
        Variant("hybrid, weighted score fusion", HYBRID),
        Variant("lexical + context", replace(LEXICAL, context_weight=default.context_weight), CONTEXT, True),
        Variant("dense + context", DENSE, CONTEXT, True),
        Variant("hybrid rrf + context", replace(default, fusion="rrf"), CONTEXT, True),
        Variant("hybrid + context, no date", default, CONTEXT, False),
        Variant("hybrid + context, 1 previous turn", default, 1, True),
        Variant("hybrid + context (default)", default, CONTEXT, True),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true", help="also sweep BM25, context and fusion parameters")
    parser.add_argument("--by-category", action="store_true", help="recall@5 by question category too")
    args = parser.parse_args()

    conversations = load_conversations()
    questions = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES and q.evidence)
    dropped = [e for c in conversations for e in c.dropped_evidence]
    print(f"LoCoMo: {len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} memories, ")
    print(f"{questions} questions of categories 1-4 with evidence; evidence entries dropped: {dropped}\n")
    embedder = CachingEmbedder(MiniLMEmbedder())
    rows = [(v.name, v) for v in variants()]
    if args.sweep:
        rows += [(f"sweep: {label}", v) for label, v in sweep()]
    width = max(len(name) for name, _ in rows)
    header = f"| {'retriever':<{width}} | recall@5 | recall@10 |"
    if args.by_category:
        header += " r@5 c1 | r@5 c2 | r@5 c3 | r@5 c4 |"
    print(header)
    print("|" + "-" * (width + 2) + "|---------:|----------:|" + ("-------:|" * 4 if args.by_category else ""))
    for name, variant in rows:
        search_fn, _ = index_search_fn(conversations, variant, embedder)
        result = evaluate(search_fn, conversations)
        line = f"| {name:<{width}} | {result['recall@5']:8.3f} | {result['recall@10']:9.3f} |"
        if args.by_category:
            line += "".join(f" {result['by_category'][c]['recall@5']:6.3f} |" for c in CATEGORIES)
        print(line, flush=True)


def sweep() -> list[tuple[str, Variant]]:
    default = SearchConfig()
    out: list[tuple[str, Variant]] = []
    for k1 in (0.9, 1.2, 1.5, 2.0):
        for b in (0.5, 0.75, 0.9):
            out.append((f"lexical k1={k1} b={b}", Variant("", replace(LEXICAL, k1=k1, b=b))))
    for w in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0):
        out.append((f"lexical + context w={w}", Variant("", replace(LEXICAL, context_weight=w), CONTEXT, True)))
    for previous in (1, 2, 3, 4):
        out.append((f"hybrid + context, previous={previous}", Variant("", default, previous, True)))
    for w in (0.1, 0.2, 0.3, 0.5, 0.7):
        out.append((f"hybrid + context w={w}", Variant("", replace(default, context_weight=w), CONTEXT, True)))
    for dw in (0.3, 0.4, 0.5, 0.6, 0.7):
        out.append((f"hybrid + context dense_weight={dw}", Variant("", replace(default, dense_weight=dw), CONTEXT, True)))
    for k in (10, 30, 60):
        config = replace(default, fusion="rrf", rrf_k=float(k))
        out.append((f"hybrid rrf + context, k={k}", Variant("", config, CONTEXT, True)))
    return out


if __name__ == "__main__":
    main()
