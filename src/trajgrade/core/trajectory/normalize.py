"""Reduce a span to a compact record: which kind of step it is and the fields trajgrade needs.

Every convention fact comes from :mod:`trajgrade.core.semconv`; this module only walks its tables (which of
their keys a span carries is worked out once per key set, in ``span_shape.py``). The record
keeps attribute values as the span holds them (JSON strings are parsed later, off the hot path), and it
does not keep the span: a buffered record costs a fraction of a ``ReadableSpan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from trajgrade.core import content_formats as cf
from trajgrade.core import semconv as sc
from trajgrade.core.internal_errors import UnreadableSpan
from trajgrade.core.spans import (
    STATUS_ERROR,
    Events,
    JsonSpan,
    SdkSpan,
    SpanView,
    sdk_events,
    sdk_parent_id,
    sdk_span_id,
    sdk_trace,
    sdk_trace_id,
)
from trajgrade.core.trajectory.model import Usage
from trajgrade.core.trajectory.records import MISSING, ModelRecord, SpanRecord, ToolRecord, share_strings
from trajgrade.core.trajectory.span_shape import SpanShape, shape_of

__all__ = [
    "MISSING",
    "PartsRef",
    "SdkFields",
    "SpanRecord",
    "classify",
    "normalize",
    "normalize_sdk",
    "sdk_fields",
    "sdk_held",
    "sdk_intake",
    "share_strings",
]


def classify(name: str, attributes: Mapping[str, Any]) -> str:
    """The step kind of a span: llm_call, tool_call, agent, workflow, embedding or other."""
    return _classify(name, _plain(attributes))


def _plain(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as a dict (as every view but an odd SDK span's gives them)."""
    return attributes if isinstance(attributes, dict) else dict(attributes)


def _classify(name: str, attributes: dict[str, Any]) -> str:
    for key, kinds in sc.KIND_BY_ATTRIBUTE:
        value = attributes.get(key)
        if value is not None:
            kind = kinds.get(str(value))
            if kind is not None:
                if (
                    kind == sc.AGENT
                    and (key, value) in sc.UNNAMED_AGENT_IS_STEP
                    and _first(attributes, sc.AGENT_NAME_KEYS) is None
                    and _name_from(name, sc.AGENT_NAME_FROM_SPAN_NAME) is None
                ):
                    return sc.AGENT_STEP
                return kind
    for pattern, kind in sc.KIND_BY_NAME:
        if pattern.match(name):
            return kind
    for pattern, _, _ in sc.AGENT_STEP_BY_NAME:
        if pattern.match(name):
            return sc.AGENT_STEP
    if sc.MCP_TOOL_SPAN.match(name) and sc.TOOL_NAME in attributes:
        return sc.TOOL
    return sc.OTHER


def _first(attributes: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite count is no count
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _usage(
    attributes: dict[str, Any], shape: SpanShape, input_keys: tuple[str, ...], output_keys: tuple[str, ...]
) -> Usage | None:
    input_tokens = _int(_first(attributes, input_keys))
    output_tokens = _int(_first(attributes, output_keys))
    if input_tokens is None and output_tokens is None:
        return None  # the other counts alone are no usage
    if not shape.optional_usage:
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=_int(_first(attributes, shape.cache_read)),
        cache_write_tokens=_int(_first(attributes, shape.cache_write)),
        reasoning_tokens=_int(_first(attributes, shape.reasoning)),
    )


def _cost(attributes: dict[str, Any], shape: SpanShape) -> float | None:
    if shape.cost:
        cost = _float(_first(attributes, shape.cost))
        if cost is not None:
            return cost
    if not shape.cost_parts:
        return None
    parts = [attributes.get(k) for k in sc.COST_PART_KEYS]
    if None in parts:
        return None
    floats = [_float(p) for p in parts]
    return None if None in floats else sum(f for f in floats if f is not None)


def _response_id(attributes: dict[str, Any], shape: SpanShape) -> str | None:
    value = _first(attributes, shape.response_id)
    if value is not None:
        return str(value)
    for key, pattern in shape.response_id_in_value:
        text = attributes[key]
        if isinstance(text, str):
            found = pattern.match(text)
            if found is not None:
                return found.group(1)
    return None


def _name_from(name: str, patterns: tuple[Any, ...]) -> str | None:
    for pattern in patterns:
        m = pattern.match(name)
        if m:
            return str(m.group(1))
    return None


def _error(
    failed: bool, status_message: str, events: Events, attributes: dict[str, Any], kind: str
) -> tuple[bool, str | None, str | None]:
    if kind == sc.TOOL and (
        attributes.get(sc.TOOL_STATUS_KEY) == sc.TOOL_STATUS_ERROR
        or (events and any(e.name == sc.TOOL_EXCEPTION_EVENT for e in events))
    ):
        failed = True
    if not failed:
        return False, None, None
    error_type = attributes.get(sc.ERROR_TYPE)
    message = status_message or None
    if error_type is None or message is None:
        for event in events:
            if event.name in sc.EXCEPTION_EVENTS:
                error_type = error_type or event.attributes.get(sc.EXCEPTION_TYPE)
                message = message or event.attributes.get(sc.EXCEPTION_MESSAGE)
                break
    return True, (str(error_type) if error_type is not None else None), (str(message) if message else None)


def _tool_content(events: Events, attributes: dict[str, Any], shape: SpanShape) -> tuple[Any, Any]:
    arguments: Any = MISSING
    if shape.tool_arguments:
        arguments = attributes[shape.tool_arguments[0]]
    elif shape.flat_arguments:
        arguments = {name: attributes[key] for key, name in shape.flat_arguments}
    result: Any = attributes[shape.tool_results[0]] if shape.tool_results else MISSING
    if events and (arguments is MISSING or result is MISSING):
        arguments, result = _tool_content_from_events(events, arguments, result)
    return arguments, result


def _tool_content_from_events(events: Events, arguments: Any, result: Any) -> tuple[Any, Any]:
    for event in events:
        attrs = event.attributes
        if arguments is MISSING:
            for name, key in sc.TOOL_ARGUMENT_EVENTS:
                if event.name == name and key in attrs:
                    arguments = attrs[key]
        if result is MISSING:
            for name, key in sc.TOOL_RESULT_EVENTS:
                if event.name == name and key in attrs:
                    result = attrs[key]
        if event.name == sc.OPERATION_DETAILS_EVENT:
            # Parts are parsed later; keep the messages as they are and mark where they came from.
            if arguments is MISSING and sc.INPUT_MESSAGES in attrs:
                arguments = PartsRef(
                    messages=attrs[sc.INPUT_MESSAGES], part_type=cf.TOOL_CALL_PART, field=cf.TOOL_CALL_ARGUMENTS
                )
            if result is MISSING and sc.OUTPUT_MESSAGES in attrs:
                result = PartsRef(
                    messages=attrs[sc.OUTPUT_MESSAGES], part_type=cf.TOOL_RESPONSE_PART, field=cf.TOOL_RESPONSE
                )
    return arguments, result


@dataclass(frozen=True, slots=True, kw_only=True)
class PartsRef:
    """A value to take from the first message part of a type (GenAI message JSON), resolved when built."""

    messages: Any
    part_type: str
    field: str


def normalize(span: SpanView, keep_attributes: bool | None = None) -> SpanRecord:
    """Reduce a span to its record. ``keep_attributes`` defaults to keeping them for root-like spans."""
    if isinstance(span, JsonSpan):  # a file's span: compiled code reads its fields directly, another view's by name
        return _record(
            span.trace_id,
            span.span_id,
            span.parent_span_id,
            bool(span.parent_is_remote),
            span.name,
            span.start_unix_nano,
            span.end_unix_nano,
            span.status_code == STATUS_ERROR,
            span.status_message,
            span.events,
            _plain(span.attributes),
            _plain(span.resource_attributes),
            keep_attributes,
        )
    return _record(
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        bool(span.parent_is_remote),
        span.name,
        span.start_unix_nano,
        span.end_unix_nano,
        span.status_code == STATUS_ERROR,
        span.status_message,
        span.events,
        _plain(span.attributes),
        _plain(span.resource_attributes),
        keep_attributes,
    )


#: An ended SDK span's fields as ``sdk_fields`` copies them out of the SDK's objects: trace id, span id, parent span
#: id (ints; the parent's None for a root), whether the parent is remote, name, start and end (ns), whether it
#: failed, its status message (read only when it failed), its events, its attribute dict, its resource's attribute
#: dict, its scope's name.
SdkFields = tuple[Any, ...]
_TRACE: Final = 0
_NAME: Final = 4
_SCOPE: Final = 12


def sdk_fields(span: Any) -> SdkFields | None:
    """An ended SDK ``ReadableSpan``'s fields (``SdkFields``), read from the fields behind its properties; None for a
    span built another way, which its view (``SdkSpan``) reads. The attribute dicts are the span's own, which the
    SDK no longer changes once the span has ended; the rest are strings, numbers and the span's events."""
    try:
        ctx, parent, status, scope = span._context, span._parent, span._status, span._instrumentation_scope
        events = span._events._dq
        failed = status._status_code._value_ == STATUS_ERROR
        fields = (
            ctx[0],
            ctx[1],
            None if parent is None else parent[1],
            parent is not None and bool(parent[2]),
            span._name,
            span._start_time or 0,
            span._end_time or 0,
            failed,
            (status._description or "") if failed else "",
            tuple(events) if events else (),
            span._attributes._dict,
            span._resource._attributes._dict,
            scope._name if scope is not None else None,
        )
    except (AttributeError, TypeError, IndexError):  # no context among them (None) is one of these
        return None
    return fields


def normalize_sdk(span: Any, keep_attributes: bool | None = None) -> SpanRecord:
    """:func:`normalize` for an ended SDK ``ReadableSpan``, read from its fields (``sdk_fields``) rather than
    through its view (``Any``: the SDK is not imported here)."""
    fields = sdk_fields(span)
    if fields is None:
        return normalize(SdkSpan(span), keep_attributes)
    return _sdk_record(fields, keep_attributes)


def _sdk_record(fields: SdkFields, keep_attributes: bool | None) -> SpanRecord:
    start: int = fields[5]
    failed: bool = fields[7]
    events = fields[9]
    parent = fields[2]
    return _record(
        sdk_trace_id(fields[0]),
        sdk_span_id(fields[1]),
        None if parent is None else sdk_parent_id(parent),
        fields[3],
        fields[4],
        start,
        fields[6] or start,
        failed,
        fields[8] if failed else "",
        sdk_events(events) if events else (),
        fields[10],
        fields[11],
        keep_attributes,
    )


def sdk_held(span: Any) -> Any:
    """What the span processor keeps of an ended SDK span until its worker reads it (``sdk_intake``): the span's
    fields (``sdk_fields``), or the span itself when they cannot be read so; None for a run's root here (a span
    without a parent, or whose parent is remote), which the processor holds itself.

    Kept this way, the span and the SDK's objects around it go when the SDK lets them go, as without trajgrade:
    held until the worker's next look, they would be about ten objects a span for the cyclic garbage collector to
    walk again and again, where the fields are one tuple, which it stops walking at its first look when its values
    are strings and numbers (as GenAI attributes are). Never raises: it runs on the application's thread."""
    try:
        fields = sdk_fields(span)
    except Exception:  # a span odd enough to fail here is read, and its failure counted, by the worker
        fields = None
    if fields is not None:
        return None if fields[2] is None or fields[3] else fields  # no parent, or a remote one: a root
    try:
        parent = span.parent
        return None if parent is None or parent.is_remote else span
    except Exception:
        return span


def sdk_intake(item: Any) -> tuple[str, SpanRecord] | None:
    """What the span processor's worker makes of what it kept of an ended span that is not a root (``sdk_held``): its
    trace and its record; None for trajgrade's own evaluation span (known by its name and scope before it is read:
    it carries a run's results as events). ``UnreadableSpan`` (from the error) for a span that cannot be read."""
    fields: SdkFields | None = item if type(item) is tuple else None  # else a span kept whole, read through its view
    try:
        if fields is not None:
            if _is_evaluation(fields[_NAME], fields[_SCOPE]):
                return None
            record = _sdk_record(fields, False)
        else:
            if _is_evaluation_span(item):
                return None
            record = normalize_sdk(item, keep_attributes=False)
    except Exception as e:
        raise UnreadableSpan(sdk_trace_id(fields[_TRACE]) if fields is not None else sdk_trace(item)) from e
    return record.trace_id, record


def _is_evaluation(name: Any, scope: str | None) -> bool:
    """Whether a span of this name and scope is trajgrade's own evaluation span."""
    return isinstance(name, str) and name.startswith(sc.EVALUATION_SPAN_PREFIX) and scope == sc.TRAJGRADE_SCOPE


def _is_evaluation_span(span: Any) -> bool:
    """Whether an SDK span is trajgrade's own evaluation span."""
    try:
        name = span._name
    except AttributeError:
        name = span.name
    if not (isinstance(name, str) and name.startswith(sc.EVALUATION_SPAN_PREFIX)):
        return False
    scope = span.instrumentation_scope
    return _is_evaluation(name, scope.name if scope is not None else None)


def _record(
    trace_id: str,
    span_id: str,
    parent: str | None,
    remote: bool,
    name: str,
    start_unix_nano: int,
    end_unix_nano: int,
    failed: bool,
    status_message: str,
    events: Events,
    attributes: dict[str, Any],
    resource_attributes: dict[str, Any],
    keep_attributes: bool | None,
) -> SpanRecord:
    kind = _classify(name, attributes)
    failed, error_type, error_message = _error(failed, status_message, events, attributes, kind)
    if keep_attributes is None:
        keep_attributes = parent is None or remote
    service = resource_attributes.get(sc.SERVICE_NAME)
    service_name = str(service) if service is not None else None
    kept = dict(attributes) if keep_attributes else None
    if kind == sc.LLM or kind == sc.EMBEDDING:
        shape = shape_of(attributes)
        if kind == sc.LLM and not _is_request(events, shape):
            kind = sc.OTHER
    agent_name: str | None = None
    if kind == sc.LLM or kind == sc.EMBEDDING:
        model = _first(attributes, shape.model)
        provider = _first(attributes, shape.provider)
        output = attributes.get(sc.OUTPUT_MESSAGES)
        return ModelRecord(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            kind=kind,
            start_unix_nano=start_unix_nano,
            end_unix_nano=end_unix_nano,
            error=failed,
            error_type=error_type,
            error_message=error_message,
            agent_name=_str_or_none(attributes.get(sc.AGENT_NAME)),
            service_name=service_name,
            attributes=kept,
            parent_is_remote=remote,
            model=str(model) if model is not None else None,
            provider=str(provider) if provider is not None else None,
            response_id=_response_id(attributes, shape),
            usage=_usage(attributes, shape, shape.input_tokens, shape.output_tokens),
            cost_usd=_cost(attributes, shape),
            output_messages=output,
            requested_tool_calls=(
                _flat_tool_calls(attributes, shape.flat_tool_calls) if output is None and shape.flat_tool_calls else ()
            ),
            tool_definitions=_first(attributes, shape.tool_definitions)
            or (tuple(attributes[k] for k in shape.flat_tool_schemas) if shape.flat_tool_schemas is not None else None),
        )
    if kind == sc.TOOL:
        shape = shape_of(attributes)
        tool_name = _first(attributes, shape.tool_name) or _name_from(name, sc.TOOL_NAME_FROM_SPAN_NAME) or name
        agent_name = _str_or_none(attributes.get(sc.AGENT_NAME))
        if tool_name in sc.SUMMARY_TOOL_NAMES:
            kind = sc.OTHER
        else:
            call_id = _first(attributes, shape.tool_call_id)
            arguments, result = _tool_content(events, attributes, shape)
            return ToolRecord(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=name,
                kind=kind,
                start_unix_nano=start_unix_nano,
                end_unix_nano=end_unix_nano,
                error=failed,
                error_type=error_type,
                error_message=error_message,
                agent_name=agent_name,
                service_name=service_name,
                attributes=kept,
                parent_is_remote=remote,
                tool_name=str(tool_name),
                tool_call_id=str(call_id) if call_id is not None else None,
                tool_arguments=arguments,
                tool_result=result,
            )
    elif kind == sc.AGENT or kind == sc.WORKFLOW:
        shape = shape_of(attributes)
        agent = _first(attributes, shape.agent_name) or _name_from(name, sc.AGENT_NAME_FROM_SPAN_NAME)
        model = _first(attributes, shape.agent_model)
        return ModelRecord(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            kind=kind,
            start_unix_nano=start_unix_nano,
            end_unix_nano=end_unix_nano,
            error=failed,
            error_type=error_type,
            error_message=error_message,
            agent_name=str(agent) if agent is not None else (name if kind == sc.AGENT else None),
            service_name=service_name,
            attributes=kept,
            parent_is_remote=remote,
            model=str(model) if model is not None else None,
            usage=_usage(attributes, shape, shape.agent_input_tokens, shape.agent_output_tokens),
            output=_first(attributes, shape.agent_output),
            tool_definitions=_first(attributes, shape.agent_tool_definitions),
        )
    elif kind == sc.AGENT_STEP:
        agent_name = _agent_in_value(name, attributes)
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_unix_nano=start_unix_nano,
        end_unix_nano=end_unix_nano,
        error=failed,
        error_type=error_type,
        error_message=error_message,
        agent_name=agent_name,
        service_name=service_name,
        attributes=kept,
        parent_is_remote=remote,
    )


def _agent_in_value(name: str, attributes: dict[str, Any]) -> str | None:
    """The agent named inside an agent step's attribute value (``semconv.AGENT_STEP_BY_NAME``)."""
    for pattern, key, value_pattern in sc.AGENT_STEP_BY_NAME:
        value = attributes.get(key)
        if pattern.match(name) and isinstance(value, str):
            found = value_pattern.search(value)
            if found is not None:
                return found.group(1)
    return None


def _is_request(events: Events, shape: SpanShape) -> bool:
    return shape.request_evidence or any(e.name in sc.LLM_REQUEST_EVENTS for e in events)


def _flat_tool_calls(
    attributes: dict[str, Any], keys: tuple[tuple[str, int, int, str], ...]
) -> tuple[tuple[str | None, str | None, Any], ...]:
    """The (id, name, raw arguments) of each flattened tool call, in index order."""
    calls: dict[tuple[int, int], dict[str, Any]] = {}
    for key, message, call, field in keys:
        calls.setdefault((message, call), {})[field] = attributes[key]
    return tuple(
        (_str_or_none(c.get("id")), _str_or_none(c.get("name")), c.get("arguments", MISSING)) for c in calls.values()
    )


def _str_or_none(value: Any) -> str | None:
    return str(value) if value is not None else None
