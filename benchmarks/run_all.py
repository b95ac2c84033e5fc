"""Run every benchmark in this folder and print one table: each figure, its target, and its same-run ratio.

Each ``bench_*.py`` module has ``figures() -> list[Figure]``. Exit status 1 when a figure misses its target. A
benchmark that cannot run (a program it needs is missing, it fails) is a row that names why, and the others still
run: one failure does not lose the figures of the whole run.
"""

from __future__ import annotations

import importlib
import math
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Figure, print_table  # noqa: E402


def main() -> int:
    figures: list[Figure] = []
    for path in sorted(HERE.glob("bench_*.py")):
        print(f"running {path.name} ...", file=sys.stderr, flush=True)
        try:
            figures.extend(importlib.import_module(path.stem).figures())
        except Exception as e:  # the benchmark's own failure, shown in the table; SystemExit and ^C still stop
            traceback.print_exc()
            figures.append(Figure(f"{path.name} did not run: {type(e).__name__}: {e}"[:150], math.nan, "", "-", False))
    print_table(figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
