"""The bare receiver's work on a request: the baseline of the sidecar benchmarks.

A module of its own that imports protobuf only, so that the bare receiver's process holds nothing of
trajgrade (whose objects its garbage collector would otherwise walk too).
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def read_every_attribute(body: bytes) -> int:
    """Parse a request and read every attribute of every span (and of its resource)."""
    message = ExportTraceServiceRequest.FromString(body)
    n = 0
    for rs in message.resource_spans:
        for kv in rs.resource.attributes:
            n += len(kv.key)
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    v = kv.value
                    n += len(kv.key) + len(str(getattr(v, v.WhichOneof("value") or "string_value")))
    return n
