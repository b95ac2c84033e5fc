"""Log records as a binary OTLP ``ExportLogsServiceRequest``, written field by field.

The sidecar's log events (breaches and results, a few a run) are encoded here rather than by the SDK's OTLP
encoder, which builds a protobuf object for every attribute and hashes each record's resource to group them.
Records are grouped by their resource and scope objects (a run's records share one), each resource and scope
encoded once a batch; attributes are encoded by ``_protowire.c``, as the results on a root span are. A batch
with a value the wire format holds otherwise (bytes, a mapping) is left to the SDK's encoder: :func:`encode_logs`
gives None for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord

from trajgrade.doors.sidecar._protowire import encode_attributes

__all__ = ["encode_logs"]

_PLAIN = (str, bool, int, float)
_EMPTY_BODY = b"\x2a\x00"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _fixed64(field: int, value: int) -> bytes:
    return _varint(field << 3 | 1) + value.to_bytes(8, "little")


def _writes(value: Any) -> bool:
    return isinstance(value, _PLAIN) and (not isinstance(value, int) or -(2**63) <= value < 2**63)


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The attributes as a dict, or None when a value is not one the result encoder writes as OTLP does."""
    out = dict(attributes or {})
    for value in out.values():
        if not all(_writes(v) for v in (value if isinstance(value, list | tuple) else (value,))):
            return None
    return out


def _record(readable: ReadableLogRecord) -> bytes | None:
    r = readable.log_record
    if r.body is not None:
        return None
    attributes = _plain(r.attributes)
    if attributes is None:
        return None
    parts = []
    if r.timestamp:
        parts.append(_fixed64(1, r.timestamp))
    severity = getattr(r.severity_number, "value", None)
    if severity:
        parts.append(_varint(2 << 3) + _varint(severity))
    if r.severity_text:
        parts.append(_delimited(3, r.severity_text.encode()))
    parts.append(_EMPTY_BODY)  # as the SDK's encoder writes a record without a body
    parts.append(encode_attributes(attributes, 6))
    if readable.dropped_attributes:
        parts.append(_varint(7 << 3) + _varint(readable.dropped_attributes))
    if r.trace_flags:
        parts.append(_varint(8 << 3 | 5) + int(r.trace_flags).to_bytes(4, "little"))
    if r.trace_id:
        parts.append(_delimited(9, r.trace_id.to_bytes(16, "big")))
    if r.span_id:
        parts.append(_delimited(10, r.span_id.to_bytes(8, "big")))
    if r.observed_timestamp:
        parts.append(_fixed64(11, r.observed_timestamp))
    if r.event_name:
        parts.append(_delimited(12, r.event_name.encode()))
    return _delimited(2, b"".join(parts))


def _resource(resource: Any) -> bytes | None:
    attributes = _plain(resource.attributes)
    if attributes is None:
        return None
    return _delimited(1, encode_attributes(attributes, 1))


def _scope(scope: Any) -> bytes | None:
    if scope is None:
        return b""
    attributes = _plain(scope.attributes)
    if attributes is None:
        return None
    parts = [_delimited(1, scope.name.encode()) if scope.name else b""]
    if scope.version:
        parts.append(_delimited(2, scope.version.encode()))
    parts.append(encode_attributes(attributes, 3))
    return _delimited(1, b"".join(parts))


def encode_logs(batch: Sequence[ReadableLogRecord]) -> bytes | None:
    """The request's bytes, or None when a value in the batch is one this encoder leaves to the SDK's."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for readable in batch:
        encoded = _record(readable)
        if encoded is None:
            return None
        resource, scope = readable.resource, readable.instrumentation_scope
        scopes = groups.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(encoded)
    out = []
    for resource, scopes in groups.values():
        resource_bytes = _resource(resource)
        if resource_bytes is None:
            return None
        parts = [resource_bytes]
        for scope, records in scopes.values():
            scope_bytes = _scope(scope)
            if scope_bytes is None:
                return None
            schema = scope.schema_url if scope is not None else ""
            parts.append(
                _delimited(2, b"".join([scope_bytes, *records, _delimited(3, schema.encode()) if schema else b""]))
            )
        if resource.schema_url:
            parts.append(_delimited(3, resource.schema_url.encode()))
        out.append(_delimited(1, b"".join(parts)))
    return b"".join(out)
