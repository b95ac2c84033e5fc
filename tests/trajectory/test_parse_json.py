"""``parse_json_value`` calls the standard decoder's scanner directly; it must agree with ``json.loads``."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from trajgrade.core.trajectory.content import parse_json_value

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _expected(value: str) -> Any:
    """What the former ``json.loads``-based reading gave."""
    if value[:1] not in ("{", "[", '"'):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=400, derandomize=True)
@given(_json_values, st.sampled_from(["", " ", "\n\t ", " x", "}", ",1", "\u00a0", "\f"]))
@example(None, "")
def test_encoded_values_with_trailing_text(value: Any, tail: str) -> None:
    text = json.dumps(value) + tail
    assert _same(parse_json_value(text), _expected(text))


@settings(max_examples=400, derandomize=True)
@given(st.text(alphabet='{}[]":,0123456789.eE+-tfnaNIulrs \t\n\\', max_size=30))
def test_fragments(text: str) -> None:
    assert _same(parse_json_value(text), _expected(text))


def test_limits_and_non_strings() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_json_value(deep) == deep  # too deep for the decoder: left as text
    big = '"' + "a" * 1_000_001 + '"'
    assert parse_json_value(big) == big  # over the size limit: not parsed
    assert parse_json_value(b'{"a": 1}') == b'{"a": 1}'
    assert parse_json_value(7) == 7
    assert parse_json_value(' {"a": 1}') == ' {"a": 1}'  # only text that starts as JSON is parsed
    assert parse_json_value('{"a": 12345678901234567890123}') == {"a": 12345678901234567890123}
