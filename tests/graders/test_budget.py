"""The budget grader (deterministic-graders spec, user story 1)."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config


def grade(options: str, t):  # type: ignore[no-untyped-def]
    return grade_run(parse_config(f"graders:\n  - type: budget\n    {options}\n"), t).results[0]


def test_pass_reports_utilisation() -> None:
    r = grade("max_tokens: 5000", run(llm(2500, 500)))
    assert r.status == "pass" and r.score == 1.0
    assert r.evidence[0].description == "used 3000/5000 tokens = 60%"


def test_tool_call_limit_fails_and_names_the_calls_past_it() -> None:
    t = run(*[x for i in range(12) for x in (llm(), tool("search", {"q": i}, "r"))])
    r = grade("max_tool_calls: 10\n    max_tokens: 100000", t)
    assert r.status == "fail"
    assert "used 12/10 tool calls = 120% (over the limit); 2 past the limit" in r.explanation
    over = next(e for e in r.evidence if "tool calls" in e.description)
    assert over.span_ids == tuple(s.span_id for s in t.tool_steps[10:])
    assert r.score == pytest.approx(0.8)


def test_input_output_llm_calls_and_duration_limits() -> None:
    t = run(llm(900, 50), llm(300, 80), duration_ms=4000)
    r = grade("max_input_tokens: 1000\n    max_output_tokens: 200\n    max_llm_calls: 1\n    max_duration: 3s", t)
    assert r.status == "fail"
    assert r.details["values"]["max_input_tokens"] == 1200
    texts = [e.description for e in r.evidence]
    assert "used 1200/1000 input tokens = 120% (over the limit)" in texts
    assert "used 130/200 output tokens = 65%" in texts
    assert any(t.startswith("used 2/1 LLM calls = 200% (over the limit)") for t in texts)
    assert any(t.startswith("used 4000/3000 ms") for t in texts)


def test_not_evaluable_without_tokens_unless_missing_fails() -> None:
    t = run(llm(None, None), tool("x", {}, "y"))
    r = grade("max_tokens: 10\n    max_tool_calls: 5", t)
    assert r.status == "error" and r.error_type == "not_evaluable"
    assert "no span of this run carries token counts" in r.explanation
    assert grade("max_tokens: 10\n    on_missing: fail", t).status == "fail"
    # A definite violation is a fail even when another limit cannot be checked.
    assert grade("max_tokens: 10\n    max_tool_calls: 0", t).status == "fail"


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ("on_missing: fail", "at least one limit"),
        ("max_tokens: -5", "greater than or equal to 0"),
        ("max_duration: soon", "is not a duration"),
        ("max_duration: 1s\n    max_duration_ms: 5", "not both"),
        ("max_tokens: .inf", "finite"),
        ("max_cost: 1", "unknown field"),
    ],
)
def test_config_errors(options: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=r"graders.yaml:[23]: graders\[0\] \(budget\)") as e:
        parse_config(f"graders:\n  - type: budget\n    {options}\n", "graders.yaml")
    assert fragment in str(e.value)
