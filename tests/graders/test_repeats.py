"""max-repeat and loop-outcome: consecutive repetitions by observation, name or name-args, and cycles."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.graders.base import GraderResult
from trajgrade.graders.repeats import longest_repetition
from trajgrade.trajectory import Trajectory


def grade(entry: str, t: Trajectory) -> GraderResult:
    return grade_run(parse_config("graders:\n  - " + entry), t).results[0]


def same_call(n: int, result: object = "no results") -> Trajectory:
    steps = []
    for _ in range(n):
        steps += [llm(), tool("search", {"q": "weather"}, result=result)]
    return run(*steps, llm())


def test_longest_repetition_counts_blocks() -> None:
    assert longest_repetition([], 3) == (0, 0, 1)
    assert longest_repetition(["a"], 1) == (1, 0, 1)
    assert longest_repetition(["x", "a", "a", "a", "b"], 1) == (3, 1, 1)
    assert longest_repetition(["a", "b", "a", "b", "a", "b", "c"], 1) == (1, 0, 1)
    assert longest_repetition(["a", "b", "a", "b", "a", "b", "c"], 2) == (3, 0, 2)


def test_max_repeat_pass_and_fail_on_observation() -> None:
    assert grade("type: max-repeat\n    max: 3\n", same_call(3)).status == "pass"
    r = grade("type: max-repeat\n    max: 3\n", same_call(4))
    assert (r.status, r.score, r.value) == ("fail", 0.0, 4)
    assert len(r.evidence[0].span_ids) == 4
    assert "search 4 times in a row" in r.explanation


def test_observation_differs_when_the_result_changes_but_name_does_not() -> None:
    steps = []
    for i in range(5):
        steps += [llm(), tool("poll", {"job": 1}, result={"status": f"step {i}"})]
    t = run(*steps)
    assert grade("type: max-repeat\n    max: 2\n", t).status == "pass"
    assert grade("type: max-repeat\n    max: 2\n    match: name\n", t).status == "fail"
    assert grade("type: max-repeat\n    max: 2\n    match: name-args\n", t).status == "fail"


def test_name_args_is_deep_equality_and_different_tools_are_never_the_same() -> None:
    t = run(
        tool("list_items", {"page": 1}, result="a"),
        tool("list_items", {"page": 2}, result="a"),
        tool("list_items", {"page": 3}, result="a"),
    )
    assert grade("type: max-repeat\n    max: 1\n    match: name-args\n", t).status == "pass"
    t2 = run(tool("a", {"x": 1}, result="r"), tool("b", {"x": 1}, result="r"), tool("a", {"x": 1}, result="r"))
    assert grade("type: max-repeat\n    max: 1\n    match: observation\n", t2).status == "pass"


def test_cycles_need_max_cycle_period() -> None:
    steps = []
    for _ in range(3):
        steps += [tool("open", {"f": "a"}, result="x"), tool("close", {"f": "a"}, result="y")]
    t = run(*steps)
    assert grade("type: max-repeat\n    max: 2\n", t).status == "pass"
    r = grade("type: max-repeat\n    max: 2\n    max_cycle_period: 2\n", t)
    assert r.status == "fail" and "[open, close] 3 times in a row" in r.explanation


def test_tools_scope_and_not_evaluable() -> None:
    t = run(*[tool("search", {"q": 1}, result="r") for _ in range(4)], tool("read", {"p": 1}, result="r"))
    assert grade("type: max-repeat\n    max: 3\n    tools: ['^read$']\n", t).status == "pass"
    assert grade("type: max-repeat\n    max: 3\n    tools: ['^sea']\n", t).status == "fail"
    blind = run(tool("search"), tool("search"))
    assert grade("type: max-repeat\n    max: 1\n", blind).error_type == "not_evaluable"
    assert grade("type: max-repeat\n    max: 1\n    match: name\n", blind).status == "fail"


def test_loop_outcome_retries_and_should_loop() -> None:
    stuck = same_call(4)  # 3 retries
    assert grade("type: loop-outcome\n    max_acceptable_retries: 3\n", stuck).status == "pass"
    r = grade("type: loop-outcome\n    max_acceptable_retries: 2\n", stuck)
    assert (r.status, r.value) == ("fail", 3)
    once = same_call(1)
    assert grade("type: loop-outcome\n    max_acceptable_retries: 0\n", once).status == "pass"
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 5\n", once).status == "fail"
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 5\n", stuck).status == "pass"
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 2\n", stuck).status == "fail"
    assert grade("type: loop-outcome\n    max_acceptable_retries: 0\n", run(tool("s"), tool("s"))).error_type == (
        "not_evaluable"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("type: max-repeat\n    match: name\n", "max: is required"),
        ("type: max-repeat\n    max: 0\n", "greater than or equal to 1"),
        ("type: max-repeat\n    max: 2\n    match: args\n", "match"),
        ("type: max-repeat\n    max: 2\n    max_cycle_period: 11\n", "less than or equal to 10"),
        ("type: max-repeat\n    max: 2\n    tools: ['(']\n", "invalid regex"),
        ("type: max-repeat\n    max: 2\n    tools: []\n", "at least one regex"),
        ("type: loop-outcome\n    should_loop: true\n", "max_acceptable_retries: is required"),
        ("type: loop-outcome\n    max_acceptable_retries: -1\n", "greater than or equal to 0"),
    ],
)
def test_configuration_errors(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - " + entry)
    assert message in str(e.value)
