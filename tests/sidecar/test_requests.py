"""What the sidecar answers: bad requests named, auth, back-pressure that loses nothing, and a graceful stop."""

from __future__ import annotations

import gzip
import json
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from infra import Sink, free_port, serve, sink
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from readings import metric_points

from trajgrade import load_config
from trajgrade.core.running import RunReport
from trajgrade.doors.sidecar.receivers import Limits
from trajgrade.doors.sidecar.server import Sidecar, SidecarOptions

CONFIG = Path(__file__).with_name("graders.yaml")
PROTOBUF = {"Content-Type": "application/x-protobuf"}
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def run_request(trace: int, tools: int = 3, *, with_root: bool = True) -> ExportTraceServiceRequest:
    """One agent run as one request: a root, then model and tool calls under it."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "agent"
    spans = rs.scope_spans.add().spans
    trace_id = trace.to_bytes(16, "big")
    root_id = (trace * 1000).to_bytes(8, "big")
    t0 = 1_700_000_000_000_000_000
    for i in range(tools):
        for j, (name, op) in enumerate((("chat gpt-4o", "chat"), ("execute_tool search", "execute_tool"))):
            s = spans.add(
                trace_id=trace_id,
                span_id=(trace * 1000 + 2 * i + j + 1).to_bytes(8, "big"),
                parent_span_id=root_id,
                name=name,
                start_time_unix_nano=t0 + (2 * i + j) * 1000,
                end_time_unix_nano=t0 + (2 * i + j) * 1000 + 500,
            )
            s.attributes.add(key="gen_ai.operation.name").value.string_value = op
            if op == "execute_tool":
                s.attributes.add(key="gen_ai.tool.name").value.string_value = "search"
                s.attributes.add(key="gen_ai.tool.call.arguments").value.string_value = json.dumps({"q": i})
    if with_root:
        root = spans.add(
            trace_id=trace_id,
            span_id=root_id,
            name="invoke_agent helper",
            start_time_unix_nano=t0,
            end_time_unix_nano=t0 + 10**6,
        )
        root.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
    return request


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Sidecar, Sink]]:
    token = "s3cret"
    with sink() as backend:
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}",
            otlp_grpc=f"127.0.0.1:{free_port()}",
            forward=(backend.url,),
            settle_s=0.05,
            limits=Limits(max_request_bytes=64 * 1024, max_decompressed_bytes=256 * 1024, auth_token=token),
        )
        sidecar = Sidecar(load_config(CONFIG), options).start()
        try:
            yield sidecar, backend
        finally:
            sidecar.stop()


def post(sidecar: Sidecar, body: bytes, headers: dict[str, str], token: str | None = "s3cret") -> requests.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.post(
        f"http://{sidecar.options.otlp_http}/v1/traces", data=body, headers={**headers, **auth}, timeout=10
    )


def test_bad_requests_are_named_and_the_server_keeps_serving(running: tuple[Sidecar, Sink]) -> None:
    sidecar, backend = running
    good = run_request(1).SerializeToString()
    bomb = gzip.compress(b"\0" * (10 * 1024 * 1024))
    short_id = run_request(2)
    short_id.resource_spans[0].scope_spans[0].spans[3].span_id = b"\x01\x02\x03"
    bad_link = run_request(3)
    bad_link.resource_spans[0].scope_spans[0].spans[1].links.add(
        trace_id=b"\x01" * 16, span_id=b"\x01" * 8, trace_state="BAD"
    )
    cases = [
        (b"\xff\xff\xff\xff not protobuf", PROTOBUF, 400, "not a valid OTLP ExportTraceServiceRequest"),
        (short_id.SerializeToString(), PROTOBUF, 400, "scope_spans[0].spans[3].span_id: 3 bytes where an id has 8"),
        (
            bad_link.SerializeToString().replace(b"BAD", b"\xff\xfe\xfd"),
            PROTOBUF,
            400,
            "spans[1].links[0].trace_state: not valid UTF-8",
        ),
        (good, {"Content-Type": "text/plain"}, 415, "unsupported Content-Type"),
        (b"\x1f\x8b\x08\x00corrupt", {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "corrupt gzip"),
        (gzip.compress(good)[:-12], {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "truncated"),
        (bomb, {**PROTOBUF, "Content-Encoding": "gzip"}, 413, "decompresses to more than"),
        (b"x" * (65 * 1024), PROTOBUF, 413, "over the limit"),
        (b"{not json", {"Content-Type": "application/json"}, 400, "not JSON"),
        (
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}).encode(),
            {"Content-Type": "application/json"},
            400,
            "resourceSpans[0].scopeSpans[0].spans[0].traceId",
        ),
        (good, {**PROTOBUF, "Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
        (b"[" * 30_000 + b"]" * 30_000, {"Content-Type": "application/json"}, 400, "nested too deeply"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": ' + b"9" * 5000 + b"}]}]}]}",
            {"Content-Type": "application/json"},
            400,
            "more than 4,300 digits",
        ),
    ]
    for body, headers, status, message in cases:
        r = post(sidecar, body, headers)
        assert (r.status_code, message in r.text) == (status, True), (message, r.status_code, r.text)
    assert post(sidecar, good, PROTOBUF, token=None).status_code == 401
    assert post(sidecar, good, PROTOBUF, token="wrong").status_code == 401
    r = post(sidecar, good, PROTOBUF)
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    r = post(sidecar, gzip.compress(good), {**PROTOBUF, "Content-Encoding": "gzip"})
    assert r.status_code == 200
    assert requests.get(f"http://{sidecar.options.otlp_http}/healthz", timeout=5).status_code == 200
    assert requests.get(f"http://{sidecar.options.otlp_http}/readyz", timeout=5).status_code == 200
    assert sidecar.pipeline.flush(10)
    forwarded_traces = {span.trace_id for span in backend.spans}
    assert forwarded_traces == {(1).to_bytes(16, "big")}  # nothing of a refused request went on


def test_grpc_answers_invalid_argument_and_unauthenticated(running: tuple[Sidecar, Sink]) -> None:
    sidecar, backend = running
    channel = grpc.insecure_channel(sidecar.options.otlp_grpc or "")
    export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    auth = (("authorization", "Bearer s3cret"),)
    with pytest.raises(grpc.RpcError) as bad:
        export(b"\xff\xff\xff\xff", metadata=auth, timeout=5)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid OTLP ExportTraceServiceRequest" in (bad.value.details() or "")
    with pytest.raises(grpc.RpcError) as unauth:
        export(run_request(2).SerializeToString(), timeout=5)
    assert unauth.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert export(run_request(2).SerializeToString(), metadata=auth, timeout=5) == b""
    channel.close()


def test_full_buffer_answers_429_and_loses_nothing_when_the_backend_is_down(tmp_path: Path) -> None:
    """The backend fails for a while; the sidecar holds what it admitted, refuses the rest, then delivers all."""
    with sink() as backend:
        backend.status = 503
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}",
            otlp_grpc=f"127.0.0.1:{free_port()}",
            forward=(backend.url,),
            settle_s=0.05,
            max_buffered_spans=40,
        )
        sidecar = Sidecar(load_config(CONFIG), options).start()
        try:
            # a request the empty buffer could never hold is refused for good, not told to retry forever
            huge = run_request(500, tools=30).SerializeToString()  # 61 spans, the buffer holds 40
            r = post(sidecar, huge, PROTOBUF, token=None)
            assert r.status_code == 413 and "more than the forward buffer holds (40 spans)" in r.text, r.text
            channel = grpc.insecure_channel(options.otlp_grpc or "")
            export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as refused_for_good:
                export(huge, timeout=5)
            assert refused_for_good.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert not any(k == "grpc-status-details-bin" for k, _ in refused_for_good.value.trailing_metadata() or ())
            channel.close()
            accepted: list[ExportTraceServiceRequest] = []
            refused = 0
            for trace in range(1, 11):  # 7 spans each: the 6th run no longer fits in 40
                request = run_request(trace)
                r = post(sidecar, request.SerializeToString(), PROTOBUF, token=None)
                if r.status_code == 200:
                    accepted.append(request)
                else:
                    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
                    refused += 1
            assert len(accepted) == 5 and refused == 5
            time.sleep(0.3)
            assert backend.spans == []
            backend.status = 200
            expected = sum(span_count(r) for r in accepted)
            assert backend.wait_for(expected, timeout=20)
            assert sidecar.pipeline.flush(10)
            # with the buffer drained, the refused runs are taken again (what a collector's retry does)
            r = post(sidecar, run_request(99).SerializeToString(), PROTOBUF, token=None)
            assert r.status_code == 200
        finally:
            sidecar.stop()
    ids = backend.span_ids()
    assert set(ids.values()) == {1}
    assert len(ids) == expected + 7
    assert all(
        any(e.name == "gen_ai.evaluation.result" for e in s.events) for s in backend.spans if not s.parent_span_id
    )


def test_load_in_random_batches_from_many_threads_nothing_lost(tmp_path: Path) -> None:
    """Many concurrent traces, split into random batches out of order, with the backend down for a while."""
    rng = random.Random(3)
    traces = [run_request(t, tools=rng.randint(1, 6)) for t in range(1, 301)]
    pieces: list[bytes] = []
    for request in traces:
        spans = list(request.resource_spans[0].scope_spans[0].spans)
        rng.shuffle(spans)
        while spans:
            cut = rng.randint(1, len(spans))
            part = ExportTraceServiceRequest()
            rs = part.resource_spans.add()
            rs.resource.CopyFrom(request.resource_spans[0].resource)
            rs.scope_spans.add().spans.extend(spans[:cut])
            pieces.append(part.SerializeToString())
            spans = spans[cut:]
    rng.shuffle(pieces)
    total = sum(span_count(r) for r in traces)
    reports: list[object] = []
    with sink() as backend:
        backend.status = 503
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}",
            otlp_grpc=f"127.0.0.1:{free_port()}",
            forward=(backend.url,),
            settle_s=0.3,
            max_buffered_spans=500,
        )
        sidecar = Sidecar(load_config(CONFIG), options, on_report=reports.append).start()
        refused = 0
        lock = threading.Lock()

        def send(chunk: list[bytes]) -> None:
            nonlocal refused
            session = requests.Session()
            for body in chunk:
                while True:  # what a collector's retry queue does with 429
                    r = session.post(f"http://{options.otlp_http}/v1/traces", data=body, headers=PROTOBUF, timeout=10)
                    if r.status_code == 200:
                        break
                    assert r.status_code == 429
                    with lock:
                        refused += 1
                    time.sleep(0.05)

        threads = [threading.Thread(target=send, args=(pieces[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        backend.status = 200  # the backend comes back
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert backend.wait_for(total, timeout=60)
        sidecar.stop()
    ids = backend.span_ids()
    assert len(ids) == total and set(ids.values()) == {1}
    assert refused > 0, "the buffer never filled: the test did not exercise back-pressure"
    assert len(reports) == len(traces)


def test_sigterm_grades_in_flight_runs_as_partial_and_forwards_everything(tmp_path: Path) -> None:
    with sink() as backend:
        with serve(tmp_path, CONFIG, [backend.url], "--settle", "1h") as sidecar:
            for trace in (1, 2):
                r = requests.post(
                    f"{sidecar.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF
                )
                assert r.status_code == 200
            assert backend.wait_for(12)  # the non-root spans go on at once; the roots wait for the settle window
            time.sleep(0.2)
            assert len(backend.spans) == 12
            sidecar.proc.send_signal(signal.SIGTERM)
            assert sidecar.proc.wait(timeout=30) == 0
    roots = [s for s in backend.spans if not s.parent_span_id]
    assert len(backend.spans) == 14 and len(roots) == 2
    for root in roots:
        attrs = {kv.key: kv.value for kv in root.attributes}
        assert attrs["trajgrade.partial"].bool_value is True
        assert sum(e.name == "gen_ai.evaluation.result" for e in root.events) == 3


def test_a_root_sent_twice_is_graded_once_and_forwarded_as_sent() -> None:
    reports: list[object] = []
    with sink() as backend:
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}", otlp_grpc=None, forward=(backend.url,), settle_s=0.05
        )
        sidecar = Sidecar(load_config(CONFIG), options, on_report=reports.append).start()
        try:
            body = run_request(5).SerializeToString()
            for _ in range(2):  # a collector's retry after a lost acknowledgement
                assert post(sidecar, body, PROTOBUF, token=None).status_code == 200
            assert backend.wait_for(14)
            assert sidecar.pipeline.flush(10)
        finally:
            sidecar.stop()
    assert len(reports) == 1
    roots = [s for s in backend.spans if not s.parent_span_id]
    assert len(roots) == 2 and sum(bool(r.events) for r in roots) == 1


def test_the_bounds_hold_for_a_request_added_at_once_and_every_drop_is_counted() -> None:
    """A request's spans enter the trace buffers together: over max_traces and max_spans_per_trace they are
    dropped from grading (never from forwarding), each drop counted by reason, and the run says it is partial."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from trajgrade.doors.sidecar.otlp import parse_protobuf
    from trajgrade.doors.sidecar.pipeline import Pipeline

    reader = InMemoryMetricReader()
    reports: list[RunReport] = []
    pipeline = Pipeline(
        load_config(CONFIG),
        (),
        meter_provider=MeterProvider(metric_readers=[reader]),
        settle_s=0.0,
        max_traces=2,
        max_spans_per_trace=4,
        on_report=reports.append,
    )
    request = ExportTraceServiceRequest()
    for trace in (1, 2, 3):  # 6 spans under each root; the third trace finds no room
        request.MergeFrom(run_request(trace, tools=3, with_root=False))
    request.MergeFrom(run_request(1, tools=0))  # the first trace's root
    assert pipeline.submit(parse_protobuf(request.SerializeToString()))
    assert pipeline.flush(10)
    pipeline.close(5)
    dropped = {p.attributes["trajgrade.reason"]: p.value for p in metric_points(reader, "trajgrade.traces.dropped")}
    assert dropped["max_traces"] == 6
    assert dropped["max_spans_per_trace"] == 4  # 2 over the limit in each of the two buffered traces
    graded = next(r for r in reports if r.trajectory.trace_id == f"{1:032x}")
    assert graded.trajectory.partial
    assert any("2 span(s) dropped" in n for n in graded.trajectory.notes)


def test_buffers_are_bounded_in_bytes_too() -> None:
    """Forward buffer: a request that would take it past its bytes gets 429 (retry later), one larger than it
    could ever hold 413. Grading buffers: spans past their bytes are dropped from grading only, counted, and
    the run is graded as partial; every admitted span is still forwarded."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    def big_run(trace: int) -> bytes:
        request = run_request(trace, tools=3)
        for span in request.resource_spans[0].scope_spans[0].spans:
            span.attributes.add(key="gen_ai.tool.call.result").value.string_value = "x" * 10_000
        return request.SerializeToString()

    reader = InMemoryMetricReader()
    reports: list[RunReport] = []
    with sink() as backend:
        backend.status = 503
        options = SidecarOptions(
            otlp_http=f"127.0.0.1:{free_port()}",
            forward=(backend.url,),
            settle_s=0.05,
            max_buffered_bytes=200_000,
            max_grading_bytes=45_000,  # about four of a run's six tool and model spans
        )
        meters = MeterProvider(metric_readers=[reader])
        sidecar = Sidecar(load_config(CONFIG), options, meter_provider=meters, on_report=reports.append).start()
        try:
            size = len(big_run(1))
            assert 60_000 < size < 80_000
            statuses = [post(sidecar, big_run(trace), PROTOBUF, token=None).status_code for trace in (1, 2, 3, 4)]
            assert statuses == [200, 200, 429, 429]  # two runs fill 200 kB
            r = post(sidecar, b"".join(big_run(t) for t in (5, 6, 7)), PROTOBUF, token=None)
            assert r.status_code == 413 and "bytes is more than the forward buffer holds (200000 bytes)" in r.text
            backend.status = 200
            assert backend.wait_for(14, timeout=20)
            assert sidecar.pipeline.flush(10)
        finally:
            sidecar.stop()
    assert len(backend.span_ids()) == 14  # every admitted span forwarded, graded or not
    refused = {p.attributes["reason"]: p.value for p in metric_points(reader, "trajgrade.sidecar.requests.refused")}
    assert refused == {"buffer_full": 2, "too_large": 1}
    dropped = {p.attributes["trajgrade.reason"]: p.value for p in metric_points(reader, "trajgrade.traces.dropped")}
    assert dropped["max_buffered_bytes"] >= 2
    assert len(reports) == 2 and any(r.trajectory.partial for r in reports)
    partial = next(r for r in reports if r.trajectory.partial)
    assert any("dropped: over the buffers' bounds" in n for n in partial.trajectory.notes)
