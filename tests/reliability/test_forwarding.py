"""After an outage the forwarder catches up: merged requests bounded in bytes, oversized ones cut in two, and a
request the next hop refuses takes nobody else's spans with it.

The next hop is rotel (its gRPC receiver refuses messages over 4 MiB, as gRPC servers do by default) exporting to
the sink, or the sink itself where a refusal has to be chosen.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sidecar"))

from infra import free_port, rotel, sink
from readings import metric_points

from trajgrade import load_config
from trajgrade.doors.sidecar.server import Sidecar, SidecarOptions

CONFIG = Path(__file__).resolve().parents[1] / "sidecar" / "graders.yaml"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def tool_spans(trace: int, spans: int, value_bytes: int, name: str = "execute_tool search") -> bytes:
    """A request of ``spans`` tool spans (no root: forwarded at once), each with a ``value_bytes`` result."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "agent"
    out = rs.scope_spans.add().spans
    for i in range(spans):
        s = out.add(
            trace_id=trace.to_bytes(16, "big"),
            span_id=(trace * 100_000 + i + 1).to_bytes(8, "big"),
            parent_span_id=(trace * 100_000).to_bytes(8, "big"),
            name=name,
            start_time_unix_nano=1_700_000_000_000_000_000 + i,
            end_time_unix_nano=1_700_000_000_000_000_000 + i + 1,
        )
        s.attributes.add(key="gen_ai.tool.call.result").value.string_value = "x" * value_bytes
    return request.SerializeToString()


def post(sidecar: Sidecar, body: bytes) -> int:
    url = f"http://{sidecar.options.otlp_http}/v1/traces"
    return requests.post(url, data=body, headers=PROTOBUF, timeout=30).status_code


def test_after_an_outage_everything_reaches_a_grpc_collector_with_a_4_mib_limit(tmp_path: Path) -> None:
    """Six 1 MB requests and one of 5 MB queue while rotel is down; merged, they would be one 11 MB request that
    rotel refuses (RESOURCE_EXHAUSTED) however often it is sent. Each span must arrive once."""
    grpc_port = free_port()
    with sink() as backend:
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}", forward=(f"grpc://127.0.0.1:{grpc_port}",), settle_s=0.05
        )
        sidecar = Sidecar(load_config(CONFIG), options).start()
        try:
            bodies = [tool_spans(t, 200, 5_000) for t in range(1, 7)] + [tool_spans(7, 1_000, 5_000)]
            assert len(bodies[-1]) > 4 * 1024 * 1024
            assert all(post(sidecar, body) == 200 for body in bodies)
            time.sleep(0.5)  # the forwarder finds the next hop down and queues
            with rotel(tmp_path, backend.url, grpc_port=grpc_port):
                assert backend.wait_for(2_200, timeout=60), f"{len(backend.spans)} of 2200 arrived"
                assert sidecar.pipeline.flush(10)
        finally:
            sidecar.stop()
    ids = backend.span_ids()
    assert len(ids) == 2_200 and set(ids.values()) == {1}


def test_a_request_refused_downstream_takes_no_other_requests_spans_with_it() -> None:
    """Requests merged after an outage, one of which the backend refuses (400): the others all arrive, and the
    refused spans, and only those, are counted as rejected downstream."""
    reader = InMemoryMetricReader()
    with sink() as backend:
        backend.status = 503
        backend.refuse = lambda request: any(
            s.name == "poison" for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
        )
        options = SidecarOptions(otlp_http=f"127.0.0.1:{free_port()}", forward=(backend.url,), settle_s=0.05)
        sidecar = Sidecar(load_config(CONFIG), options, meter_provider=MeterProvider(metric_readers=[reader]))
        sidecar.start()
        try:
            for trace in range(1, 9):
                name = "poison" if trace == 5 else "execute_tool search"
                assert post(sidecar, tool_spans(trace, 10, 10, name)) == 200
            time.sleep(0.3)
            backend.status = 200
            assert backend.wait_for(70, timeout=20)
            assert sidecar.pipeline.flush(10)
        finally:
            sidecar.stop()
    assert len(backend.span_ids()) == 70 and all(s.name != "poison" for s in backend.spans)
    rejected = metric_points(reader, "trajgrade.sidecar.spans.rejected_downstream")
    assert sum(p.value for p in rejected) == 10
