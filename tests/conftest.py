"""Shared test set-up: fixtures live in tests/fixtures/<env>/<variant>/<scenario>.json (+ .truth.json)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
sys.path.insert(0, str(TESTS))


def fixture_files() -> list[Path]:
    """Every fixture with a truth file beside it."""
    return sorted(p for p in FIXTURES.glob("*/*/*.json") if not p.name.endswith(".truth.json"))


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
