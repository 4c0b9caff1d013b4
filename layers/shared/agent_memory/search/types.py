"""What the search index takes and is configured with: ``Doc`` (a saved memory), ``SearchConfig`` (scoring
parameters) and ``DEFAULT_CONFIG`` (what the service searches with). No numpy: a caller can name these without
loading the index."""

from __future__ import annotations

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

__all__ = ["DEFAULT_CONFIG", "Doc", "SearchConfig"]


@dataclass(frozen=True)
class Doc:
    """One saved memory as the index sees it.

    ``text`` is the memory itself (e.g. ``"Caroline: I went to the support group yesterday"``); ``context`` is
    optional surrounding text (the turns just before it in the same session, the session date), indexed as a
    second, lower-weighted field and embedded with the text, so that a memory can be found by what it refers to.
    ``reply`` is the turn that answered it (``"Melanie: Are they yours at the festival?"``): embedded after the
    context, never indexed as words, so that a memory's vector holds its exchange while a query word matches only
    what the memory and the turns before it said.
    """

    id: str
    text: str
    context: str = ""
    author: str = ""  # who said it: a query naming the author prefers the author's memories (``author_boost``)
    timestamp: float | None = None  # when it was said (epoch seconds): a query naming its month prefers it
    reply: str = ""


@dataclass(frozen=True)
class SearchConfig:
    """Scoring parameters. ``mode``: hybrid | lexical | dense; ``fusion``: weighted | rrf."""

    mode: str = "hybrid"
    k1: float = 1.2
    b: float = 0.75
    context_weight: float = 0.4
    fusion: str = "weighted"
    dense_weight: float = 0.5
    rrf_k: float = 60.0
    rrf_depth: int = 100
    # Added to the fused ranking (which is in [0, 1]) of the memories of an author the query names, and of
    # memories that place something in time when the query asks when: see ``SearchIndex._signals``.
    author_boost: float = 0.0
    time_boost: float = 0.0
    date_boost: float = 0.0  # memories of the month (and year) the query names ("in July 2023", "on 7 July")
    # What the query's embedding is computed from: the query as typed ("keep"), or with the words naming an
    # author of the memories replaced by "they" / "their" ("neutral"; ``SearchIndex._dense_query``).
    dense_names: str = "keep"
    # The learned rerank below the head (``scoring.Rerank``, hybrid weighted fusion only; 0: off): the first
    # pass's top ``rerank_keep`` stay where they are and the rest of its top ``rerank_depth`` are reordered.
    rerank_depth: int = 0
    rerank_keep: int = 5

    def __post_init__(self) -> None:
        if self.mode not in ("hybrid", "lexical", "dense"):
            raise ValueError(f"unknown search mode {self.mode!r}")
        if self.fusion not in ("weighted", "rrf"):
            raise ValueError(f"unknown fusion {self.fusion!r}")
        if self.dense_names not in ("keep", "neutral"):
            raise ValueError(f"unknown dense_names {self.dense_names!r}")
        if self.k1 < 0 or not 0 <= self.b <= 1 or self.context_weight < 0 or not 0 <= self.dense_weight <= 1:
            raise ValueError("k1 >= 0, 0 <= b <= 1, context_weight >= 0 and 0 <= dense_weight <= 1")
        if self.author_boost < 0 or self.time_boost < 0 or self.date_boost < 0:
            raise ValueError("author_boost, time_boost and date_boost must be >= 0")
        if self.rerank_depth < 0 or self.rerank_keep < 0:
            raise ValueError("rerank_depth and rerank_keep must be >= 0")


# What the service searches with: the boosts chosen on LoCoMo's tuning conversations (26, 30, 41;
# bench/quality/locomo.py --sweep), best there of a grid from 0.05 to 0.5 and flat within 0.01 around it; the
# validation conversations (42, 43) were only reported. The month boost fires on few questions (9% name a month) and
# moves recall by a question or two across its grid: the smallest that reached the grid's best tuning recall@10. The
# neutral names in the query's embedding, which raise recall@10, were chosen the same way: +0.012 / +0.014 tuning
# recall@5 / @10, and every neighbouring setting of the dense weight, context weight and author boost kept most of it.
# The learned rerank below the top 5 (``scoring.RERANK``, for recall@10) over the first pass's top 50, chosen the same
# way (``bench/tuning/rerank.py --fit``).
DEFAULT_CONFIG = SearchConfig(
    author_boost=0.3, time_boost=0.3, date_boost=0.1, dense_names="neutral", rerank_depth=50, rerank_keep=5
)
