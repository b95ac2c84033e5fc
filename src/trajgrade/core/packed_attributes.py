"""Read-only attributes that cost a tuple of their values: for events an open span holds until it ends.

An in-flight breach's ``gen_ai.evaluation.result`` event waits on its run's open root span until the run ends,
and a process may hold thousands of open runs. As a dict, its dozen attributes take a hash table of about 500
bytes; :class:`PackedAttributes` keeps a tuple of the values over a key tuple shared by every mapping with the same
keys (about a third of that). It is a ``Mapping``, as the SDK's event attributes are typed: the exporters read
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
    """The keys of a set of mappings, in order, and the position of each."""

    __slots__ = ("index", "keys")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.index = {key: i for i, key in enumerate(keys)}


_LAYOUTS: dict[tuple[str, ...], _Layout] = {}


def _layout(keys: tuple[str, ...]) -> _Layout:
    layout = _LAYOUTS.get(keys)
    if layout is None:
        if len(_LAYOUTS) >= _LAYOUTS_KEPT:
            _LAYOUTS.clear()
        layout = _LAYOUTS[keys] = _Layout(keys)
    return layout


class PackedAttributes(Mapping[str, AttributeValue]):
    """The attributes of ``attributes``, in the same order, read-only; equal to any mapping of the same items."""

    __slots__ = ("_layout", "_values")

    def __init__(self, attributes: Mapping[str, AttributeValue]) -> None:
        self._layout = _layout(tuple(attributes))
        self._values = tuple(attributes.values())

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
