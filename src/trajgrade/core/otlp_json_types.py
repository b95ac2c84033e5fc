"""The plain shape of OTLP/JSON as msgspec types, which its decoder fills as it reads (no dict per object).

The shape is closed: the fields instrumentations write, in camelCase, with the types they write them in, and
the fields trajgrade does not read (kept as raw JSON, unread). Anything else (a snake_case name, a value of
another type, an unknown field) fails to decode, and the request is read by the general readers instead
(:mod:`trajgrade.core.readers`), which read every form and name every problem. ``UNSET`` marks a field the
object does not have; an ``AnyValue`` must have one field at most, which the reader checks.

Not compiled: msgspec makes these classes itself.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.structs
from msgspec import UNSET, Raw, Struct, UnsetType

__all__ = [
    "MISSING_FIELD",
    "REQUEST",
    "SPAN",
    "SPAN_FIELDS",
    "VALUE_FIELDS",
    "AnyValue",
    "Event",
    "KeyValue",
    "Request",
    "Span",
]


class _Closed(Struct, forbid_unknown_fields=True, gc=False):
    """An object of the shape: no other field; never part of a cycle, so never tracked by the collector."""


class AnyValue(_Closed):
    stringValue: str | UnsetType = UNSET
    intValue: int | str | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    doubleValue: float | UnsetType = UNSET
    arrayValue: ArrayValue | UnsetType = UNSET
    kvlistValue: KeyValueList | UnsetType = UNSET
    bytesValue: str | UnsetType = UNSET


class KeyValue(_Closed):
    key: str
    value: AnyValue | None = None


class ArrayValue(_Closed):
    values: list[AnyValue | None] = []


class KeyValueList(_Closed):
    values: list[KeyValue] = []


class Status(_Closed):
    code: int | str = 0
    message: str = ""


class Event(_Closed):
    name: str = ""
    timeUnixNano: int | str | None = None
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Raw = Raw()


class Span(_Closed):
    traceId: str | None = None
    spanId: str | None = None
    parentSpanId: str | None = None
    name: str = ""
    kind: int | str = 0
    startTimeUnixNano: int | str | None = None
    endTimeUnixNano: int | str | None = None
    flags: int | str | None = None
    attributes: list[KeyValue] | None = None
    events: list[Event] | None = None
    status: Status | None = None
    traceState: Raw = Raw()
    links: Raw = Raw()
    droppedAttributesCount: Raw = Raw()
    droppedEventsCount: Raw = Raw()
    droppedLinksCount: Raw = Raw()


class Scope(_Closed):
    name: str | None = None
    version: Raw = Raw()
    attributes: Raw = Raw()
    droppedAttributesCount: Raw = Raw()


class ScopeSpans(_Closed):
    scope: Scope | None = None
    #: Each span's JSON, decoded on its own (``SPAN``) as the reader comes to it: a span's objects are let go
    #: before the next one's are made, rather than every span of a request being held at once.
    spans: list[Raw] | None = None
    schemaUrl: Raw = Raw()


class Resource(_Closed):
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Raw = Raw()


class ResourceSpans(_Closed):
    resource: Resource | None = None
    scopeSpans: list[ScopeSpans] | None = None
    schemaUrl: Raw = Raw()


class Request(_Closed):
    """An ``ExportTraceServiceRequest`` (or ``TracesData``)."""

    resourceSpans: list[ResourceSpans]


#: Decode one request, or one of its spans, in the shape; raise ``msgspec.DecodeError`` (a ``ValueError``) or
#: ``RecursionError``.
REQUEST: Any = msgspec.json.Decoder(Request)
SPAN: Any = msgspec.json.Decoder(Span)
#: A struct's fields as a tuple, in their order (an ``AnyValue``'s, a ``Span``'s).
VALUE_FIELDS: Any = msgspec.structs.astuple
#: The names of a ``Span``'s fields, in their order.
SPAN_FIELDS: tuple[str, ...] = Span.__struct_fields__
#: What a field the object does not have holds.
MISSING_FIELD: Any = UNSET
