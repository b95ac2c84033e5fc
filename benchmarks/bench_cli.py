"""The command line's speed: ``trajgrade grade`` of an OTLP/JSON file, read, rebuilt and graded in a process.

It writes the synthetic run of 1,000 and of 100,000 steps (:func:`_common.synthetic_otlp`) to a temporary
directory and times ``trajgrade grade --config benchmarks/every_grader.yaml --format markdown -o OUT FILE`` as
a subprocess from the repository root (the graders file names its baseline run by a relative path), beside
``trajgrade --version`` in the same run: start-up, which imports nothing. Markdown is the report format that
renders least (the run table and each failed grader's explanation, cut short, without evidence: 2 KiB for the
1,000-step run, where JSON writes 1 MB); the report goes to a file, as in CI.

Targets: the 1,000-step file within 30 ms beyond start-up (median of grade minus median of ``--version``), the
100,000-step file under 2 s in all, in wall time. The same figures in CPU time (user and system, from the
children's resource usage) follow, without targets: on a machine shared with other work they move less. Each
figure's baseline is ``trajgrade --version``.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Figure, print_table, synthetic_otlp

ROOT = Path(__file__).resolve().parent.parent
TRAJGRADE = Path(sys.executable).with_name("trajgrade")
CONFIG = "benchmarks/every_grader.yaml"
SMALL_STEPS, LARGE_STEPS = 1_000, 100_000
SMALL_LIMIT_MS, LARGE_LIMIT_S = 30.0, 2.0


def _median_run(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user and system) of ``cmd`` run from the repository root;
    exit 0 or 1 (a run failed its graders)."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr}")
    return statistics.median(walls), statistics.median(cpus)


def _grade(path: Path, out: Path) -> list[str]:
    return [str(TRAJGRADE), "grade", "--config", CONFIG, "--format", "markdown", "-o", str(out), str(path)]


def figures() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "run_1k.json", Path(tmp) / "run_100k.json"
        small.write_text(json.dumps(synthetic_otlp(SMALL_STEPS)))
        large.write_text(json.dumps(synthetic_otlp(LARGE_STEPS)))
        report = Path(tmp) / "report.md"
        subprocess.run(_grade(small, report), cwd=ROOT, capture_output=True)  # the file system's caches warm
        version, version_cpu = _median_run([str(TRAJGRADE), "--version"], repeat=11)
        grade_small, small_cpu = _median_run(_grade(small, report), repeat=11)
        grade_large, large_cpu = _median_run(_grade(large, report), repeat=3)
        sizes = {p: p.stat().st_size / 2**20 for p in (small, large)}
    beyond = (grade_small - version) * 1000
    return [
        Figure(
            f"trajgrade grade, {SMALL_STEPS:,} steps ({sizes[small]:.1f} MiB), beyond start-up",
            beyond,
            "ms",
            f"<= {SMALL_LIMIT_MS:.0f} ms",
            beyond <= SMALL_LIMIT_MS,
            version * 1000,
            "trajgrade --version",
        ),
        Figure(
            f"trajgrade grade, {LARGE_STEPS:,} steps ({sizes[large]:.0f} MiB), in all",
            grade_large,
            "s",
            f"< {LARGE_LIMIT_S:.0f} s",
            grade_large < LARGE_LIMIT_S,
            version,
            "trajgrade --version",
        ),
        # the same in CPU time (user and system), which other work on the machine changes less
        Figure(
            f"  CPU beyond start-up ({SMALL_STEPS:,} steps)",
            (small_cpu - version_cpu) * 1000,
            "ms",
            "-",
            True,
            version_cpu * 1000,
            "trajgrade --version",
        ),
        Figure(f"  CPU in all ({LARGE_STEPS:,} steps)", large_cpu, "s", "-", True, version_cpu, "trajgrade --version"),
    ]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
