"""Every fixture made by a real instrumentation rebuilds exactly: each summary field equals the framework's truth.

A fixture is ``tests/fixtures/<env>/<variant>/<scenario>.json``; beside it ``<scenario>.truth.json`` holds what
the framework itself reported (its usage object, its message history, the fake server's log), never what the
spans say. ``tests/fixtures/<env>/generate.py`` made both; ``make fixtures`` makes them again.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, FRAMEWORKS, fixture_files

from trajgrade.core.readers import read_path
from trajgrade.core.trajectory import Trajectory, build_trajectories, normalize

SUMMARY_KEYS = ("llm_calls", "tool_calls", "tool_errors", "turns", "input_tokens", "output_tokens", "failed")
INSTRUMENTATIONS = ("pydantic_ai", "otel_openai_v2", "openinference", "openllmetry", "strands", "openai_agents")
ENVIRONMENTS = (*INSTRUMENTATIONS, *FRAMEWORKS)
#: The scenarios of ``tests/fixtures/_framework.py``.
SCENARIOS = (
    "no_tools",
    "three_tools",
    "repeat_six",
    "tool_error_retry",
    "fail_http500",
    "parallel_tools",
    "delegation",
)


#: Variants whose model spans carry the id the fake server gave each response: ``gen_ai.response.id`` (GenAI,
#: OpenLLMetry), or OpenInference's OpenAI response recorded whole as ``output.value``. The others' spans do not
#: have it (ADK's, Strands', LangChain's and smolagents' records, the Agents SDK through OpenInference).
RESPONSE_ID_VARIANTS = (
    "agent_framework/otel",
    "autogen/agentchat",
    "crewai/openinference",
    "langgraph/openllmetry",
    "openai_agents/default",
    "openinference/openai",
    "openllmetry/current",
    "openllmetry/legacy",
    "otel_openai_v2/no_content",
    "otel_openai_v2/span_only",
    "pydantic_ai/default",
    "pydantic_ai/v2",
    "pydantic_ai/v6",
)
#: Environments that run one FakeOpenAI per agent (a sub-agent's requests are counted by its own server); the
#: others send every agent's requests to one server.
SERVER_PER_AGENT = (*FRAMEWORKS, "pydantic_ai")


def load(path: Path) -> Trajectory:
    runs = build_trajectories(normalize(s) for s in read_path(str(path)))
    assert len(runs) == 1, f"{path}: {len(runs)} runs"
    return runs[0]


def ids(path: Path) -> str:
    return str(path.relative_to(FIXTURES).with_suffix(""))


def truth_of(path: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads(path.with_suffix(".truth.json").read_text())
    return truth


FILES = fixture_files()


def test_every_environment_has_fixtures() -> None:
    found = {p.relative_to(FIXTURES).parts[0] for p in FILES}
    assert set(ENVIRONMENTS) <= found, f"missing fixtures for {sorted(set(ENVIRONMENTS) - found)}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_has_every_scenario(framework: str) -> None:
    for variant in sorted(p for p in (FIXTURES / framework).iterdir() if p.is_dir()):
        missing = [s for s in SCENARIOS if not (variant / f"{s}.json").is_file()]
        assert not missing, f"{variant.relative_to(FIXTURES)} lacks {missing}"


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_fixture_rebuilds_to_the_framework_truth(path: Path) -> None:
    truth = truth_of(path)
    t = load(path)
    got = {key: getattr(t.summary, key) for key in SUMMARY_KEYS if key in truth}
    want = {key: truth[key] for key in SUMMARY_KEYS if key in truth}
    assert got == want
    if "tool_names" in truth:
        assert list(t.summary.tool_names) == truth["tool_names"]
    if truth.get("input_tokens") is not None and truth.get("output_tokens") is not None:
        assert t.summary.total_tokens == truth["input_tokens"] + truth["output_tokens"]
    if "agents" in truth:
        mine: dict[str, dict[str, int]] = defaultdict(lambda: {"llm_calls": 0, "tool_calls": 0})
        for a in t.agents:
            mine[a.name]["llm_calls"] += a.llm_calls
            mine[a.name]["tool_calls"] += a.tool_calls
        for name, counts in truth["agents"].items():
            assert {k: mine[name][k] for k in counts if k in ("llm_calls", "tool_calls")} == {
                k: v for k, v in counts.items() if k in ("llm_calls", "tool_calls")
            }, name
    assert t.summary.duration_ms > 0
    if "wall_ms" in truth:  # measured around the framework's run call: the root span lies within it
        assert t.summary.duration_ms <= truth["wall_ms"]
    steps = list(t.steps)
    assert steps == sorted(steps, key=lambda s: s.start_unix_nano)


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_fixture_columns_kept_beside_the_steps_are_the_steps_own(path: Path) -> None:
    t = load(path)
    assert t.span_ids == tuple(s.span_id for s in t.steps)
    assert t.llm_span_ids == tuple(s.span_id for s in t.steps if s.kind == "llm_call")
    assert t.tool_span_ids == tuple(s.span_id for s in t.steps if s.kind == "tool_call")
    assert t.tool_names == tuple(s.tool.name if s.tool is not None else None for s in t.tool_steps)
    assert None not in t.tool_names and len(t.tool_names) == len(t.tool_span_ids)
    assert t.failed_span_ids == tuple(s.span_id for s in t.steps if s.status == "error")
    assert t.failed_llm_span_ids == tuple(s.span_id for s in t.llm_steps if s.status == "error")


@pytest.mark.parametrize("path", [p for p in FILES if "tool_arguments" in truth_of(p)], ids=ids)
def test_fixture_tool_arguments_are_the_ones_the_tools_received(path: Path) -> None:
    truth = truth_of(path)
    t = load(path)
    got = [s.tool.arguments if s.tool is not None and s.tool.arguments_captured else None for s in t.tool_steps]
    assert got == truth["tool_arguments"]


@pytest.mark.parametrize("path", [p for p in FILES if "requested_tool_calls" in truth_of(p)], ids=ids)
def test_fixture_requested_calls_that_never_ran_are_reported(path: Path) -> None:
    """What the model asked for (the server's log) against what ran (the tools' own record)."""
    truth = truth_of(path)
    t = load(path)
    ran = Counter(truth["tool_names"])
    not_run: list[str] = []
    for call in truth["requested_tool_calls"]:
        if ran[call["name"]] > 0:
            ran[call["name"]] -= 1
        else:
            not_run.append(call["name"])
    assert list(t.summary.tool_calls_not_run) == not_run
    assert t.summary.tool_calls_not_requested == ()


def _variant(path: Path) -> str:
    return "/".join(path.relative_to(FIXTURES).parts[:2])


@pytest.mark.parametrize("path", [p for p in FILES if _variant(p) in RESPONSE_ID_VARIANTS], ids=ids)
def test_fixture_response_ids_are_the_ones_the_server_answered(path: Path) -> None:
    """The fake server answers its n-th request ``chatcmpl-<n>``, counting the failed ones, which get no response."""
    t = load(path)
    per_server: dict[str | None, list[Any]] = defaultdict(list)
    for step in t.llm_steps:
        per_server[step.agent if path.relative_to(FIXTURES).parts[0] in SERVER_PER_AGENT else None].append(step)
    assert per_server
    for steps in per_server.values():
        answered = [None if step.failed else f"chatcmpl-{n}" for n, step in enumerate(steps)]
        assert [step.response_id for step in steps] == answered
    assert all(step.response_id is None for step in t.tool_steps)


@pytest.mark.parametrize("path", [p for p in FILES if _variant(p) not in RESPONSE_ID_VARIANTS], ids=ids)
def test_fixture_without_response_ids_has_none(path: Path) -> None:
    assert [step.response_id for step in load(path).steps if step.response_id is not None] == []
