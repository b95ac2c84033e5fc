"""What a run's spans recorded as content, read: JSON values parsed, a tool call's arguments and result without
the wrapper its instrumentation put around them, the tool calls a model requested, the run's final answer and
its tools' definitions.

How that content is laid out in each dialect is data in :mod:`trajgrade.core.content_formats`; this module only
walks it. Values are parsed lazily where most graders never read them (a tool call's arguments and result).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeGuard

import msgspec

from trajgrade.core import content_formats as cf
from trajgrade.core.trajectory.model import ToolCall
from trajgrade.core.trajectory.normalize import MISSING, PartsRef, SpanRecord

__all__ = ["Request", "final_output", "parse_json_value", "requested", "tool_call", "tool_definitions"]

#: A tool call the model requested: (tool-call id, tool name, raw arguments or MISSING).
Request = tuple[str | None, str | None, Any]

_MAX_JSON_CHARS: Final = 1_000_000
#: msgspec's decoder: twice as fast as the standard one, and where it decodes a text it gives what ``json.loads``
#: gives (numbers of any size up to the same 4,300 digits, the last of duplicate keys); what it refuses (NaN,
#: a lone surrogate, other text after the value) is left to the standard decoder.
_decode_json: Final[Callable[[str], Any]] = msgspec.json.Decoder().decode
#: The standard decoder's own scanner: ``json.loads`` around it costs three times the scan on a short object.
_scan_json: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_WHITESPACE: Final = " \t\n\r"


def parse_json_value(value: Any) -> Any:
    """A JSON string parsed (strings that are not JSON stay strings); other values as they are."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"') and len(value) <= _MAX_JSON_CHARS:
        try:
            return _decode_json(value)
        except (ValueError, RecursionError):  # msgspec's DecodeError and UnicodeEncodeError are ValueErrors
            pass
        try:
            parsed, end = _scan_json(value, 0)
        except (StopIteration, ValueError, RecursionError):
            return value
        if end == len(value) or not value[end:].strip(_JSON_WHITESPACE):  # what json.loads accepts after a value
            return parsed
    return value


def _is_array(value: Any) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Whether ``value`` is a JSON array as parsed (a list) or as an attribute holds it (a tuple); two checks, as
    compiled code checks one type at a time faster than a union."""
    return isinstance(value, list) or isinstance(value, tuple)


def _parts(messages: Any, part_type: str) -> list[dict[str, Any]]:
    """The message parts of one type in GenAI messages (parsed when JSON text), in order."""
    messages = parse_json_value(messages)
    found: list[dict[str, Any]] = []
    for message in messages if _is_array(messages) else ():
        parts = message.get(cf.MESSAGE_PARTS) if isinstance(message, dict) else None
        for part in parts if _is_array(parts) else ():
            if isinstance(part, dict) and part.get(cf.PART_TYPE) == part_type:
                found.append(part)
    return found


def requested(r: SpanRecord) -> tuple[Request, ...]:
    """The tool calls an LLM span's output asked for: its flattened ones, else the GenAI output messages' parts."""
    if r.requested_tool_calls:
        return r.requested_tool_calls
    calls: list[Request] = []
    for part in _parts(r.output_messages, cf.TOOL_CALL_PART):
        call_id, name = part.get(cf.TOOL_CALL_ID), part.get(cf.TOOL_CALL_NAME)
        calls.append(
            (
                str(call_id) if call_id else None,
                str(name) if name is not None else None,
                part[cf.TOOL_CALL_ARGUMENTS] if cf.TOOL_CALL_ARGUMENTS in part else MISSING,
            )
        )
    return tuple(calls)


def _from_parts(ref: PartsRef) -> Any:
    for part in _parts(ref.messages, ref.part_type):
        if ref.field in part:
            return part[ref.field]
    return MISSING


def tool_call(r: SpanRecord, request: Request | None) -> ToolCall:
    """The tool call of a tool span, completed by the model's request for it when there is one."""
    arguments = _from_parts(r.tool_arguments) if isinstance(r.tool_arguments, PartsRef) else r.tool_arguments
    result = _from_parts(r.tool_result) if isinstance(r.tool_result, PartsRef) else r.tool_result
    call_id = r.tool_call_id
    parse_arguments: Callable[[Any], Any] = _arguments
    if request is not None:
        call_id = call_id or request[0]
        asked = request[2]
        if arguments is MISSING:
            arguments = asked
        elif asked is not MISSING:

            def parse_arguments(raw: Any, asked: Any = asked) -> Any:
                return _named(_arguments(raw), asked)

    has_arguments, has_result = arguments is not MISSING, result is not MISSING
    return ToolCall(
        name=r.tool_name or r.name,
        call_id=call_id,
        arguments=arguments if has_arguments else None,
        result=result if has_result else None,
        arguments_captured=has_arguments,
        result_captured=has_result,
        parse_arguments=parse_arguments if has_arguments else None,
        parse_result=_result if has_result else None,
    )


def _arguments(raw: Any) -> Any:
    """A tool's arguments parsed, without the wrapper an instrumentation put around them."""
    arguments = parse_json_value(raw)
    inner = _unwrap(arguments, cf.TOOL_ARGUMENT_WRAPPERS, _ARGUMENT_WRAPPER_KEYS)
    return inner if isinstance(inner, dict) else arguments


def _result(raw: Any) -> Any:
    """A tool's result parsed, without the wrappers an instrumentation put around it."""
    value = parse_json_value(raw)
    for _ in range(cf.TOOL_RESULT_WRAPPER_DEPTH):
        inner = _unwrap(value, cf.TOOL_RESULT_WRAPPERS, _RESULT_WRAPPER_KEYS)
        if inner is MISSING:
            break
        value = inner
    return value


def _wrapper_keys(wrappers: tuple[cf.Wrapper, ...]) -> frozenset[str]:
    """Every key a wrapper of ``wrappers`` must or may have: a value with any other key fits none of them."""
    keys: set[str] = set()
    for required, optional, _, _ in wrappers:
        keys |= required | optional
    return frozenset(keys)


_ARGUMENT_WRAPPER_KEYS: Final = _wrapper_keys(cf.TOOL_ARGUMENT_WRAPPERS)
_RESULT_WRAPPER_KEYS: Final = _wrapper_keys(cf.TOOL_RESULT_WRAPPERS)


def _unwrap(value: Any, wrappers: tuple[cf.Wrapper, ...], keys: frozenset[str]) -> Any:
    """The value inside the first wrapper of ``wrappers`` (whose keys are ``keys``) that fits ``value``, else
    MISSING."""
    if not isinstance(value, dict):
        return MISSING
    for k in value:
        if k not in keys:
            return MISSING  # most values: a tool's own arguments, its first key already no wrapper's
    for required, optional, path, empty in wrappers:
        if (
            all(k in value for k in required)
            and all(k in required or k in optional for k in value)
            and not (empty is not None and value.get(empty))
        ):
            inner: Any = value
            for key in path:
                inner = parse_json_value(inner.get(key, MISSING)) if isinstance(inner, dict) else MISSING
            if inner is not MISSING:
                return inner
    return MISSING


def _named(value: Any, asked_raw: Any) -> Any:
    """A bare argument value (a one-parameter tool recorded without its parameter's name) named by the request."""
    if isinstance(value, dict):
        return value
    asked = _arguments(asked_raw)
    if not (isinstance(asked, dict) and len(asked) == 1):
        return value
    ((key, expected),) = asked.items()
    if value == expected or (
        isinstance(value, str) and not isinstance(expected, str) and value == json.dumps(expected)
    ):
        return {key: expected}
    return {key: value}


def _text_of(messages: Any) -> str | None:
    parsed = parse_json_value(messages)
    if isinstance(parsed, str):
        return parsed
    texts = [p[cf.TEXT_CONTENT] for p in _parts(parsed, cf.TEXT_PART) if isinstance(p.get(cf.TEXT_CONTENT), str)]
    return "\n".join(texts) if texts else None


def final_output(outer_agent: SpanRecord | None, last_output_messages: Any) -> str | None:
    """The run's final answer: its agent's recorded output, else the text of the output messages of its agent's
    last model call (``None`` when it made none)."""
    if outer_agent is not None and outer_agent.output is not None:
        value = parse_json_value(outer_agent.output)
        return value if isinstance(value, str) else (_text_of(value) or json.dumps(value, default=str))
    return _text_of(last_output_messages)


def tool_definitions(records: Iterable[SpanRecord]) -> dict[str, Any]:
    """Tool name -> JSON Schema of its arguments, from the definitions of every dialect (``content_formats``)."""
    found: dict[str, Any] = {}
    seen: set[str] = set()
    for r in records:
        if r.tool_definitions is None:
            continue
        if isinstance(r.tool_definitions, str):  # model calls often repeat the same definitions
            if r.tool_definitions in seen:
                continue
            seen.add(r.tool_definitions)
        raw = parse_json_value(r.tool_definitions)
        for item in raw if _is_array(raw) else ():
            item = parse_json_value(item)
            if isinstance(item, dict):
                _add_definition(found, item)
    return found


def _add_definition(found: dict[str, Any], item: dict[str, Any]) -> None:
    for holder, name_key, schema_key in cf.TOOL_DEFINITION_FORMATS:
        definition = item.get(holder) if holder is not None else item
        if not isinstance(definition, dict):
            continue
        name, schema = definition.get(name_key), definition.get(schema_key)
        if isinstance(name, str) and isinstance(schema, dict):
            found.setdefault(name, schema)
            return
