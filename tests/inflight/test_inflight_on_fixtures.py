"""In-flight checks on every fixture made by the real instrumentations, fed the spans in the order they ended.

What the checks count while a run is open must be what the framework counted (``.truth.json``) once every span is
in, and a grader that breaks in flight must fail when the whole run is graded: the final grading agrees.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, fixture_files

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.watch import ON_TOOL_CALLS, Gate
from trajgrade.core.inflight import Breach, InFlightChecks, RunTracker
from trajgrade.core.readers import read_path
from trajgrade.core.trajectory import Trajectory, build_trajectories, normalize
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.core.trajectory.records import replace_record

FILES = fixture_files()


def ident(path: Path) -> str:
    return str(path.relative_to(FIXTURES).with_suffix(""))


def load(path: Path) -> tuple[list[SpanRecord], Trajectory, dict[str, Any]]:
    records = [normalize(s) for s in read_path(str(path))]
    (t,) = build_trajectories(records)
    return records, t, json.loads(path.with_suffix(".truth.json").read_text())


def in_flight(records: list[SpanRecord], t: Trajectory, config: Any) -> tuple[RunTracker, list[Breach]]:
    """Feed a run's spans but its root, in the order they ended, as a door sees them while the run is open."""
    tracker = (config if isinstance(config, InFlightChecks) else InFlightChecks(config)).start()
    breaches: list[Breach] = []
    for r in sorted(records, key=lambda r: (r.end_unix_nano, r.start_unix_nano)):
        if r.span_id != t.root_span_id:
            breaches += tracker.add(r)
    return tracker, breaches


def config(*graders: dict[str, Any]) -> Any:
    return parse_config(json.dumps({"graders": list(graders)}))


@pytest.mark.parametrize("path", FILES, ids=ident)
def test_the_counts_in_flight_are_the_frameworks(path: Path) -> None:
    records, t, truth = load(path)
    tracker, _ = in_flight(records, t, config({"type": "turn-count", "max": 10_000}))
    run = tracker.run
    assert run.llm_calls == truth["llm_calls"]
    delegated = sum(1 for s in t.tool_steps if s.span_id in {r.span_id for r in records if r.kind == "agent"})
    assert run.tool_calls == truth["tool_calls"] - delegated  # a delegation with no tool span is known at the end
    if t.summary.usage_source == "llm_calls":
        assert (run.input_tokens, run.output_tokens) == (truth["input_tokens"], truth["output_tokens"])
    # failed LLM and tool calls are counted in flight; an agent known as one only from its children is at the end
    assert t.summary.tool_errors + sum(1 for s in t.llm_steps if s.failed) <= run.errors <= t.summary.errors


def limits(truth: dict[str, Any], t: Trajectory) -> list[dict[str, Any]]:
    """Graders at the framework's own counts (they pass) and one below (they fail)."""
    entries: list[dict[str, Any]] = []
    for below in (0, 1):
        tag = "below" if below else "at"
        calls, turns = truth["tool_calls"], truth["turns"]
        entries.append({"type": "turn-count", "name": f"turns-{tag}", "max": max(turns - below, 0)})
        entries.append({"type": "tool-call-count", "name": f"calls-{tag}", "max": max(calls - below, 0)})
        entries.append({"type": "step-count", "name": f"steps-{tag}", "max": max(calls + turns - below, 0)})
        if t.summary.usage_source == "llm_calls":
            tokens = truth["input_tokens"] + truth["output_tokens"]
            entries.append({"type": "token-budget", "name": f"tokens-{tag}", "max": max(tokens - below, 0)})
            entries.append({"type": "budget", "name": f"budget-{tag}", "max_tokens": tokens - below})
            entries.append({"type": "token_usage", "name": f"usage-{tag}", "max_total_tokens": tokens - below})
        entries.append({"type": "error-count", "name": f"errors-{tag}", "max": max(t.summary.errors - below, 0)})
    entries.append({"type": "max-repeat", "name": "repeat", "max": 3, "match": "name-args"})
    entries.append({"type": "loop-outcome", "name": "retries", "max_acceptable_retries": 2})
    entries.append({"type": "loop", "name": "loop", "max_repeats": 3})
    if truth["tool_names"]:
        entries.append({"type": "tool-calls", "name": "forbidden", "disallowed": [f"^{truth['tool_names'][-1]}$"]})
    return entries


@pytest.mark.parametrize("path", FILES, ids=ident)
def test_a_breach_in_flight_is_a_failure_at_the_end(path: Path) -> None:
    records, t, truth = load(path)
    cfg = config(*limits(truth, t))
    _, breaches = in_flight(records, t, cfg)
    final = {r.name: r for r in grade_run(cfg, t).results}
    breached = {b.result.name for b in breaches}
    for b in breaches:
        assert b.result.status == "fail"
        assert final[b.result.name].status == "fail", (b.result, final[b.result.name])
        assert b.span_id is not None and b.span_id in {r.span_id for r in records}
    assert not any(name.endswith("-at") for name in breached)  # within the framework's own counts: no breach
    counted = {"turns-below", "tokens-below", "budget-below", "usage-below"}
    if not truth.get("agents"):  # a delegation is a tool call (and a step) only the end knows
        counted |= {"calls-below", "steps-below"}
    for name in counted & set(final):
        assert (name in breached) == (final[name].status == "fail"), name
    if truth["tool_names"] and "forbidden" in final:
        assert "forbidden" in breached
    if path.stem == "repeat_six" and all(s.tool is not None and s.tool.arguments_captured for s in t.tool_steps):
        assert {"repeat", "retries", "loop"} <= breached  # a real loop is caught while the run is open


@pytest.mark.parametrize("path", FILES, ids=ident)
def test_a_gates_bounds_hide_no_breach(path: Path) -> None:
    """The checks called on every span their gate is on, bounds or not, break on the same spans."""
    records, t, truth = load(path)
    checks = InFlightChecks(config(*limits(truth, t)))
    _, gated = in_flight(records, t, checks)
    checks._gates = tuple(Gate(g.check, start=g.start, on=g.on, tools=g.tools) for g in checks._gates)
    _, ungated = in_flight(records, t, checks)
    assert [(b.result.name, b.span_id) for b in gated] == [(b.result.name, b.span_id) for b in ungated]
    assert any(g.over for g in InFlightChecks(config(*limits(truth, t)))._gates)


def test_a_gate_decides_a_tool_name_once_and_keeps_a_bounded_number_of_answers() -> None:
    gate = Gate(lambda run, step, state: None, tools=["^read_", "^search$"])
    assert gate.on == ON_TOOL_CALLS
    assert [gate.takes(n) for n in ("read_file", "search", "searches", "write")] == [True, True, False, False]
    for i in range(10_000):
        assert gate.takes(f"read_{i}") and not gate.takes(f"write_{i}")
    assert len(gate._names) <= 4096


@pytest.mark.parametrize("path", [p for p in FILES if p.stem == "repeat_six"], ids=ident)
def test_the_breach_names_the_span_past_the_limit(path: Path) -> None:
    records, t, _truth = load(path)
    cfg = config({"type": "tool-call-count", "name": "calls", "max": 3})
    _, (breach,) = in_flight(records, t, cfg)
    fourth = sorted(t.tool_steps, key=lambda s: s.end_unix_nano)[3]
    assert breach.span_id == fourth.span_id
    assert (breach.result.value, breach.result.limit) == (4, 3)
    assert breach.span_id == grade_run(cfg, t).results[0].evidence[0].span_ids[0]  # the final names it first


def test_an_open_runs_memory_does_not_grow_with_its_length() -> None:
    """10,000 more calls of a looping run leave a tracker of every in-flight grader the size it was."""
    path = next(p for p in FILES if p.stem == "repeat_six" and p.parent.name == "default")
    records, t, _ = load(path)
    tool = next(r for r in records if r.kind == "tool_call")
    llm = next(r for r in records if r.kind == "llm_call")
    every = config(
        {"type": "tool-call-count", "max": 10**9},
        {"type": "turn-count", "max": 10**9},
        {"type": "token-budget", "max": 10**12},
        {"type": "budget", "max_tokens": 10**12, "max_tool_calls": 10**9, "max_duration": "100h"},
        {"type": "error-count", "max": 10**9},
        {"type": "wall-time", "max": "100h"},
        {"type": "max-repeat", "max": 10**9},
        {"type": "loop", "max_repeats": 10**6},
        {"type": "loop-outcome", "max_acceptable_retries": 10**6, "max_cycle_period": 10},
        {"type": "tool-calls", "disallowed": ["^never$"]},
        {"type": "cost", "max_usd": 10**9},
    )
    tracker = InFlightChecks(every).start()

    def feed(start: int, n: int) -> None:
        for i in range(start, start + n):
            tracker.add(replace_record(llm, span_id=f"a{i:015x}", parent_span_id=t.root_span_id))
            tracker.add(
                replace_record(tool, span_id=f"b{i:015x}", parent_span_id=t.root_span_id, tool_arguments={"page": i})
            )

    tracemalloc.start()
    feed(0, 1_000)
    gc.collect()  # what earlier tests left for the collector is not counted either way
    before = tracemalloc.take_snapshot()
    feed(1_000, 10_000)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert tracker.run.tool_calls == 11_000
    # the bounded windows' contents change (a few KB either way); one object kept per call would be >= 560 KB
    assert grown < 64_000, f"{grown} bytes more after 10,000 more calls"


def test_enforce_is_checked_when_the_config_loads() -> None:
    assert config({"type": "tool-call-count", "max": 3, "enforce": True}).suites[0].graders[0].enforce
    with pytest.raises(ConfigError, match="enforce: must be true or false"):
        config({"type": "tool-call-count", "max": 3, "enforce": "yes"})
    with pytest.raises(ConfigError, match="completed is only known when the run ends"):
        config({"type": "completed", "enforce": True})


def test_only_a_suite_that_selects_every_run_is_checked_in_flight() -> None:
    selecting = parse_config(
        "suites:\n  - name: s\n    match: {agent_name: planner}\n    graders: [{type: turn-count, max: 1}]\n"
    )
    assert not InFlightChecks(selecting)
    assert InFlightChecks(config({"type": "turn-count", "max": 1}))
    assert not InFlightChecks(config({"type": "completed"}))
