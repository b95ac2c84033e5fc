"""GradingSpanProcessor and GradingSpanExporter with real pydantic-ai agents (scripted models, no network)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanExporter, GradingSpanProcessor, RunReport, parse_config
from trajgrade.core.result_attributes import result_attributes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from demo_agent import make_agent, run_scenarios  # noqa: E402
from readings import metric_points  # noqa: E402

CONFIG = parse_config(
    "graders:\n"
    "  - type: token-budget\n    config: {max: 100000}\n"
    "  - name: no-loops\n    type: loop\n    max_repeats: 3\n"
    "  - type: budget\n    max_tool_calls: 5\n"
)


def events_by_run(spans: list[ReadableSpan]) -> dict[str, dict[str, dict[str, Any]]]:
    """agent-name -> grader-name -> event attributes, from wherever the events sit."""
    by_trace_agent = {s.context.trace_id: s.attributes.get("gen_ai.agent.name") for s in spans if s.parent is None}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for s in spans:
        for e in s.events:
            if e.name == "gen_ai.evaluation.result":
                agent = by_trace_agent[s.context.trace_id]
                out.setdefault(str(agent), {})[str(e.attributes["gen_ai.evaluation.name"])] = dict(e.attributes)
    return out


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.mark.parametrize("wiring", ["downstream", "beside", "exporter"])
def test_three_wirings_with_a_real_agent(wiring: str, reader: InMemoryMetricReader) -> None:
    exported = InMemorySpanExporter()
    reports: list[RunReport] = []
    provider = TracerProvider()
    meter_provider = MeterProvider(metric_readers=[reader])
    kw: dict[str, Any] = {"meter_provider": meter_provider, "on_report": reports.append}
    if wiring == "downstream":
        provider.add_span_processor(GradingSpanProcessor(CONFIG, downstream=SimpleSpanProcessor(exported), **kw))
    elif wiring == "beside":
        provider.add_span_processor(GradingSpanProcessor(CONFIG, tracer_provider=provider, **kw))
        provider.add_span_processor(SimpleSpanProcessor(exported))
    else:
        provider.add_span_processor(SimpleSpanProcessor(GradingSpanExporter(CONFIG, exported, **kw)))
    run_scenarios(provider, ["weather", "stuck"])
    assert provider.force_flush()
    spans = list(exported.get_finished_spans())
    results = events_by_run(spans)
    assert set(results) == {"weather-agent", "stuck-agent"}
    assert results["weather-agent"]["no-loops"]["gen_ai.evaluation.score.label"] == "pass"
    stuck = results["stuck-agent"]
    assert stuck["no-loops"]["gen_ai.evaluation.score.label"] == "fail"
    assert len(stuck["no-loops"]["trajgrade.evidence.span_ids"]) == 6
    assert stuck["budget"]["gen_ai.evaluation.score.label"] == "fail"
    assert stuck["budget"]["trajgrade.grader.type"] == "budget"
    assert isinstance(stuck["token-budget"]["gen_ai.evaluation.score.value"], float)
    carriers = [s for s in spans if "trajgrade.passed" in (s.attributes or {})]
    assert sorted(bool(s.attributes["trajgrade.passed"]) for s in carriers) == [False, True]
    if wiring == "beside":
        assert {s.name for s in carriers} == {"evaluation weather-agent", "evaluation stuck-agent"}
        roots = {s.context.span_id for s in spans if s.parent is None}
        assert all(s.parent is not None and s.parent.span_id in roots for s in carriers)
    else:
        assert all(s.parent is None for s in carriers)
    # each span exactly once
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids))
    assert sorted(r.trajectory.agent_name or "" for r in reports) == ["stuck-agent", "weather-agent"]
    runs = {
        (p.attributes["gen_ai.agent.name"], p.attributes["trajgrade.result"]): p.value
        for p in metric_points(reader, "trajgrade.runs")
    }
    assert runs == {("weather-agent", "passed"): 1, ("stuck-agent", "failed"): 1}
    labels = {
        (p.attributes["gen_ai.evaluation.name"], p.attributes["gen_ai.agent.name"]): p.attributes[
            "gen_ai.evaluation.score.label"
        ]
        for p in metric_points(reader, "trajgrade.evaluations")
    }
    assert labels[("no-loops", "stuck-agent")] == "fail"
    assert {p.attributes["gen_ai.agent.name"] for p in metric_points(reader, "trajgrade.run.tokens")} == {
        "weather-agent",
        "stuck-agent",
    }
    assert not any(m.startswith("gen_ai.client") for m in _metric_names(reader))
    provider.shutdown()


def _metric_names(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    return {m.name for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics}


@pytest.mark.parametrize("limit", [None, 8])
def test_the_evaluation_spans_events_hold_the_results_attributes_within_the_sdks_limits(
    limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events of the span trajgrade starts are the results' attributes, whichever way they are added; a value
    length limit of the SDK still cuts them."""
    if limit is not None:
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    exported = InMemorySpanExporter()
    reports: list[RunReport] = []
    provider = TracerProvider()
    provider.add_span_processor(GradingSpanProcessor(CONFIG, tracer_provider=provider, on_report=reports.append))
    provider.add_span_processor(SimpleSpanProcessor(exported))
    run_scenarios(provider, ["stuck"])
    assert provider.force_flush()
    (evaluation,) = [s for s in exported.get_finished_spans() if s.name.startswith("evaluation ")]
    (report,) = reports  # with the limit, the agent's name is cut too
    expected = [result_attributes(r) for r in report.results]
    if limit is not None:
        expected = [{k: v[:limit] if isinstance(v, str) else v for k, v in a.items()} for a in expected]
        expected = [
            {k: tuple(i[:limit] for i in v) if isinstance(v, tuple) else v for k, v in a.items()} for a in expected
        ]
    assert [e.name for e in evaluation.events] == ["gen_ai.evaluation.result"] * len(report.results)
    assert [dict(e.attributes or {}) for e in evaluation.events] == expected
    assert all(e.timestamp == evaluation.end_time for e in evaluation.events)


def test_zero_code_with_opentelemetry_instrument(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - name: no-loops\n    type: loop\n    max_repeats: 3\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    env.update(
        TRAJGRADE_CONFIG=str(config),
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="zero-code-app",
    )
    bindir = Path(sys.executable).parent
    out = subprocess.run(
        [str(bindir / "opentelemetry-instrument"), sys.executable, str(ROOT / "tests/apps/zero_code_app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    spans = _console_spans(out.stdout)
    (evaluation,) = [s for s in spans if s["name"] == "evaluation stuck-agent"]
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert evaluation["parent_id"] == root["context"]["span_id"]
    (event,) = evaluation["events"]
    assert event["name"] == "gen_ai.evaluation.result"
    assert event["attributes"]["gen_ai.evaluation.score.label"] == "fail"
    assert evaluation["attributes"]["trajgrade.passed"] is False


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The ConsoleSpanExporter prints one indented JSON object per span."""
    decoder, spans, i = json.JSONDecoder(), [], 0
    while (start := text.find("{", i)) != -1:
        obj, i = decoder.raw_decode(text, start)
        spans.append(obj)
    return spans


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_through_the_prometheus_endpoint() -> None:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1")
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    try:
        provider = TracerProvider()
        provider.add_span_processor(
            GradingSpanProcessor(
                CONFIG, downstream=SimpleSpanProcessor(InMemorySpanExporter()), meter_provider=meter_provider
            )
        )
        run_scenarios(provider, ["stuck"])
        provider.force_flush()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert 'trajgrade_runs_total{gen_ai_agent_name="stuck-agent"' in body
        assert 'gen_ai_evaluation_name="no-loops"' in body and 'gen_ai_evaluation_score_label="fail"' in body
        assert "trajgrade_run_tokens_bucket" in body
        provider.shutdown()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        meter_provider.shutdown()


# --- behaviour ------------------------------------------------------------------------------------------
@pytest.fixture
def no_reraise(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRAJGRADE_RAISE_INTERNAL_ERRORS", "0")
    yield


def test_settle_window_attaches_spans_that_end_after_the_root(reader: InMemoryMetricReader) -> None:
    reports: list[RunReport] = []
    provider = TracerProvider()
    provider.add_span_processor(
        GradingSpanProcessor(
            CONFIG, settle_s=0.3, on_report=reports.append, meter_provider=MeterProvider(metric_readers=[reader])
        )
    )
    tracer = provider.get_tracer("app")
    root = tracer.start_span("invoke_agent bg", attributes={"gen_ai.operation.name": "invoke_agent"})
    from opentelemetry.trace import set_span_in_context

    late = tracer.start_span(
        "execute_tool upload",
        context=set_span_in_context(root),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "upload"},
    )
    root.end()
    late.end()  # a background task that finishes after the run's root
    assert provider.force_flush(5000)
    (report,) = reports
    assert report.trajectory.summary.tool_names == ("upload",)


def test_runs_open_at_shutdown_are_graded_as_partial(reader: InMemoryMetricReader) -> None:
    reports: list[RunReport] = []
    provider = TracerProvider()
    provider.add_span_processor(
        GradingSpanProcessor(CONFIG, on_report=reports.append, meter_provider=MeterProvider(metric_readers=[reader]))
    )
    tracer = provider.get_tracer("app")
    from opentelemetry.trace import set_span_in_context

    root = tracer.start_span(
        "invoke_agent never-ends",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "never-ends"},
    )
    tracer.start_span(
        "execute_tool a",
        context=set_span_in_context(root),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"},
    ).end()
    provider.shutdown()
    (report,) = reports
    assert report.trajectory.partial and report.trajectory.summary.tool_calls == 1
    assert any(p.attributes.get("trajgrade.partial") for p in metric_points(reader, "trajgrade.runs"))


def test_concurrent_agents_each_graded_once() -> None:
    reports: list[RunReport] = []
    lock = threading.Lock()

    def record(r: RunReport) -> None:
        with lock:
            reports.append(r)

    provider = TracerProvider()
    provider.add_span_processor(GradingSpanProcessor(CONFIG, on_report=record, meter_provider=MeterProvider()))
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            # each thread runs its own event loop, with several agents as concurrent asyncio tasks
            async def many() -> None:
                agents = [make_agent(f"agent-{i}-{k}", [("search", {"query": f"{i}.{k}"})], provider) for k in range(4)]
                await asyncio.gather(*(a.run("go") for a in agents))

            asyncio.run(many())
        except BaseException as e:  # pragma: no cover - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert provider.force_flush(10_000)
    assert not errors
    names = sorted(r.trajectory.agent_name or "" for r in reports)
    assert names == sorted(f"agent-{i}-{k}" for i in range(8) for k in range(4))
    provider.shutdown()


def test_faults_never_reach_the_agent(no_reraise: None, reader: InMemoryMetricReader) -> None:
    from trajgrade.core.graders.catalogue import lookup

    class Broken(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            raise RuntimeError("collector down")

    spec = lookup("loop")
    assert spec is not None
    config = parse_config("graders:\n  - type: loop\n  - type: turn-count\n    config: {max: 10}\n")
    original = spec.grade
    object.__setattr__(spec, "grade", lambda *a: (_ for _ in ()).throw(ValueError("grader bug")))
    try:
        reports: list[RunReport] = []
        provider = TracerProvider()
        provider.add_span_processor(
            GradingSpanProcessor(
                config,
                downstream=SimpleSpanProcessor(Broken()),
                on_report=reports.append,
                max_traces=50,
                meter_provider=MeterProvider(metric_readers=[reader]),
            )
        )
        run_scenarios(provider, ["weather"])  # the agent finishes although a grader and the exporter raise
        provider.force_flush()
        (report,) = reports
        statuses = {r.name: (r.status, r.error_type) for r in report.results}
        assert statuses == {"loop": ("error", "internal"), "turn-count": ("pass", None)}
        # a flood of unfinished traces stays within max_traces; the rest are counted as dropped
        tracer = provider.get_tracer("flood")
        from opentelemetry.trace import set_span_in_context

        for _ in range(500):
            root = tracer.start_span("invoke_agent flood")
            tracer.start_span("chat x", context=set_span_in_context(root)).end()
        provider.force_flush()  # the spans put so far are taken in (else within check_interval_s)
        active = metric_points(reader, "trajgrade.traces.active")
        assert active and active[0].value <= 50
        dropped = {p.attributes["trajgrade.reason"]: p.value for p in metric_points(reader, "trajgrade.traces.dropped")}
        assert dropped["max_traces"] == 450
    finally:
        object.__setattr__(spec, "grade", original)


def test_a_child_is_buffered_as_its_record() -> None:
    """on_end puts a child in the inbox; it is buffered as its record (what ``normalize`` makes of it), not as the
    span or its attributes."""
    from trajgrade.core.spans import SdkSpan
    from trajgrade.core.trajectory.normalize import normalize

    processor = GradingSpanProcessor(CONFIG, worker=False)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a") as root:
        with tracer.start_as_current_span("execute_tool search", attributes={"gen_ai.tool.name": "search"}) as child:
            child.add_event("exception", {"exception.type": "ValueError"})
        assert processor._collector.inbox == 1
        processor._collector.read_inbox()
        buffer = processor._collector._assembler._traces[format(root.get_span_context().trace_id, "032x")]
        kept, dropped = list(buffer.records), buffer.dropped_spans
    assert dropped == 0 and len(kept) == 1
    assert isinstance(child, ReadableSpan)
    assert kept[0] == normalize(SdkSpan(child), keep_attributes=False)
    assert (kept[0].name, kept[0].tool_name) == ("execute_tool search", "search")
    assert kept[0].attributes is None
    provider.shutdown()


@pytest.mark.parametrize("in_flight", [False, True])
def test_an_open_run_keeps_none_of_the_sdks_span_objects_alive(in_flight: bool) -> None:
    """What the hook keeps of an ended child until the worker reads it is the span's fields: the ``ReadableSpan``
    the SDK hands over, and its attribute, event and link holders, go when the SDK lets them go, as they do with no
    processor at all (the cyclic collector would otherwise walk about ten objects a span). The run is graded whole."""
    import gc

    reports: list[RunReport] = []
    # without a worker thread nothing reads the inbox before the root ends (the runs are graded as the root ends)
    processor = GradingSpanProcessor(CONFIG, in_flight=in_flight, worker=False, on_report=reports.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")

    def alive(kind: type) -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is kind)

    before = alive(ReadableSpan)
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(50):
            with tracer.start_as_current_span(
                "execute_tool search", attributes={"gen_ai.tool.name": "search", "gen_ai.tool.call.id": f"c{i}"}
            ):
                pass
        assert processor._collector.inbox == 50  # held, not read yet
        assert alive(ReadableSpan) == before
    assert provider.force_flush()
    (report,) = reports
    assert [s.tool.call_id for s in report.trajectory.steps if s.tool is not None] == [f"c{i}" for i in range(50)]
    provider.shutdown()


def test_the_inbox_keeps_each_traces_order_and_loses_only_a_span_it_cannot_read(
    no_reraise: None, reader: InMemoryMetricReader
) -> None:
    processor = GradingSpanProcessor(CONFIG, worker=False, meter_provider=MeterProvider(metric_readers=[reader]))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    from opentelemetry.trace import set_span_in_context

    roots = [tracer.start_span(f"invoke_agent {n}") for n in "ab"]
    for i in range(6):
        tracer.start_span(f"chat {i}", context=set_span_in_context(roots[i % 2])).end()
        if i == 2:
            processor._collector.put(object())  # not a span: its intake fails
    processor._collector.read_inbox()
    traces = processor._collector._assembler._traces
    names = [[record.name for record in traces[format(r.get_span_context().trace_id, "032x")].records] for r in roots]
    assert names == [["chat 0", "chat 2", "chat 4"], ["chat 1", "chat 3", "chat 5"]]
    errors = metric_points(reader, "trajgrade.internal_errors")
    assert [p.value for p in errors] == [1]
    for root in roots:
        root.end()
    provider.shutdown()


def test_without_a_worker_the_hot_path_reads_the_inbox_past_its_bound(reader: InMemoryMetricReader) -> None:
    """Nothing else reads the inbox while the root is open: the buffers' bounds still hold, and drops are counted."""
    processor = GradingSpanProcessor(
        CONFIG, worker=False, max_spans_per_trace=100, meter_provider=MeterProvider(metric_readers=[reader])
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"):
        for i in range(1_500):
            tracer.start_span(f"chat {i}").end()
        assert processor._collector.inbox < 1_024
        dropped = {p.attributes["trajgrade.reason"]: p.value for p in metric_points(reader, "trajgrade.traces.dropped")}
        assert dropped == {"max_spans_per_trace": 1_024 - 100}
    provider.shutdown()


def test_the_sdk_view_spells_ids_and_reads_status_as_the_public_api_does() -> None:
    from opentelemetry.trace import SpanContext, Status, StatusCode

    from trajgrade.core.spans import SdkSpan

    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"):
        with tracer.start_as_current_span("chat m") as child:
            child.set_status(Status(StatusCode.ERROR, "boom"))
    assert isinstance(child, ReadableSpan) and child.parent is not None
    view = SdkSpan(child)
    assert view.trace_id == format(child.context.trace_id, "032x")
    assert view.span_id == format(child.context.span_id, "016x")
    assert view.parent_span_id == format(child.parent.span_id, "016x")
    assert (view.status_code, view.status_message, view.kind) == (2, "boom", 1)
    assert view.resource_attributes["service.name"] == child.resource.attributes["service.name"]
    odd = ReadableSpan("x", context=SpanContext(trace_id=2**130 + 5, span_id=7, is_remote=False))
    assert SdkSpan(odd).trace_id == format(2**130 + 5, "032x")  # not an id of the SDK's size: spelled out whole


def test_an_sdk_span_read_from_its_fields_gives_the_record_its_view_gives() -> None:
    """``normalize_sdk`` and the worker's intake of what the hook kept (``sdk_held``) read the fields behind the SDK's
    properties; their record equals the view's, for spans with events, errors, usage and remote parents, and for a
    ReadableSpan built by hand."""
    from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, set_span_in_context

    from trajgrade.core.spans import SdkSpan
    from trajgrade.core.trajectory.normalize import normalize, normalize_sdk, sdk_held, sdk_intake

    ended: list[ReadableSpan] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended.append(span)

    provider = TracerProvider()
    provider.add_span_processor(Keep())
    tracer = provider.get_tracer("test")
    remote = SpanContext(trace_id=5, span_id=6, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with tracer.start_as_current_span("invoke_agent a", context=set_span_in_context(NonRecordingSpan(remote))):
        with tracer.start_as_current_span(
            "chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3}
        ) as llm:
            llm.set_status(Status(StatusCode.ERROR, "boom"))
        with tracer.start_as_current_span("execute_tool search", attributes={"gen_ai.tool.name": "search"}) as tool:
            tool.add_event(
                "gen_ai.execute_tool.exception", {"exception.type": "ValueError", "exception.message": "bad"}
            )
        with tracer.start_as_current_span("execute_tool fetch") as events:
            events.add_event("gen_ai.tool.message", {"content": '{"url": "x"}'})
    by_hand = ReadableSpan(  # no attribute or event holders of the SDK's: kept whole, read through its view
        "execute_tool by hand",
        context=SpanContext(trace_id=8, span_id=9, is_remote=False),
        parent=SpanContext(trace_id=8, span_id=7, is_remote=False),
    )
    ended.append(by_hand)
    assert len(ended) == 5
    for span in ended:
        for keep in (None, True, False):
            assert normalize_sdk(span, keep) == normalize(SdkSpan(span), keep)
        held = sdk_held(span)  # what the span processor's hook keeps: the span's fields, read by its worker
        if span.parent is None or span.parent.is_remote:  # a run's root: the processor holds it itself
            assert held is None
            continue
        assert held is by_hand if span is by_hand else type(held) is tuple
        assert sdk_intake(held) == sdk_intake(span) == (SdkSpan(span).trace_id, normalize(SdkSpan(span), False))
    assert sdk_held(ReadableSpan("invoke_agent by hand", context=SpanContext(8, 7, False))) is None
    odd = object()  # no SDK fields: kept as it is, for the worker to read (and to count, as it cannot)
    assert sdk_held(odd) is odd
    records = [normalize_sdk(span) for span in ended]
    assert [(r.kind, r.error, r.error_message) for r in records[:2]] == [
        ("llm_call", True, "boom"),
        ("tool_call", True, "bad"),
    ]
    assert records[2].tool_arguments == '{"url": "x"}'
    assert records[3].parent_is_remote and records[3].attributes is not None


def _one_run(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("app")
    root = tracer.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
    from opentelemetry.trace import set_span_in_context

    tracer.start_span("chat m", context=set_span_in_context(root), attributes={"gen_ai.operation.name": "chat"}).end()
    root.end()


@pytest.mark.parametrize("worker", [False, True])
def test_a_users_test_suite_never_gets_trajgrade_errors_raised_into_it(
    monkeypatch: pytest.MonkeyPatch, worker: bool
) -> None:
    """Under pytest (PYTEST_CURRENT_TEST is set here) without trajgrade's own switch: a callback that raises stays
    inside trajgrade, on the application's thread and on the grading thread, which keeps grading."""
    monkeypatch.delenv("TRAJGRADE_RAISE_INTERNAL_ERRORS", raising=False)
    assert "PYTEST_CURRENT_TEST" in os.environ
    seen: list[RunReport] = []

    def on_report(report: RunReport) -> None:
        seen.append(report)
        raise RuntimeError("the user's callback failed")

    provider = TracerProvider()
    provider.add_span_processor(GradingSpanProcessor(CONFIG, on_report=on_report, worker=worker))
    _one_run(provider)  # span.end() does not raise
    _one_run(provider)
    provider.force_flush()
    assert len(seen) == 2  # the grading thread survived the first callback's error
    provider.shutdown()


@pytest.mark.timeout(30)
def test_shutdown_keeps_its_time_limit_when_grading_is_stuck(no_reraise: None) -> None:
    release = threading.Event()
    started = threading.Event()

    def stuck(report: RunReport) -> None:  # the user's callback never returns on its own
        started.set()
        release.wait(60)

    processor = GradingSpanProcessor(CONFIG, on_report=stuck)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    _one_run(provider)
    assert started.wait(10)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (processor.shutdown(timeout_millis=200), done.set()), daemon=True)
    thread.start()
    assert done.wait(10), "shutdown waited for a grading job past its limit"
    release.set()


def test_a_breach_finds_the_first_open_root_of_its_trace_among_many_open_runs() -> None:
    """Open roots are found by trace (a breach's event goes on the first root of its trace that started and has
    not ended), however many other runs are open: two roots of one trace under a remote parent, beside 1,000 runs
    of other traces."""
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    from trajgrade.core.graders.base import GraderResult
    from trajgrade.core.inflight import Breach

    config = parse_config("graders:\n  - type: tool-call-count\n    config: {max: 1}\n")
    processor = GradingSpanProcessor(config, worker=False)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    others = [tracer.start_span("invoke_agent other") for _ in range(1000)]
    trace_id = 0x5B8EFFF798038103D269B633813FC60C
    remote = SpanContext(trace_id, 0xEEE19B7EC3C1B174, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    first, second = (tracer.start_span(n, context=set_span_in_context(NonRecordingSpan(remote))) for n in "ab")
    failed = GraderResult(name="calls", type="tool-call-count", status="fail", score=0.0, explanation="2 > 1")
    breach = Breach(f"{trace_id:032x}", None, failed, enforce=False)
    assert processor._open_root(breach) is first
    first.end()
    assert processor._open_root(breach) is second
    second.end()
    assert processor._open_root(breach) is None
    other_trace = f"{others[7].get_span_context().trace_id:032x}"
    assert processor._open_root(Breach(other_trace, None, failed, enforce=False)) is others[7]
    for span in others:
        span.end()
    provider.shutdown()
