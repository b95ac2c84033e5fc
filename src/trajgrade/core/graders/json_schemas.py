"""JSON Schemas that a config or a trace gives for a tool's arguments: whether one is a valid schema, and whether it
refers outside itself (trajgrade never fetches one)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical_json", "remote_reference", "schema_problem"]

_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


#: What a schema's canonical JSON holds when the meta-schema checks one of its values by a ``format`` (``$id``,
#: ``$schema``, ``$ref``, ``$dynamicRef`` and ``$vocabulary``'s keys are URIs, ``pattern`` and
#: ``patternProperties``' keys regular expressions), or picks its draft (``$schema``): see :func:`schema_problem`.
_DECIDED_BY_JSONSCHEMA = ('"$id"', '"$schema"', '"$ref"', '"$dynamicRef"', '"$vocabulary"', '"pattern')


def canonical_json(schema: Any) -> str | None:
    """``schema`` as JSON with its keys sorted, or None when it is not JSON (a value YAML reads that JSON has not)."""
    try:
        return json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return None


def schema_problem(schema: Any, text: str | None) -> str | None:
    """What makes ``schema`` not a valid JSON Schema of draft 2020-12 (jsonschema's message), or None when it is
    one; ``text``: its canonical JSON (:func:`canonical_json`).

    jsonschema-rs checks a schema against the meta-schema in microseconds, where jsonschema takes milliseconds (and
    about 70 ms to import). Its answer is taken when the two cannot differ: it says valid, and the schema has
    nothing the meta-schema checks by a ``format`` (jsonschema checks the formats it has checkers installed for,
    jsonschema-rs none) and no ``$schema`` (by which jsonschema-rs would choose the meta-schema). Otherwise
    jsonschema decides, and says what is wrong.
    """
    if text is not None and not any(key in text for key in _DECIDED_BY_JSONSCHEMA):
        import jsonschema_rs

        try:
            if jsonschema_rs.meta.is_valid(schema):
                return None
        except Exception:  # a value it cannot take: jsonschema decides
            pass
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        return e.message
    return None


def remote_reference(schema: Any) -> str | None:
    """The first reference in ``schema`` that points outside it (anything but ``#...``), or None."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in _REFERENCE_KEYS:
                ref = node.get(key)
                if isinstance(ref, str) and not ref.startswith("#"):
                    return ref
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
