"""tool_trajectory (every mode and argument match) and composite (every aggregator, nesting, the seeds' examples)."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.trajectory import Trajectory

T = run(
    llm(),
    tool("search", {"query": "python", "limit": 5}, result="r"),
    tool("read", {"path": "a.py", "opts": {"lines": 10}}, result="r"),
    llm(),
    tool("search", {"query": "js", "limit": 5}, result="r", duration_ms=30),
    tool("summarize", {"text": "..."}, result="r"),
)


def one(entry: str, t: Trajectory = T) -> GraderResult:
    return grade_run(parse_config("graders:\n  - " + entry), t).results[0]


def test_any_order_minimums_from_the_seed() -> None:
    r = one("name: workflow\n    type: tool_trajectory\n    mode: any_order\n    minimums:\n      search: 1\n")
    assert (r.status, r.score) == ("pass", 1.0)
    r = one("type: tool_trajectory\n    mode: any_order\n    minimums: {search: 3, read: 1}\n")
    assert (r.status, r.score) == ("fail", 0.5)
    assert "search: 2 call(s), minimum 3" in r.details["misses"]


def test_in_order_consumes_a_same_name_call_whose_arguments_differ() -> None:
    ok = "type: tool_trajectory\n    mode: in_order\n    expected:\n      - {tool: search}\n      - {tool: summarize}\n"
    assert one(ok).status == "pass"
    r = one(
        "type: tool_trajectory\n    mode: in_order\n    expected:\n"
        "      - {tool: search, args: {query: rust, limit: 5}}\n      - {tool: search, args: {query: js, limit: 5}}\n"
    )
    assert (r.value, r.limit) == (1, 2)  # the first search is used up by the mismatch; the second matches
    backwards = (
        "type: tool_trajectory\n    mode: in_order\n    expected:\n      - {tool: summarize}\n      - {tool: read}\n"
    )
    assert one(backwards).status == "fail"


def test_exact_superset_subset() -> None:
    exact = "type: tool_trajectory\n    mode: exact\n    args_match: ignore\n    expected:\n"
    names = ["search", "read", "search", "summarize"]
    assert one(exact + "".join(f"      - {{tool: {n}}}\n" for n in names)).status == "pass"
    r = one(exact + "".join(f"      - {{tool: {n}}}\n" for n in names[:3]))
    assert r.status == "fail" and "4 tool call(s), expected exactly 3" in r.details["misses"]
    sup = "type: tool_trajectory\n    mode: superset\n    expected:\n      - {tool: read}\n      - {tool: search}\n"
    assert one(sup).status == "pass"
    assert one(sup + "      - {tool: search}\n      - {tool: search}\n").score == pytest.approx(3 / 4)
    sub = "type: tool_trajectory\n    mode: subset\n    expected:\n      - {tool: search}\n      - {tool: read}\n"
    r = one(sub)
    assert r.score == pytest.approx(3 / 4) and r.status == "fail"
    assert one(sub + "      - {tool: summarize}\n").status == "pass"


def test_argument_matching_modes() -> None:
    base = "type: tool_trajectory\n    mode: superset\n    expected:\n      - tool: read\n"
    assert one(base + "        args: {path: a.py, opts: {lines: 10}}\n").status == "pass"  # exact (default)
    assert one(base + "        args: {path: a.py}\n").status == "fail"
    assert one(base + "        args: {path: a.py}\n        args_match: superset\n").status == "pass"
    assert one(base + "        args: {path: a.py, opts: {lines: 10}, x: 1}\n        args_match: subset\n").passed
    assert one(base + "        args: {path: b.py}\n        args_match: ignore\n").passed
    assert one(base + "        args: {path: z, opts: {lines: 10}}\n        args_match: [opts.lines]\n").passed
    assert one(base + "        args: {path: z, opts: {lines: 11}}\n        args_match: [opts.lines]\n").status == "fail"
    assert one(base + "        args: any\n").passed


def test_latency_assertions_and_not_evaluable() -> None:
    r = one("type: tool_trajectory\n    mode: superset\n    expected:\n      - {tool: summarize, max_duration_ms: 5}\n")
    assert (r.value, r.limit) == (2, 2)
    slow = "type: tool_trajectory\n    mode: in_order\n    expected:\n"
    r = one(slow + "      - {tool: search, args: any}\n      - {tool: search, args: any, max_duration_ms: 10}\n")
    assert r.score == pytest.approx(2 / 3)
    blind = run(llm(), tool("search"))
    needs = "type: tool_trajectory\n    mode: superset\n    expected:\n      - {tool: search, args: {q: 1}}\n"
    assert one(needs, blind).error_type == "not_evaluable"
    assert one("type: tool_trajectory\n    mode: any_order\n    minimums: {search: 1}\n", blind).passed


CHILDREN = (
    "    evaluators:\n"
    "      - name: budget\n        type: execution_metrics\n        max_tool_calls: 10\n"
    "      - name: tokens\n        type: token_usage\n        max_total_tokens: 100\n"
    "      - name: uses-search\n        type: tool-calls\n        config: {required: [search]}\n"
)


@pytest.mark.parametrize(
    ("aggregator", "status", "score"),
    [
        ("", "fail", 2 / 3),  # weighted_average, threshold 0.8
        ("    threshold: 0.6\n", "pass", 2 / 3),
        ("    aggregator: minimum\n", "fail", 0.0),
        ("    aggregator: maximum\n", "pass", 1.0),
        ("    aggregator: {type: all_or_nothing, threshold: 0.8}\n", "fail", 0.0),
        ("    aggregator: {type: safety_gate, required: [budget, uses-search]}\n    threshold: 0.6\n", "pass", 2 / 3),
        ("    aggregator: {type: safety_gate, required: [tokens]}\n", "fail", 0.0),
        ("    aggregator: {type: weighted_average, weights: {tokens: 0}}\n", "pass", 1.0),
    ],
)
def test_composite_aggregators(aggregator: str, status: str, score: float) -> None:
    r = one("name: production_ready\n    type: composite\n" + CHILDREN + aggregator)  # T uses 200+ tokens
    assert (r.status, r.score) == (status, pytest.approx(score))
    assert [c["name"] for c in r.details["children"]] == ["budget", "tokens", "uses-search"]


def test_nested_composite_and_child_weights() -> None:
    r = one(
        "type: composite\n    threshold: 0.5\n    evaluators:\n"
        "      - name: inner\n        type: composite\n        weight: 3\n        aggregator: maximum\n"
        "        evaluators:\n          - {name: a, type: latency, max_ms: 1}\n          - {name: b, type: completed}\n"
        "      - name: over\n        type: token_usage\n        max_total: 1\n"
    )
    assert r.score == pytest.approx(0.75) and r.status == "pass"


def test_the_seed_composite_with_an_llm_judge_loads_and_grades_what_it_can() -> None:
    config = parse_config(
        "execution:\n  evaluators:\n    - name: production_ready\n      type: composite\n      evaluators:\n"
        "        - name: correctness\n          type: llm_judge\n          prompt: ./prompts/correct.md\n"
        "        - name: efficiency\n          type: execution_metrics\n          max_tool_calls: 10\n"
        "          max_cost_usd: 0.10\n      aggregator:\n        type: all_or_nothing\n        threshold: 0.8\n"
    )
    cheap = run(llm(100, 10, cost=0.01), tool("search", {}, result="r"))
    report = grade_run(config, cheap)
    (r,) = report.results
    assert r.status == "pass" and report.passed
    assert r.details["children"][0]["status"] == "error"  # skipped: trajgrade runs no LLM judge
    quality = parse_config(
        "execution:\n  evaluators:\n    - name: quality\n      type: llm_judge\n      prompt: ./prompts/quality.md\n"
        "      weight: 3.0\n    - name: performance\n      type: execution_metrics\n      max_duration_ms: 10000\n"
        "      weight: 1.0\n"
    )
    report = grade_run(quality, cheap)
    assert report.passed and report.results[0].error_type == "skipped"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("type: tool_trajectory\n    mode: any_order\n", "needs minimums"),
        ("type: tool_trajectory\n    mode: in_order\n", "needs expected"),
        ("type: tool_trajectory\n    mode: exact\n    expected: []\n    minimums: {a: 1}\n", "minimums is for mode"),
        ("type: tool_trajectory\n    mode: sideways\n    expected: []\n", "mode"),
        ("type: tool_trajectory\n    mode: exact\n    expected: [{args: {}}]\n", "is required"),
        ("type: composite\n", "a composite needs a list of graders"),
        ("type: composite\n    evaluators: [{type: nope}]\n", "unknown grader type 'nope'"),
        ("type: composite\n    evaluators: [{type: completed}]\n    aggregator: median\n", "aggregator"),
        (
            "type: composite\n    evaluators: [{type: completed}]\n    aggregator: {type: safety_gate}\n",
            "needs required",
        ),
        ("type: composite\n    evaluators: [{type: completed}]\n    aggregator: {weights: {x: 1}}\n", "no child named"),
    ],
)
def test_configuration_errors(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - " + entry)
    assert message in str(e.value)
