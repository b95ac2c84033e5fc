"""Shared parts of the observability tests: the picture script's helpers, and a failure (never a skip) when the
Debian packages they need are missing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import render_pictures  # noqa: E402

RULES = render_pictures.RULES
RULES_TEST = RULES.with_name("trajgrade-rules.test.yml")
DASHBOARD = render_pictures.DASHBOARD


def require(binary: str) -> str:
    """The binary's path; fails the test, saying how to install it, when it is missing."""
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"`{binary}` is not installed; {render_pictures.INSTALL_HINT}", pytrace=False)
    return path
