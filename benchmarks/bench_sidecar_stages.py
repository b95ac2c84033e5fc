"""Where the sidecar's CPU goes, a stage at a time, beside the bare receiver's work, in one process.

``bench_sidecar.py`` measures the whole server; this takes the same request bodies (both shapes) and times,
in one thread with the garbage collector off, what each stage of ``trajgrade serve`` costs per span:

- ``read``: the request checked whole (``parse_protobuf``) and read by ``sidecar/_protowire.c`` into span views,
  with the attributes normalization reads;
- ``normalize``: every span reduced to its record;
- ``build``: every run's trajectory from its records;
- ``graders``: the config of ``bench_sidecar.py`` on every run (timed with a fresh build, minus build,
  because a trajectory parses its tool arguments once, when a grader first reads them);
- ``result events``: each run's events and verdict, encoded for its root.

The baseline is the bare receiver's own work (``read_every_attribute``: parse, then read every attribute).
Stages run in shuffled order for ``ROUNDS`` rounds; each figure is the median. The sum leaves out HTTP,
assembly and forwarding, which ``bench_sidecar.py`` includes (and its bare receiver forwards too): for 0.8
times the bare receiver's rate, the sidecar's whole cost per span must stay within 1.25 times the bare figure.
The stages are also summed by the thread of ``trajgrade serve`` that runs them (receiving, grading); the two
share one interpreter lock.

Then the whole of it, without HTTP: the sidecar's ``Pipeline`` (with its defaults: in-flight checks and log events
on) takes the same requests (``submit`` after ``parse_protobuf``, as the receiver hands them over; new trace ids
each round), grades every run on its own thread and forwards spans and log events to a rotel that drops them, and
the bare receiver's work is ``read_every_attribute`` and its forward (``_bare.Forward``) to the same rotel. Both
are measured in CPU time of the whole process (every thread), until everything is delivered, in shuffled rounds;
the pipeline also with the in-flight checks off and with the log events off, each part's cost the difference.
The process's collector and switch interval are tuned as ``trajgrade serve`` tunes its own.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bare import Forward, read_every_attribute
from _common import Figure, print_table
from bench_sidecar import CONFIG, SHAPES, fixture_templates, free_port, make_templates, rotel, stop, with_new_trace_ids

from trajgrade import load_config
from trajgrade.core.running import grade_run
from trajgrade.core.trajectory import SpanRecord, build_trajectory, normalize
from trajgrade.doors.sidecar._protowire import Span
from trajgrade.doors.sidecar.otlp import parse_protobuf, result_fields
from trajgrade.doors.sidecar.pipeline import Pipeline
from trajgrade.doors.sidecar.server import _tune_interpreter as tune_interpreter

ROUNDS = 7
REQUESTS = 40
#: The sidecar's two busy threads: the receiver records every span, the grader builds, grades and encodes.
SIDES = {
    "receiving (the receiver's thread)": ("read", "normalize"),
    "grading (the grader's thread)": ("build", "graders", "result events"),
}


def _bodies(shape: str) -> list[bytes]:
    templates = make_templates(REQUESTS) if shape == "synthetic" else fixture_templates()
    return [with_new_trace_ids(templates[i % len(templates)], 0, i) for i in range(REQUESTS)]


def _runs(views: list[Span]) -> list[tuple[list[SpanRecord], SpanRecord]]:
    """Each run's records and its root (a span with no parent or a remote one), as the sidecar grades them."""
    by_trace: dict[str, list[SpanRecord]] = {}
    roots: list[SpanRecord] = []
    for view in views:
        record = normalize(view, False)
        by_trace.setdefault(record.trace_id, []).append(record)
        if record.parent_span_id is None or view.parent_is_remote:
            roots.append(record)
    return [([r for r in by_trace[root.trace_id] if r is not root], root) for root in roots]


def stages(shape: str) -> dict[str, float]:
    """Median microseconds per span of each stage, and of the bare receiver's work."""
    config = load_config(CONFIG)
    bodies = _bodies(shape)
    spans = [span for b in bodies for span in parse_protobuf(b).spans]
    runs = _runs(spans)
    reports = [grade_run(config, build_trajectory([root, *rest], root, prices=config.prices)) for rest, root in runs]

    timed: dict[str, Callable[[], Any]] = {
        "bare": lambda: [read_every_attribute(b) for b in bodies],
        "read": lambda: [parse_protobuf(b).spans for b in bodies],  # the spans are read when first asked for
        "normalize": lambda: [normalize(span, False) for span in spans],
        "build": lambda: [build_trajectory([root, *rest], root, prices=config.prices) for rest, root in runs],
        "build+graders": lambda: [
            grade_run(config, build_trajectory([root, *rest], root, prices=config.prices)) for rest, root in runs
        ],
        "result events": lambda: [result_fields(r, 1) for r in reports],
    }
    samples: dict[str, list[float]] = {name: [] for name in timed}
    order = list(timed)
    for _ in range(ROUNDS):
        random.shuffle(order)
        for name in order:
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                timed[name]()
                samples[name].append((time.perf_counter() - t0) / len(spans) * 1e6)
            finally:
                gc.enable()
    m = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "bare": m["bare"],
        "read": m["read"],
        "normalize": m["normalize"],
        "build": m["build"],
        "graders": m["build+graders"] - m["build"],
        "result events": m["result events"],
    }


#: The pipelines timed whole: the sidecar's defaults, then each with one part off (that part's cost is the difference).
PIPELINES = {  # (in_flight, log_events)
    "whole": (True, True),
    "without in-flight checks": (False, True),
    "without log events": (True, False),
}


def whole(shape: str, sink: str) -> dict[str, float]:
    """Median CPU microseconds per span of the bare receiver's whole work and of each pipeline (``PIPELINES``),
    everything forwarded to ``sink``."""
    config = load_config(CONFIG)
    templates = make_templates(REQUESTS) if shape == "synthetic" else fixture_templates()
    forward = Forward(sink)
    pipelines = {
        name: Pipeline(config, [sink], settle_s=0.0, in_flight=checks, log_events=events)
        for name, (checks, events) in PIPELINES.items()
    }
    switch, thresholds = sys.getswitchinterval(), gc.get_threshold()
    tune_interpreter()  # as trajgrade serve tunes its process
    samples: dict[str, list[float]] = {name: [] for name in ["bare", *pipelines]}
    order = list(samples)
    try:
        for round_ in range(ROUNDS):
            random.shuffle(order)
            for k, name in enumerate(order):
                bodies = [with_new_trace_ids(t, round_ * 8 + k, i) for i, t in enumerate(templates)]
                spans = sum(t[2] for t in templates)
                t0 = time.process_time()
                if name == "bare":
                    for body in bodies:
                        read_every_attribute(body)
                        forward.put(body)
                    forward.flush()
                else:
                    pipeline = pipelines[name]
                    for body in bodies:
                        pipeline.submit(parse_protobuf(body))
                    pipeline.flush()
                samples[name].append((time.process_time() - t0) / spans * 1e6)
    finally:
        for pipeline in pipelines.values():
            pipeline.close()
        sys.setswitchinterval(switch)
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    return {name: statistics.median(values) for name, values in samples.items()}


def figures() -> list[Figure]:
    figs = []
    for shape, label in SHAPES.items():
        s = stages(shape)
        bare = s.pop("bare")
        total = sum(s.values())
        figs.append(Figure(f"sidecar stages, CPU per span: {label}", total, "us", "-", True, bare, "bare receiver"))
        for side, names in SIDES.items():
            figs.append(Figure(f"  {side}", sum(s[n] for n in names), "us", "-", True, bare, "bare receiver"))
            figs += [Figure(f"    {n}", s[n], "us", "-", True, bare, "bare receiver") for n in names]
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        sink = rotel(Path(tmp), port)
        try:
            for shape, label in SHAPES.items():
                w = whole(shape, f"http://127.0.0.1:{port}")
                bare, pipeline = w["bare"], w["whole"]
                base = "bare receiver, forwarding"
                figs.append(
                    Figure(f"sidecar pipeline whole, CPU per span: {label}", pipeline, "us", "-", True, bare, base)
                )
                for name in PIPELINES:
                    if name != "whole":
                        part = name.removeprefix("without ")
                        figs.append(Figure(f"  of which {part}", pipeline - w[name], "us", "-", True, bare, base))
        finally:
            stop(sink)
    return figs


if __name__ == "__main__":
    print_table(figures())
