"""Values made from long-lived objects, kept by the object itself: a config's schemas, a baseline run.

The object is found by identity (its id, with the object held so that the id stays its own), without hashing or
serializing it: what is kept is found in one dict look-up, run after run. At most ``size`` values are kept; past
that, all are forgotten at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ByObject"]

K = TypeVar("K")
V = TypeVar("V")


class ByObject(Generic[K, V]):
    """``make(key)`` for each key object, made once while kept."""

    def __init__(self, make: Callable[[K], V], size: int) -> None:
        self._make = make
        self._size = size
        self._kept: dict[int, tuple[K, V]] = {}

    def __call__(self, key: K) -> V:
        kept = self._kept.get(id(key))
        if kept is not None and kept[0] is key:
            return kept[1]
        value = self._make(key)
        if len(self._kept) >= self._size:
            self._kept.clear()
        self._kept[id(key)] = (key, value)
        return value
