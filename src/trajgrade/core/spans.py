"""One read-only view over the three shapes a span arrives in.

- :class:`SdkSpan` wraps an SDK ``ReadableSpan``, or the parts of one that the processor buffers;
- :class:`ProtoSpan` wraps an OTLP protobuf ``Span`` with its resource and scope (binary files);
- :class:`JsonSpan` wraps an OTLP/JSON span object (files).

The sidecar reads its requests with ``sidecar/_protowire.c``, whose spans have the same fields.

Every view gives ids as lower-case hex strings, times in Unix nanoseconds, the status code as the OTLP
number (0 unset, 1 ok, 2 error), and attributes as plain Python values: arrays become tuples and
key-value lists become dicts, as the SDK stores them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from trajgrade.core.semconv import TRAJGRADE_SCOPE

if TYPE_CHECKING:  # types only: reading files and rebuilding runs loads neither protobuf nor the SDK
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["Events", "JsonSpan", "ProtoSpan", "SdkSpan", "SpanEvent", "SpanView", "is_own", "is_root"]

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2


def is_root(parent_span_id: object, parent_is_remote: bool | None) -> bool:
    """Whether a span is a run's root: it has no parent, or its parent is in another process."""
    return parent_span_id is None or parent_is_remote is True


def is_own(scope_name: str | None) -> bool:
    """Whether a span is trajgrade's own (its evaluation span): never part of a run."""
    return scope_name == TRAJGRADE_SCOPE


# OTLP span flags: bit 8 says whether bit 9 (the parent is remote) is known.
_FLAG_HAS_IS_REMOTE, _FLAG_IS_REMOTE = 0x100, 0x200
_EMPTY: Mapping[str, Any] = {}


class SpanEvent(Protocol):
    """A span event: name, time and attributes."""

    @property
    def name(self) -> str: ...
    @property
    def time_unix_nano(self) -> int: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...


Events = tuple[SpanEvent, ...]


class SpanView(Protocol):
    """What trajgrade reads of a span, whatever its source."""

    @property
    def trace_id(self) -> str: ...
    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str | None: ...
    @property
    def parent_is_remote(self) -> bool | None: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> int: ...
    @property
    def start_unix_nano(self) -> int: ...
    @property
    def end_unix_nano(self) -> int: ...
    @property
    def status_code(self) -> int: ...
    @property
    def status_message(self) -> str: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...
    @property
    def events(self) -> tuple[SpanEvent, ...]: ...
    @property
    def resource_attributes(self) -> Mapping[str, Any]: ...
    @property
    def scope_name(self) -> str: ...


class _Event:
    __slots__ = ("attributes", "name", "time_unix_nano")

    def __init__(self, name: str, time_unix_nano: int, attributes: Mapping[str, Any]) -> None:
        self.name = name
        self.time_unix_nano = time_unix_nano
        self.attributes = attributes


# --- SDK ---------------------------------------------------------------------------------------------
SdkParts = tuple[Any, ...]


def sdk_parts(span: ReadableSpan) -> SdkParts:
    """The parts of an ended SDK span that its view reads: references in one tuple, no copy.

    This runs for every span the agent ends, so it reads the fields behind the public properties (which
    copy: ``events`` builds a tuple, ``attributes`` a mappingproxy) and takes the attributes' plain dict
    rather than their thread-safe wrapper.
    """
    try:
        return (
            span._context,
            span._parent,
            span._name,
            span._kind,
            span._start_time or 0,
            span._end_time,
            span._status,
            span._attributes._dict,  # type: ignore[union-attr]
            _events(span._events),
            span._resource,
            span._instrumentation_scope,
        )
    except AttributeError:  # a ReadableSpan built another way: the public properties say the same
        return (
            span.context,
            span.parent,
            span.name,
            span.kind,
            span.start_time or 0,
            span.end_time,
            span.status,
            span.attributes,
            tuple(span.events),
            span.resource,
            span.instrumentation_scope,
        )


def _events(events: Any) -> tuple[Any, ...]:
    """The events of an SDK span's ``BoundedList``, read from its deque (its own ``len`` and iterator are Python
    methods, the iterator under a lock)."""
    kept = getattr(events, "_dq", events)
    return tuple(kept) if kept else ()


def sdk_events(events: Any) -> Events:
    """SDK span events (their ``timestamp``, their attributes possibly None) as the views' events."""
    return tuple(_Event(e.name, e.timestamp, e.attributes or _EMPTY) for e in events) if events else ()


class _Spelled:
    """The id spelled last, with its spelling: a trace's spans share its id, siblings their parent's."""

    def __init__(self) -> None:
        self.last: tuple[int, str] = (-1, "")

    def hex(self, n: int, size: int) -> str:
        last = self.last  # one read, one write: threads that end spans at once see a whole pair
        if last[0] == n:
            return last[1]
        spelled = _hex(n, size)
        self.last = (n, spelled)
        return spelled


_TRACE_IDS: Final = _Spelled()
_PARENT_IDS: Final = _Spelled()


def sdk_trace_id(n: int) -> str:
    """An SDK trace id in hex (a trace's spans share the spelling)."""
    return _TRACE_IDS.hex(n, 16)


def sdk_trace(span: Any) -> str:
    """An SDK span's trace id in hex (the key the span processor buffers its spans under)."""
    return sdk_trace_id(span.context.trace_id)


def sdk_parent_id(n: int) -> str:
    """An SDK parent span id in hex (siblings share the spelling)."""
    return _PARENT_IDS.hex(n, 8)


def sdk_span_id(n: int) -> str:
    """An SDK span id in hex."""
    return _hex(n, 8)


def _hex(n: int, size: int) -> str:
    """An SDK id as ``size`` bytes of lower-case hex (as ``format(n, "0{2*size}x")``, at a third of its cost)."""
    try:
        return n.to_bytes(size, "big").hex()
    except OverflowError:  # not an id of the SDK's sizes: spelled out whole
        return format(n, f"0{2 * size}x")


class SdkSpan:
    """A view over an SDK ``ReadableSpan``, or over the parts :func:`sdk_parts` kept of one."""

    __slots__ = ("_p",)

    def __init__(self, span: ReadableSpan | SdkParts) -> None:
        self._p: SdkParts = span if isinstance(span, tuple) else sdk_parts(span)

    # A SpanContext is a tuple (trace_id, span_id, is_remote, ...): its fields are read by index, not through
    # its Python properties.
    @property
    def trace_id(self) -> str:
        ctx = self._p[0]
        return sdk_trace_id(ctx[0]) if ctx is not None else "0" * 32

    @property
    def span_id(self) -> str:
        ctx = self._p[0]
        return sdk_span_id(ctx[1]) if ctx is not None else "0" * 16

    @property
    def parent_span_id(self) -> str | None:
        parent = self._p[1]
        return sdk_parent_id(parent[1]) if parent is not None else None

    @property
    def parent_is_remote(self) -> bool | None:
        parent = self._p[1]
        return bool(parent[2]) if parent is not None else None

    @property
    def name(self) -> str:
        return str(self._p[2])

    @property
    def kind(self) -> int:
        return int(self._p[3]._value_) + 1  # SDK INTERNAL=0 ... OTLP INTERNAL=1 (an enum's documented value field)

    @property
    def start_unix_nano(self) -> int:
        return int(self._p[4])

    @property
    def end_unix_nano(self) -> int:
        return int(self._p[5] or self._p[4])

    @property
    def status_code(self) -> int:
        return int(self._p[6]._status_code._value_)  # the field behind the Status's property

    @property
    def status_message(self) -> str:
        return str(self._p[6].description or "")

    @property
    def attributes(self) -> Mapping[str, Any]:
        attributes: Mapping[str, Any] | None = self._p[7]
        return attributes or _EMPTY

    @property
    def events(self) -> tuple[SpanEvent, ...]:
        return sdk_events(self._p[8])

    @property
    def resource_attributes(self) -> Mapping[str, Any]:
        resource = self._p[9]
        bounded = getattr(resource, "_attributes", None)  # the SDK's field, and its plain dict: no Python-level get
        attributes: Mapping[str, Any] = getattr(bounded, "_dict", None) or resource.attributes
        return attributes

    @property
    def scope_name(self) -> str:
        scope = self._p[10]
        return str(scope.name) if scope is not None else ""


# --- OTLP protobuf -----------------------------------------------------------------------------------
def proto_value(value: common_pb2.AnyValue) -> Any:
    """Turn an OTLP ``AnyValue`` into a plain Python value."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(proto_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: proto_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def proto_attributes(kvs: Any) -> dict[str, Any]:
    """Turn OTLP attributes (a repeated ``KeyValue``) into a dict; a later duplicate key wins, as in the SDK."""
    out: dict[str, Any] = {}
    for kv in kvs:  # scalars are read inline: this loop runs for every attribute of every span
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            out[kv.key] = value.string_value
        elif which == "int_value":
            out[kv.key] = value.int_value
        else:
            out[kv.key] = proto_value(value)
    return out


class ProtoSpan:
    """A view over an OTLP protobuf span; attributes are decoded once, on first use."""

    __slots__ = ("_attributes", "_resource", "_scope", "_span")

    def __init__(self, span: trace_pb2.Span, resource: Mapping[str, Any], scope: str) -> None:
        self._span = span
        self._resource = resource
        self._scope = scope
        self._attributes: dict[str, Any] | None = None

    @property
    def raw(self) -> trace_pb2.Span:
        """The protobuf span itself (the sidecar forwards it)."""
        return self._span

    @property
    def trace_id(self) -> str:
        return self._span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self._span.span_id.hex()

    @property
    def parent_span_id(self) -> str | None:
        return self._span.parent_span_id.hex() or None

    @property
    def parent_is_remote(self) -> bool | None:
        return otlp_parent_is_remote(self._span.parent_span_id, self._span.flags)

    @property
    def name(self) -> str:
        return self._span.name

    @property
    def kind(self) -> int:
        return int(self._span.kind)

    @property
    def start_unix_nano(self) -> int:
        return int(self._span.start_time_unix_nano)

    @property
    def end_unix_nano(self) -> int:
        return int(self._span.end_time_unix_nano) or self.start_unix_nano

    @property
    def status_code(self) -> int:
        return int(self._span.status.code)

    @property
    def status_message(self) -> str:
        return self._span.status.message

    @property
    def attributes(self) -> Mapping[str, Any]:
        if self._attributes is None:
            self._attributes = proto_attributes(self._span.attributes)
        return self._attributes

    @property
    def events(self) -> tuple[SpanEvent, ...]:
        return tuple(_Event(e.name, int(e.time_unix_nano), proto_attributes(e.attributes)) for e in self._span.events)

    @property
    def resource_attributes(self) -> Mapping[str, Any]:
        return self._resource

    @property
    def scope_name(self) -> str:
        return self._scope


def otlp_parent_is_remote(parent_span_id: bytes, flags: int) -> bool | None:
    """Whether an OTLP span's parent is remote; ``None`` when it has no parent or its flags do not say."""
    if not parent_span_id or not flags & _FLAG_HAS_IS_REMOTE:
        return None
    return bool(flags & _FLAG_IS_REMOTE)


def iter_proto_request(request: Any) -> Iterator[ProtoSpan]:
    """Every span of an ``ExportTraceServiceRequest`` (or ``TracesData``) message, as views."""
    for resource_spans in request.resource_spans:
        resource = proto_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                yield ProtoSpan(span, resource, scope)


# --- OTLP/JSON ---------------------------------------------------------------------------------------
class JsonSpan:
    """A validated OTLP/JSON span, decoded into plain values (see :func:`trajgrade.otlp_json`)."""

    __slots__ = (
        "attributes",
        "end_unix_nano",
        "events",
        "kind",
        "name",
        "parent_is_remote",
        "parent_span_id",
        "resource_attributes",
        "scope_name",
        "span_id",
        "start_unix_nano",
        "status_code",
        "status_message",
        "trace_id",
    )

    def __init__(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        parent_is_remote: bool | None,
        name: str,
        kind: int,
        start_unix_nano: int,
        end_unix_nano: int,
        status_code: int,
        status_message: str,
        attributes: Mapping[str, Any],
        events: tuple[SpanEvent, ...],
        resource_attributes: Mapping[str, Any],
        scope_name: str,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.parent_is_remote = parent_is_remote
        self.name = name
        self.kind = kind
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.status_code = status_code
        self.status_message = status_message
        self.attributes = attributes
        self.events = events
        self.resource_attributes = resource_attributes
        self.scope_name = scope_name


def decode_id(value: Any, nbytes: int) -> str:
    """An OTLP/JSON id as hex: hex (the OTLP/JSON rule) or base64 (plain proto3 JSON). Raises ValueError."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    if len(value) == 2 * nbytes:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != nbytes:
        raise ValueError(f"{value[:40]!r} is neither {2 * nbytes} hex digits nor base64 of {nbytes} bytes")
    return raw.hex()


def make_event(name: str, time_unix_nano: int, attributes: Mapping[str, Any]) -> SpanEvent:
    """A span event value (used by the readers and by the emitters)."""
    return _Event(name, time_unix_nano, attributes)
