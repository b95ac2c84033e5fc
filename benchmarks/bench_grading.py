"""Grading time of synthetic runs of 1,000, 10,000 and 100,000 steps with a config of every grader type.

Two shapes of run, each at every size:

- ``realistic``: model calls each followed by a tool call of one of five tools, arguments varied
  (``_common.synthetic_records``);
- ``loops``: the loop and similarity graders' worst case: every tool call in a block of near-identical calls with
  wide nested arguments, each compared leaf by leaf at every period, and a loop reported every few calls
  (``_common.looping_records``).

Targets: 1,000 realistic steps in at most 3 ms; time growing linearly, 100,000 steps within 110x of 1,000, on
both shapes (no grader quadratic on its worst input). The trajectory is built once per size; the figure is
grading only (every grader, suite aggregation), which is what runs on the worker thread after the rebuild. The
sizes of a shape are timed in turn, round after round, so that the growth is a ratio of figures taken side by
side. The baseline, in the same run, is one pass over the steps reading each tool call's arguments (the floor of
looking at every step at all).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import ROOT, Figure, median_time, print_table, synthetic_run

from trajgrade import load_config
from trajgrade.core.graders.catalogue import CATALOGUE
from trajgrade.core.running import grade_run

CONFIG = ROOT / "benchmarks" / "every_grader.yaml"
SIZES = (1_000, 10_000, 100_000)
ROUNDS = 11
MAX_CALLS = 20
TARGET_MS = 3.0
GROWTH = 110


def _interleaved(grade: dict[int, Callable[[], Any]]) -> dict[int, float]:
    """Median seconds of each size's grading over ``ROUNDS`` rounds, each round timing every size in turn (the
    smaller ones over as many gradings as make 100,000 steps, at most ``MAX_CALLS``), so that the machine's drift
    from one moment to the next weighs on every size alike. Each run is graded once first: a trajectory parses its
    tool arguments when a grader first reads them."""
    for fn in grade.values():
        fn()
    samples: dict[int, list[float]] = {steps: [] for steps in grade}
    for _ in range(ROUNDS):
        for steps, fn in grade.items():
            number = max(1, min(MAX_CALLS, SIZES[-1] // steps))
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[steps].append((time.perf_counter() - t0) / number)
    return {steps: statistics.median(s) for steps, s in samples.items()}


def figures() -> list[Figure]:
    config = load_config(CONFIG)
    used = {g.spec.type for suite in config.suites for g in suite.graders}
    missing = {spec.type for spec in CATALOGUE} - used
    if missing:
        raise SystemExit(f"{CONFIG.name} does not use every grader type: add {sorted(missing)}")
    out: list[Figure] = []
    for shape in ("realistic", "loops"):
        runs = {steps: synthetic_run(steps, looping=shape == "loops") for steps in SIZES}
        times = _interleaved({steps: (lambda run=run: grade_run(config, run)) for steps, run in runs.items()})
        for steps, run in runs.items():
            floor = median_time(
                lambda run=run: sum(1 for s in run.steps if s.tool is not None and s.tool.arguments),
                repeat=21 if steps <= 10_000 else 5,
            )
            limited = shape == "realistic" and steps == 1_000
            out.append(
                Figure(
                    f"grade {steps:,} steps ({shape}), {len(used)} grader types",
                    times[steps] * 1000,
                    "ms",
                    f"<= {TARGET_MS:g} ms" if limited else "-",
                    times[steps] * 1000 <= TARGET_MS if limited else True,
                    floor * 1000,
                    "one pass over the steps",
                )
            )
        del runs
        gc.collect()
        growth = times[SIZES[-1]] / times[SIZES[0]]
        out.append(
            Figure(f"  growth ({shape}): 100,000 steps / 1,000 steps", growth, "x", f"<= {GROWTH}x", growth <= GROWTH)
        )
    return out


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
