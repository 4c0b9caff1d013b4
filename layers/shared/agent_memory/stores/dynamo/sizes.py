"""DynamoDB's item size formula: the bytes it bills an item's write and read units by.

Used by the DynamoDB store (whether a compressed body saves a write unit) and by ``bench.perf.cost`` (the units of
every item the handlers write), so both count alike."""

from __future__ import annotations

import math
from typing import Any


def value_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one typed attribute value."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").split("e")[0].split("E")[0].strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(v)
    if kind in {"BOOL", "NULL"}:
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in v.items())
    if kind == "SS":
        return sum(len(e.encode()) for e in v)
    if kind == "NS":
        return sum(value_size({"N": e}) for e in v)
    if kind == "BS":
        return sum(len(e) for e in v)
    raise ValueError(kind)


def item_size(item: dict[str, Any] | None) -> int:
    """Bytes of an item: attribute names plus values."""
    return sum(len(k.encode()) + value_size(v) for k, v in (item or {}).items())
