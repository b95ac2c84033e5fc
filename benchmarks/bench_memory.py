"""Memory per buffered step: what a run's ended spans cost while the run is open, in the processor and in the
sidecar, with ``every_grader.yaml`` and in-flight checks on (the defaults).

``OPEN_RUNS`` runs are opened at once (their roots started, never ended while measured), then each gets ``STEPS``
child spans (ten GenAI attributes each, as ``bench_hot_path.py`` makes them; ids and arguments differ per
span). The figure is tracemalloc's growth over the children, once the in-flight checks have read them, divided
by their number (target: at most 512 bytes a step). The processor's spans are all read and checked before the
second snapshot, and the breaches they found are on their roots (a span the worker has not read yet is an SDK span,
several kilobytes, and a breach it has not emitted yet is an event missing from its root: counting either would
measure the worker's speed under tracemalloc, not what a buffered step costs).

- processor: ``GradingSpanProcessor`` under a ``TracerProvider``; the roots are live SDK spans;
- sidecar: ``trajgrade serve``'s pipeline in process (``Pipeline``, no forward target), fed binary OTLP
  requests of ``RUNS_PER_REQUEST`` runs' children, as a collector's exporter sends them.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from collections.abc import Callable

from _common import ROOT, Figure, print_table
from bench_hot_path import attributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from trajgrade import GradingSpanProcessor, load_config
from trajgrade.doors.sidecar.otlp import parse_protobuf
from trajgrade.doors.sidecar.pipeline import Pipeline

CONFIG = ROOT / "benchmarks" / "every_grader.yaml"
OPEN_RUNS = int(os.environ.get("BENCH_MEMORY_RUNS", "10000"))
STEPS = 10
RUNS_PER_REQUEST = 100
TARGET_B = 512


def _grown(setup: Callable[[], None], fill: Callable[[], None], settle: Callable[[], None]) -> float:
    """Bytes a step: tracemalloc's growth over ``fill`` (after ``settle``), ``setup`` done before the first snapshot."""
    setup()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    fill()
    settle()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename")) / (OPEN_RUNS * STEPS)


def processor_figure() -> Figure:
    provider = TracerProvider()
    processor = GradingSpanProcessor(load_config(CONFIG), max_traces=OPEN_RUNS * 2)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    roots = []
    children = [[attributes(r * STEPS + i) for i in range(STEPS)] for r in range(OPEN_RUNS)]

    def setup() -> None:
        roots.extend(
            tracer.start_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent"})
            for _ in range(OPEN_RUNS)
        )

    def fill() -> None:
        for root, attrs in zip(roots, children, strict=True):
            context = set_span_in_context(root)
            for a in attrs:
                tracer.start_span("execute_tool search", context=context, attributes=a).end()

    def settle() -> None:  # every span read and checked, as the worker's next pass would, and every breach emitted
        processor.force_flush()
        processor._worker.check_open()
        processor.force_flush()  # a pass the worker began meanwhile has emitted its breaches

    per_step = _grown(setup, fill, settle)
    provider.shutdown()
    return Figure(
        f"memory per buffered step, processor ({OPEN_RUNS:,} open runs, tracemalloc)",
        per_step,
        "B",
        f"<= {TARGET_B} B",
        per_step <= TARGET_B,
    )


def _requests() -> list[bytes]:
    """Binary OTLP requests holding the children of OPEN_RUNS runs (their roots never sent)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    bodies = []
    for first in range(0, OPEN_RUNS, RUNS_PER_REQUEST):
        for r in range(first, min(first + RUNS_PER_REQUEST, OPEN_RUNS)):
            root = tracer.start_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent"})
            for i in range(STEPS):
                tracer.start_span(
                    "execute_tool search", context=set_span_in_context(root), attributes=attributes(r * STEPS + i)
                ).end()
        spans: list[ReadableSpan] = list(exporter.get_finished_spans())
        exporter.clear()
        bodies.append(encode_spans(spans).SerializeToString())
    return bodies


def sidecar_figure() -> Figure:
    bodies = _requests()
    pipeline = Pipeline(load_config(CONFIG), [], max_traces=OPEN_RUNS * 2, settle_s=600.0)

    def fill() -> None:
        for body in bodies:
            assert pipeline.submit(parse_protobuf(body))

    per_step = _grown(lambda: None, fill, lambda: None)  # the pipeline checks each request as it takes it
    pipeline.close(timeout_s=1.0)
    return Figure(
        f"memory per buffered step, sidecar ({OPEN_RUNS:,} open runs, tracemalloc)",
        per_step,
        "B",
        f"<= {TARGET_B} B",
        per_step <= TARGET_B,
    )


def figures() -> list[Figure]:
    return [processor_figure(), sidecar_figure()]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
