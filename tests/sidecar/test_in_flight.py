"""In-flight checks beside a collector: a looping run's breach reaches the next hop before the run's root is sent.

The run is a real one: the OpenAI Agents SDK under OpenInference's instrumentation, searching for the same flight six
times (``tests/fixtures/openinference/openai_agents/repeat_six.json``). Its spans are sent as an exporter sends them,
in the order they ended and in several requests, the root last: up to the third search, up to the fourth (the call
past ``tool-call-count max: 3``, and the fourth repetition past ``max-repeat max: 3``), the rest, then the root.

Through ``trajgrade serve`` (to the sink, and to a real rotel over OTLP/HTTP and OTLP/gRPC) and through a real rotel
running trajgrade as its trace processor: once the request with the fourth search is taken, and before the root is
sent, the breaches are counted in ``trajgrade.breaches`` and their log events (``gen_ai.evaluation.result``, marked
``trajgrade.in_flight``, in the context of the span that broke the limit, with the run's resource) are at the end of
the pipeline. The root then arrives with its result events, and the results arrive as log events too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import FIXTURES
from infra import Serve, Sink, free_port, rotel, serve, sink
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from readings import metric_points

from trajgrade import parse_config
from trajgrade.core import semconv as sc
from trajgrade.core.inflight import Breach
from trajgrade.core.readers import read_path
from trajgrade.core.trajectory import build_trajectories, normalize
from trajgrade.doors.sidecar.otlp import PROTOBUF, decode_body, parse_protobuf
from trajgrade.doors.sidecar.pipeline import Pipeline

RUN = FIXTURES / "openinference" / "openai_agents" / "repeat_six.json"
GRADERS = """
graders:
  - {name: calls, type: tool-call-count, max: 3}
  - {name: repeats, type: max-repeat, max: 3}
"""
#: Log events leave every 100 ms (the SDK's batch processor reads it), metrics are pushed every 200 ms.
FAST = {"OTEL_BLRP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "200"}


@dataclass(frozen=True)
class StagedRun:
    """A run's spans as requests, in end order with the root last; the ids a reader of the results looks for."""

    requests: list[bytes]  # up to the third search, up to the fourth, the rest, the root
    trace_id: bytes
    root_span_id: bytes
    searches: list[bytes]  # the tool calls, in end order
    resource: dict[str, Any]


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _attributes(item: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in item.attributes}


def staged_run(path: Path = RUN) -> StagedRun:
    (trajectory,) = build_trajectories([normalize(s) for s in read_path(str(path))])
    searches = [bytes.fromhex(s.span_id) for s in sorted(trajectory.tool_steps, key=lambda s: s.end_unix_nano)]
    assert len(searches) == 6
    body = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26).body
    request = ExportTraceServiceRequest.FromString(body)
    (rs,) = request.resource_spans
    (ss,) = rs.scope_spans
    spans = sorted(ss.spans, key=lambda s: (not s.parent_span_id, s.end_time_unix_nano))  # the root last
    cuts = [[s.span_id for s in spans].index(searches[2]) + 1, [s.span_id for s in spans].index(searches[3]) + 1]
    parts = [spans[: cuts[0]], spans[cuts[0] : cuts[1]], spans[cuts[1] : -1], spans[-1:]]
    out = []
    for part in parts:
        one = ExportTraceServiceRequest()
        out_rs = one.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
        out_rs.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url).spans.extend(part)
        out.append(one.SerializeToString())
    root = spans[-1]
    assert not root.parent_span_id and root.span_id == bytes.fromhex(trajectory.root_span_id)
    return StagedRun(out, root.trace_id, root.span_id, searches, _attributes(rs.resource))


def post(url: str, body: bytes) -> None:
    r = requests.post(f"{url}/v1/traces", data=body, headers={"Content-Type": PROTOBUF}, timeout=10)
    assert r.status_code == 200, r.text


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def events(backend: Sink, *, in_flight: bool) -> dict[str, logs_pb2.LogRecord]:
    """The ``gen_ai.evaluation.result`` log events the sink has, breaches or results, by grader."""
    found = {}
    for record in list(backend.logs):
        attrs = _attributes(record)
        if record.event_name == sc.EVALUATION_RESULT_EVENT and bool(attrs.get(sc.TRAJGRADE_IN_FLIGHT)) == in_flight:
            found[str(attrs[sc.EVALUATION_NAME])] = record
    return found


def check_breaches(backend: Sink, run: StagedRun) -> None:
    """Both breaches are at the sink: the call past the limit names the fourth search, the repetition its first."""
    wait_until(lambda: set(events(backend, in_flight=True)) == {"calls", "repeats"}, "the breaches' log events")
    breaches = events(backend, in_flight=True)
    expected = {"calls": run.searches[3], "repeats": run.searches[0]}
    for name, record in breaches.items():
        attrs = _attributes(record)
        assert (record.trace_id, record.span_id) == (run.trace_id, expected[name]), name
        assert attrs[sc.EVALUATION_SCORE_LABEL] == "fail"
        assert (attrs[sc.TRAJGRADE_VALUE], attrs[sc.TRAJGRADE_LIMIT]) == (4, 3), name
    assert _attributes(breaches["calls"])[sc.TRAJGRADE_GRADER_TYPE] == "tool-call-count"
    assert all(resource == run.resource for resource in log_resources(backend))


def check_results(backend: Sink, run: StagedRun) -> None:
    """The root arrived with its two result events, and the results arrived as log events of the run."""
    wait_until(lambda: any(s.span_id == run.root_span_id for s in backend.spans), "the root")
    (root,) = [s for s in backend.spans if s.span_id == run.root_span_id]
    assert sorted(str(_attributes(e)[sc.EVALUATION_NAME]) for e in root.events) == ["calls", "repeats"]
    wait_until(lambda: set(events(backend, in_flight=False)) == {"calls", "repeats"}, "the results' log events")
    for record in events(backend, in_flight=False).values():
        assert record.trace_id == run.trace_id
        assert _attributes(record)[sc.EVALUATION_SCORE_LABEL] == "fail"
    assert all(resource == run.resource for resource in log_resources(backend))


def log_resources(backend: Sink) -> list[dict[str, Any]]:
    return [_attributes(rl.resource) for rl in list(backend.resource_logs)]


def breaches_counted(sidecar: Serve) -> dict[str, float]:
    """``trajgrade_breaches_total`` on the sidecar's Prometheus endpoint, by grader."""
    counted = {}
    for line in sidecar.metrics_text().splitlines():
        if line.startswith("trajgrade_breaches_total{"):
            labels, value = line.rsplit(" ", 1)
            name = labels.split('gen_ai_evaluation_name="', 1)[1].split('"', 1)[0]
            counted[name] = float(value)
    return counted


@contextmanager
def next_hop(workdir: Path, backend: Sink, hop: str) -> Iterator[str]:
    """Where the sidecar forwards: the sink itself, or a rotel in front of it (over OTLP/HTTP or OTLP/gRPC)."""
    if hop == "sink":
        yield backend.url
        return
    with rotel(workdir, backend.url) as ports:
        yield f"http://127.0.0.1:{ports['http']}" if hop == "rotel-http" else f"grpc://127.0.0.1:{ports['grpc']}"


def test_the_breach_is_out_when_the_request_that_caused_it_is_taken() -> None:
    """The pipeline checks a request's runs as it admits it: the application's callback has the breaches, and the
    counter has them, when ``submit`` returns."""
    run = staged_run()
    reader = InMemoryMetricReader()
    found: list[Breach] = []
    config = parse_config(GRADERS)
    pipeline = Pipeline(config, [], meter_provider=MeterProvider([reader]), on_breach=found.append, settle_s=0.0)
    first, fourth, rest, root = run.requests
    assert pipeline.submit(parse_protobuf(first)) and found == []
    assert pipeline.submit(parse_protobuf(fourth))
    named = {(b.result.name, bytes.fromhex(b.span_id or "")) for b in found}
    assert named == {("calls", run.searches[3]), ("repeats", run.searches[0])}
    counted = {p.attributes[sc.EVALUATION_NAME]: p.value for p in metric_points(reader, "trajgrade.breaches")}
    assert counted == {"calls": 1, "repeats": 1}
    assert pipeline.submit(parse_protobuf(rest)) and pipeline.submit(parse_protobuf(root))
    assert pipeline.flush()
    pipeline.close()
    assert len(found) == 2  # each limit broke once


@pytest.mark.parametrize("hop", ["sink", "rotel-http", "rotel-grpc"])
def test_a_breach_reaches_the_next_hop_before_the_runs_root_is_sent(tmp_path: Path, hop: str) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(GRADERS)
    run = staged_run()
    with sink() as backend, next_hop(tmp_path, backend, hop) as forward:
        with serve(tmp_path, config, [forward], "--settle", "200ms", env=FAST) as sidecar:
            first, fourth, rest, root = run.requests
            post(sidecar.url, first)
            assert breaches_counted(sidecar) == {}  # three calls: within both limits
            post(sidecar.url, fourth)
            wait_until(lambda: breaches_counted(sidecar) == {"calls": 1.0, "repeats": 1.0}, "the breach counter")
            check_breaches(backend, run)
            post(sidecar.url, rest)
            time.sleep(0.5)  # the root's settle time, and more: the run is still open without its root
            assert not any(s.span_id == run.root_span_id for s in backend.spans)
            assert events(backend, in_flight=False) == {}
            post(sidecar.url, root)
            check_results(backend, run)
            assert breaches_counted(sidecar) == {"calls": 1.0, "repeats": 1.0}  # each limit broke once
        assert sidecar.stop() == 0
    assert len([r for r in backend.logs if _attributes(r).get(sc.TRAJGRADE_IN_FLIGHT)]) == 2  # each breach once


def test_without_in_flight_checks_or_log_events_the_run_is_graded_at_its_root_only(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(GRADERS)
    run = staged_run()
    with sink() as backend:
        with serve(tmp_path, config, [backend.url], "--settle", "0s", "--no-in-flight", env=FAST) as sidecar:
            for body in run.requests:
                post(sidecar.url, body)
            check_results(backend, run)
            assert breaches_counted(sidecar) == {}
            assert events(backend, in_flight=True) == {}
        with serve(tmp_path, config, [backend.url], "--settle", "0s", "--no-log-events", env=FAST) as sidecar:
            before = len(backend.logs)
            for body in run.requests:
                post(sidecar.url, body)
            wait_until(lambda: breaches_counted(sidecar) == {"calls": 1.0, "repeats": 1.0}, "the breach counter")
            assert sidecar.stop() == 0
        assert len(backend.logs) == before  # flushed at the stop: nothing was sent


def test_rotel_processor_sends_a_breach_before_the_runs_root_passes(tmp_path: Path) -> None:
    """trajgrade inside rotel: its log events and metrics go to rotel's own OTLP receiver, and on to the sink."""
    import trajgrade.doors.rotel as processor

    config = tmp_path / "graders.yaml"
    config.write_text(GRADERS)
    run = staged_run()
    http = free_port()
    env = {"TRAJGRADE_CONFIG": str(config), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{http}", **FAST}

    def counted() -> dict[str, float]:
        return {
            dict(attrs)[sc.EVALUATION_NAME]: value
            for (name, attrs), value in list(backend.counters.items())
            if name == "trajgrade.breaches"
        }

    with sink() as backend, rotel(tmp_path, backend.url, processor=processor.__file__, env=env, http_port=http):
        url = f"http://127.0.0.1:{http}"
        first, fourth, rest, root = run.requests
        post(url, first)
        wait_until(lambda: any(s.span_id == run.searches[2] for s in backend.spans), "the first request's spans")
        post(url, fourth)
        check_breaches(backend, run)
        wait_until(lambda: counted() == {"calls": 1, "repeats": 1}, "the breach counter")
        post(url, rest)
        time.sleep(0.5)
        assert not any(s.span_id == run.root_span_id for s in backend.spans)
        assert events(backend, in_flight=False) == {}
        post(url, root)
        check_results(backend, run)
    assert counted() == {"calls": 1, "repeats": 1}
