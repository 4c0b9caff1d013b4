"""The user profile: facts per memory record, aggregated into what is known about the user, and its rendering.

A memory record carries the facts extracted from its text when it was saved (``MemoryRecord.facts``: a list of
``{"category", "text"}``). The profile is never stored: it is aggregated from the user's current records on read,
so a forgotten record's facts leave it at once. Aggregation:

- the same fact (category and text, compared case- and space-insensitively) from several records is one fact
  listing every record it came from (``memory_ids``) and dated by the newest (``updated_at``);
- single-valued facts keep only the newest statement: the user's name, where they live now ("Lives in …",
  "Moved to …"), and each thing they like or dislike ("Likes sushi" then "Dislikes sushi": the dislike);
- facts are listed by importance (name, allergies, diet, dislikes, preferences, people, places, work, other),
  newest first within a category, so that a caller short of room (``profile_text(max_facts=)``, the context's
  budget) keeps the ones that matter most.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any, Final

from ..limits import MAX_FACT_CHARS, MAX_FACTS_PER_MEMORY
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

CATEGORIES: Final = ("name", "preference", "dislike", "allergy", "diet", "place", "person", "work", "other")
# The order facts are listed (and kept, when a budget trims them): what must not be got wrong first.
IMPORTANCE: Final = ("name", "allergy", "diet", "dislike", "preference", "person", "place", "work", "other")
PROFILE_HEADER: Final = "What is known about the user:"

_TASTE = re.compile(r"^(?:likes|loves|enjoys|prefers|dislikes|hates|does not like)\s+(.+)$", re.IGNORECASE)
_RESIDENCE = re.compile(r"^(?:lives in|moved to)\s+", re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".! ")


def clean_facts(raw: Any) -> list[dict[str, str]]:
    """Facts as stored: a list of ``{"category", "text"}`` from whatever an extractor (a model) returned, with an
    unknown category read as ``other``, texts trimmed to ``MAX_FACT_CHARS``, blanks and repeats dropped, at most
    ``MAX_FACTS_PER_MEMORY``. Anything that is not a list of such objects gives no facts."""
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        text, category = item.get("text"), item.get("category")
        if not isinstance(text, str) or not text.strip():
            continue
        text = " ".join(text.split())
        if len(text) > MAX_FACT_CHARS:
            text = text[: MAX_FACT_CHARS - 1] + "…"
        category = category.strip().lower() if isinstance(category, str) else "other"
        if category not in CATEGORIES:
            category = "other"
        key = (category, _norm(text))
        if key in seen:
            continue
        seen.add(key)
        out.append({"category": category, "text": text})
        if len(out) >= MAX_FACTS_PER_MEMORY:
            break
    return out


def _slot(category: str, text: str) -> tuple[str, ...] | None:
    """The slot a single-valued fact fills (a newer fact of the same slot replaces it); None for a fact that
    adds to the others."""
    if category == "name":
        return ("name",)
    if category == "place" and _RESIDENCE.match(text):
        return ("residence",)
    if category in ("preference", "dislike") and (match := _TASTE.match(text)):
        return ("taste", _norm(match.group(1)))
    return None


@dataclass
class _Fact:
    category: str
    text: str
    memory_ids: list[str] = field(default_factory=list)
    updated_at: float = 0.0


@dataclass(frozen=True)
class Source:
    """One memory record as the profile sees it: its id, its time, and its facts."""

    memory_id: str
    timestamp: float
    facts: list[dict[str, str]]


def aggregate(sources: Iterable[Source]) -> list[dict[str, Any]]:
    """The profile's facts from ``sources``: merged, the newest winning each single-valued slot, in importance
    order (see the module's docstring); ``updated_at`` is the newest source's timestamp (epoch seconds)."""
    facts: dict[tuple[str, str], _Fact] = {}
    for source in sources:
        for item in source.facts:
            key = (item["category"], _norm(item["text"]))
            fact = facts.setdefault(key, _Fact(item["category"], item["text"]))
            if source.memory_id not in fact.memory_ids:
                fact.memory_ids.append(source.memory_id)
            if source.timestamp >= fact.updated_at:
                fact.updated_at = source.timestamp
                fact.text = item["text"]  # the newest wording
    winners: dict[tuple[str, ...], _Fact] = {}
    kept: list[_Fact] = []
    for fact in facts.values():
        slot = _slot(fact.category, fact.text)
        if slot is None:
            kept.append(fact)
            continue
        held = winners.get(slot)
        # Ties (one record stating both) keep the later-listed fact's memory order stable: by text.
        if held is None or (fact.updated_at, fact.text) > (held.updated_at, held.text):
            winners[slot] = fact
    kept.extend(winners.values())
    rank = {c: i for i, c in enumerate(IMPORTANCE)}
    kept.sort(key=lambda f: (rank.get(f.category, len(rank)), -f.updated_at, _norm(f.text)))
    return [
        {"category": f.category, "text": f.text, "memory_ids": sorted(f.memory_ids), "updated_at": f.updated_at}
        for f in kept
    ]


def profile_text(profile: Mapping[str, Any], max_facts: int | None = None) -> str:
    """The profile as the text of a system message: ``"What is known about the user:\\n- <fact>\\n…"``, the
    first ``max_facts`` facts (all when None); ``""`` when there are none to show."""
    facts = list(profile.get("facts") or [])
    if max_facts is not None:
        facts = facts[: max(max_facts, 0)]
    lines = [f"- {fact['text']}" for fact in facts if isinstance(fact, Mapping) and fact.get("text")]
    return "\n".join([PROFILE_HEADER, *lines]) if lines else ""
