"""The command line's speed: ``trajgrade grade`` of an OTLP/JSON file, read, rebuilt and graded in a process.

It writes the synthetic run (:func:`_common.synthetic_otlp`) of one step, of 1,000 and of 100,000 steps to a
temporary directory and times ``trajgrade grade --config benchmarks/every_grader.yaml --format markdown -o OUT
FILE`` as a subprocess from the repository root (the graders file names its baseline run by a relative path).
Markdown is the report format that renders least (the run table and each failed grader's explanation, cut
short, without evidence: 2 KiB for the 1,000-step run, where JSON writes 1 MB); the report goes to a file, as in
CI. The interpreted modules' bytecode is written first (:func:`_common.compile_bytecode`), as installing trajgrade
from a wheel writes it.

Start-up is the command's own fixed cost: ``trajgrade grade`` with the same graders file on the one-step run
(the interpreter, the imports, loading and validating the graders file with its baseline run, grading and
writing a report of one step). The runs of the one-step file and of the 1,000-step file alternate, so that
other work on the machine weighs on both alike.

What the 1,000-step file costs beyond start-up is timed inside fresh processes (``_BEYOND``): each runs the
command on the one-step file (its start-up), then times the command on the one-step file again and on the
1,000-step file (its first, as in a process of its own), one right after the other; the figure is the median
over the processes of the difference. The difference of the two files' process times measures the same, but
on a machine whose speed moves from one process to the next it is the difference of two figures of 300 to 500
ms, each spread over a hundred: it is reported beside, without a target.

Targets: the 1,000-step file within 30 ms beyond start-up, the 100,000-step file under 2 s in all, in wall time.
Start-up itself is reported beside ``trajgrade --version`` (which imports nothing), without a target. The same
figures in CPU time (user and system, from the children's resource usage; of the timed commands' thread inside
the processes) follow, without targets: on a machine shared with other work they move less.
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

from _common import Figure, compile_bytecode, print_table, synthetic_otlp

ROOT = Path(__file__).resolve().parent.parent
TRAJGRADE = Path(sys.executable).with_name("trajgrade")
CONFIG = "benchmarks/every_grader.yaml"
TINY_STEPS, SMALL_STEPS, LARGE_STEPS = 1, 1_000, 100_000
SMALL_LIMIT_MS, LARGE_LIMIT_S = 30.0, 2.0
#: A process that runs the command on the one-step file (its start-up), then prints the wall and CPU seconds of
#: the command on the 1,000-step file minus those of the command on the one-step file, run one after the other
#: (the two commands' arguments, as ``_grade`` makes them, in JSON).
_BEYOND = """
import json, sys, time
from trajgrade.doors.cli import main
tiny, small = json.loads(sys.argv[1])
def timed(argv):
    wall, cpu = time.perf_counter(), time.thread_time()
    main(argv)
    return time.perf_counter() - wall, time.thread_time() - cpu
timed(tiny)
(tiny_wall, tiny_cpu), (small_wall, small_cpu) = timed(tiny), timed(small)
print(small_wall - tiny_wall, small_cpu - tiny_cpu)
"""


def _run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user and system) of ``cmd`` run from the repository root; exit 0 or 1 (a
    run failed its graders)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _medians(cmds: list[list[str]], repeat: int) -> list[tuple[float, float]]:
    """Median wall and CPU seconds of each command, the commands run in turn ``repeat`` times."""
    samples: list[list[tuple[float, float]]] = [[] for _ in cmds]
    for _ in range(repeat):
        for cmd, out in zip(cmds, samples, strict=True):
            out.append(_run(cmd))
    return [(statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for s in samples]


def _grade(path: Path, out: Path) -> list[str]:
    return [str(TRAJGRADE), "grade", "--config", CONFIG, "--format", "markdown", "-o", str(out), str(path)]


def _beyond(tiny: Path, small: Path, out: Path, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of the 1,000-step file beyond start-up, over ``repeat`` processes (``_BEYOND``)."""
    samples = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", _BEYOND, json.dumps([_grade(tiny, out)[1:], _grade(small, out)[1:]])],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        wall, cpu = done.stdout.split()
        samples.append((float(wall), float(cpu)))
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def figures() -> list[Figure]:
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        files = {n: Path(tmp) / f"run_{n}.json" for n in (TINY_STEPS, SMALL_STEPS, LARGE_STEPS)}
        for steps, path in files.items():
            path.write_text(json.dumps(synthetic_otlp(steps)))
        report = Path(tmp) / "report.md"
        for path in files.values():
            _run(_grade(path, report))  # the file system's caches warm, and genai-prices' answers kept (price_cache.py)
        (version, version_cpu), (tiny, tiny_cpu), (small, small_cpu) = _medians(
            [[str(TRAJGRADE), "--version"], _grade(files[TINY_STEPS], report), _grade(files[SMALL_STEPS], report)],
            repeat=21,
        )
        beyond_s, beyond_cpu = _beyond(files[TINY_STEPS], files[SMALL_STEPS], report, repeat=21)
        ((large, large_cpu),) = _medians([_grade(files[LARGE_STEPS], report)], repeat=9)
        sizes = {n: p.stat().st_size / 2**20 for n, p in files.items()}
    start_up = "trajgrade grade, 1 step"
    beyond = beyond_s * 1000
    return [
        Figure(
            f"trajgrade grade, {SMALL_STEPS:,} steps ({sizes[SMALL_STEPS]:.1f} MiB), beyond start-up",
            beyond,
            "ms",
            f"<= {SMALL_LIMIT_MS:.0f} ms",
            beyond <= SMALL_LIMIT_MS,
            tiny * 1000,
            start_up,
        ),
        Figure(
            "  the same as the difference of the two files' process times",
            (small - tiny) * 1000,
            "ms",
            "-",
            True,
            tiny * 1000,
            start_up,
        ),
        Figure(
            f"trajgrade grade, {LARGE_STEPS:,} steps ({sizes[LARGE_STEPS]:.0f} MiB), in all",
            large,
            "s",
            f"< {LARGE_LIMIT_S:.0f} s",
            large < LARGE_LIMIT_S,
            tiny,
            start_up,
        ),
        Figure(
            "start-up (trajgrade grade, 1 step)", tiny * 1000, "ms", "-", True, version * 1000, "trajgrade --version"
        ),
        # the same in CPU time (user and system), which other work on the machine changes less
        Figure(
            f"  CPU beyond start-up ({SMALL_STEPS:,} steps)",
            beyond_cpu * 1000,
            "ms",
            "-",
            True,
            tiny_cpu * 1000,
            start_up,
        ),
        Figure(f"  CPU in all ({LARGE_STEPS:,} steps)", large_cpu, "s", "-", True, tiny_cpu, start_up),
        Figure("  CPU of start-up", tiny_cpu * 1000, "ms", "-", True, version_cpu * 1000, "trajgrade --version"),
    ]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
