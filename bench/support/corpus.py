"""The synthetic memories the speed benchmarks seed a store with: short texts over a small vocabulary, so that every
query matches many records (the hard case for ranking time), the same for every run."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_memory.stores.ports import MemoryRecord

WORDS = [
    "trip",
    "flight",
    "hotel",
    "Lisbon",
    "Porto",
    "sister",
    "brother",
    "cat",
    "dog",
    "allergy",
    "peanuts",
    "gluten",
    "cello",
    "piano",
    "guitar",
    "marathon",
    "running",
    "swimming",
    "painting",
    "pottery",
    "garden",
    "tomatoes",
    "birthday",
    "anniversary",
    "wedding",
    "job",
    "interview",
    "promotion",
    "manager",
    "startup",
    "python",
    "rust",
    "recipe",
    "lasagna",
    "curry",
    "sushi",
    "museum",
    "concert",
    "festival",
    "camping",
    "hiking",
    "mountain",
    "beach",
    "ocean",
    "sunset",
    "coffee",
    "tea",
    "book",
    "novel",
    "poetry",
    "school",
    "university",
    "exam",
    "thesis",
    "doctor",
    "dentist",
    "insurance",
]


def synthetic(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"Memory {i}: " + " ".join(rng.choice(WORDS) for _ in range(14)) for i in range(n)]


def seed_records(n: int) -> list[MemoryRecord]:
    """The records a store of ``n`` is seeded with (those of a smaller size are a prefix of a larger one's)."""
    from agent_memory.stores.ports import MemoryRecord

    return [MemoryRecord(f"m{i}", t, "user", 1.7e9) for i, t in enumerate(synthetic(n))]
