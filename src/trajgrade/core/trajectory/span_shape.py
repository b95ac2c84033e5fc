"""Which of the conventions' keys a span carries, for each field normalization reads (``SpanShape``).

A shape depends on the attribute keys alone, and an instrumentation sends the same keys, in the same order,
on every span of a kind: it is worked out once per key tuple (``shape_of``), not once per span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from trajgrade.core import semconv as sc

__all__ = ["SpanShape", "shape_of"]


def _by_index(key: str) -> tuple[int, ...]:
    """Flattened keys in the order of their indices (``a.10.b`` after ``a.9.b``), whatever order they came in."""
    return tuple(int(part) for part in key.split(".") if part.isdigit())


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanShape:
    """Where a span's fields are among its attribute keys: for each field, the keys of its priority list that
    are present (in priority order), and the flattened keys, in index order."""

    model: tuple[str, ...]
    provider: tuple[str, ...]
    response_id: tuple[str, ...]
    #: (key, pattern) of each ``semconv.RESPONSE_ID_IN_VALUE`` entry whose key is present.
    response_id_in_value: tuple[tuple[str, re.Pattern[str]], ...]
    input_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    cache_read: tuple[str, ...]
    cache_write: tuple[str, ...]
    reasoning: tuple[str, ...]
    optional_usage: bool
    cost: tuple[str, ...]
    cost_parts: bool
    tool_definitions: tuple[str, ...]
    flat_tool_schemas: tuple[str, ...] | None
    #: (key, message index, call index, field) of each flattened tool-call field, in index order.
    flat_tool_calls: tuple[tuple[str, int, int, str], ...]
    #: An LLM-marked span with these keys is a model request (``semconv.LLM_REQUEST_KEYS``).
    request_evidence: bool
    tool_name: tuple[str, ...]
    tool_call_id: tuple[str, ...]
    tool_arguments: tuple[str, ...]
    flat_arguments: tuple[tuple[str, str], ...]
    tool_results: tuple[str, ...]
    agent_name: tuple[str, ...]
    agent_model: tuple[str, ...]
    agent_input_tokens: tuple[str, ...]
    agent_output_tokens: tuple[str, ...]
    agent_output: tuple[str, ...]
    agent_tool_definitions: tuple[str, ...]

    @classmethod
    def of(cls, keys: tuple[str, ...]) -> SpanShape:
        present = set(keys)

        def among(priority: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(k for k in priority if k in present)

        flat_calls: list[tuple[str, int, int, str]] = []
        for k in keys:
            if k.startswith(sc.FLAT_TOOL_CALL_PREFIXES):
                for pattern, fields in sc.FLAT_TOOL_CALL:
                    m = pattern.match(k)
                    if m:
                        flat_calls.append((k, int(m.group(1)), int(m.group(2)), fields[m.group(3)]))
        arguments, suffix = sc.TOOL_ARGUMENT_PREFIX, sc.TOOL_ARGUMENT_SUFFIX
        optional = (among(sc.CACHE_READ_KEYS), among(sc.CACHE_WRITE_KEYS), among(sc.REASONING_KEYS))
        return cls(
            model=among(sc.MODEL_KEYS),
            provider=among(sc.PROVIDER_KEYS),
            response_id=among(sc.RESPONSE_ID_KEYS),
            response_id_in_value=tuple((k, p) for k, p in sc.RESPONSE_ID_IN_VALUE if k in present),
            input_tokens=among(sc.INPUT_TOKEN_KEYS),
            output_tokens=among(sc.OUTPUT_TOKEN_KEYS),
            cache_read=optional[0],
            cache_write=optional[1],
            reasoning=optional[2],
            optional_usage=any(optional),
            cost=among(sc.COST_KEYS),
            cost_parts=all(k in present for k in sc.COST_PART_KEYS),
            tool_definitions=among((sc.TOOL_DEFINITIONS,)),
            flat_tool_schemas=(
                tuple(sorted((k for k in keys if sc.FLAT_TOOL_SCHEMA.match(k)), key=_by_index))
                if sc.FLAT_TOOL_SCHEMA_FIRST in present
                else None
            ),
            flat_tool_calls=tuple(sorted(flat_calls, key=lambda c: (c[1], c[2]))),
            request_evidence=bool(flat_calls)
            or not present.isdisjoint(sc.LLM_REQUEST_KEYS)
            or any(k.startswith(sc.LLM_REQUEST_PREFIXES) for k in keys),
            tool_name=among(sc.TOOL_NAME_KEYS),
            tool_call_id=among(sc.TOOL_CALL_ID_KEYS),
            tool_arguments=among(sc.TOOL_ARGUMENT_KEYS),
            flat_arguments=tuple(
                (k, k[len(arguments) : -len(suffix)]) for k in keys if k.startswith(arguments) and k.endswith(suffix)
            ),
            tool_results=among(sc.TOOL_RESULT_KEYS),
            agent_name=among(sc.AGENT_NAME_KEYS),
            agent_model=among(sc.AGENT_MODEL_KEYS),
            agent_input_tokens=among(sc.AGENT_INPUT_TOKEN_KEYS),
            agent_output_tokens=among(sc.AGENT_OUTPUT_TOKEN_KEYS),
            agent_output=among(sc.AGENT_OUTPUT_KEYS),
            agent_tool_definitions=among(sc.TOOL_DEFINITION_KEYS),
        )


_SHAPES: Final[dict[tuple[str, ...], SpanShape]] = {}
#: Key tuples remembered at most (then forgotten all at once): far more than the kinds of span a fleet sends.
_MAX_SHAPES: Final = 4096
#: The last two key tuples looked up, with their shapes, the latest first: a run's spans are mostly of two kinds
#: (model calls and tool calls, in turn), and an instrumentation's keys are the same string objects on every
#: span, so comparing a span's key tuple with these (item by item, each found the same object at once) costs less
#: than hashing it for ``_SHAPES`` (one read, one write: threads that look shapes up at once see whole pairs).
_recent: tuple[tuple[tuple[str, ...], SpanShape | None], tuple[tuple[str, ...], SpanShape | None]] = (
    ((), None),
    ((), None),
)


def shape_of(attributes: dict[str, Any]) -> SpanShape:
    """The shape of a span's attributes (remembered by key tuple)."""
    global _recent
    keys = tuple(attributes)
    latest, before = _recent
    if latest[1] is not None and keys == latest[0]:
        return latest[1]
    if before[1] is not None and keys == before[0]:
        return before[1]
    shape = _SHAPES.get(keys)
    if shape is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        shape = _SHAPES[keys] = SpanShape.of(keys)
    _recent = ((keys, shape), latest)
    return shape
