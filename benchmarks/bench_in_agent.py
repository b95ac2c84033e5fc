"""What trajgrade costs an agent's process, everything included: the span hooks, assembling each run, grading it
on the worker thread when its root ends, and emitting its results (the evaluation span and its events, metrics).

Each round creates ``RUNS`` agent runs of a root and ``SPANS - 1`` tool spans (ten GenAI attributes each, as
``bench_hot_path.py`` makes them) under a provider with nothing else (``sdk``, the baseline), and under the
same with ``GradingSpanProcessor`` and ``every_grader.yaml`` (its defaults: in-flight checks on); the clock stops
after ``force_flush`` returns, so every run has been graded and its results emitted. Configurations alternate
in shuffled order; the figure is the median over rounds of the per-round ratio (target: at most 1.25x).

Reported beside it, in the same process and the same rounds: the same runs graded by one ``step-count`` grader
with the in-flight checks off (what trajgrade costs before the graders' own work); the same as the figure with
trajgrade's metrics recorded by an SDK ``MeterProvider`` (the figure's own processor records them on the API's
no-op provider, which an agent without metrics set up has: the SDK spends 15-20 µs on each measurement, and a run
graded by ``every_grader.yaml`` makes about thirty); the same as the figure with the grading done in the thread
that ends the root (``worker=False``: the same work, under the same lock, without a second thread: what the worker
itself costs an agent that never waits); and the grading of one run on the worker: normalizing its spans,
rebuilding the trajectory and every grader of the config. (``bench_hot_path.py`` measures the per-span hook at
length.) In rounds of their own: the figure's runs in an agent that exports its spans over OTLP/HTTP to a rotel, as
one in production does, against that agent alone (its exporter then also encodes and sends trajgrade's evaluation
spans: what encoding one run's takes is reported beside what its agent spans take).

The figure's agent does nothing but make spans: trajgrade's whole cost is set against the SDK's alone. For
reference, the same ratio with a real framework making runs of as many spans: the demo's pydantic-ai agent
(``examples/demo_agent.py``, its own instrumentation) asking for ``SPANS // 2 - 1`` tool calls a run from its
scripted model, which answers at once in the agent's process (no network wait in which the worker could grade
unseen), graded with ``every_grader.yaml`` against the same agent under a provider with nothing else.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from _common import ROOT, Figure, print_table
from bench_hot_path import attributes
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanProcessor, load_config, parse_config
from trajgrade.core.running import RunReport, grade_run
from trajgrade.core.spans import SdkSpan
from trajgrade.core.trajectory import build_trajectories, normalize

CONFIG = Path(ROOT / "benchmarks" / "every_grader.yaml")
#: The least a config asks: one grader of a count, nothing checked in flight.
ONE_GRADER = "graders:\n  - type: step-count\n    config: {max: 500}\n"
SPANS = 50
RUNS = 20
ROUNDS = int(__import__("os").environ.get("BENCH_IN_AGENT_ROUNDS", "40"))
#: A pydantic-ai run takes about 80 times the synthetic one: fewer runs a round, and fewer rounds.
FRAMEWORK_RUNS = 4
FRAMEWORK_ROUNDS = 15
ATTRS = [attributes(i) for i in range(SPANS - 1)]
ROOT_ATTRS = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"}


def make_runs(provider: TracerProvider, runs: int = RUNS) -> None:
    tracer = provider.get_tracer("bench")
    for _ in range(runs):
        with tracer.start_as_current_span("invoke_agent bench", attributes=ROOT_ATTRS):
            for attrs in ATTRS:
                with tracer.start_as_current_span("execute_tool search", attributes=attrs):
                    pass


def alternated(timed: Callable[[str], float], names: list[str], rounds: int) -> dict[str, list[float]]:
    """``timed(name)`` of each configuration, once to warm up, then in shuffled order each round."""
    order = list(names)  # shuffled here, not the caller's list
    for name in order:
        timed(name)
    seconds: dict[str, list[float]] = {name: [] for name in order}
    rng = random.Random(11)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            gc.collect()
            seconds[name].append(timed(name))
    return seconds


def median_ratio(seconds: list[float], baseline: list[float]) -> float:
    """The median over rounds of each round's ratio to the baseline."""
    return statistics.median(t / b for t, b in zip(seconds, baseline, strict=True))


def everything_figures() -> list[Figure]:
    bare = TracerProvider()
    graded: dict[str, tuple[TracerProvider, GradingSpanProcessor]] = {}
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    for name, processor in (
        ("trajgrade", GradingSpanProcessor(load_config(CONFIG))),
        ("one grader", GradingSpanProcessor(parse_config(ONE_GRADER), in_flight=False)),
        ("with metrics", GradingSpanProcessor(load_config(CONFIG), meter_provider=meters)),
        ("own thread", GradingSpanProcessor(load_config(CONFIG), worker=False)),
    ):
        graded[name] = (TracerProvider(), processor)
        graded[name][0].add_span_processor(processor)

    def timed(name: str) -> float:
        t0 = time.perf_counter()
        if name == "sdk":
            make_runs(bare)
        else:
            provider, processor = graded[name]
            make_runs(provider)
            processor.force_flush()
        return time.perf_counter() - t0

    seconds = alternated(timed, ["sdk", *graded], ROUNDS)
    for provider, _ in graded.values():
        provider.shutdown()
    meters.shutdown()
    ratio = {name: median_ratio(seconds[name], seconds["sdk"]) for name in graded}
    per_run = {name: statistics.median(s) / RUNS * 1e3 for name, s in seconds.items()}
    return [
        Figure(
            f"in the agent, everything included: {SPANS}-span runs graded with every_grader.yaml",
            ratio["trajgrade"],
            "x",
            "<= 1.25x",
            ratio["trajgrade"] <= 1.25,
            1.0,
            f"SDK alone, {per_run['sdk']:.2f} ms/run; trajgrade {per_run['trajgrade']:.2f} ms/run",
        ),
        Figure(
            "  reference: the same runs graded by one step-count grader, in-flight checks off",
            ratio["one grader"],
            "x",
            "-",
            True,
            1.0,
            f"SDK alone; trajgrade {per_run['one grader']:.2f} ms/run",
        ),
        Figure(
            "  reference: the figure with trajgrade's metrics recorded by an SDK MeterProvider",
            ratio["with metrics"],
            "x",
            "-",
            True,
            1.0,
            f"SDK alone; trajgrade {per_run['with metrics']:.2f} ms/run",
        ),
        Figure(
            "  reference: the figure's grading in the agent's own thread (worker=False), not on the worker",
            ratio["own thread"],
            "x",
            "-",
            True,
            1.0,
            f"SDK alone; trajgrade {per_run['own thread']:.2f} ms/run",
        ),
    ]


def grading_figure() -> Figure:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    make_runs(provider, 1)
    spans = exporter.get_finished_spans()
    config = load_config(CONFIG)

    def grade_one() -> None:
        (run,) = build_trajectories([normalize(SdkSpan(s)) for s in spans])
        grade_run(config, run)

    n = 200
    seconds = min(timeit.repeat(grade_one, number=n, repeat=5)) / n
    return Figure(
        f"  of which on the worker: normalize + rebuild + grade one {SPANS}-span run",
        seconds * 1e3,
        "ms",
        "-",
        True,
    )


def framework_figure() -> Figure:
    sys.path.insert(0, str(ROOT / "examples"))
    from demo_agent import make_agent  # the demo's agent: pydantic-ai, instrumented by pydantic-ai itself

    calls = [("search", {"query": f"page {i}"}) for i in range(SPANS // 2 - 1)]
    graded: list[RunReport] = []
    processor = GradingSpanProcessor(load_config(CONFIG), on_report=graded.append)
    providers = {"sdk": TracerProvider(), "trajgrade": TracerProvider()}
    providers["trajgrade"].add_span_processor(processor)
    agents = {name: make_agent("bench", calls, provider) for name, provider in providers.items()}

    def timed(name: str) -> float:
        t0 = time.perf_counter()
        for _ in range(FRAMEWORK_RUNS):
            agents[name].run_sync("search every page")
        if name == "trajgrade":
            processor.force_flush()
        return time.perf_counter() - t0

    seconds = alternated(timed, list(agents), FRAMEWORK_ROUNDS)
    processor.shutdown()
    steps = {len(report.trajectory.steps) for report in graded}  # a step for each span under the agent's
    if len(graded) != FRAMEWORK_RUNS * (FRAMEWORK_ROUNDS + 1) or steps != {SPANS - 1}:
        raise RuntimeError(f"pydantic-ai runs graded: {len(graded)}, of {sorted(steps)} steps (want {SPANS - 1})")
    per_run = {name: statistics.median(s) / FRAMEWORK_RUNS * 1e3 for name, s in seconds.items()}
    return Figure(
        f"  reference: a pydantic-ai agent's {SPANS}-span runs, its model answering at once, graded the same way",
        median_ratio(seconds["trajgrade"], seconds["sdk"]),
        "x",
        "-",
        True,
        1.0,
        f"the agent alone, {per_run['sdk']:.1f} ms/run; trajgrade {per_run['trajgrade']:.1f} ms/run",
    )


def exporting_figures() -> list[Figure]:
    """The figure's runs in an agent that exports its spans, as one in production does: a ``BatchSpanProcessor``
    with the OTLP/HTTP exporter sending to a rotel (into its blackhole) in another process, against the same agent
    with ``GradingSpanProcessor`` beside it, whose evaluation spans that exporter sends too; the clock stops once
    both processors have flushed. Beside it, what the OTLP exporter's encoder takes for one run's spans and for
    the evaluation span trajgrade adds to them (its ``gen_ai.evaluation.result`` events)."""
    from bench_sidecar import free_port, rotel, stop
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        collector = rotel(Path(workdir), port)
        try:
            agents: dict[str, tuple[TracerProvider, list[SpanProcessor]]] = {}
            for name in ("exporting", "exporting + trajgrade"):
                provider = TracerProvider()
                processors: list[SpanProcessor] = []
                if name != "exporting":
                    processors.append(GradingSpanProcessor(load_config(CONFIG)))
                processors.append(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
                for processor in processors:
                    provider.add_span_processor(processor)
                agents[name] = provider, processors

            def timed(name: str) -> float:
                provider, processors = agents[name]
                t0 = time.perf_counter()
                make_runs(provider)
                for processor in processors:
                    if not processor.force_flush():
                        raise RuntimeError(f"{name}: a processor did not flush")
                return time.perf_counter() - t0

            seconds = alternated(timed, list(agents), ROUNDS)
            for provider, _ in agents.values():
                provider.shutdown()
        finally:
            stop(collector)
    per_run = {name: statistics.median(s) / RUNS * 1e3 for name, s in seconds.items()}

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(GradingSpanProcessor(load_config(CONFIG), worker=False))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    make_runs(provider, 1)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    evaluation = [s for s in spans if s.name.startswith("evaluation ")]
    agent = [s for s in spans if not s.name.startswith("evaluation ")]
    if len(evaluation) != 1 or len(agent) != SPANS:
        raise RuntimeError(f"one run exported {len(agent)} agent spans and {len(evaluation)} evaluation spans")
    encode = {
        label: min(timeit.repeat(lambda ss=ss: encode_spans(ss).SerializeToString(), number=100, repeat=5)) / 100
        for label, ss in (("agent", agent), ("evaluation", evaluation))
    }
    events = len(evaluation[0].events)
    return [
        Figure(
            "  reference: the figure in an agent exporting its spans over OTLP/HTTP (a BatchSpanProcessor to a rotel)",
            median_ratio(seconds["exporting + trajgrade"], seconds["exporting"]),
            "x",
            "-",
            True,
            1.0,
            f"the exporting agent alone, {per_run['exporting']:.2f} ms/run; trajgrade "
            f"{per_run['exporting + trajgrade']:.2f} ms/run",
        ),
        Figure(
            f"  reference: the OTLP exporter encoding a run's evaluation span ({events} result events)",
            encode["evaluation"] * 1e3,
            "ms",
            "-",
            True,
            encode["agent"] * 1e3,
            f"its {SPANS} agent spans",
        ),
    ]


def figures() -> list[Figure]:
    return [*everything_figures(), *exporting_figures(), framework_figure(), grading_figure()]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
