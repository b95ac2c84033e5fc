"""The agent's hot path: what trajgrade adds to creating and ending a span, and what a buffered step costs.

Per-span cost: each round creates, in shuffled order, one agent run of ``SPANS`` child spans (ten GenAI
attributes each, ``start_as_current_span`` as instrumentations do) under every configuration:

- ``sdk``: a TracerProvider with no processor (the baseline);
- ``trajgrade``: the same with ``GradingSpanProcessor`` and a config of every grader family (its in-flight checks
  on, as by default: the worker reads the open run's spans every 50 ms);
- ``trajgrade, checks every 5 ms``: the same with the in-flight checks ten times as often;
- ``trajgrade, checks off``: the same without in-flight checks (the spans are read when the root ends, after the
  clock stops): what holding each run's spans costs, beside what reading them while the run is open adds;
- ``simple``: the same with ``SimpleSpanProcessor(InMemorySpanExporter())`` (a reference point).

Only the child spans are timed; the root ends after the clock stops, grading runs on the worker thread, and
a full collection runs between configurations, so that none is charged for another's garbage. The cyclic garbage
collections that start within the timed runs are counted (``gc.callbacks``) and reported beside: the SDK alone frees
each span as it ends and starts none, and what trajgrade holds of the open run's spans should start few.
The figure is the median over rounds of the per-round ratio to ``sdk`` (target: at most 1.15). The rounds
are many (about two minutes in all) because this machine's speed drifts: with 60 rounds, runs of the same code
gave medians from 1.10 to 1.16; with 200, from 1.12 to 1.14.

Memory per buffered step is ``bench_memory.py``'s.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import Figure, print_table
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanProcessor, load_config
from trajgrade.core.inflight import Breach

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__import__("os").environ.get("BENCH_CONFIG", ROOT / "benchmarks" / "every_grader.yaml"))
SPANS = 2_000
ROUNDS = 200


def attributes(i: int) -> dict[str, str | int]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "bench",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.tool.call.arguments": '{"query": "weather in Paris", "page": 2}',
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 14,
    }


ATTRS = [attributes(i) for i in range(SPANS)]


def one_run(provider: TracerProvider) -> float:
    """Seconds spent creating and ending SPANS child spans of one agent run (the root ends after the clock)."""
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent"}):
        t0 = time.perf_counter()
        for attrs in ATTRS:
            with tracer.start_as_current_span("execute_tool search", attributes=attrs):
                pass
        return time.perf_counter() - t0


#: Runs with an in-flight breach found while the run was open, by configuration (every timed run crosses limits).
CAUGHT: dict[str, set[str]] = {}


def graded(name: str, check_interval_s: float, in_flight: bool = True) -> tuple[TracerProvider, Callable[[], None]]:
    provider = TracerProvider()
    caught = CAUGHT.setdefault(name, set())

    def on_breach(breach: Breach) -> None:
        if processor._open_roots:  # found while the run's root was still open
            caught.add(breach.trace_id)

    processor = GradingSpanProcessor(
        load_config(CONFIG), on_breach=on_breach, check_interval_s=check_interval_s, in_flight=in_flight
    )
    provider.add_span_processor(processor)
    return provider, lambda: processor.force_flush()


def providers() -> dict[str, tuple[TracerProvider, Callable[[], None]]]:
    simple = TracerProvider()
    exporter = InMemorySpanExporter()
    simple.add_span_processor(SimpleSpanProcessor(exporter))
    return {
        "sdk": (TracerProvider(), lambda: None),
        "trajgrade": graded("trajgrade", 0.05),
        "trajgrade-5ms": graded("trajgrade-5ms", 0.005),
        "trajgrade-off": graded("trajgrade-off", 0.05, in_flight=False),
        "simple": (simple, exporter.clear),
    }


def per_span_figures() -> list[Figure]:
    configs = providers()
    names = list(configs)
    rng = random.Random(7)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    collections = dict.fromkeys(names, 0)  # the cyclic collections started within the timed runs
    started = [0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] += 1

    for name in names:  # warm-up
        one_run(configs[name][0])
        configs[name][1]()
    gc.callbacks.append(count)
    for _ in range(ROUNDS):
        rng.shuffle(names)
        for name in names:
            provider, settle = configs[name]
            started[0] = 0
            seconds[name].append(one_run(provider))
            collections[name] += started[0]
            settle()  # grading and clearing happen outside the timed loop, before the next configuration
            gc.collect()  # and so does collecting their garbage: no configuration pays for another's
    gc.callbacks.remove(count)
    per_run = {name: n / ROUNDS for name, n in collections.items()}
    ratios = {
        name: statistics.median(s / b for s, b in zip(seconds[name], seconds["sdk"], strict=True)) for name in names
    }
    us = {name: statistics.median(seconds[name]) / SPANS * 1e6 for name in names}
    for provider, _ in configs.values():
        provider.shutdown()
    return [
        Figure(
            "hot path: span with 10 GenAI attributes, GradingSpanProcessor",
            ratios["trajgrade"],
            "x",
            "<= 1.15x",
            ratios["trajgrade"] <= 1.15,
            1.0,
            f"SDK alone, {us['sdk']:.1f} us/span; trajgrade {us['trajgrade']:.1f} us/span",
        ),
        Figure(
            "  the same, in-flight checks every 5 ms",
            ratios["trajgrade-5ms"],
            "x",
            "<= 1.15x",
            ratios["trajgrade-5ms"] <= 1.15,
            1.0,
            f"SDK alone; trajgrade {us['trajgrade-5ms']:.1f} us/span",
        ),
        Figure(
            "  runs caught in flight (a breach while the root was open), checks every 5 ms",
            len(CAUGHT["trajgrade-5ms"]),
            "runs",
            f"= {ROUNDS + 1} (every run)",
            len(CAUGHT["trajgrade-5ms"]) == ROUNDS + 1,
        ),
        Figure(
            "  reference: the same, in-flight checks off (spans read when the root ends)",
            ratios["trajgrade-off"],
            "x",
            "-",
            True,
            1.0,
            f"SDK alone; trajgrade {us['trajgrade-off']:.1f} us/span",
        ),
        Figure(
            "  reference: cyclic garbage collections started within a timed run",
            per_run["trajgrade"],
            "a run",
            "-",
            True,
            per_run["sdk"],
            f"SDK alone; checks off {per_run['trajgrade-off']:.1f} a run",
        ),
        Figure(
            "  reference: SimpleSpanProcessor(InMemorySpanExporter)",
            ratios["simple"],
            "x",
            "-",
            True,
            1.0,
            f"SDK alone; {us['simple']:.1f} us/span",
        ),
    ]


def figures() -> list[Figure]:
    return per_span_figures()


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
