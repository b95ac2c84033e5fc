"""The picture script renders real PNGs with headless Chromium: Prometheus's graph, and a trace in Phoenix."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from obs import ROOT, render_pictures, require

SCRIPT = ROOT / "scripts" / "render_pictures.py"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def render(tmp_path: Path, only: str) -> Path:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", only, "--out", str(tmp_path), "--settle", "5"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(result.stdout.strip().splitlines()[-1])


def test_the_prometheus_picture_is_rendered(tmp_path: Path) -> None:
    require("prometheus")
    require("chromium")
    out = render(tmp_path, "prometheus")
    assert out == tmp_path / "prometheus-grader-results.png"
    assert png_size(out) == (1400, 1000)
    assert out.stat().st_size > 30_000, "the screenshot is nearly empty"


@pytest.mark.timeout(600)
def test_the_phoenix_picture_is_rendered(tmp_path: Path) -> None:
    """Installs arize-phoenix into .phoenix-venv on first use (about a minute, 850 MB), then about 30 s."""
    require("chromium")
    render_pictures.phoenix_binary()
    out = render(tmp_path, "phoenix")
    assert out == tmp_path / "phoenix-trace.png"
    assert png_size(out) == (1600, 1000)
    assert out.stat().st_size > 30_000, "the screenshot is nearly empty"
