"""Deferred dataclasses (``agent_memory.runtime.lazyclass``): a class defined with them is, from its first instance on,
exactly the class ``dataclasses.dataclass`` makes; and every dataclass of the package is one of them or processed."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import pickle
import subprocess
import sys
import time
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest

from agent_memory.runtime import lazyclass
from agent_memory.runtime.lazyclass import dataclass
from tests.support.aws import race

LAYER = Path(__file__).resolve().parents[2] / "layers" / "shared"


def _twins(**options: Any) -> tuple[type, type]:
    """The same class body decorated by ``dataclasses.dataclass`` and by ``lazyclass.dataclass``."""

    def body(decorate: Any) -> type:
        @decorate(**options)
        class Record:
            """A record."""

            name: str
            count: int = 0
            tags: list[str] = field(default_factory=list)
            note: str | None = field(default=None, compare=False, repr=False)

        return Record

    return body(dataclasses.dataclass), body(dataclass)


def _hash_outcome(value: Any) -> str:
    try:
        hash(value)
    except TypeError as exc:
        return f"TypeError: {exc}"
    return "hashable"


def _methods(cls: type) -> set[str]:
    return {k for k, v in vars(cls).items() if callable(v) or k in ("__hash__", "__match_args__")}


@pytest.mark.parametrize(
    "options",
    [{}, {"frozen": True}, {"eq": False}, {"order": True}, {"kw_only": True}, {"frozen": True, "repr": False}],
    ids=repr,
)
def test_a_deferred_class_becomes_what_dataclasses_makes(options: dict[str, Any]) -> None:
    eager, lazy = _twins(**options)
    assert not dataclasses.is_dataclass(lazy)  # nothing generated at definition
    assert "__eq__" not in vars(lazy) and "__repr__" not in vars(lazy)
    make = (lambda c, **k: c(name="a", **k)) if options.get("kw_only") else (lambda c, **k: c("a", **k))
    first, twin = make(lazy, count=2), make(eager, count=2)
    assert dataclasses.is_dataclass(lazy)
    assert [(f.name, f.default, f.compare, f.repr) for f in dataclasses.fields(lazy)] == [
        (f.name, f.default, f.compare, f.repr) for f in dataclasses.fields(eager)
    ]
    assert _methods(lazy) == _methods(eager)
    assert getattr(lazy, "__hash__", None) is None or callable(lazy.__hash__)
    assert (lazy.__hash__ is None) == (eager.__hash__ is None)
    if options.get("repr", True):
        assert repr(first) == repr(twin) == "_twins.<locals>.body.<locals>.Record(name='a', count=2, tags=[])"
    else:
        assert repr(first).startswith("<") and " object at 0x" in repr(first)  # object's, as dataclasses leaves it
    assert dataclasses.asdict(first) == dataclasses.asdict(twin)
    assert dataclasses.replace(first, count=3).count == 3 and first.count == 2
    assert copy.copy(first).count == 2
    if options.get("eq", True):
        assert make(lazy, count=2) == first and make(lazy, count=3) != first
    else:
        assert make(lazy, count=2) != first  # identity, as dataclasses does with eq=False
    if options.get("frozen"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.count = 4  # type: ignore[misc]
        assert _hash_outcome(first) == _hash_outcome(twin)  # here a TypeError: a list field, as dataclasses does
    else:
        first.count = 4
        assert first.count == 4
    assert first.tags == [] and first.tags is not make(lazy).tags  # default_factory, per instance


@dataclass(frozen=True)
class _Base:
    a: int


@dataclass(frozen=True)
class _Child(_Base):
    b: int = 1


class _Plain(_Base):
    """Not a dataclass: inherits the deferred base's __init__."""


@dataclass
class _WithPostInit:
    a: int
    doubled: int = field(init=False)

    def __post_init__(self) -> None:
        self.doubled = self.a * 2


@dataclass
class _Pickled:
    a: int


def test_subclasses_post_init_and_pickle() -> None:
    child = _Child(1, 2)  # processes the base first
    assert (child.a, child.b) == (1, 2) and [f.name for f in dataclasses.fields(_Child)] == ["a", "b"]
    assert _Base(1) == _Base(1) and _Base(1) != child
    assert _Plain(5).a == 5 and isinstance(_Plain(5), _Base)
    assert _WithPostInit(3).doubled == 6
    assert pickle.loads(pickle.dumps(_Pickled(7))) == _Pickled(7)
    with pytest.raises(TypeError):
        _Base()  # type: ignore[call-arg]  # the generated __init__'s own error
    with pytest.raises(TypeError):
        _Base(1, 2)  # type: ignore[call-arg]


def test_a_class_with_its_own_init_or_slots_is_processed_at_once() -> None:
    @dataclass(slots=True)
    class Slotted:
        a: int

    @dataclass
    class OwnInit:
        a: int

        def __init__(self, a: int) -> None:
            self.a = a + 1

    assert dataclasses.is_dataclass(Slotted) and dataclasses.is_dataclass(OwnInit)
    assert Slotted(1).a == 1 and not hasattr(Slotted(1), "__dict__") and OwnInit(1).a == 2


def test_racing_first_instantiations_all_get_whole_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first instantiation processes the class; threads making one meanwhile go through the stand-in and wait
    for it (processing is slowed, the GIL released, so that they do come in the middle of it)."""
    real = dataclasses.dataclass

    def slow(cls: Any = None, /, **options: Any) -> Any:
        time.sleep(0.05)
        return real(cls, **options)

    monkeypatch.setattr(lazyclass.dataclasses, "dataclass", slow)

    @dataclass(frozen=True)
    class Raced:
        a: int
        b: str = "x"

    made: list[Any] = []
    race(*(functools.partial(lambda i: made.append(Raced(i)), i) for i in range(8)))
    assert sorted(r.a for r in made) == list(range(8)) and all(r.b == "x" for r in made)
    assert not getattr(vars(Raced)["__init__"], lazyclass._STAND_IN, False)  # the generated one replaced it
    assert lazyclass.dataclasses._set_new_attribute is lazyclass._ORIGINAL_SET_NEW_ATTRIBUTE  # put back


def test_every_deferred_dataclass_of_the_package_processes() -> None:
    """Processing is deferred to the first instance, so an error in it (a frozen class inheriting a mutable one, a
    field without a default after one with) would only show then: in a fresh interpreter (where no test has made
    one yet) every module of the package is imported, and each deferred class is processed and becomes a
    dataclass."""
    script = f"""
import sys; sys.path[:0] = [{str(LAYER)!r}]
import dataclasses, importlib, json, pkgutil
import agent_memory
from agent_memory.runtime import lazyclass
deferred, failed = [], []
for info in pkgutil.walk_packages(agent_memory.__path__, "agent_memory."):
    module = importlib.import_module(info.name)
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == info.name and lazyclass._PENDING in vars(value):
            deferred.append(info.name + "." + value.__qualname__)
            lazyclass.realize(value)
            if not dataclasses.is_dataclass(value) or lazyclass._PENDING in vars(value):
                failed.append(value.__qualname__)
print(json.dumps({{"deferred": deferred, "failed": failed}}))
"""
    out = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True, timeout=120)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["failed"] == []
    # the ports, the policies' records, the services' outcomes: deferred at import
    assert {"agent_memory.stores.ports.SessionKey", "agent_memory.stores.ports.NewEvent"} <= set(result["deferred"])
    assert len(result["deferred"]) >= 40
