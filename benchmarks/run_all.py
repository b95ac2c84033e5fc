"""Run every benchmark in this folder and print one table: each figure, its target, and its same-run ratio.

Each ``bench_*.py`` module has ``figures() -> list[Figure]``. Exit status 1 when a figure misses its target.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Figure, print_table  # noqa: E402


def main() -> int:
    figures: list[Figure] = []
    for path in sorted(HERE.glob("bench_*.py")):
        print(f"running {path.name} ...", file=sys.stderr, flush=True)
        figures.extend(importlib.import_module(path.stem).figures())
    print_table(figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
