"""``make demo`` writes the HTML report of its runs and says where."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_writes_its_html_report(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo_agent.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "TRAJGRADE_DEMO_REPORT": str(out), "COLUMNS": "200"},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "The HTML report of these runs:" in run.stdout and str(out) in run.stdout.replace("\n", "")
    page = out.read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="runs">(.*?)</script>', page, re.S)
    assert data is not None
    runs = json.loads(data.group(1).replace("<\\/", "</"))
    assert len(runs) == 3 and all(r["steps"] and r["graders"] for r in runs)
