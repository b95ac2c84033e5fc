"""Start-up of the command line: ``trajgrade --version`` (target under 0.2 s), beside ``python -c pass``; with the
interpreted modules' bytecode written first, as installing from a wheel writes it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _common import Figure, compile_bytecode, print_table

TRAJGRADE = Path(sys.executable).with_name("trajgrade")


def _median_run(cmd: list[str], repeat: int = 11) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return sorted(times)[repeat // 2]


def figures() -> list[Figure]:
    compile_bytecode()
    version = _median_run([str(TRAJGRADE), "--version"])
    bare = _median_run([sys.executable, "-c", "pass"])
    return [
        Figure("trajgrade --version", version * 1000, "ms", "< 200 ms", version < 0.2, bare * 1000, "python -c pass")
    ]


if __name__ == "__main__":
    print_table(figures())
