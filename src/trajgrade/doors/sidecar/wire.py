"""The sidecar's own writing on the protobuf wire: length-delimited fields (:func:`delimited`: a held root's
one-span request, the log events' requests), and a partial schema of OTLP's ``ExportTraceServiceRequest`` that
keeps each span as its raw bytes, to cut in two a request a target refuses as too large (:func:`split_request`).
(The roots are taken out of a request by ``_protowire.splice_spans``, which copies every other field as it came.)

:data:`SpliceRequest` is declared over the OTLP wire format's own field numbers, so it parses the bytes a
collector sends (fields it does not declare are kept as unknown fields). The message is built from a descriptor
at import (protobuf's own ``descriptor_pb2`` and message factory, on the ``upb`` backend).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["SpliceRequest", "delimited", "split_request"]

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "trajgrade.wire"


def _field(message: Any, name: str, number: int, kind: int, type_name: str = "", repeated: bool = False) -> None:
    field = message.field.add(
        name=name, number=number, type=kind, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    )
    if type_name:
        field.type_name = type_name


def _schema() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="trajgrade/wire.proto", package=_PACKAGE, syntax="proto3")
    msg = _F.TYPE_MESSAGE

    # Resource and scope are messages with no declared field: their bytes are kept as unknown fields, and a
    # message given twice merges as protobuf merges it (a bytes field would keep only the last one).
    file.message_type.add(name="SpliceOpaque")
    opaque = f".{_PACKAGE}.SpliceOpaque"
    scope_spans = file.message_type.add(name="SpliceScopeSpans")
    _field(scope_spans, "scope", 1, msg, opaque)
    _field(scope_spans, "spans", 2, _F.TYPE_BYTES, repeated=True)
    _field(scope_spans, "schema_url", 3, _F.TYPE_STRING)
    resource_spans = file.message_type.add(name="SpliceResourceSpans")
    _field(resource_spans, "resource", 1, msg, opaque)
    _field(resource_spans, "scope_spans", 2, msg, f".{_PACKAGE}.SpliceScopeSpans", repeated=True)
    _field(resource_spans, "schema_url", 3, _F.TYPE_STRING)
    request = file.message_type.add(name="SpliceRequest")
    _field(request, "resource_spans", 1, msg, f".{_PACKAGE}.SpliceResourceSpans", repeated=True)
    return file


def _splice_request() -> Any:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("trajgrade/wire.proto")
    except KeyError:
        pool.Add(_schema())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.SpliceRequest"))


SpliceRequest = _splice_request()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (a message, a string, bytes): its tag, its length, its payload."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def split_request(body: bytes) -> list[tuple[bytes, int]]:
    """A request cut in two, each half with its spans' resource and scope, with the span count of each: halves
    of the resource spans, else of the scope spans, else of the spans. One span cannot be cut: ``[]``."""
    request = SpliceRequest.FromString(body)
    resource_spans = request.resource_spans
    if len(resource_spans) > 1:
        cut = len(resource_spans) // 2
        parts = [resource_spans[:cut], resource_spans[cut:]]
    elif len(resource_spans) == 1 and len(resource_spans[0].scope_spans) > 1:
        rs = resource_spans[0]
        cut = len(rs.scope_spans) // 2
        parts = [[_with(rs, "scope_spans", rs.scope_spans[:cut])], [_with(rs, "scope_spans", rs.scope_spans[cut:])]]
    elif len(resource_spans) == 1 and len(resource_spans[0].scope_spans) == 1:
        rs, ss = resource_spans[0], resource_spans[0].scope_spans[0]
        cut = len(ss.spans) // 2
        if cut == 0:
            return []
        halves = (ss.spans[:cut], ss.spans[cut:])
        parts = [[_with(rs, "scope_spans", [_with(ss, "spans", spans)])] for spans in halves]
    else:
        return []
    out = []
    for part in parts:
        half = SpliceRequest()
        half.resource_spans.extend(part)
        spans = sum(len(ss.spans) for rs in half.resource_spans for ss in rs.scope_spans)
        out.append((half.SerializeToString(), spans))
    return out


def _with(message: Any, field: str, items: Any) -> Any:
    """A copy of ``message`` with ``items`` in its repeated ``field`` (every other field kept, unknown ones too)."""
    out = type(message)()
    out.CopyFrom(message)
    del getattr(out, field)[:]
    getattr(out, field).extend(items)
    return out
