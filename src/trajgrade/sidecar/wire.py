"""Two partial schemas of OTLP's ``ExportTraceServiceRequest`` for the sidecar's hot path.

Both are declared over the OTLP wire format's own field numbers, so either parses the bytes a collector
sends, and fields a schema does not declare are kept as unknown fields:

- :data:`ReadRequest` holds what grading reads. A span's ``attributes`` are declared as
  ``map<string, AnyValue>``: a protobuf map is encoded as repeated (key = 1, value = 2) entries, which is
  exactly OTLP's repeated ``KeyValue``, so the same bytes parse into a map whose keys are looked up in C
  rather than by walking ``KeyValue`` messages in Python. As in the SDK, a later duplicate key wins.
- :data:`SpliceRequest` keeps each span as its raw bytes, so spans are forwarded byte for byte, and a root
  is taken out of a request (to wait for its grade) without re-encoding the others.

The messages are built from descriptors at import (protobuf's own ``descriptor_pb2`` and message factory,
on the ``upb`` backend), reusing the official ``AnyValue``, ``InstrumentationScope``, ``Span.Event`` and
``Status`` types.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["ReadRequest", "ReadSpan", "SpliceRequest"]

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "trajgrade.wire"
_COMMON = "opentelemetry.proto.common.v1"
_TRACE = "opentelemetry.proto.trace.v1"


def _field(message: Any, name: str, number: int, kind: int, type_name: str = "", repeated: bool = False) -> None:
    field = message.field.add(
        name=name, number=number, type=kind, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    )
    if type_name:
        field.type_name = type_name


def _schema() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="trajgrade/wire.proto",
        package=_PACKAGE,
        syntax="proto3",
        dependency=[common_pb2.DESCRIPTOR.name, trace_pb2.DESCRIPTOR.name],
    )
    msg = _F.TYPE_MESSAGE

    # --- read: what grading needs -------------------------------------------------------------------------
    span = file.message_type.add(name="ReadSpan")
    entry = span.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_STRING)
    _field(entry, "value", 2, msg, f".{_COMMON}.AnyValue")
    _field(span, "trace_id", 1, _F.TYPE_BYTES)
    _field(span, "span_id", 2, _F.TYPE_BYTES)
    _field(span, "parent_span_id", 4, _F.TYPE_BYTES)
    _field(span, "name", 5, _F.TYPE_STRING)
    _field(span, "kind", 6, _F.TYPE_INT32)  # an enum on the wire is a varint
    _field(span, "start_time_unix_nano", 7, _F.TYPE_FIXED64)
    _field(span, "end_time_unix_nano", 8, _F.TYPE_FIXED64)
    _field(span, "attributes", 9, msg, f".{_PACKAGE}.ReadSpan.AttributesEntry", repeated=True)
    _field(span, "events", 11, msg, f".{_TRACE}.Span.Event", repeated=True)
    _field(span, "status", 15, msg, f".{_TRACE}.Status")
    _field(span, "flags", 16, _F.TYPE_FIXED32)
    scope_spans = file.message_type.add(name="ReadScopeSpans")
    _field(scope_spans, "scope", 1, msg, f".{_COMMON}.InstrumentationScope")
    _field(scope_spans, "spans", 2, msg, f".{_PACKAGE}.ReadSpan", repeated=True)
    resource = file.message_type.add(name="ReadResource")
    _field(resource, "attributes", 1, msg, f".{_COMMON}.KeyValue", repeated=True)
    resource_spans = file.message_type.add(name="ReadResourceSpans")
    _field(resource_spans, "resource", 1, msg, f".{_PACKAGE}.ReadResource")
    _field(resource_spans, "scope_spans", 2, msg, f".{_PACKAGE}.ReadScopeSpans", repeated=True)
    request = file.message_type.add(name="ReadRequest")
    _field(request, "resource_spans", 1, msg, f".{_PACKAGE}.ReadResourceSpans", repeated=True)

    # --- splice: spans as raw bytes ---------------------------------------------------------------------
    scope_spans = file.message_type.add(name="SpliceScopeSpans")
    _field(scope_spans, "scope", 1, _F.TYPE_BYTES)
    _field(scope_spans, "spans", 2, _F.TYPE_BYTES, repeated=True)
    _field(scope_spans, "schema_url", 3, _F.TYPE_STRING)
    resource_spans = file.message_type.add(name="SpliceResourceSpans")
    _field(resource_spans, "resource", 1, _F.TYPE_BYTES)
    _field(resource_spans, "scope_spans", 2, msg, f".{_PACKAGE}.SpliceScopeSpans", repeated=True)
    _field(resource_spans, "schema_url", 3, _F.TYPE_STRING)
    request = file.message_type.add(name="SpliceRequest")
    _field(request, "resource_spans", 1, msg, f".{_PACKAGE}.SpliceResourceSpans", repeated=True)
    return file


def _messages(*names: str) -> list[Any]:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("trajgrade/wire.proto")
    except KeyError:
        pool.Add(_schema())
    return [message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{n}")) for n in names]


ReadRequest, ReadSpan, SpliceRequest = _messages("ReadRequest", "ReadSpan", "SpliceRequest")
