"""One nesting limit everywhere a request is read: protobuf's own (messages at most 100 deep below the request).

A value nested as deep as protobuf parses it is read by every reader (the sidecar's protobuf and OTLP/JSON paths,
the command line's file reader); one level deeper is refused by all of them, with the field named.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from trajgrade.core.readers import MAX_MESSAGE_DEPTH, parse_json_request
from trajgrade.doors.sidecar import _protowire
from trajgrade.doors.sidecar.otlp import BadRequest, decode_body


def nested(kind: str, levels: int) -> AnyValue:
    value = AnyValue(int_value=7)
    for _ in range(levels):
        outer = AnyValue()
        if kind == "array":
            outer.array_value.values.add().CopyFrom(value)
        else:
            outer.kvlist_value.values.add(key="k").value.CopyFrom(value)
        value = outer
    return value


def request(kind: str, levels: int, where: str) -> ExportTraceServiceRequest:
    r = ExportTraceServiceRequest()
    rs = r.resource_spans.add()
    span = rs.scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="deep")
    holder = {"span": span.attributes, "event": span.events.add(name="e").attributes, "resource": None}[where]
    if holder is None:
        holder = rs.resource.attributes
    holder.add(key="deep").value.CopyFrom(nested(kind, levels))
    return r


def protobuf_parses(body: bytes) -> bool:
    try:
        ExportTraceServiceRequest.FromString(body)
    except DecodeError:
        return False
    return True


def readers(r: ExportTraceServiceRequest) -> dict[str, bool]:
    """Whether each reader takes the request."""
    body = r.SerializeToString()
    as_json = json_format.MessageToDict(r)
    out: dict[str, bool] = {"protobuf (upb)": protobuf_parses(body)}
    for name, read in (
        ("sidecar protobuf", lambda: decode_body(body, "application/x-protobuf", "", max_decompressed=1 << 26)),
        (
            "sidecar OTLP/JSON",
            lambda: decode_body(json.dumps(as_json).encode(), "application/json", "", max_decompressed=1 << 26),
        ),
        ("file reader", lambda: parse_json_request(as_json)),
    ):
        try:
            read()
            out[name] = True
        except BadRequest as e:
            assert "deep" in e.message or "nested" in e.message, e.message
            out[name] = False
        except ValueError as e:
            assert "nested more than 100 messages deep" in str(e), e
            out[name] = False
    return out


def test_the_limit_is_protobufs() -> None:
    assert MAX_MESSAGE_DEPTH == _protowire.MAX_MESSAGE_DEPTH == 100


@pytest.mark.parametrize(
    ("kind", "where", "deepest"),
    [
        ("array", "span", 47),
        ("kvlist", "span", 31),
        ("array", "event", 47),
        ("kvlist", "event", 31),
        ("array", "resource", 48),
        ("kvlist", "resource", 32),
    ],
)
def test_every_reader_takes_what_protobuf_takes_and_refuses_one_level_more(kind: str, where: str, deepest: int) -> None:
    at_limit: dict[str, Any] = readers(request(kind, deepest, where))
    assert set(at_limit.values()) == {True}, at_limit
    past: dict[str, Any] = readers(request(kind, deepest + 1, where))
    assert set(past.values()) == {False}, past
