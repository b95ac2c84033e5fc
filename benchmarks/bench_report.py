"""The HTML report of a 1,000-step run: its size (target under 5 MB) and the time Chromium takes to load and
draw it (target under 2 s, from navigation start to the end of the load event, the page's script included).

The run is the synthetic one of ``bench_grading``, each tool call given a result of 6,000 characters (the page
keeps ``MAX_TEXT`` of each: the largest a 1,000-step page gets), graded with ``every_grader.yaml``; the baseline,
in the same run and browser, is an empty page.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from _common import Figure, print_table, synthetic_records

from trajgrade import load_config
from trajgrade.core.running import grade_run
from trajgrade.core.trajectory import build_trajectories
from trajgrade.reports.html import to_html

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

import render_pictures  # noqa: E402

STEPS = 1_000


def figures() -> list[Figure]:
    records = synthetic_records(STEPS)
    for record in records:
        if record.kind == "tool_call":
            record.tool_result = "lorem ipsum " * 500
    (run,) = build_trajectories(records)
    report = grade_run(load_config(HERE / "every_grader.yaml"), run)
    page = to_html([("synthetic", [report])])
    size_mb = len(page.encode()) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        path, empty = workdir / "report.html", workdir / "empty.html"
        path.write_text(page, encoding="utf-8")
        empty.write_text("<!DOCTYPE html><title>empty</title>", encoding="utf-8")
        loads, blanks = [], []
        with render_pictures.browser_page(workdir) as browser:
            for _ in range(5):
                blanks.append(browser.load(empty.as_uri()))
                loads.append(browser.load(path.as_uri()))
            bars = browser.evaluate("document.querySelectorAll('.bar').length")
            errors = list(browser.errors)
    if bars != len(run.steps) or errors:
        raise SystemExit(f"the report drew {bars} of {len(run.steps)} steps; console errors: {errors}")
    load_ms = sorted(loads)[len(loads) // 2]
    blank_ms = sorted(blanks)[len(blanks) // 2]
    return [
        Figure(f"HTML report of {STEPS:,} steps: size", size_mb, "MB", "< 5 MB", size_mb < 5),
        Figure(
            f"HTML report of {STEPS:,} steps: load and draw in Chromium",
            load_ms,
            "ms",
            "< 2000 ms",
            load_ms < 2000,
            blank_ms,
            "an empty page",
        ),
    ]


if __name__ == "__main__":
    print_table(figures())
