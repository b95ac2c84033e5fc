"""The metric-threshold graders (seed 000): scoring, evidence wording, metadata, config errors."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.base import linear_score


def grade(yaml_text: str, trajectory):  # type: ignore[no-untyped-def]
    return grade_run(parse_config(yaml_text), trajectory).results[0]


def test_linear_score_matches_the_seed() -> None:
    assert linear_score(50000, 50000) == 1.0
    assert linear_score(75000, 50000) == 0.5
    assert linear_score(100000, 50000) == 0.0
    assert linear_score(1, 0) == 0.0
    assert linear_score(0, 0) == 1.0


def test_token_budget_pass_and_seed_wording() -> None:
    r = grade("graders:\n  - type: token-budget\n    config:\n      max: 50000\n", run(llm(1000, 500)))
    assert (r.status, r.score, r.explanation) == ("pass", 1.0, "1500 tokens (within budget of 50000)")
    assert r.details == {"value": 1500, "max": 50000}


def test_token_budget_fail_degrades_linearly() -> None:
    r = grade("graders:\n  - type: token-budget\n    config: {max: 50000}\n", run(llm(70000, 5000)))
    assert r.status == "fail"
    assert r.score == 0.5
    assert r.explanation == "75000 tokens exceeds max of 50000"


def test_token_budget_not_evaluable_without_tokens() -> None:
    r = grade("graders:\n  - type: token-budget\n    config: {max: 10}\n", run(llm(None, None)))
    assert r.status == "error" and r.error_type == "not_evaluable"
    assert "no span of this run carries token counts" in r.explanation


def test_token_budget_partial_usage_lower_bound() -> None:
    within = run(llm(5, 5), llm(None, None))
    over = run(llm(500, 500), llm(None, None))
    cfg = "graders:\n  - type: token-budget\n    config: {max: 100}\n"
    assert grade(cfg, within).status == "error"
    assert grade(cfg, over).status == "fail"


def test_tool_call_count_with_tools_regex_and_evidence_of_calls_past_the_limit() -> None:
    t = run(llm(), tool("search", {"q": 1}), tool("read", {"p": "a"}), tool("search_web", {"q": 2}), llm())
    r = grade("graders:\n  - type: tool-call-count\n    config: {max: 1, tools: ['^search']}\n", t)
    assert (r.status, r.value) == ("fail", 2)
    assert r.evidence[0].span_ids == (t.tool_steps[2].span_id,)
    assert grade("graders:\n  - type: tool_call_count\n    config: {max: 3}\n", t).status == "pass"


def test_turn_error_wall_time_and_step_count() -> None:
    t = run(llm(), tool("x", {}, error=True), llm(error=True), duration_ms=90_000)
    assert grade("graders:\n  - type: turn-count\n    config: {max: 1}\n", t).score == 0.0
    r = grade("graders:\n  - type: error-count\n    config: {max: 0}\n", t)
    assert (r.status, r.value, r.score) == ("fail", 2, 0.0)
    r = grade("graders:\n  - type: wall-time\n    config: {max: 2m}\n", t)
    assert (r.status, r.explanation) == ("pass", "90s (within budget of 2m)")
    r = grade("graders:\n  - type: wall-time\n    config: {max: 1m}\n", t)
    assert r.status == "fail" and r.score == 0.5
    assert grade("graders:\n  - type: step-count\n    config: {max: 2}\n", t).status == "fail"
    assert grade("graders:\n  - type: step-count\n    config: {min: 4}\n", t).status == "fail"
    assert grade("graders:\n  - type: step-count\n    config: {min: 1, max: 3}\n", t).status == "pass"


@pytest.mark.parametrize(
    ("yaml_text", "fragment"),
    [
        ("graders:\n  - type: token-budget\n    config: {}\n", "graders[0] (token-budget): config.max: is required"),
        ("graders:\n  - type: token-budget\n    config: {max: -1}\n", "greater than or equal to 0"),
        ("graders:\n  - type: turn-count\n    config: {max: 1.5}\n", "valid integer"),
        ("graders:\n  - type: wall-time\n    config: {max: 30}\n", "valid string"),
        ("graders:\n  - type: wall-time\n    config: {max: '30'}\n", "is not a duration"),
        ("graders:\n  - type: tool-call-count\n    config: {max: 1, tools: ['(']}\n", "invalid regex"),
        ("graders:\n  - type: tool-call-count\n    config: {max: 1, tools: []}\n", "at least one regex"),
        ("graders:\n  - type: token-budget\n    config: {max: 1, maximum: 2}\n", "unknown field"),
        ("graders:\n  - type: step-count\n    config: {}\n", "needs max, min or both"),
        ("graders:\n  - type: token-budget\n    max: 5\n    config: {max: 1}\n", "under `config`"),
    ],
)
def test_config_errors_name_the_line_grader_and_field(yaml_text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(yaml_text, "graders.yaml")
    assert str(e.value).startswith("graders.yaml:2: graders[0] (") or str(e.value).startswith("graders.yaml:3:")
    assert fragment in str(e.value)


@pytest.mark.parametrize(
    "snippet",
    [
        "graders: - type: token-budget config: max: 50000",
        "graders: - type: tool-call-count config: max: 20",
        "graders: - type: turn-count config: max: 10",
        "graders: - type: error-count config: max: 0",
        'graders: - type: wall-time config: max: "2m"',
    ],
)
def test_seed_000_snippets_load(snippet: str) -> None:
    # The seed's snippets lost their line breaks in rendering; restore the YAML they show.
    parts = snippet.split(" ")
    text = f"graders:\n  - type: {parts[3]}\n    config:\n      max: {parts[-1]}\n"
    config = parse_config(text)
    (grader,) = config.suites[0].graders
    assert grader.type == parts[3]
    assert grade(text, run(llm(10, 10), duration_ms=1000)).status == "pass"


@pytest.mark.parametrize(
    ("entry", "limit_ms"),
    [("type: wall-time\n    config: {max: 2s}", 2000), ("type: latency\n    max_ms: 2000", 2000)],
)
def test_a_duration_checked_in_flight_breaks_where_its_rounded_value_does(entry: str, limit_ms: int) -> None:
    """The gate lets the check through from a millisecond below the limit; around the limit, the rounded duration
    decides."""
    from trajgrade.core.graders.watch import RunSoFar

    (grader,) = parse_config(f"graders:\n  - {entry}\n").suites[0].graders
    assert grader.spec.watch is not None
    gate = grader.spec.watch(grader.options, grader.name)
    assert gate is not None
    ns = limit_ms * 1_000_000
    for d in (ns - 1_000_001, ns - 1_000_000, ns - 999_999, ns - 1, ns, ns + 40_000, ns + 49_999, ns + 50_000, ns + 1):
        run = RunSoFar()
        run.start_unix_nano, run.end_unix_nano = 1, 1 + d
        rounded_ms = round(d / 1e6, 1) if "latency" in entry else round(d / 1e9, 3) * 1000
        breaks = run.past(gate.over) and gate.check(run, None, None) is not None
        assert breaks == (rounded_ms > limit_ms), d
        assert run.past(gate.over) == (d > ns - 1_000_000), d  # the check is called from a millisecond below
