"""SDK -> rotel -> trajgrade serve -> rotel -> sink, with real agents and real collectors on loopback.

Every span sent arrives exactly once, every run is graded, the result events are on the runs' root spans,
and the metrics are on the Prometheus endpoint and pushed over OTLP through the collector. The same for
rotel running trajgrade as its trace processor.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from infra import ROOT, rotel, serve, sink
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(ROOT / "examples"))
from demo_agent import run_scenarios

CONFIG = Path(__file__).with_name("graders.yaml")
RESULT = "gen_ai.evaluation.result"


def run_agents(exporter: object, scenarios: list[str]) -> list[bytes]:
    """Run the demo's real pydantic-ai agents, exporting over OTLP; the span ids that were sent."""
    sent = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sent))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))  # type: ignore[arg-type]
    run_scenarios(provider, scenarios)
    provider.shutdown()
    return [s.context.span_id.to_bytes(8, "big") for s in sent.get_finished_spans() if s.context]


def roots(spans: list[trace_pb2.Span]) -> list[trace_pb2.Span]:
    return [s for s in spans if not s.parent_span_id]


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@pytest.mark.parametrize("hop", ["http", "grpc"])
def test_every_span_arrives_once_graded_through_two_collectors(workdir: Path, hop: str) -> None:
    with sink() as backend, rotel(workdir, backend.url) as after:
        push = ["--push-metrics", f"http://127.0.0.1:{after['http']}", "--push-interval", "200ms"]
        with serve(workdir, CONFIG, [f"http://127.0.0.1:{after['http']}"], "--settle", "200ms", *push) as sidecar:
            into = f"http://127.0.0.1:{sidecar.http}" if hop == "http" else f"http://127.0.0.1:{sidecar.grpc}"
            with rotel(workdir, into, protocol=hop) as before:
                sent = run_agents(HttpExporter(endpoint=f"http://127.0.0.1:{before['http']}/v1/traces"), ["weather"])
                sent += run_agents(GrpcExporter(endpoint=f"127.0.0.1:{before['grpc']}", insecure=True), ["stuck"])
                assert backend.wait_for(len(sent)), f"{len(backend.spans)}/{len(sent)} spans arrived"
            metrics = sidecar.metrics_text()
            pushed = {"trajgrade.runs", "trajgrade.evaluations", "trajgrade.sidecar.spans.received"}
            assert backend.wait_for_metrics(pushed), sorted(backend.metric_names)
        assert sidecar.stop() == 0
    received = backend.span_ids()
    assert sorted(received) == sorted(sent)
    assert set(received.values()) == {1}, "a span arrived more than once"
    graded = roots(backend.spans)
    assert len(graded) == 2
    for root in graded:
        events = [e for e in root.events if e.name == RESULT]
        assert len(events) == 3, root.name
        attrs = {kv.key for kv in root.attributes}
        assert {"trajgrade.passed", "trajgrade.score"} <= attrs
    non_roots = [s for s in backend.spans if s.parent_span_id]
    assert not any(e.name == RESULT for s in non_roots for e in s.events)
    verdicts = {r.name: {kv.key: kv.value for kv in r.attributes}["trajgrade.passed"].bool_value for r in graded}
    assert sorted(verdicts.values()) == [False, True]  # the stuck agent loops, the weather agent does not
    assert "trajgrade_runs_total{" in metrics and "trajgrade_evaluations_total{" in metrics
    assert "trajgrade_sidecar_spans_received_total" in metrics


def test_rotel_runs_trajgrade_as_its_trace_processor(workdir: Path) -> None:
    import trajgrade.doors.rotel as processor

    env = {"TRAJGRADE_CONFIG": str(CONFIG)}
    with sink() as backend, rotel(workdir, backend.url, processor=processor.__file__, env=env) as collector:
        sent = run_agents(
            HttpExporter(endpoint=f"http://127.0.0.1:{collector['http']}/v1/traces"), ["weather", "stuck"]
        )
        assert backend.wait_for(len(sent)), f"{len(backend.spans)}/{len(sent)} spans arrived"
    assert sorted(backend.span_ids()) == sorted(sent)
    graded = roots(backend.spans)
    assert len(graded) == 2
    for root in graded:
        assert len([e for e in root.events if e.name == RESULT]) == 3


def test_the_fixtures_of_every_instrumentation_through_the_collectors(workdir: Path) -> None:
    """Real traces from every library, in OTLP/JSON, sent as protobuf through rotel, trajgrade and rotel again."""
    import requests
    from conftest import fixture_files

    from trajgrade.doors.sidecar.otlp import decode_body

    files = [p for p in fixture_files() if p.stem in ("three_tools", "repeat_six", "delegation", "fail_http500")]
    assert len(files) >= 30
    bodies = [decode_body(p.read_bytes(), "application/json", "", max_decompressed=1 << 26) for p in files]
    sent = {bytes.fromhex(s.span_id) for b in bodies for s in b.spans}
    with sink() as backend, rotel(workdir, backend.url) as after:
        with serve(workdir, CONFIG, [f"http://127.0.0.1:{after['http']}"], "--settle", "200ms") as sidecar:
            with rotel(workdir, f"http://127.0.0.1:{sidecar.http}") as before:
                for body in bodies:
                    r = requests.post(
                        f"http://127.0.0.1:{before['http']}/v1/traces",
                        data=body.body,
                        headers={"Content-Type": "application/x-protobuf"},
                        timeout=30,
                    )
                    assert r.status_code == 200
                assert backend.wait_for(len(sent), timeout=60), f"{len(backend.spans)}/{len(sent)}"
        assert sidecar.stop() == 0
    received = backend.span_ids()
    assert set(received) == sent and set(received.values()) == {1}
    graded = [s for s in backend.spans if any(e.name == RESULT for e in s.events)]
    # one graded root per run (every fixture is one run), but for a run whose root never ended (smolagents' failed
    # run): it is graded as a partial run at expiry, with no root span to carry its results
    ended = [b for b in bodies if any(s.parent_span_id is None for s in b.spans)]
    assert len(ended) < len(files) and len(graded) == len(ended)
    assert all(not s.parent_span_id for s in graded)
