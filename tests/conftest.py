"""Shared test set-up: fixtures live in tests/fixtures/<env>/<variant>/<scenario>.json (+ .truth.json)."""

from __future__ import annotations

import ast
import atexit
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
sys.path.insert(0, str(TESTS))
# trajgrade's own tests see its internal errors raised (a test that checks the agent keeps running sets it to 0)
os.environ.setdefault("TRAJGRADE_RAISE_INTERNAL_ERRORS", "1")
# what trajgrade keeps between processes (genai-prices' answers) goes to a directory of the test session's own, for
# it and the processes it starts, never to the user's
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="trajgrade-tests-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)


def _setup_list(name: str) -> list[str]:
    tree = ast.parse((TESTS.parent / "setup.py").read_text())
    return next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name
    )


def pytest_configure(config: pytest.Config) -> None:
    """The tests run the code Python imports: for the modules setup.py compiles with mypyc, their extension, which
    must be built from the sources as they are now (``make test`` rebuilds it when one changed; a bare ``pytest``
    does not). A compiled module also holds the constants it took from the ``INLINED`` modules."""
    inlined = max((TESTS.parent / path).stat().st_mtime for path in _setup_list("INLINED"))
    for path in _setup_list("COMPILED"):
        module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
        loaded = Path(importlib.import_module(module).__file__ or "")
        if loaded.suffix != ".so":
            raise pytest.UsageError(f"{module} runs from {loaded}, not compiled: run `make test` to build it")
        if loaded.stat().st_mtime < max(inlined, (TESTS.parent / path).stat().st_mtime):
            raise pytest.UsageError(f"{loaded.name} is older than its sources: run `make test` to rebuild it")


#: The agent-framework environments: each has every scenario of ``tests/fixtures/_framework.py``.
FRAMEWORKS = ("langgraph", "smolagents", "llamaindex", "autogen", "agent_framework", "google_adk", "crewai")


#: What a span view gives (``spans.SpanView``) but its events: the fields tests compare view by view.
VIEW_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "parent_is_remote",
    "name",
    "kind",
    "start_unix_nano",
    "end_unix_nano",
    "status_code",
    "status_message",
    "attributes",
    "resource_attributes",
    "scope_name",
)


def fixture_files() -> list[Path]:
    """Every fixture with a truth file beside it."""
    return sorted(p for p in FIXTURES.glob("*/*/*.json") if not p.name.endswith(".truth.json"))


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
