"""Dataclasses whose methods are generated when the class is first instantiated, not when it is defined.

``dataclasses.dataclass`` writes a class's ``__init__``, ``__repr__``, ``__eq__`` (and, frozen, ``__setattr__``,
``__delattr__`` and ``__hash__``) as source text and compiles it when the class statement runs: 0.3-0.6 ms a class.
A session function defines 26 of this package's dataclasses on its cold start (the compaction route 36), most of
which none of its requests makes: about 60 M instructions, 5-6% of the boto3 floor its first response is measured
against (``bench.perf.first_response --instructions``).

``dataclass`` here takes the same arguments. For a class that defines no ``__init__`` of its own and asks for
neither ``slots`` nor ``init=False`` it only puts a stand-in ``__init__`` on the class; the first instantiation runs
``dataclasses.dataclass`` on the class in place (as it always works without ``slots``: the same class object),
its dataclass bases first, then makes the instance. From then on the class is exactly what the decorator would
have made. Any other class is processed at once, after its deferred bases.

What differs before a class's first instance: ``dataclasses.fields`` and ``is_dataclass`` do not know it yet,
and a default given as ``field(...)`` reads as that ``Field`` on the class. Nothing in this package asks a
dataclass's class anything before making one (instances only: ``fields(self)``, ``asdict(report)``);
``tests/unit/test_lazyclass.py`` holds the processed classes to what ``dataclasses.dataclass`` makes.

Threads: the first instantiations may race (the local server's request threads share the modules; a function's
own worker threads read parts and write batches). The stand-in stays on the class until the class is wholly
processed and the generated ``__init__`` replaces it (one assignment), and processing runs under a lock, so a
thread making one meanwhile goes through the stand-in, waits, and gets the finished class: there is no moment
without an ``__init__``, nor an instance of a half-processed class. dataclasses never replaces an ``__init__`` a
class has (``_set_new_attribute``), so while it processes a deferred class that one private function is swapped
for one that keeps the generated ``__init__`` aside: CPython 3.13's, which the functions run (the Makefile and
the template pin it); on any other version every class is processed at once, as dataclasses does.

Type checkers see ``dataclasses.dataclass`` itself (``typing.dataclass_transform`` would lose ``replace``).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

_LOCK = threading.RLock()
_PENDING = "__agent_memory_deferred_dataclass__"  # the options, on a class not processed yet
_STAND_IN = "__agent_memory_stand_in__"  # marks the stand-in __init__
_ORIGINAL_SET_NEW_ATTRIBUTE: Callable[[type, str, Any], bool] | None = getattr(dataclasses, "_set_new_attribute", None)
# Deferral relies on how CPython 3.13's dataclasses sets the generated methods (see the module's doc).
DEFERRED = sys.version_info[:2] == (3, 13) and callable(_ORIGINAL_SET_NEW_ATTRIBUTE)


def _deferrable(cls: type, options: dict[str, Any]) -> bool:
    """No ``__init__`` of its own, none of ``slots`` (a new class) or ``init=False``."""
    return DEFERRED and "__init__" not in cls.__dict__ and not options.get("slots") and options.get("init", True)


def _pending(cls: type) -> bool:
    return any(_PENDING in klass.__dict__ for klass in cls.__mro__)


# The generated __init__ of the class being processed (under the lock), set once the rest of it is.
_GENERATED_INIT: dict[type, Any] = {}


def _replacing_stand_ins(cls: type, name: str, value: Any) -> bool:
    """dataclasses' ``_set_new_attribute`` (never overwrite an attribute the class has), except that the generated
    ``__init__`` of a class with a stand-in is kept aside: ``realize`` puts it in the stand-in's place once every
    other method is set, so that no instance is made of a class still half-processed."""
    if name == "__init__" and getattr(cls.__dict__.get(name), _STAND_IN, False):
        _GENERATED_INIT[cls] = value
        return False
    assert _ORIGINAL_SET_NEW_ATTRIBUTE is not None
    return _ORIGINAL_SET_NEW_ATTRIBUTE(cls, name, value)


def realize(cls: type) -> None:
    """Process ``cls`` and every deferred dataclass among its bases, bases first (nothing when all are done)."""
    if not _pending(cls):
        return
    with _LOCK:
        for klass in reversed(cls.__mro__):
            options = klass.__dict__.get(_PENDING)
            if options is None:
                continue
            dataclasses._set_new_attribute = _replacing_stand_ins  # type: ignore[attr-defined]
            try:
                dataclasses.dataclass(klass, **options)
            finally:
                dataclasses._set_new_attribute = _ORIGINAL_SET_NEW_ATTRIBUTE  # type: ignore[attr-defined]
            klass.__init__ = _GENERATED_INIT.pop(klass)  # type: ignore[misc]  # one assignment: the class is whole
            delattr(klass, _PENDING)


def _stand_in(owner: type) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        realize(owner)
        init = owner.__dict__["__init__"]
        if getattr(init, _STAND_IN, False):  # never expected (the stand-in goes only with the class processed):
            raise TypeError(f"dataclass {owner.__qualname__} is not processed")  # an error, not endless recursion
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{owner.__qualname__}.__init__"
    setattr(__init__, _STAND_IN, True)
    return __init__


def _deferred(cls: type | None = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass``, processed on first instantiation where it can be (see the module's doc)."""

    def wrap(klass: type) -> type:
        if not _deferrable(klass, options):
            realize(klass)  # its deferred bases
            return dataclasses.dataclass(klass, **options)  # type: ignore[no-any-return]
        setattr(klass, _PENDING, options)
        klass.__init__ = _stand_in(klass)  # type: ignore[misc]
        return klass

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass  # what type checkers see: the classes are dataclasses
else:
    dataclass = _deferred
