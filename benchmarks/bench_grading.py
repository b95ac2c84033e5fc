"""Grading time of synthetic runs of 1,000, 10,000 and 100,000 steps with a config of every grader type.

Targets: 1,000 steps in under 10 ms; time growing linearly (100,000 steps within 150x of 1,000). The
trajectory is built once per size; the figure is grading only (every grader, suite aggregation), which is
what runs on the worker thread after the rebuild. The baseline, in the same run, is one pass over the
steps reading each tool call's arguments (the floor of looking at every step at all).
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import Figure, median_time, print_table, synthetic_run

from trajgrade import load_config
from trajgrade.core.graders.catalogue import CATALOGUE
from trajgrade.core.running import grade_run

CONFIG = Path(__file__).resolve().parent / "every_grader.yaml"
SIZES = (1_000, 10_000, 100_000)


def figures() -> list[Figure]:
    config = load_config(CONFIG)
    used = {g.spec.type for suite in config.suites for g in suite.graders}
    missing = {spec.type for spec in CATALOGUE} - used
    if missing:
        raise SystemExit(f"{CONFIG.name} does not use every grader type: add {sorted(missing)}")
    times: dict[int, float] = {}
    out: list[Figure] = []
    for steps in SIZES:
        run = synthetic_run(steps)
        repeat = 15 if steps <= 10_000 else 3
        times[steps] = median_time(lambda run=run: grade_run(config, run), repeat=repeat)
        floor = median_time(
            lambda run=run: sum(1 for s in run.steps if s.tool is not None and s.tool.arguments), repeat=repeat
        )
        target = "< 10 ms" if steps == 1_000 else "-"
        ok = times[steps] * 1000 < 10 if steps == 1_000 else True
        out.append(
            Figure(
                f"grade {steps:,} steps, {len(used)} grader types",
                times[steps] * 1000,
                "ms",
                target,
                ok,
                floor * 1000,
                "one pass over the steps",
            )
        )
    growth = times[SIZES[-1]] / times[SIZES[0]]
    out.append(Figure("growth: 100,000 steps / 1,000 steps", growth, "x", "<= 150x", growth <= 150))
    return out


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
