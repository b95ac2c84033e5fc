"""Normalization looks keys up through a cache of key sets (``span_shape``); a record must not depend on it.

Every span of every fixture is normalized as recorded, with its attribute keys reversed and rotated (a new key
tuple, so a new shape), and after the cache was filled past its limit: the records must be equal.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import pytest
from conftest import fixture_files

from trajgrade.core.readers import read_path
from trajgrade.core.spans import SpanView
from trajgrade.core.trajectory import normalize

#: The module that keeps the cache.
span_shape = importlib.import_module("trajgrade.core.trajectory.span_shape")


class _Reordered:
    """A span whose attributes come in another order (every other field as the span has it)."""

    def __init__(self, span: SpanView, attributes: Mapping[str, Any]) -> None:
        self._span = span
        self.attributes = attributes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)


def _orders(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    items = list(attributes.items())
    return [dict(reversed(items)), dict(items[len(items) // 2 :] + items[: len(items) // 2])]


def _record(span: Any) -> dict[str, Any]:
    r = normalize(span, True)
    record = r.fields()
    record["attributes"] = dict(sorted((r.attributes or {}).items()))
    return record


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.stem}")
def test_records_do_not_depend_on_key_order_or_the_cache(path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    spans = list(read_path(str(path)))
    expected = [_record(s) for s in spans]
    for span, want in zip(spans, expected, strict=True):
        for attributes in _orders(span.attributes):
            assert _record(_Reordered(span, attributes)) == want
    monkeypatch.setattr(span_shape, "_SHAPES", {})
    monkeypatch.setattr(span_shape, "_MAX_SHAPES", 3)
    assert [_record(s) for s in spans] == expected
    assert len(span_shape._SHAPES) <= 3
