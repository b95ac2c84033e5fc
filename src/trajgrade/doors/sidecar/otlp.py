"""OTLP/HTTP bodies in and out, and result events on protobuf spans.

A body is an ``ExportTraceServiceRequest`` as binary protobuf (``application/x-protobuf``) or as OTLP/JSON
(``application/json``: hex trace and span ids, as the specification writes them; base64 ids of plain proto3
JSON are accepted too), optionally gzip-compressed. Every problem is a :class:`BadRequest` with the HTTP
status and a message that names it. An accepted body becomes a :class:`TraceRequest`: its protobuf bytes
(forwarded as they are), checked whole against the OTLP schema, and their span count; the spans themselves
(read by ``_protowire.c`` with the attributes normalization reads) are read only once the request is admitted.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.result_attributes import report_attributes, results_attributes
from trajgrade.core.running import RunReport
from trajgrade.doors.sidecar._protowire import (
    MAX_MESSAGE_DEPTH,
    Span,
    check_request,
    encode_result_fields,
    read_request,
)

__all__ = [
    "PROTOBUF",
    "BadRequest",
    "TraceRequest",
    "decode_body",
    "encode_response",
    "parse_protobuf",
    "result_fields",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_SIZES = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_JSON_PARSER_DEPTH = 4 * MAX_MESSAGE_DEPTH


class BadRequest(Exception):
    """A request trajgrade will not take, with the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class TraceRequest:
    """A well-formed export request: its protobuf bytes, its span count, and its spans (with the attributes
    normalization reads) once asked for."""

    __slots__ = ("_spans", "body", "span_count")

    def __init__(self, body: bytes, span_count: int) -> None:
        self.body = body
        self.span_count = span_count
        self._spans: list[Span] | None = None

    @property
    def spans(self) -> list[Span]:
        if self._spans is None:
            self._spans = read_request(self.body, sc.READ_KEYS, sc.READ_PREFIXES)
        return self._spans


def parse_protobuf(body: bytes) -> TraceRequest:
    """Check a binary ``ExportTraceServiceRequest`` whole (raises :class:`BadRequest` naming the field)."""
    try:
        count = check_request(body)
    except ValueError as e:
        raise BadRequest(400, f"body is not a valid OTLP ExportTraceServiceRequest: {e}") from None
    return TraceRequest(body, count)


def decode_body(body: bytes, content_type: str, content_encoding: str, *, max_decompressed: int) -> TraceRequest:
    """Decompress and parse an OTLP/HTTP trace export body."""
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        body = _gunzip(body, max_decompressed)
    elif encoding not in ("", "identity"):
        raise BadRequest(415, f"unsupported Content-Encoding {content_encoding!r} (use gzip or none)")
    media = content_type.split(";")[0].strip().lower()
    if media == PROTOBUF:
        return parse_protobuf(body)
    if media == JSON:
        return parse_protobuf(_parse_json(body).SerializeToString())
    raise BadRequest(415, f"unsupported Content-Type {content_type!r} (use {PROTOBUF} or {JSON})")


_INFLATE_CHUNK = 1 << 20


def _gunzip(body: bytes, limit: int) -> bytes:
    """Decompressed in chunks of 1 MiB, joined once: no buffer is grown (and copied) on the way to the limit."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    chunks: list[bytes] = []
    size = 0
    data = body
    try:
        while not inflater.eof:
            chunk = inflater.decompress(data, _INFLATE_CHUNK)
            size += len(chunk)
            if size > limit:
                raise BadRequest(413, f"body decompresses to more than {limit} bytes")
            chunks.append(chunk)
            data = inflater.unconsumed_tail
            if not chunk and not data:
                raise BadRequest(400, "corrupt gzip body: truncated")
    except zlib.error as e:
        raise BadRequest(400, f"corrupt gzip body: {e}") from None
    return b"".join(chunks)


def _parse_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise BadRequest(400, f"body is not JSON: {e}") from None
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"body is not UTF-8 at byte {e.start}") from None
    except ValueError:  # the one ValueError json.loads raises that is not a JSONDecodeError
        raise BadRequest(400, "body is not JSON it can read: a number of more than 4,300 digits") from None
    except RecursionError:
        raise BadRequest(400, "body is JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise BadRequest(400, "body is not an OTLP/JSON ExportTraceServiceRequest object")
    try:
        for i, rs in enumerate(obj.get("resourceSpans") or ()):
            for j, ss in enumerate(rs.get("scopeSpans") or ()):
                for k, span in enumerate(ss.get("spans") or ()):
                    _ids_to_base64(span, f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]")
                    for n, link in enumerate(span.get("links") or ()):
                        _ids_to_base64(link, f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}].links[{n}]")
        # protobuf's JSON parser counts nesting its own way (it refuses 31 key-value lists that its binary parser
        # takes): the limit is the binary one, which check_request applies to what this gives.
        return json_format.ParseDict(obj, ExportTraceServiceRequest(), max_recursion_depth=_JSON_PARSER_DEPTH)
    except BadRequest:
        raise
    except (json_format.ParseError, AttributeError, TypeError, ValueError) as e:
        raise BadRequest(400, f"not an OTLP/JSON ExportTraceServiceRequest: {e}") from None
    except RecursionError:
        raise BadRequest(400, "not an OTLP/JSON ExportTraceServiceRequest: values nested too deeply") from None


def _ids_to_base64(obj: Any, where: str) -> None:
    """OTLP/JSON ids are hex; protobuf's JSON parser wants base64. Ids already in base64 are left alone."""
    for key, size in _ID_SIZES.items():
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            continue
        if len(value) == 2 * size:
            try:
                obj[key] = base64.b64encode(bytes.fromhex(value)).decode()
                continue
            except ValueError:
                pass
        try:
            if len(base64.b64decode(value, validate=True)) == size:
                continue
        except binascii.Error:
            pass
        raise BadRequest(400, f"{where}.{key}: {value!r} is not a {size}-byte id in hex or base64")


def encode_response(media: str, rejected_spans: int = 0, message: str = "") -> tuple[bytes, str]:
    """An ExportTraceServiceResponse body in the request's encoding."""
    response = ExportTraceServiceResponse()
    if rejected_spans:
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = message
    if media == JSON:
        return json.dumps(json_format.MessageToDict(response)).encode(), JSON
    return response.SerializeToString(), PROTOBUF


def result_fields(report: RunReport, when: int, made: list[dict[str, AttributeValue]] | None = None) -> bytes:
    """A run's ``gen_ai.evaluation.result`` events and verdict attributes, encoded as span fields; ``made``: the
    results' attributes when made already (``results_attributes``).

    Appended to the bytes of the run's root span they add to it: concatenated protobuf messages merge, and
    repeated fields (``events``, ``attributes``) are appended. The root is never decoded and re-encoded.
    """
    events = results_attributes(report.results) if made is None else made
    return encode_result_fields(events, report_attributes(report), when, sc.EVALUATION_RESULT_EVENT)
