"""Read OTLP trace data from files, stdin and request bodies into span views.

Accepted, detected from the content:

- one ``ExportTraceServiceRequest`` (or ``TracesData``) as a JSON object, in OTLP/JSON (hex ids, enums as
  numbers) or plain proto3 JSON (base64 ids, enum names), ``intValue`` as a string or a number;
- JSON Lines of such objects, as the Collector's ``file`` exporter writes them;
- a binary protobuf ``ExportTraceServiceRequest``.

Problems raise :class:`~trajgrade.exceptions.TraceDecodeError` naming the source, the line and the field.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from trajgrade.core.otlp_json_types import MISSING_FIELD, REQUEST, SPAN, SPAN_FIELDS, VALUE_FIELDS
from trajgrade.core.spans import JsonSpan, SpanEvent, SpanView, decode_id, iter_proto_request, make_event
from trajgrade.exceptions import TraceDecodeError

__all__ = ["file_bytes", "parse_json_request", "parse_proto_request", "read_bytes", "read_path", "source_name"]

_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
#: The problem of a JSON document that is not trace data at all (a directory of runs may hold other files).
NOT_TRACE_DATA = "no resourceSpans: not OTLP trace data"
#: Messages nest at most this deep below the request, as protobuf's parser (upb) and the sidecar's reader take
#: them: a span attribute's value can hold 47 arrays one in another, or 31 key-value lists.
MAX_MESSAGE_DEPTH: Final = 100
#: The message depth of an attribute's value (AnyValue) below the request: Request > ResourceSpans > Resource >
#: KeyValue > AnyValue; a span's a level deeper (ScopeSpans > Span), an event's two.
_RESOURCE_VALUE: Final = 4
_SPAN_VALUE: Final = 5
_EVENT_VALUE: Final = 6
_TOO_LONG = "invalid JSON: a number of more than 4,300 digits"
#: A decimal integer as OTLP/JSON writes 64-bit numbers: ASCII digits only (``int()`` also takes "²" and "٣"),
#: at most 20 of them (``int()`` of thousands of digits is slow, and past 4,300 refused).
_DECIMAL = re.compile(r"[+-]?[0-9]{1,20}")
_ZERO_SPAN_ID: Final = "0000000000000000"
#: The fields of otlp_json_types.AnyValue, in order.
_STRING: Final = 0
_INT: Final = 1
_BOOL: Final = 2
_DOUBLE: Final = 3
_ARRAY: Final = 4
_KVLIST: Final = 5
_BYTES: Final = 6
#: otlp_json_types' constants, read as this module's own (a compiled module reads its final names directly).
_UNSET: Final[Any] = MISSING_FIELD
_FIELDS: Final[Any] = VALUE_FIELDS
_SPAN: Final[Any] = SPAN
#: The fields of otlp_json_types.Span that the typed reader reads, by their index (checked below).
_TRACE_ID: Final = 0
_SPAN_ID: Final = 1
_PARENT_SPAN_ID: Final = 2
_NAME: Final = 3
_KIND: Final = 4
_START: Final = 5
_END: Final = 6
_FLAGS: Final = 7
_ATTRIBUTES: Final = 8
_EVENTS: Final = 9
_STATUS: Final = 10
if SPAN_FIELDS[:11] != (
    "traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano", "flags",
    "attributes", "events", "status",
):  # fmt: skip
    raise ImportError(f"otlp_json_types.Span's fields are not in the order the typed reader reads: {SPAN_FIELDS}")


class _Bad(ValueError):
    """A problem at a JSON path inside one request."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def read_path(path: str) -> list[SpanView]:
    """Read every span in a file (``-`` is stdin)."""
    return read_bytes(file_bytes(path), source_name(path))


def file_bytes(path: str) -> bytes:
    """A file's bytes (``-`` is stdin); :class:`~trajgrade.exceptions.TraceDecodeError` when it cannot be read."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TraceDecodeError(path, f"cannot read: {e.strerror or e}") from None


def source_name(path: str) -> str:
    """How problems name the file at ``path``."""
    return "<stdin>" if path == "-" else path


def read_bytes(data: bytes, source: str) -> list[SpanView]:
    """Read every span in a JSON, JSON Lines or binary protobuf payload."""
    stripped = data.lstrip()
    if not stripped:
        raise TraceDecodeError(source, "empty input: expected OTLP trace data")
    if stripped[:1] in (b"{", b"["):
        return _read_json(data, source)
    return parse_proto_request(data, source)


def parse_proto_request(data: bytes, source: str) -> list[SpanView]:
    """Spans of a binary protobuf ``ExportTraceServiceRequest``."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as e:
        raise TraceDecodeError(source, f"not JSON and not a protobuf ExportTraceServiceRequest ({e})") from None
    if not request.resource_spans:
        # Arbitrary bytes can parse as a message made only of unknown fields.
        raise TraceDecodeError(source, "not JSON and not a protobuf ExportTraceServiceRequest (no resourceSpans)")
    return list(iter_proto_request(request))


def _read_json(data: bytes, source: str) -> list[SpanView]:
    """The spans of a JSON or JSON Lines payload.

    A request in the shape of :mod:`~trajgrade.core.otlp_json_types` (what instrumentations write) is decoded
    into those types by msgspec and read by :func:`_typed_spans`. Otherwise orjson decodes it and
    :func:`_plain_spans` reads it when every span has the plain shape, in which both decoders give the same
    values; anything else (bad JSON, other shapes, numbers orjson reads as floats where :mod:`json` gives
    integers) is read again by the reference reader, :mod:`json` and :func:`parse_json_request`, which names the
    problem. The three give the same spans wherever they read.
    """
    spans = _typed_spans(data)
    if spans is not None:
        return spans
    try:
        spans = _plain_spans(orjson.loads(data))
    except orjson.JSONDecodeError:
        spans = _plain_json_lines(data) if b"\n" in data else None
    if spans is not None:
        return spans
    return _read_json_reference(data, source)


def _plain_json_lines(data: bytes) -> list[SpanView] | None:
    """The spans of JSON Lines (split as :func:`_read_json_lines` splits them) whose every line orjson decodes
    into plain spans; ``None`` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None  # one line orjson cannot decode whole: the reference reader names why
    spans: list[SpanView] = []
    for line in lines:
        more = _typed_spans(line)
        if more is None:
            try:
                more = _plain_spans(orjson.loads(line))
            except orjson.JSONDecodeError:
                return None
        if more is None:
            return None
        spans += more
    return spans


def _read_json_reference(data: bytes, source: str) -> list[SpanView]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceDecodeError(source, f"not UTF-8 at byte {e.start}") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg != "Extra data":
            # One object per line is the Collector's file format; a broken single object is reported as is.
            if "\n" not in text.strip():
                raise TraceDecodeError(source, f"invalid JSON: {e.msg} at column {e.colno}", e.lineno) from None
        return _read_json_lines(text, source)
    except ValueError:  # the one ValueError json.loads raises that is not a JSONDecodeError
        raise TraceDecodeError(source, _TOO_LONG) from None
    except RecursionError:
        raise TraceDecodeError(source, "JSON nested too deeply") from None
    return _request_or_list(whole, source, None)


def _read_json_lines(text: str, source: str) -> list[SpanView]:
    spans: list[SpanView] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceDecodeError(source, f"invalid JSON: {e.msg} at column {e.colno}", lineno) from None
        except ValueError:
            raise TraceDecodeError(source, _TOO_LONG, lineno) from None
        except RecursionError:
            raise TraceDecodeError(source, "JSON nested too deeply", lineno) from None
        spans.extend(_request_or_list(obj, source, lineno))
    return spans


def _request_or_list(obj: Any, source: str, lineno: int | None) -> list[SpanView]:
    if isinstance(obj, list):
        out: list[SpanView] = []
        for i, item in enumerate(obj):
            out.extend(_one_request(item, source, lineno, f"[{i}]"))
        return out
    return _one_request(obj, source, lineno, "")


def _one_request(obj: Any, source: str, lineno: int | None, prefix: str) -> list[SpanView]:
    try:
        return parse_json_request(obj, prefix)
    except _Bad as e:
        raise TraceDecodeError(source, str(e), lineno) from None


def parse_json_request(obj: Any, prefix: str = "") -> list[SpanView]:
    """Spans of one decoded OTLP/JSON ``ExportTraceServiceRequest``; raises ValueError naming the field."""
    if not isinstance(obj, dict):
        raise _Bad(prefix or "top level", f"expected an object with resourceSpans, got {type(obj).__name__}")
    resource_spans = _get(obj, ("resourceSpans", "resource_spans"), list, prefix or "top level")
    if resource_spans is None:
        raise _Bad(prefix or "top level", NOT_TRACE_DATA)
    spans: list[SpanView] = []
    for i, rs in enumerate(resource_spans):
        where = f"{prefix}resourceSpans[{i}]"
        _need_dict(rs, where)
        resource = _get(rs, ("resource",), dict, where) or {}
        resource_attrs = _attributes(resource.get("attributes"), f"{where}.resource.attributes", _RESOURCE_VALUE)
        for j, ss in enumerate(
            _get(rs, ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"), list, where) or []
        ):
            swhere = f"{where}.scopeSpans[{j}]"
            _need_dict(ss, swhere)
            scope = _get(ss, ("scope", "instrumentationLibrary"), dict, swhere) or {}
            scope_name = scope.get("name") if isinstance(scope.get("name"), str) else ""
            for k, span in enumerate(_get(ss, ("spans",), list, swhere) or []):
                spans.append(_span(span, f"{swhere}.spans[{k}]", resource_attrs, scope_name or ""))
    return spans


def _span(obj: Any, where: str, resource: Mapping[str, Any], scope: str) -> JsonSpan:
    _need_dict(obj, where)
    trace_id = _id(obj, ("traceId", "trace_id"), 16, where, required=True)
    span_id = _id(obj, ("spanId", "span_id"), 8, where, required=True)
    parent = _id(obj, ("parentSpanId", "parent_span_id"), 8, where, required=False)
    name = obj.get("name", "")
    if not isinstance(name, str):
        raise _Bad(f"{where}.name", "must be a string")
    start = _int(obj, ("startTimeUnixNano", "start_time_unix_nano"), where)
    end = _int(obj, ("endTimeUnixNano", "end_time_unix_nano"), where) or start
    flags = _int(obj, ("flags",), where)
    status = _get(obj, ("status",), dict, where) or {}
    code = _enum(status.get("code", 0), _STATUS_NAMES, f"{where}.status.code")
    message = status.get("message", "")
    events: list[SpanEvent] = []
    for n, ev in enumerate(_get(obj, ("events",), list, where) or []):
        ewhere = f"{where}.events[{n}]"
        _need_dict(ev, ewhere)
        ev_name = ev.get("name", "")
        events.append(
            make_event(
                ev_name if isinstance(ev_name, str) else str(ev_name),
                _int(ev, ("timeUnixNano", "time_unix_nano"), ewhere),
                _attributes(ev.get("attributes"), f"{ewhere}.attributes", _EVENT_VALUE),
            )
        )
    return JsonSpan(
        trace_id=trace_id or "",
        span_id=span_id or "",
        parent_span_id=parent,
        parent_is_remote=(bool(flags & 0x200) if parent and flags & 0x100 else None),
        name=name,
        kind=_enum(obj.get("kind", 0), _KIND_NAMES, f"{where}.kind"),
        start_unix_nano=start,
        end_unix_nano=end,
        status_code=code,
        status_message=message if isinstance(message, str) else str(message),
        attributes=_attributes(obj.get("attributes"), f"{where}.attributes", _SPAN_VALUE),
        events=tuple(events),
        resource_attributes=resource,
        scope_name=scope,
    )


def _need_dict(obj: Any, where: str) -> None:
    if not isinstance(obj, dict):
        raise _Bad(where, f"expected an object, got {type(obj).__name__}")


def _get(obj: dict[str, Any], keys: tuple[str, ...], typ: type, where: str) -> Any:
    for key in keys:
        if key in obj and obj[key] is not None:
            value = obj[key]
            if not isinstance(value, typ):
                raise _Bad(f"{where}.{key}", f"expected {'an array' if typ is list else 'an object'}")
            return value
    return None


def _id(obj: dict[str, Any], keys: tuple[str, ...], nbytes: int, where: str, *, required: bool) -> str | None:
    for key in keys:
        value = obj.get(key)
        if value not in (None, ""):
            return _id_value(value, nbytes, where, key, required=required)
    if required:
        raise _Bad(where, f"missing {keys[0]}")
    return None


def _id_value(value: Any, nbytes: int, where: str, key: str, *, required: bool) -> str | None:
    """An id that is there (``where.key``): ``None`` when all zeros and not ``required``."""
    try:
        decoded = decode_id(value, nbytes)
    except ValueError as e:
        raise _Bad(f"{where}.{key}", str(e)) from None
    if decoded.strip("0") == "":
        if required:
            raise _Bad(f"{where}.{key}", "is all zeros (invalid id)")
        return None
    return decoded


def _int(obj: dict[str, Any], keys: tuple[str, ...], where: str) -> int:
    for key in keys:
        value = obj.get(key)
        if value is not None:
            return _uint64(value, where, key)
    return 0


def _uint64(value: Any, where: str, key: str) -> int:
    """A 64-bit unsigned integer that is there (``where.key``), a number or a string of digits."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Bad(f"{where}.{key}", "must be an integer or a string of digits")
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise _Bad(f"{where}.{key}", f"{value[:40]!r} is not an integer")
    number = int(value)
    if not 0 <= number < 1 << 64:
        raise _Bad(f"{where}.{key}", "must be a 64-bit unsigned integer")
    return number


def _enum(value: Any, names: dict[str, int], where: str) -> int:
    if isinstance(value, str):
        if value in names:
            return names[value]
        if _DECIMAL.fullmatch(value) and -(1 << 31) <= int(value) < 1 << 31:
            return int(value)
        raise _Bad(where, f"unknown value {value[:40]!r}")
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 31) <= value < 1 << 31:
        return value
    raise _Bad(where, "must be a number or an enum name")


def _attributes(kvs: Any, where: str, depth: int) -> dict[str, Any]:
    """Key-value pairs whose values are messages ``depth`` deep below the request."""
    if kvs is None:
        return {}
    if not isinstance(kvs, list):
        raise _Bad(where, "expected an array of {key, value}")
    out: dict[str, Any] = {}
    for i, kv in enumerate(kvs):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise _Bad(f"{where}[{i}]", "expected {key: string, value: AnyValue}")
        out[kv["key"]] = _any_value(kv.get("value"), f"{where}[{i}].value", depth)
    return out


def _any_value(value: Any, where: str, depth: int) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Bad(where, "expected an AnyValue object")
    if depth > MAX_MESSAGE_DEPTH:
        raise _Bad(where, f"nested more than {MAX_MESSAGE_DEPTH} messages deep below the request (protobuf's limit)")
    if not value:
        return None
    key, inner = next(iter(value.items()))
    decode = _DECODERS.get(key)
    if decode is None:
        raise _Bad(where, f"unknown AnyValue field {key!r}")
    return decode(inner, where, depth)


def _string(inner: Any, where: str, depth: int) -> Any:
    return inner if isinstance(inner, str) else str(inner)


def _bool(inner: Any, where: str, depth: int) -> Any:
    if isinstance(inner, bool):
        return inner
    raise _Bad(where, "boolValue must be true or false")


def _integer(inner: Any, where: str, depth: int) -> Any:
    if isinstance(inner, str) and _DECIMAL.fullmatch(inner):
        inner = int(inner)
    if isinstance(inner, int) and not isinstance(inner, bool) and -(1 << 63) <= inner < 1 << 63:
        return inner
    raise _Bad(where, f"intValue {str(inner)[:40]!r} is not a 64-bit integer")


def _double(inner: Any, where: str, depth: int) -> Any:
    # The decoder's own object, not a float made again from its value: json's NaN is one object, so two readings
    # of a file compare equal. Compiled code makes a new float for a variable typed float, even one narrowed to
    # float by the check below: hence a variable of type object, declared before it.
    decoded: object = inner
    if type(inner) is float:
        return decoded
    if not isinstance(inner, bool) and isinstance(inner, int | float | str):
        try:
            return float(inner)
        except ValueError:
            pass
    raise _Bad(where, f"doubleValue {inner!r} is not a number")


def _values(inner: Any, where: str, field: str) -> list[Any]:
    values = inner.get("values", []) if isinstance(inner, dict) else None
    if not isinstance(values, list):
        raise _Bad(where, f"{field}.values must be an array")
    return values


def _array(inner: Any, where: str, depth: int) -> Any:
    values = _values(inner, where, "arrayValue")
    # AnyValue > ArrayValue > AnyValue
    return tuple(_any_value(v, f"{where}.arrayValue.values[{i}]", depth + 2) for i, v in enumerate(values))


def _kvlist(inner: Any, where: str, depth: int) -> Any:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_values(inner, where, "kvlistValue")):
        at = f"{where}.kvlistValue.values[{i}]"
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise _Bad(at, "expected {key, value}")
        out[kv["key"]] = _any_value(kv.get("value"), f"{at}.value", depth + 3)  # > KeyValueList > KeyValue >
    return out


def _bytes(inner: Any, where: str, depth: int) -> Any:
    return inner


# --- the plain shape -----------------------------------------------------------------------------------------
# What instrumentations write: the camelCase names, hex or base64 ids, times as strings of digits or integers,
# attribute values that are strings, integers, booleans, doubles, arrays and key-value lists of them. A request
# in this shape is read here without naming where each value sits (only the reference reader names problems).
# Every value read here is one orjson and json decode alike: an integer past 64 bits, which orjson decodes as a
# float and json as an integer, is read here only as a double (the same to both); anywhere else it leaves the
# request to the reference reader, as a string, an event name or a status message that is not a string does.
class _NotPlain(Exception):
    """A value outside the plain shape: the request is read by the reference reader."""


def _plain_spans(obj: Any) -> list[SpanView] | None:
    """The spans of a decoded request, or of a list of them, when all are plain; ``None`` otherwise."""
    try:
        if type(obj) is list:
            spans: list[SpanView] = []
            for request in obj:
                spans += _plain_request(request)
            return spans
        return _plain_request(obj)
    except (_NotPlain, _Bad):
        return None


def _plain_request(obj: Any) -> list[SpanView]:
    if type(obj) is not dict or "resource_spans" in obj:
        raise _NotPlain
    resource_spans = obj.get("resourceSpans")
    if type(resource_spans) is not list:
        raise _NotPlain
    spans: list[SpanView] = []
    traces: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    for rs in resource_spans:
        if type(rs) is not dict or "scope_spans" in rs or "instrumentationLibrarySpans" in rs:
            raise _NotPlain
        resource = _plain_dict(rs.get("resource"))
        resource_attrs = _plain_attributes(resource.get("attributes"), _RESOURCE_VALUE)
        scope_spans = rs.get("scopeSpans")
        for ss in () if scope_spans is None else _plain_list(scope_spans):
            if type(ss) is not dict or "instrumentationLibrary" in ss:
                raise _NotPlain
            scope = _plain_dict(ss.get("scope"))
            scope_name = scope.get("name")
            if type(scope_name) is not str:
                scope_name = ""
            in_scope = ss.get("spans")
            for span in () if in_scope is None else _plain_list(in_scope):
                spans.append(_plain_span(span, resource_attrs, scope_name, traces, parents))
    return spans


def _plain_dict(value: Any) -> dict[str, Any]:
    """An optional object: absent is empty."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise _NotPlain
    return value


def _plain_list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _NotPlain
    return value


def _plain_span(
    obj: Any, resource: Mapping[str, Any], scope: str, traces: dict[str, str], parents: dict[str, str | None]
) -> JsonSpan:
    """A span; ``traces`` and ``parents`` hold the trace and parent ids read so far by their text (a run's spans
    share them)."""
    if type(obj) is not dict:
        raise _NotPlain
    # The usual forms are read inline; the rest by the shared helpers, which read what both decoders give alike
    # (strings, integers) and whose problems (_Bad) the reference reader names.
    get = obj.get
    text = get("traceId")
    trace_id = traces.get(text) if type(text) is str else None
    if trace_id is None:
        trace_id = _id(obj, ("traceId", "trace_id"), 16, "", required=True) or ""
        if type(text) is str and text:
            traces[text] = trace_id
    text = get("spanId")
    if type(text) is str and len(text) == 16 and _lower_hex(text) and text != _ZERO_SPAN_ID:
        span_id: str | None = text
    else:
        span_id = _id(obj, ("spanId", "span_id"), 8, "", required=True)
    text = get("parentSpanId")
    if type(text) is str and text in parents:
        parent = parents[text]
    else:
        parent = _id(obj, ("parentSpanId", "parent_span_id"), 8, "", required=False)
        if type(text) is str and text:
            parents[text] = parent
    name = get("name", "")
    if type(name) is not str:
        raise _NotPlain
    start = _plain_time(get("startTimeUnixNano"))
    if start is None:
        start = _int(obj, ("startTimeUnixNano", "start_time_unix_nano"), "")
    end = _plain_time(get("endTimeUnixNano"))
    if end is None:
        end = _int(obj, ("endTimeUnixNano", "end_time_unix_nano"), "")
    end = end or start
    flags = _int(obj, ("flags",), "") if "flags" in obj else 0
    status = get("status")
    message: Any  # a value of any type until checked (compiled code checks what a variable is declared to hold)
    if status is None:
        code, message = 0, ""
    elif type(status) is dict:
        code = _enum(status.get("code", 0), _STATUS_NAMES, "")
        message = status.get("message", "")
        if type(message) is not str:
            raise _NotPlain
    else:
        raise _NotPlain
    kind = get("kind", 0)
    if type(kind) is not int or not -(1 << 31) <= kind < 1 << 31:
        kind = _enum(kind, _KIND_NAMES, "")
    raw_events = get("events")
    events: tuple[SpanEvent, ...] = ()
    if raw_events is not None:
        events = tuple(_plain_event(ev) for ev in _plain_list(raw_events))
    return JsonSpan(
        trace_id=trace_id,
        span_id=span_id or "",
        parent_span_id=parent,
        parent_is_remote=(bool(flags & 0x200) if parent and flags & 0x100 else None),
        name=name,
        kind=kind,
        start_unix_nano=start,
        end_unix_nano=end,
        status_code=code,
        status_message=message,
        attributes=_plain_attributes(get("attributes"), _SPAN_VALUE),
        events=events,
        resource_attributes=resource,
        scope_name=scope,
    )


def _plain_time(value: Any) -> int | None:
    """A time as a string of at most 19 ASCII digits (below 2**64), or ``None`` for the shared helper to read."""
    if type(value) is str and 0 < len(value) < 20 and value.isascii() and value.isdigit():
        return int(value)
    return None


def _plain_event(ev: Any) -> SpanEvent:
    if type(ev) is not dict:
        raise _NotPlain
    name = ev.get("name", "")
    if type(name) is not str:
        raise _NotPlain
    time = _int(ev, ("timeUnixNano", "time_unix_nano"), "")
    return make_event(name, time, _plain_attributes(ev.get("attributes"), _EVENT_VALUE))


def _plain_attributes(kvs: Any, depth: int) -> dict[str, Any]:
    if kvs is None:
        return {}
    out: dict[str, Any] = {}
    for kv in _plain_list(kvs):
        if type(kv) is not dict:
            raise _NotPlain
        key = kv.get("key")
        if type(key) is not str:
            raise _NotPlain
        value = kv.get("value")
        if type(value) is dict and len(value) == 1:
            text = value.get("stringValue")
            if type(text) is str:
                out[key] = text
                continue
            text = value.get("intValue")
            if type(text) is str and 0 < len(text) < 19 and text.isascii() and text.isdigit():
                out[key] = int(text)
                continue
        out[key] = _plain_value(value, depth)
    return out


def _plain_value(value: Any, depth: int) -> Any:
    if value is None:
        return None
    if type(value) is not dict or depth > MAX_MESSAGE_DEPTH:
        raise _NotPlain
    if not value:
        return None
    if len(value) != 1:
        raise _NotPlain
    ((field, inner),) = value.items()
    kind = type(inner)
    if field == "stringValue" and kind is str:
        return inner
    if field == "intValue" and (kind is int or (kind is str and _DECIMAL.fullmatch(inner))):
        number = int(inner)
        if -(1 << 63) <= number < 1 << 63:
            return number
    elif field == "boolValue" and kind is bool:
        return inner
    elif field == "doubleValue" and (kind is float or kind is int):
        return float(inner)  # an integer past 64 bits, a float to orjson, is the same double to both
    elif field == "arrayValue" and kind is dict:
        return tuple(_plain_value(v, depth + 2) for v in _plain_list(inner.get("values", [])))
    elif field == "kvlistValue" and kind is dict:
        out: dict[str, Any] = {}
        for kv in _plain_list(inner.get("values", [])):
            if type(kv) is not dict or type(kv.get("key")) is not str:
                raise _NotPlain
            out[kv["key"]] = _plain_value(kv.get("value"), depth + 3)
        return out
    elif field == "bytesValue" and kind is str:
        return inner
    raise _NotPlain


# --- the typed shape ------------------------------------------------------------------------------------------
# A request decoded by msgspec into the types of otlp_json_types, read as _plain_spans reads the same request
# decoded by orjson: the types admit only values both decoders give alike, and what _plain_spans would leave to
# the reference reader leaves it here too (to orjson and _plain_spans first).
def _typed_spans(data: bytes | str) -> list[SpanView] | None:
    """The spans of one request in the typed shape, or ``None`` when it is not in it. Each span is decoded and read
    in turn, its decoded objects let go before the next span's are made."""
    try:
        return _typed_request(REQUEST.decode(data))
    except (ValueError, RecursionError, _NotPlain):  # msgspec.DecodeError and _Bad are ValueErrors
        return None


def _typed_request(request: Any) -> list[SpanView]:
    spans: list[SpanView] = []
    traces: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    keys: dict[str, str] = {}
    for rs in request.resourceSpans:
        resource = rs.resource
        resource_attrs = _typed_attributes(None if resource is None else resource.attributes, _RESOURCE_VALUE, keys)
        scope_spans = rs.scopeSpans
        for ss in () if scope_spans is None else scope_spans:
            scope = ss.scope
            scope_name = None if scope is None else scope.name
            in_scope = ss.spans
            for raw in () if in_scope is None else in_scope:
                span = _SPAN.decode(raw)
                spans.append(_typed_span(span, resource_attrs, scope_name or "", traces, parents, keys))
    return spans


def _typed_span(
    span: Any,
    resource: Mapping[str, Any],
    scope: str,
    traces: dict[str, str],
    parents: dict[str, str | None],
    keys: dict[str, str],
) -> JsonSpan:
    """A span; ``traces`` and ``parents`` as in :func:`_plain_span`, ``keys`` as in :func:`_typed_attributes`."""
    fields: tuple[Any, ...] = _FIELDS(span)  # one call rather than a look-up per field
    text = fields[_TRACE_ID]
    if not text:
        raise _NotPlain  # no trace id: the reference reader names the problem
    trace_id = traces.get(text)
    if trace_id is None:
        trace_id = traces[text] = _id_value(text, 16, "", "traceId", required=True) or ""
    text = fields[_SPAN_ID]
    if not text:
        raise _NotPlain
    if len(text) == 16 and _lower_hex(text) and text != _ZERO_SPAN_ID:
        span_id: str | None = text
    else:
        span_id = _id_value(text, 8, "", "spanId", required=True)
    text = fields[_PARENT_SPAN_ID]
    if not text:
        parent = None
    else:
        parent = parents.get(text)  # one look-up for a parent read before (None: an all-zero id, or a new one)
        if parent is None and text not in parents:
            parent = parents[text] = _id_value(text, 8, "", "parentSpanId", required=False)
    start = _typed_time(fields[_START], "startTimeUnixNano")
    end = _typed_time(fields[_END], "endTimeUnixNano") or start
    flags = _typed_time(fields[_FLAGS], "flags")
    status = fields[_STATUS]
    code, message = (0, "") if status is None else (_enum(status.code, _STATUS_NAMES, ""), status.message)
    kind = fields[_KIND]
    if type(kind) is not int or not -(1 << 31) <= kind < 1 << 31:
        kind = _enum(kind, _KIND_NAMES, "")
    raw_events = fields[_EVENTS]
    events: tuple[SpanEvent, ...] = ()
    if raw_events is not None:
        events = tuple(
            make_event(
                ev.name,
                _typed_time(ev.timeUnixNano, "timeUnixNano"),
                _typed_attributes(ev.attributes, _EVENT_VALUE, keys),
            )
            for ev in raw_events
        )
    return JsonSpan(
        trace_id=trace_id,
        span_id=span_id or "",
        parent_span_id=parent,
        parent_is_remote=(bool(flags & 0x200) if parent and flags & 0x100 else None),
        name=fields[_NAME],
        kind=kind,
        start_unix_nano=start,
        end_unix_nano=end,
        status_code=code,
        status_message=message,
        attributes=_typed_attributes(fields[_ATTRIBUTES], _SPAN_VALUE, keys),
        events=events,
        resource_attributes=resource,
        scope_name=scope,
    )


def _typed_time(value: Any, key: str) -> int:
    """A 64-bit unsigned integer field (a time, the flags): 0 when absent."""
    if value is None:
        return 0
    if type(value) is str and 0 < len(value) < 20 and value.isascii() and value.isdigit():
        return int(value)
    return _uint64(value, "", key)


def _lower_hex(text: str) -> bool:
    """Whether ``text`` is lowercase hexadecimal digits only."""
    for i in range(len(text)):
        c = ord(text[i])
        if not (48 <= c <= 57 or 97 <= c <= 102):
            return False
    return True


def _typed_attributes(kvs: Any, depth: int, keys: dict[str, str]) -> dict[str, Any]:
    """Attributes, each key one string object for the whole request (``keys``): spans of a kind then share their
    keys, as an instrumentation's spans do in its process (:func:`~trajgrade.core.trajectory.span_shape.shape_of`
    compares them by identity)."""
    out: dict[str, Any] = {}
    if kvs is not None:
        items: list[Any] = kvs  # a list (otlp_json_types), walked as one
        for kv in items:
            key: str = kv.key
            out[keys.setdefault(key, key)] = _typed_value(kv.value, depth)
    return out


def _typed_value(value: Any, depth: int) -> Any:
    """An ``AnyValue``: its one field read as :func:`_plain_value` reads it."""
    if value is None:
        return None
    if depth > MAX_MESSAGE_DEPTH:
        raise _NotPlain
    unset = _UNSET
    fields: tuple[Any, ...] = _FIELDS(value)  # one call rather than a look-up per field
    out: Any = None
    found = -1
    for i in range(len(fields)):
        if fields[i] is not unset:
            if found >= 0:
                raise _NotPlain  # the reference reader takes the first field written: an order these types lose
            found = i
            out = fields[i]
    if found == _STRING or found == _BOOL or found == _DOUBLE or found == _BYTES:
        return out  # msgspec's own float, as orjson's: an integer is decoded as the double json would make of it
    if found == _INT:
        return _typed_int(out)
    if found == _ARRAY:
        return tuple(_typed_value(v, depth + 2) for v in out.values)
    if found == _KVLIST:
        return {kv.key: _typed_value(kv.value, depth + 3) for kv in out.values}
    return None


def _typed_int(number: Any) -> int:
    if type(number) is str:
        text: str = number
        if 0 < len(text) < 19 and text.isascii() and text.isdigit():
            return int(text)  # at most 18 digits: within 64 bits
        if not _DECIMAL.fullmatch(text):
            raise _NotPlain
    value = int(number)
    if not -(1 << 63) <= value < 1 << 63:
        raise _NotPlain
    return value


_DECODERS: dict[str, Callable[[Any, str, int], Any]] = {}
for _names, _fn in (
    (("stringValue", "string_value"), _string),
    (("boolValue", "bool_value"), _bool),
    (("intValue", "int_value"), _integer),
    (("doubleValue", "double_value"), _double),
    (("arrayValue", "array_value"), _array),
    (("kvlistValue", "kvlist_value"), _kvlist),
    (("bytesValue", "bytes_value"), _bytes),
):
    for _name in _names:
        _DECODERS[_name] = _fn
