"""Every door finishes a run the same way: the same span streams through the span processor, the exporter wrapper,
the sidecar's pipeline and the command line give the same graded runs and the same drop counters, and the doors
that check open runs (the processor and the sidecar) find the same in-flight breaches (the rotel processor, which
runs inside the rotel binary, is checked on the same streams in ``tests/sidecar``).

The spans are made by the OpenTelemetry SDK and recorded as it hands them to processors; each door then gets
them its own way: ``on_start``/``on_end`` in start and end order (the processor), ``export`` per batch (the
exporter), OTLP protobuf requests per batch (the sidecar), one trace file per batch (the command line).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer, set_span_in_context
from readings import metric_points

from trajgrade import GradingSpanExporter, GradingSpanProcessor, RunReport, grade_run, parse_config
from trajgrade.core.inflight import Breach
from trajgrade.core.runfiles import read_runs
from trajgrade.doors.sidecar.otlp import parse_protobuf
from trajgrade.doors.sidecar.pipeline import Pipeline

CONFIG = parse_config(
    """
graders:
  - {type: tool-call-count, name: calls, config: {max: 2}}
  - {type: loop, name: loop, max_repeats: 2}
  - {type: token-budget, name: tokens, config: {max: 100}}
"""
)
AGE_S = 0.3  # a trace with no root this old is graded as partial


@dataclass
class Stream:
    """Spans in batches (a batch is what one export call or request carries), as the SDK made them."""

    batches: list[list[ReadableSpan]]
    unended: list[ReadableSpan] = field(default_factory=list)  # started, never ended (the processor sees them)
    wait_for_age: bool = False  # the doors are asked for their runs after the traces' age has passed
    settle: bool = False  # a span of the run ends after its root: the doors that can wait for it, wait


@dataclass(frozen=True)
class Graded:
    trace_id: str
    root_span_id: str
    partial: bool
    steps: int
    results: tuple[tuple[str, str], ...]


#: An in-flight breach as the doors agree on it: the run's trace, the grader, and the span that broke the limit.
Found = tuple[str, str, str | None]


def found(breach: Breach) -> Found:
    return (breach.trace_id, breach.result.name, breach.span_id)


def graded(report: RunReport) -> Graded:
    t = report.trajectory
    results = tuple(sorted((r.name, r.status) for r in report.results))
    return Graded(t.trace_id, t.root_span_id, t.partial, len(t.steps), results)


# --- the streams --------------------------------------------------------------------------------------------------
@contextmanager
def recorded() -> Iterator[tuple[Tracer, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider.get_tracer("app"), memory


def _tool(tracer: Tracer, parent: Any, name: str = "search", query: str = "q") -> ReadableSpan:
    span = tracer.start_span(
        f"execute_tool {name}",
        context=set_span_in_context(parent),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": f'{{"q": "{query}"}}',
        },
    )
    span.end()
    return span  # type: ignore[return-value]


def _chat(tracer: Tracer, parent: Any, tokens: int) -> ReadableSpan:
    span = tracer.start_span(
        "chat m",
        context=set_span_in_context(parent),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": tokens,
            "gen_ai.usage.output_tokens": 1,
        },
    )
    span.end()
    return span  # type: ignore[return-value]


def _root(tracer: Tracer, context: Any = None) -> Any:
    return tracer.start_span(
        "invoke_agent looper",
        context=context,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "looper"},
    )


def normal_run() -> Stream:
    """A run that loops on one tool: every grader has something to say."""
    with recorded() as (tracer, memory):
        root = _root(tracer)
        _chat(tracer, root, 60)
        for _ in range(4):
            _tool(tracer, root)
        _chat(tracer, root, 60)
        root.end()
    return Stream([list(memory.get_finished_spans())])


def split_children_first() -> Stream:
    """The run's children in one batch, its root in the next (batches cut by a batch processor)."""
    (spans,) = normal_run().batches
    return Stream([spans[:3], spans[3:]])


def remote_parent() -> Stream:
    """The run's root is a child of a span in another process (its parent is remote)."""
    with recorded() as (tracer, memory):
        caller = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        root = _root(tracer, set_span_in_context(NonRecordingSpan(caller)))
        _tool(tracer, root)
        _tool(tracer, root, "fetch")
        root.end()
    return Stream([list(memory.get_finished_spans())])


def own_spans() -> Stream:
    """trajgrade's own span (an evaluation of another run) among the run's: never part of a run."""
    with recorded() as (tracer, memory):
        root = _root(tracer)
        _tool(tracer, root)
        own = TracerProvider()
        own.add_span_processor(SimpleSpanProcessor(memory))
        evaluation = own.get_tracer("trajgrade").start_span("evaluation other", context=set_span_in_context(root))
        evaluation.end()
        root.end()
    return Stream([list(memory.get_finished_spans())])


def _rootless(tracer: Tracer) -> Any:
    """The root of a run that never ends: a local parent whose span is never recorded."""
    parent = SpanContext(0x5EED, 0xF00D, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return NonRecordingSpan(parent)


def expires() -> Stream:
    """Spans of a run whose root never comes: graded as partial once the trace is ``AGE_S`` old."""
    with recorded() as (tracer, memory):
        parent = _rootless(tracer)
        _tool(tracer, parent)
        _tool(tracer, parent)
        _tool(tracer, parent)
    return Stream([list(memory.get_finished_spans())], wait_for_age=True)


def open_at_shutdown() -> Stream:
    """A run still open when the door shuts down: graded from what arrived, as partial."""
    with recorded() as (tracer, memory):
        root = _root(tracer)
        _tool(tracer, root)
        _tool(tracer, root)
        _chat(tracer, root, 500)
    spans = list(memory.get_finished_spans())
    return Stream([spans], unended=[root])


def late_child() -> Stream:
    """A span of the run ends after its root and comes in the next batch: a settling door waits for it."""
    with recorded() as (tracer, memory):
        root = _root(tracer)
        _tool(tracer, root)
        late = tracer.start_span("execute_tool slow", context=set_span_in_context(root))
        late.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow"})
        root.end()
        late.end()
    spans = list(memory.get_finished_spans())
    return Stream([spans[:2], spans[2:]], settle=True)


STREAMS: dict[str, Callable[[], Stream]] = {
    "normal run": normal_run,
    "split, children first": split_children_first,
    "remote parent": remote_parent,
    "own spans": own_spans,
    "expires": expires,
    "open at shutdown": open_at_shutdown,
    "late child": late_child,
}


# --- the doors ----------------------------------------------------------------------------------------------------
Outcome = tuple[list[Graded], Counter[str]]


def _drops(reader: InMemoryMetricReader) -> Counter[str]:
    return Counter(
        {p.attributes["trajgrade.reason"]: p.value for p in metric_points(reader, "trajgrade.traces.dropped")}
    )


def _wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def through_processor(stream: Stream, breaches: list[Breach] | None = None) -> Outcome:
    """``breaches``: where the in-flight breaches go."""
    reader = InMemoryMetricReader()
    reports: list[RunReport] = []
    processor = GradingSpanProcessor(
        CONFIG,
        meter_provider=MeterProvider([reader]),
        on_report=reports.append,
        on_breach=(breaches if breaches is not None else []).append,
        max_trace_age_s=AGE_S,
        settle_s=0.5 if stream.settle else 0.0,
    )
    spans = [s for batch in stream.batches for s in batch]
    for span in sorted([*spans, *stream.unended], key=lambda s: s.start_time or 0):
        processor.on_start(span)  # type: ignore[arg-type]
    for span in spans:
        processor.on_end(span)
    if stream.wait_for_age:
        _wait_until(lambda: bool(reports))
    processor.force_flush()
    processor.shutdown()
    return [graded(r) for r in reports], _drops(reader)


def through_exporter(stream: Stream) -> Outcome:
    class Nowhere(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    reader = InMemoryMetricReader()
    reports: list[RunReport] = []
    exporter = GradingSpanExporter(
        CONFIG, Nowhere(), meter_provider=MeterProvider([reader]), on_report=reports.append, max_trace_age_s=AGE_S
    )
    for batch in stream.batches:
        exporter.export(batch)
    if stream.wait_for_age:
        time.sleep(AGE_S + 1.0)  # the exporter looks at the traces' age when it is next called
        exporter.export([])
    exporter.shutdown()
    return [graded(r) for r in reports], _drops(reader)


def _request(batch: list[ReadableSpan]) -> bytes:
    return encode_spans(batch).SerializeToString()  # type: ignore[no-any-return]


def through_sidecar(stream: Stream, breaches: list[Breach] | None = None) -> Outcome:
    """``breaches``: where the in-flight breaches go."""
    reader = InMemoryMetricReader()
    reports: list[RunReport] = []
    pipeline = Pipeline(
        CONFIG,
        [],
        meter_provider=MeterProvider([reader]),
        on_report=reports.append,
        on_breach=(breaches if breaches is not None else []).append,
        settle_s=0.5 if stream.settle else 0.0,
        max_trace_age_s=AGE_S,
    )
    for batch in stream.batches:
        assert pipeline.submit(parse_protobuf(_request(batch)))
    if stream.wait_for_age:
        _wait_until(lambda: bool(reports))
    pipeline.flush()
    pipeline.close()
    return [graded(r) for r in reports], _drops(reader)


def through_command_line(stream: Stream, directory: Path) -> Outcome:
    for i, batch in enumerate(stream.batches):
        (directory / f"batch-{i}.pb").write_bytes(_request(batch))
    runs, problems = read_runs([str(directory)])
    assert not problems
    return [graded(grade_run(CONFIG, run.trajectory)) for run in runs], Counter()


# --- the checks ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(STREAMS))
def test_every_door_grades_the_same_runs(name: str, tmp_path: Path) -> None:
    stream = STREAMS[name]()
    processor, processor_drops = through_processor(stream)
    sidecar, sidecar_drops = through_sidecar(stream)
    command_line, _ = through_command_line(stream, tmp_path)
    assert processor, "the stream gave no run"
    assert sorted(sidecar, key=repr) == sorted(processor, key=repr)
    assert sorted(command_line, key=repr) == sorted(processor, key=repr)
    assert sidecar_drops == processor_drops
    exporter, exporter_drops = through_exporter(stream)
    if stream.settle:  # an exporter cannot hold a root: the late span is counted, never silently lost
        assert exporter_drops == processor_drops + Counter({"after_root": 1})
        assert [g.steps for g in exporter] == [g.steps - 1 for g in processor]
    else:
        assert sorted(exporter, key=repr) == sorted(processor, key=repr)
        assert exporter_drops == processor_drops


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_doors_that_check_open_runs_find_the_same_breaches(name: str) -> None:
    """Each limit a run breaks is found once, on the same span, by the processor (its worker reads the spans that
    ended before it grades) and by the sidecar (as each request is admitted), whichever batch the spans come in. A
    run still open when the processor shuts down is graded from its spans without a look in flight if its worker
    had not looked yet: the processor finds no more than the sidecar there."""
    stream = STREAMS[name]()
    in_processor: list[Breach] = []
    in_sidecar: list[Breach] = []
    (run,), _ = through_processor(stream, in_processor)
    through_sidecar(stream, in_sidecar)
    if stream.unended:
        assert set(map(found, in_processor)) <= set(map(found, in_sidecar))
    else:
        assert sorted(map(found, in_sidecar), key=repr) == sorted(map(found, in_processor), key=repr)
    assert all(b.trace_id == run.trace_id and b.result.status == "fail" for b in in_sidecar)
    final = dict(run.results)
    assert all(final[b.result.name] == "fail" for b in in_sidecar)  # a breach in flight is a failure at the end


def test_what_each_stream_gives() -> None:
    """The runs the streams give, and their in-flight breaches, as the doors agree on them (so that agreeing on
    nothing cannot pass)."""
    every = ("calls", "loop", "tokens")
    expected = {
        "normal run": (False, 6, {"calls": "fail", "loop": "fail", "tokens": "fail"}, {}, every),
        "split, children first": (False, 6, {"calls": "fail", "loop": "fail", "tokens": "fail"}, {}, every),
        "remote parent": (False, 2, {"calls": "pass", "loop": "pass", "tokens": "error"}, {}, ()),
        "own spans": (False, 1, {"calls": "pass", "loop": "pass", "tokens": "error"}, {}, ()),
        "expires": (True, 3, {"calls": "fail", "loop": "fail", "tokens": "error"}, {"trace_age": 1}, ("calls", "loop")),
        "open at shutdown": (
            True,
            3,
            {"calls": "pass", "loop": "pass", "tokens": "fail"},
            {"open_at_shutdown": 1},
            ("tokens",),
        ),
        "late child": (False, 2, {"calls": "pass", "loop": "pass", "tokens": "error"}, {}, ()),
    }
    for name, make in STREAMS.items():
        stream = make()
        (run,), drops = through_processor(stream)
        breaches: list[Breach] = []
        through_sidecar(stream, breaches)
        partial, steps, results, dropped, breached = expected[name]
        got = (run.partial, run.steps, dict(run.results), dict(drops), tuple(sorted(b.result.name for b in breaches)))
        assert got == (partial, steps, results, dropped, breached), name
