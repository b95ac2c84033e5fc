"""Read-only attributes that cost a tuple of their values: for events an open span holds until it ends.

An in-flight breach's ``gen_ai.evaluation.result`` event waits on its run's open root span until the run ends,
and a process may hold thousands of open runs. As a dict, its dozen attributes take a hash table of about 500
bytes; :class:`PackedAttributes` keeps a tuple of the values over a key tuple shared by every mapping with the same
keys (about a third of that), and each string, or tuple of strings, equal to the one the previous mapping of the
same keys holds is that object (the events of one run's breaches, found together, name the same spans). It is a
``Mapping``, as the SDK's event attributes are typed: the exporters read
them with ``items()`` (OTLP) or ``dict()`` (``ReadableSpan.to_json``), as they read the SDK's own
``BoundedAttributes``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from opentelemetry.util.types import AttributeValue

__all__ = ["PackedAttributes"]

#: At most this many key sets are kept (the events made here have a few dozen); past it the table starts over.
_LAYOUTS_KEPT: Final = 256


class _Layout:
    """The keys of a set of mappings, in order, the position of each, and the values of the last mapping made."""

    __slots__ = ("index", "keys", "last")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.index = {key: i for i, key in enumerate(keys)}
        self.last: tuple[AttributeValue, ...] = ()


_LAYOUTS: dict[tuple[str, ...], _Layout] = {}


def _layout(keys: tuple[str, ...]) -> _Layout:
    layout = _LAYOUTS.get(keys)
    if layout is None:
        if len(_LAYOUTS) >= _LAYOUTS_KEPT:
            _LAYOUTS.clear()
        layout = _LAYOUTS[keys] = _Layout(keys)
    return layout


def _same(value: AttributeValue, seen: AttributeValue) -> bool:
    """Whether ``seen`` can stand for ``value``: an equal string, or an equal tuple of strings (an equal number may
    differ, as -0.0 from 0.0, and a bool from an int)."""
    if type(value) is str:
        return type(seen) is str and value == seen
    return type(value) is tuple and type(seen) is tuple and value == seen and all(type(v) is str for v in value)


class PackedAttributes(Mapping[str, AttributeValue]):
    """The attributes of ``attributes``, in the same order, read-only; equal to any mapping of the same items."""

    __slots__ = ("_layout", "_values")

    def __init__(self, attributes: Mapping[str, AttributeValue]) -> None:
        layout = self._layout = _layout(tuple(attributes))
        values = tuple(attributes.values())
        last = layout.last
        if last:
            values = tuple(seen if _same(v, seen) else v for v, seen in zip(values, last, strict=True))
        self._values = layout.last = values

    def __getitem__(self, key: str) -> AttributeValue:
        return self._values[self._layout.index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout.keys)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._layout.index

    def __repr__(self) -> str:
        return f"PackedAttributes({dict(zip(self._layout.keys, self._values, strict=True))!r})"
