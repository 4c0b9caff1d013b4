"""Embedders for search tests: deterministic bag-of-words vectors, no model."""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt

from agent_memory.search import tokenize


class HashEmbedder:
    """Deterministic bag-of-words vectors (each token hashed to a dimension): fast, no model."""

    name = "hash"
    dim = 64

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text) or ["<empty>"]:
                out[row, int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1.0
        unit: npt.NDArray[np.float32] = out / np.linalg.norm(out, axis=1, keepdims=True)
        return unit


class RecordingEmbedder(HashEmbedder):
    """Remembers what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.seen += texts
        return super().embed(texts)


class RecordingHashEmbedder(RecordingEmbedder):
    """``RecordingEmbedder``'s bag-of-words vectors, wider (fewer hash collisions in the orders asserted)."""

    dim = 256
