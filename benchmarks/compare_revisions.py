"""This tree's benchmark figures against an earlier revision's, measured side by side in one run.

    python benchmarks/compare_revisions.py [--base REV] [--rounds N] [--only hot_path,grading,sidecar] [--check]

The earlier revision (``--base``, by default ``8e3d429``, the tree before the core/doors/reports
restructuring) is checked out as a git worktree in ``.bench-revisions/<sha>/`` and installed there the way its
Makefile does (``make .venv/.installed``: a ``.venv`` of its own, ``pip install -e '.[all,dev]'``, its C and
mypyc modules compiled from its sources); both are kept for the next run. The new side is this working tree
(uncommitted changes included) with its own ``.venv``, brought up to date by the same make target. Both
virtualenvs are made by the same Python.

Each figure comes from the benchmark that each tree already has, run in the tree's own interpreter with its
own ``benchmarks/`` folder: the driver below imports the script, sets its size constants (the scripts take
no options, and their full runs take minutes each) and calls the functions its ``figures()`` is made of, so
neither tree's output is parsed as text and neither script is changed. The runs alternate: old, new, old,
new, ... (``--rounds`` of each, a fresh process every time), and the table gives each side's median:

- ``hot_path`` (``bench_hot_path.py``): the per-span cost of ``GradingSpanProcessor`` as a ratio to the bare
  SDK in the same process, and the memory of a buffered step;
- ``grading`` (``bench_grading.py``): the time to grade synthetic runs of ``--grading-sizes`` steps with every
  grader of ``every_grader.yaml``, each the median of four times the samples the script takes (the script's
  check that the file has a grader of every type in the catalogue is relaxed: a type it lacks is named under
  the table, not timed);
- ``sidecar`` (``bench_sidecar.py``): ``trajgrade serve`` forwarding to rotel's blackhole under the synthetic
  load for ``--sidecar-seconds``, then the bare Python receiver: the sidecar's spans/s, the same as a ratio to
  the bare receiver's, and the sidecar's CPU per span.

A regression is new/old above 1.10 for a time (or anything lower-is-better) and below 0.90 for a
throughput. Every row says PASS or FAIL; with ``--check`` the exit status is 1 when a row fails. The default
run takes about three minutes on a 2-core machine, once the worktree is built and installed (about a minute
the first time). To drop the cache: ``git worktree remove --force .bench-revisions/<sha>``.

Only the standard library: run it with any Python 3.10+.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench-revisions"
DEFAULT_BASE = "8e3d429"
FIGURES = ("hot_path", "grading", "sidecar")
#: new/old past these is a regression: times (lower is better) may grow 10%, throughputs may drop 10%.
TIME_LIMIT = 1.10
THROUGHPUT_LIMIT = 0.90
#: Each grading time is the median of this many times the samples bench_grading.py takes.
GRADING_REPEAT_FACTOR = 4

#: Runs inside a tree's own interpreter, with that tree's ``benchmarks/`` first on ``sys.path``:
#: argv = benchmarks folder, figure, options (JSON), output file. Writes {metric: value} and what it ran.
DRIVER = textwrap.dedent(
    """
    import importlib, json, sys, tempfile
    from pathlib import Path

    bench_dir, figure, opts, out_path = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    sys.path.insert(0, bench_dir)
    import trajgrade
    from google.protobuf.internal import api_implementation

    out = {"trajgrade": trajgrade.__file__, "protobuf": api_implementation.Type(), "metrics": {}, "notes": []}
    metrics = out["metrics"]

    if figure == "hot_path":
        m = importlib.import_module("bench_hot_path")
        m.ROUNDS = opts["rounds"]
        (graded,) = [f for f in m.per_span_figures() if "GradingSpanProcessor" in f.name]
        metrics["hot_path.ratio"] = graded.value
        if hasattr(m, "memory_figure"):  # later trees measure it on many open runs, in bench_memory.py
            metrics["hot_path.memory"] = m.memory_figure().value

    elif figure == "grading":
        m = importlib.import_module("bench_grading")
        m.SIZES = tuple(opts["sizes"])
        # More samples than the script takes (15 a size): a few milliseconds each are at the mercy of the machine.
        median_time = m.median_time
        m.median_time = lambda fn, *, repeat=15, number=1: median_time(
            fn, repeat=repeat * opts["repeat_factor"], number=number
        )
        # The script refuses a config that leaves out a grader type of the catalogue; time the graders it has
        # (the same file on both sides when the trees' copies are equal) and say which types are left out.
        used = {g.spec.type for suite in m.load_config(m.CONFIG).suites for g in suite.graders}
        left_out = sorted({spec.type for spec in m.CATALOGUE} - used)
        if left_out:
            m.CATALOGUE = [spec for spec in m.CATALOGUE if spec.type in used]
            out["notes"].append(f"{Path(m.CONFIG).name} has no grader of type {', '.join(left_out)}: not timed")
        timed = [f for f in m.figures() if f.name.startswith("grade ") and "(loops)" not in f.name]
        for steps, f in zip(m.SIZES, timed, strict=True):
            metrics[f"grading.{steps}"] = f.value

    elif figure == "sidecar":
        m = importlib.import_module("bench_sidecar")
        m.SECONDS = opts["seconds"]
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            sink_port = m.free_port()
            sink = m.rotel(Path(tmp), sink_port)
            try:
                url = f"http://127.0.0.1:{sink_port}"
                for name, start in (("bare", m.bare), ("trajgrade", lambda: m.serve(url))):
                    proc, port = start()
                    try:
                        results[name] = m.load_process([proc], [port], "synthetic")
                    finally:
                        m.stop(proc)
            finally:
                m.stop(sink)
        t, b = results["trajgrade"], results["bare"]
        metrics["sidecar.spans_per_s"] = t["spans_per_s"]
        metrics["sidecar.vs_bare"] = t["spans_per_s"] / b["spans_per_s"]
        metrics["sidecar.cpu_us"] = t["cpu_us_per_span"]
        if t["refused"]:
            out["notes"].append(f"the sidecar refused {t['refused']:.0f} request(s) (429)")
    else:
        raise SystemExit(f"unknown figure {figure!r}")

    out["compiled"] = sorted(
        name for name, module in sys.modules.items()
        if name.startswith("trajgrade") and str(getattr(module, "__file__", "")).endswith(".so")
    )
    Path(out_path).write_text(json.dumps(out))
    """
)


@dataclass
class Metric:
    """One row of the table: how to label it and which way is worse."""

    label: str
    unit: str
    higher_is_better: bool = False

    @property
    def limit(self) -> str:
        return f">= {THROUGHPUT_LIMIT:.2f}" if self.higher_is_better else f"<= {TIME_LIMIT:.2f}"

    def passes(self, ratio: float) -> bool:
        return ratio >= THROUGHPUT_LIMIT if self.higher_is_better else ratio <= TIME_LIMIT


def metric(key: str) -> Metric:
    if key.startswith("grading."):
        return Metric(f"grade {int(key.split('.')[1]):,} steps, every grader", "ms")
    return {
        "hot_path.ratio": Metric("hot path: span with GradingSpanProcessor / SDK alone", "x"),
        "hot_path.memory": Metric("hot path: memory per buffered step", "B"),
        "sidecar.spans_per_s": Metric("sidecar: spans/s, synthetic load", "spans/s", higher_is_better=True),
        "sidecar.vs_bare": Metric("sidecar: spans/s / bare receiver's", "x", higher_is_better=True),
        "sidecar.cpu_us": Metric("sidecar: CPU per span", "us"),
    }[key]


@dataclass
class Side:
    """One tree and the interpreter of its virtualenv."""

    name: str
    tree: Path
    python: Path
    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: set[str] = field(default_factory=set)
    compiled: set[str] = field(default_factory=set)


def run(cmd: list[str], cwd: Path | None = None) -> str:
    """The command's output; its output and errors on stderr, and exit, when it fails."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}")
    return done.stdout.strip()


def git(*args: str) -> str:
    return run(["git", *args], cwd=ROOT)


def base_python() -> str:
    """The Python this tree's virtualenv was made from (so that both sides run the same interpreter)."""
    venv_python = ROOT / ".venv" / "bin" / "python"
    if venv_python.exists():
        return run([str(venv_python), "-c", "import sys; print(sys._base_executable)"])
    return sys.executable


def install(tree: Path, python: str) -> Path:
    """``make .venv/.installed`` in ``tree`` (what its Makefile does before every target); it does nothing when
    the install is newer than the sources it compiles."""
    log(f"installing {tree.relative_to(ROOT) if tree != ROOT else 'this tree'} (make .venv/.installed) ...")
    run(["make", "--no-print-directory", "-C", str(tree), ".venv/.installed", f"PYTHON={python}"])
    return tree / ".venv" / "bin" / "python"


def base_tree(rev: str) -> Path:
    """A worktree of ``rev`` in ``.bench-revisions/<sha>/``, made once and kept."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = CACHE / sha
    if not (tree / ".git").exists():
        log(f"adding a worktree of {rev} ({sha[:12]}) in {tree.relative_to(ROOT)} ...")
        git("worktree", "prune")
        CACHE.mkdir(exist_ok=True)
        git("worktree", "add", "--detach", str(tree), sha)
    head = run(["git", "rev-parse", "HEAD"], cwd=tree)
    if head != sha:
        raise SystemExit(f"{tree} is at {head}, not {sha}: remove it (git worktree remove --force {tree})")
    return tree


def measure(side: Side, figure: str, options: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / "out.json"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{side.python.parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [str(side.python), "-c", DRIVER, str(side.tree / "benchmarks"), figure, json.dumps(options)]
        done = subprocess.run([*cmd, str(out_path)], cwd=side.tree, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not out_path.exists():
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"{figure} failed on the {side.name} side ({side.tree})")
        out = json.loads(out_path.read_text())
    expected = side.tree / "src" / "trajgrade"
    if not Path(out["trajgrade"]).resolve().is_relative_to(expected.resolve()):
        raise SystemExit(f"the {side.name} side imported trajgrade from {out['trajgrade']}, not {expected}")
    if out["protobuf"] != "upb":
        side.notes.add(f"protobuf on its {out['protobuf']!r} backend")
    side.notes.update(out["notes"])
    side.compiled.update(out["compiled"])
    for key, value in out["metrics"].items():
        side.samples.setdefault(key, []).append(value)


def fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def table(old: Side, new: Side) -> tuple[list[dict[str, object]], bool]:
    """Print one row per figure (medians, the runs' range, new/old, limit, PASS or FAIL); return the rows."""
    rows: list[dict[str, object]] = []
    lines = [("figure", "unit", "old median", "new median", "old runs", "new runs", "new/old", "limit", "")]
    ok = True
    for key, old_samples in old.samples.items():
        if key not in new.samples:
            log(f"note: {key} is measured by the old tree only: not compared")
            continue
        m, new_samples = metric(key), new.samples[key]
        o, n = statistics.median(old_samples), statistics.median(new_samples)
        ratio, passed = n / o, m.passes(n / o)
        ok = ok and passed
        rows.append(
            {"key": key, "figure": m.label, "unit": m.unit, "old": o, "new": n, "ratio": ratio, "limit": m.limit}
            | {"pass": passed, "old_samples": old_samples, "new_samples": new_samples}
        )
        spread = [f"{fmt(min(s))}-{fmt(max(s))}" for s in (old_samples, new_samples)]
        lines.append((m.label, m.unit, fmt(o), fmt(n), *spread, f"{ratio:.3f}", m.limit, "PASS" if passed else "FAIL"))
    widths = [max(len(cell) for cell in col) for col in zip(*lines, strict=True)]
    for i, line in enumerate(lines):
        cells = zip(line, widths, strict=True)
        print("  ".join(c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(cells)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    return rows, ok


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--base", default=DEFAULT_BASE, help=f"the earlier revision (default {DEFAULT_BASE})")
    p.add_argument("--rounds", type=int, default=3, help="runs of each side for each figure (default 3)")
    p.add_argument("--only", default=",".join(FIGURES), help=f"figures to measure, of {','.join(FIGURES)}")
    p.add_argument("--hot-path-rounds", type=int, default=30, help="rounds of bench_hot_path in each run (default 30)")
    p.add_argument(
        "--grading-sizes", default="1000,10000", help="steps of the graded runs, comma-separated (default 1000,10000)"
    )
    p.add_argument(
        "--sidecar-seconds", type=float, default=5.0, help="seconds of load on each receiver in each run (default 5)"
    )
    p.add_argument("--check", action="store_true", help="exit 1 when a figure regressed past its limit")
    p.add_argument("--json", metavar="FILE", help="also write every sample and median to FILE")
    args = p.parse_args(argv)
    args.only = [f.strip() for f in args.only.split(",") if f.strip()]
    unknown = set(args.only) - set(FIGURES)
    if unknown or not args.only:
        p.error(f"--only takes some of {','.join(FIGURES)}, not {','.join(sorted(unknown)) or 'nothing'}")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.grading_sizes = [int(s.replace("_", "")) for s in args.grading_sizes.split(",") if s.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    python = base_python()
    old_tree = base_tree(args.base)
    old = Side(f"old ({args.base})", old_tree, install(old_tree, python))
    new = Side("new (this tree)", ROOT, install(ROOT, python))
    for name in ("benchmarks/every_grader.yaml", "tests/sidecar/graders.yaml"):
        if (old.tree / name).read_bytes() != (ROOT / name).read_bytes():
            log(f"note: {name} differs between the trees: each side uses its own")
    options: dict[str, dict[str, object]] = {
        "hot_path": {"rounds": args.hot_path_rounds},
        "grading": {"sizes": args.grading_sizes, "repeat_factor": GRADING_REPEAT_FACTOR},
        "sidecar": {"seconds": args.sidecar_seconds},
    }
    for figure in args.only:
        t0 = time.monotonic()
        for r in range(args.rounds):
            for side in (old, new):
                log(f"{figure}: round {r + 1}/{args.rounds}, {side.name} ...")
                measure(side, figure, options[figure])
        log(f"{figure}: {time.monotonic() - t0:.0f} s")
    print(
        f"\nnew: this tree ({git('rev-parse', '--short', 'HEAD')}"
        f"{', uncommitted changes' if git('status', '--porcelain', '--untracked-files=no') else ''})"
        f" against old: {args.base} ({old.tree.name[:12]}); medians of {args.rounds} alternating runs each\n"
    )
    rows, ok = table(old, new)
    for side in (old, new):
        compiled = ", ".join(sorted(name.rpartition(".")[2] for name in side.compiled)) or "none"
        print(f"{side.name}: {side.tree}; compiled modules imported: {compiled}")
        for note in sorted(side.notes):
            print(f"  note: {note}")
    print(
        f"\n{'no regression' if ok else 'REGRESSION'} (limits: times new/old <= {TIME_LIMIT}, throughputs >= "
        f"{THROUGHPUT_LIMIT}); {time.monotonic() - started:.0f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"base": args.base, "rounds": args.rounds, "rows": rows}, indent=2))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
