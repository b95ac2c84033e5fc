"""``make fuzz`` in short: the C reader under AddressSanitizer and UBSan, mutated requests for ten seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sanitized_c_reader_survives_ten_seconds_of_mutations() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz_protowire.py"), "--seconds", "10", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "no sanitizer report" in run.stdout
    inputs = int(run.stdout.split("fuzz: ")[1].split()[0])
    assert inputs > 1000, run.stdout
