"""Shared test set-up: fixtures live in tests/fixtures/<env>/<variant>/<scenario>.json (+ .truth.json)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
sys.path.insert(0, str(TESTS))


def compiled_modules() -> list[tuple[str, Path]]:
    """(module, source) of each module setup.py compiles with mypyc."""
    tree = ast.parse((TESTS.parent / "setup.py").read_text())
    paths: list[str] = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED"
    )
    return [(path.removeprefix("src/").removesuffix(".py").replace("/", "."), TESTS.parent / path) for path in paths]


def pytest_configure(config: pytest.Config) -> None:
    """The tests run the code Python imports: for the compiled modules, their extension, which must be built from
    the source as it is now (``make test`` rebuilds it when a source changed; a bare ``pytest`` does not)."""
    for module, source in compiled_modules():
        loaded = Path(importlib.import_module(module).__file__ or "")
        if loaded.suffix != ".so":
            raise pytest.UsageError(f"{module} runs from {loaded}, not compiled: run `make test` to build it")
        if loaded.stat().st_mtime < source.stat().st_mtime:
            raise pytest.UsageError(f"{loaded.name} is older than {source}: run `make test` to rebuild it")


def fixture_files() -> list[Path]:
    """Every fixture with a truth file beside it."""
    return sorted(p for p in FIXTURES.glob("*/*/*.json") if not p.name.endswith(".truth.json"))


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
