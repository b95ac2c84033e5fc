"""execution_metrics (seeds 002 and 004), latency, cost, token_usage, and completed."""

from __future__ import annotations

import textwrap

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.graders.options import DEFAULT_EXPLORATION_TOOLS
from trajgrade.core.running import run_grader
from trajgrade.core.trajectory import Trajectory


def results(yaml_text: str, t: Trajectory) -> tuple[GraderResult, ...]:
    return grade_run(parse_config(yaml_text), t).results


def one(entry: str, t: Trajectory) -> GraderResult:
    return results("graders:\n  - " + entry, t)[0]


# 8 tool calls, 2 LLM calls, 2000 tokens, $0.12, 4500 ms (the older seed's scoring example, over on cost)
def perf_run(cost: float | None = 0.06) -> Trajectory:
    names = ["search", "read", "read", "summarize", "grep", "read", "list", "write"]
    return run(
        llm(1000, 250, cost=cost),
        *[tool(n, {"q": i}, result="ok") for i, n in enumerate(names)],
        llm(500, 250, cost=cost),
        duration_ms=4500,
    )


def test_older_seed_scoring_example_all_or_nothing() -> None:
    r = one(
        "name: perf\n    type: execution_metrics\n    scoring: all_or_nothing\n    max_tool_calls: 10\n"
        "    max_duration_ms: 5000\n    max_cost_usd: 0.10\n",
        perf_run(),
    )
    assert (r.status, r.score) == ("fail", 0.0)
    assert r.details["hits"] == ["Tool calls (8) within limit (10)", "Duration (4500ms) within limit (5000ms)"]
    assert r.details["misses"] == ["Cost ($0.12) exceeds limit ($0.1)"]
    assert r.details["tool_calls"] == 8 and r.details["llm_calls"] == 2 and r.details["total_tokens"] == 2000


def test_newer_seed_proportional_default_and_verdict() -> None:
    entry = "name: efficiency\n    type: execution_metrics\n    max_tool_calls: 10\n    max_duration_ms: 5000\n"
    r = one(entry + "    max_cost_usd: 0.10\n", perf_run())
    assert r.score == pytest.approx(2 / 3) and r.status == "fail"  # below the 0.8 verdict threshold
    r = one(entry + "    max_cost_usd: 0.10\n    max_llm_calls: 5\n    max_tokens: 5000\n", perf_run())
    assert r.score == pytest.approx(4 / 5) and r.status == "pass"
    assert one(entry + "    max_cost_usd: 0.20\n", perf_run()).score == 1.0


def test_missing_data_counts_as_a_miss() -> None:
    r = one("type: execution_metrics\n    max_tokens: 5000\n    max_cost_usd: 1\n", run(llm(None, None), tool("x")))
    assert (r.status, r.score) == ("fail", 0.0)
    assert r.details["misses"][0].startswith("Tokens not available")
    assert r.details["misses"][1].startswith("Cost not available")


def test_exploration_ratio_with_the_default_and_configured_tools() -> None:
    t = perf_run()  # search, read, read, grep, read, list are read-only: 6 of 8 = 0.75
    assert "read" in DEFAULT_EXPLORATION_TOOLS and "read_file" not in DEFAULT_EXPLORATION_TOOLS
    r = one("type: execution_metrics\n    target_exploration_ratio: 0.6\n    exploration_tolerance: 0.2\n", t)
    assert r.status == "pass" and r.details["exploration_ratio"] == 0.75
    r = one("type: execution_metrics\n    target_exploration_ratio: 0.5\n    exploration_tolerance: 0.1\n", t)
    assert r.status == "fail" and "Exploration ratio (0.75) outside 0.5 ± 0.1" in r.details["misses"]
    r = one("type: execution_metrics\n    target_exploration_ratio: 0.1\n    exploration_tools: [write]\n", t)
    assert r.status == "pass"  # 1 of 8 = 0.125, default tolerance 0.2
    none = one("type: execution_metrics\n    target_exploration_ratio: 0.5\n", run(llm()))
    assert none.status == "fail" and "not available" in none.details["misses"][0]


SEED_SNIPPETS = [
    # 002: configuration
    """
    evaluators:
      - name: performance
        type: execution_metrics
        max_tool_calls: 10
        max_llm_calls: 5
        max_tokens: 5000
        max_cost_usd: 0.10
        max_duration_ms: 30000
    """,
    # 002: basic performance bounds
    """
    name: efficient-agent-eval
    version: "1.0"
    execution:
      evaluators:
        - name: performance
          type: execution_metrics
          max_tool_calls: 5
          max_duration_ms: 10000
    evalcases:
      - id: quick-lookup
        expected_outcome: Agent finds answer efficiently
        input: "What is the capital of France?"
    """,
    # 002: cost control; comprehensive metrics
    """
    execution:
      evaluators:
        - name: budget
          type: execution_metrics
          max_cost_usd: 0.05
          max_tokens: 2000
    """,
    """
    execution:
      evaluators:
        - name: full_metrics
          type: execution_metrics
          max_tool_calls: 10
          max_llm_calls: 5
          max_tokens: 10000
          max_input_tokens: 8000
          max_output_tokens: 2000
          max_cost_usd: 0.25
          max_duration_ms: 60000
    """,
    # 002: tiered performance, per eval case
    """
    evalcases:
      - id: simple-query
        expected_outcome: Quick response
        input: "Hello!"
        execution:
          evaluators:
            - name: fast
              type: execution_metrics
              max_duration_ms: 2000
              max_tool_calls: 0
      - id: complex-research
        expected_outcome: Thorough research
        input: "Compare Python vs JavaScript for web development"
        execution:
          evaluators:
            - name: research_bounds
              type: execution_metrics
              max_duration_ms: 60000
              max_tool_calls: 20
              max_cost_usd: 0.50
    """,
    # 002: use cases
    """
    evaluators:
      - name: loop_guard
        type: execution_metrics
        max_tool_calls: 50
        max_llm_calls: 20
      - name: edge_limits
        type: execution_metrics
        max_tokens: 500
        max_duration_ms: 1000
    """,
    # 004: comprehensive, exploration balance, single-metric evaluators
    """
    tests:
      - id: efficient-research
        criteria: Agent researches and summarizes efficiently
        input: Research the topic and provide a summary
        assert:
          - name: efficiency
            type: execution_metrics
            max_tool_calls: 15
            max_llm_calls: 5
            max_tokens: 8000
            max_cost_usd: 0.10
            max_duration_ms: 60000
    """,
    """
    assert:
      - name: exploration-balance
        type: execution_metrics
        target_exploration_ratio: 0.6
        exploration_tolerance: 0.2
    """,
    """
    assert:
      - name: speed
        type: latency
        max_ms: 5000
      - name: budget
        type: cost
        max_usd: 0.10
      - name: tokens
        type: token_usage
        max_total_tokens: 4000
    """,
]


@pytest.mark.parametrize("text", SEED_SNIPPETS)
def test_every_seed_snippet_loads_and_grades_a_run(text: str) -> None:
    config = parse_config(textwrap.dedent(text))
    graders = [g for suite in config.suites for g in suite.graders]
    assert graders
    for suite in config.suites:
        report_results = [run_grader(g, perf_run()) for g in suite.graders]
        assert all(r.status in ("pass", "fail") for r in report_results)


def test_tiered_bounds_grade_each_case_by_its_own_evaluators() -> None:
    config = parse_config(textwrap.dedent(SEED_SNIPPETS[4]))
    fast, research = config.suites
    assert [g.name for g in fast.graders] == ["fast"] and [g.name for g in research.graders] == ["research_bounds"]
    t = perf_run()  # 8 tool calls, 4.5 s, $0.12
    assert run_grader(fast.graders[0], t).score == 0.0  # over on duration and on tool calls
    assert run_grader(research.graders[0], t).status == "pass"


def test_latency_cost_token_usage_with_both_spellings() -> None:
    t = perf_run()
    assert one("type: latency\n    max_ms: 5000\n", t).status == "pass"
    assert one("type: latency\n    threshold: 4000\n", t).status == "fail"
    assert one("type: cost\n    max_usd: 0.2\n", t).status == "pass"
    r = one("type: cost\n    budget: 0.1\n", t)
    assert (r.status, r.value, r.limit) == ("fail", pytest.approx(0.12), 0.1)
    unpriced = run(llm(100, 10, model="in-house-model"), duration_ms=10)  # no cost on the span, no known price
    assert one("type: cost\n    max_usd: 1\n", unpriced).status == "fail"  # missing cost: a fail
    assert one("type: token_usage\n    max_total_tokens: 2000\n", t).status == "pass"
    assert one("type: token-usage\n    max_total: 1999\n", t).status == "fail"
    assert one("type: token_usage\n    max_input: 1500\n    max_output_tokens: 400\n", t).status == "fail"


def test_completed() -> None:
    assert one("type: completed\n", run(llm(), tool("x", {}, result="r"), llm(), output="done")).status == "pass"
    ok_without_output = one("type: completed\n", run(llm()))
    assert ok_without_output.status == "pass" and "not captured" in ok_without_output.explanation
    assert one("type: completed\n", run(llm(), failed=True)).status == "fail"
    assert one("type: completed\n", run(llm(error=True))).status == "fail"
    assert one("type: completed\n", run(tool("x", {}, result="r"))).status == "fail"  # no turn at all
    assert one("type: completed\n", run(llm(), output="  ")).status == "fail"
    # a failed tool call the agent recovered from is not a crash
    assert one("type: completed\n", run(llm(), tool("x", {}, error=True), llm())).status == "pass"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("type: execution_metrics\n    exploration_tolerance: 0.1\n", "give at least one threshold"),
        ("type: execution_metrics\n    max_tool_calls: -1\n", "greater than or equal to 0"),
        ("type: execution_metrics\n    max_cost_usd: .inf\n", "finite number"),
        ("type: execution_metrics\n    max_tool_calls: 3\n    scoring: average\n", "scoring"),
        ("type: execution_metrics\n    target_exploration_ratio: 1.5\n", "less than or equal to 1"),
        ("type: latency\n    max_ms: fast\n", "valid number"),
        ("type: cost\n", "is required"),
        ("type: token_usage\n", "give at least one of"),
        ("type: completed\n    strict: true\n", "unknown field"),
    ],
)
def test_configuration_errors(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - " + entry)
    assert message in str(e.value)
