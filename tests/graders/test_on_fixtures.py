"""Every grader family on every fixture made by the real instrumentations, with verdicts derived from the truth.

Each check sets a grader's limit from the framework's own accounting (``.truth.json``) so that the verdict is
known without reading the spans: a limit equal to the truth passes, one below it fails. The loop graders are
checked on the scenarios whose behaviour is known (``repeat_six`` loops, ``paging`` does not).
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, FRAMEWORKS, fixture_files

from trajgrade import grade_run, parse_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.readers import read_path
from trajgrade.core.trajectory import Trajectory, build_trajectories, normalize

FILES = fixture_files()


def load(path: Path) -> tuple[Trajectory, dict[str, Any]]:
    (t,) = build_trajectories(normalize(s) for s in read_path(str(path)))
    return t, json.loads(path.with_suffix(".truth.json").read_text())


def grade(entry: dict[str, Any], t: Trajectory) -> GraderResult:
    return grade_run(parse_config(json.dumps({"graders": [entry]})), t).results[0]


def ident(path: Path) -> str:
    return str(path.relative_to(FIXTURES).with_suffix(""))


@pytest.mark.parametrize("path", FILES, ids=ident)
def test_limits_from_the_truth(path: Path) -> None:
    t, truth = load(path)
    calls, llm = truth["tool_calls"], truth["llm_calls"]
    if truth.get("input_tokens") is not None:
        total = truth["input_tokens"] + truth["output_tokens"]
        # a failed model call carries no counts: the sum is then a lower bound, so within the limit is unknown
        lower_bound = t.summary.llm_calls_without_usage > 0
        assert grade({"type": "token-budget", "max": total}, t).status == ("error" if lower_bound else "pass")
        assert grade({"type": "token-budget", "max": total - 1}, t).status == "fail"
        assert grade({"type": "token_usage", "max_total_tokens": total}, t).status == "pass"
    assert grade({"type": "tool-call-count", "max": calls}, t).status == "pass"
    assert grade({"type": "turn-count", "max": llm}, t).status == "pass"
    assert grade({"type": "step-count", "max": llm + calls}, t).status == "pass"
    assert grade({"type": "step-count", "min": llm + calls + 1}, t).status == "fail"
    assert grade({"type": "error-count", "max": 1000}, t).status == "pass"
    assert grade({"type": "wall-time", "max": "1h"}, t).status == "pass"
    assert grade({"type": "latency", "max_ms": 0}, t).status == "fail"
    assert grade({"type": "budget", "max_tool_calls": calls, "max_llm_calls": llm}, t).status == "pass"
    metrics = {"type": "execution_metrics", "max_tool_calls": calls, "max_llm_calls": llm}
    assert grade(metrics, t).status == "pass"
    if calls:
        assert grade({"type": "tool-call-count", "max": calls - 1}, t).status == "fail"
        strict = {**metrics, "max_tool_calls": calls - 1, "scoring": "all_or_nothing"}
        assert grade(strict, t).status == "fail"
    assert grade({"type": "completed"}, t).status == ("fail" if truth["failed"] else "pass")


@pytest.mark.parametrize("path", FILES, ids=ident)
def test_tool_matchers_from_the_truth(path: Path) -> None:
    t, truth = load(path)
    names: list[str] = truth["tool_names"]
    if not names:
        assert grade({"type": "tool-calls", "disallowed": [".*"]}, t).status == "pass"
        return
    exact = [f"^{n}$" for n in dict.fromkeys(names)]
    assert grade({"type": "tool-calls", "required": exact}, t).status == "pass"
    assert grade({"type": "tool-calls", "sequence": [f"^{n}$" for n in names[:12]]}, t).status == "pass"
    assert grade({"type": "tool-calls", "disallowed": [exact[0]]}, t).status == "fail"
    assert grade({"type": "tool-calls", "required": ["^no_such_tool$"]}, t).status == "fail"
    expected = [{"tool": n} for n in names]
    trajectory = {"type": "tool_trajectory", "mode": "exact", "args_match": "ignore", "expected": expected}
    assert grade(trajectory, t).status == "pass"
    assert grade({**trajectory, "expected": [{"tool": "no_such_tool"}, *expected[1:]]}, t).status == (
        "fail" if len(expected) < 5 else "pass"  # one miss in five or more checks is still >= 0.8
    )
    assert grade({**trajectory, "expected": [{"tool": "no_such_tool"}] * len(expected)}, t).status == "fail"
    longest = max(len(list(g)) for _, g in groupby(names))
    repeat = grade({"type": "max-repeat", "max": 5, "match": "name"}, t)
    assert repeat.status == ("fail" if longest > 5 else "pass")


@pytest.mark.parametrize("path", [p for p in FILES if p.stem in ("repeat_six", "paging")], ids=ident)
def test_loop_graders_on_real_loops_and_real_paging(path: Path) -> None:
    t, _truth = load(path)
    captured = all(s.tool is not None and s.tool.arguments_captured for s in t.tool_steps)
    loops = path.stem == "repeat_six"
    if path.relative_to(FIXTURES).parts[0] in FRAMEWORKS:  # every agent framework's loop is seen with its arguments
        assert captured
    results = [
        grade({"type": "loop", "max_repeats": 3}, t),
        grade({"type": "max-repeat", "max": 3, "match": "name-args"}, t),
        grade({"type": "loop-outcome", "max_acceptable_retries": 2}, t),
    ]
    for r in results:
        if not captured:
            assert (r.status, r.error_type) == ("error", "not_evaluable"), r
        else:
            assert r.status == ("fail" if loops else "pass"), r
    if captured and loops:
        assert len(results[0].evidence[0].span_ids) >= 4


@pytest.mark.parametrize("path", [p for p in FILES if p.stem == "three_tools"], ids=ident)
def test_composite_and_schema_on_a_real_run(path: Path) -> None:
    t, truth = load(path)
    entry = {
        "type": "composite",
        "aggregator": {"type": "safety_gate", "required": ["budget"]},
        "evaluators": [
            {
                "name": "budget",
                "type": "execution_metrics",
                "max_tool_calls": truth["tool_calls"],
                "max_llm_calls": truth["llm_calls"],
            },
            {"name": "tools", "type": "tool-calls", "sequence": ["get_weather", "search", "read_file"]},
            {"name": "schema", "type": "tool-schema", "blocklist": ["delete_everything"]},
        ],
    }
    r = grade(entry, t)
    assert r.status == "pass", r.explanation
    blocked = grade({"type": "tool-schema", "blocklist": ["search"]}, t)
    assert blocked.status == "fail" and "search" in blocked.explanation
    # a framework that ends its runs with a final-answer tool (smolagents) calls it last
    assert truth["tool_names"][:3] == ["get_weather", "search", "read_file"]
