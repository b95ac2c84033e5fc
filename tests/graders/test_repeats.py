"""max-repeat and loop-outcome: consecutive repetitions by observation, name or name-args, and cycles."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from factories import llm, repeating_calls, run, tool, tool_steps
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.config import Grader
from trajgrade.core.graders.base import GraderConfig, GraderResult, GraderSpec
from trajgrade.core.graders.repeats import json_equal, longest_repetition
from trajgrade.core.graders.repetition import longest_repetitions
from trajgrade.core.running import grading_facts
from trajgrade.core.trajectory import Step, Trajectory


def grade(entry: str, t: Trajectory) -> GraderResult:
    return grade_run(parse_config("graders:\n  - " + entry), t).results[0]


def same_call(n: int, result: object = "no results") -> Trajectory:
    steps = []
    for _ in range(n):
        steps += [llm(), tool("search", {"q": "weather"}, result=result)]
    return run(*steps, llm())


def calls(*names: str) -> list[Step]:
    return list(run(*(tool(name) for name in names)).tool_steps)


def test_longest_repetition_counts_blocks() -> None:
    assert longest_repetition(calls(), "name", 3) == (0, 0, 1)
    assert longest_repetition(calls("a"), "name", 1) == (1, 0, 1)
    assert longest_repetition(calls("x", "a", "a", "a", "b"), "name", 1) == (3, 1, 1)
    assert longest_repetition(calls("a", "b", "a", "b", "a", "b", "c"), "name", 1) == (1, 0, 1)
    assert longest_repetition(calls("a", "b", "a", "b", "a", "b", "c"), "name", 2) == (3, 0, 2)


def _longest_by_period(names: list[str], max_period: int) -> tuple[int, int, int]:
    """The longest repetition found period by period, each run of equal names start to end."""
    best = (1 if names else 0, 0, 1)
    for period in range(1, max_period + 1):
        start = 0
        for i in range(period, len(names) + 1):
            if i < len(names) and names[i] == names[i - period]:
                continue
            occurrences = (i - start) // period  # the run is names[start:i]
            if occurrences > best[0]:
                best = (occurrences, start, period)
            start = i - period + 1
    return best


@settings(max_examples=300, derandomize=True)
@given(st.lists(st.sampled_from("abc"), max_size=14), st.integers(1, 4))
def test_longest_repetition_prefers_the_shorter_period_then_the_earlier_start(names: list[str], period: int) -> None:
    assert longest_repetition(calls(*names), "name", period) == _longest_by_period(names, period)


@settings(max_examples=200, derandomize=True)
@given(st.lists(st.sampled_from("abc"), max_size=14), st.integers(1, 4))
def test_one_pass_answers_every_shorter_period(names: list[str], max_period: int) -> None:
    found = longest_repetitions(calls(*names), "name", max_period)
    assert found[1:] == [_longest_by_period(names, p) for p in range(1, max_period + 1)]


def test_max_repeat_and_loop_outcome_share_one_comparison_of_the_calls() -> None:
    """In one grading, loop-outcome (period 1) reads what max-repeat (period 3) found for every period; the results
    are those each finds alone."""
    steps = []
    for args in ({"q": "a"}, {"q": "a"}, {"q": "b"}, {"q": "b"}, {"q": "b"}, {"q": "a"}, {"q": "b"}) * 2:
        steps += [llm(), tool("search", args)]
    t = run(*steps, llm())
    max_repeat = "type: max-repeat\n    max: 2\n    match: name-args\n    max_cycle_period: 3\n"
    loop_outcome = "type: loop-outcome\n    max_acceptable_retries: 1\n"
    seen: list[object] = []

    def peek(_t: Trajectory, _c: object, name: str) -> GraderResult:
        facts = grading_facts(t)
        seen.append(None if facts is None else facts.get(("repeats", None, "name-args")))
        return GraderResult(name=name, type="peek", status="pass", score=1.0, explanation="")

    config = parse_config("graders:\n  - " + max_repeat + "  - " + loop_outcome)
    peeker = Grader(
        name="peek", type="peek", weight=1.0, spec=GraderSpec("peek", GraderConfig, peek, ""), options=GraderConfig()
    )
    suite = replace(config.suites[0], graders=(*config.suites[0].graders, peeker))
    together = grade_run(replace(config, suites=(suite,)), t).results
    assert together[:2] == (grade(max_repeat, t), grade(loop_outcome, t))
    assert (together[0].value, together[1].value) == (3, 2)  # "b" three times in a row: 2 retries
    (kept,) = seen
    assert isinstance(kept, tuple) and len(kept[1]) == 4  # periods 1 .. 3 of max-repeat's pass
    assert grading_facts(t) is None  # only while its grading runs


def _json_equal_by_definition(a: object, b: object) -> bool:
    """Equal JSON values: objects by keys in any order, arrays in order, 1 equal to 1.0, true not equal to 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_json_equal_by_definition(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_json_equal_by_definition(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return False
    return a == b


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from([1.0, 0.5, float("nan")])
    | st.text("ab", max_size=2)
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, derandomize=True)
@given(_json_values, _json_values)
def test_json_equal_is_equality_of_json_values(a: object, b: object) -> None:
    assert json_equal(a, b) == _json_equal_by_definition(a, b)
    copy = json.loads(json.dumps(a))  # the same value parsed again: NaN is then another object
    assert json_equal(a, copy) == _json_equal_by_definition(a, copy)
    assert json_equal(a, a) == _json_equal_by_definition(a, a)


def test_max_repeat_pass_and_fail_on_observation() -> None:
    r = grade("type: max-repeat\n    max: 3\n", same_call(3))
    assert (r.status, r.score, r.value, r.limit) == ("pass", 1.0, 3, 3)
    assert r.explanation == "longest repetition: search 3 times in a row (match: observation, max 3)"
    r = grade("type: max-repeat\n    max: 3\n", same_call(4))
    assert (r.status, r.score, r.value) == ("fail", 0.0, 4)
    assert len(r.evidence[0].span_ids) == 4
    assert r.explanation == "repeated more than 3 times: search 4 times in a row (match: observation, max 3)"
    assert r.details == {"value": 4, "max": 3, "period": 1, "match": "observation"}


def test_the_seed_snippets_load_and_behave_as_described() -> None:
    max_repeat = (
        'graders:\n  - type: max-repeat\n    config:\n      max: 3\n      match: observation\n      tools: ["^bash$"]\n'
    )
    loop_outcome = (
        "graders:\n  - type: loop-outcome\n    config:\n      should_loop: false\n"
        '      max_acceptable_retries: 3\n      match: name-args\n      tools: ["^bash$"]\n'
    )

    def bash(n: int, other: int = 0) -> Trajectory:
        steps = [llm()]
        for _ in range(n):
            steps += [tool("bash", {"command": "npm test"}, result="1 failing"), llm()]
        steps += [tool("view", {"path": "a"}, result="x") for _ in range(other)]
        return run(*steps)

    def status(config: str, t: Trajectory) -> str:
        return grade_run(parse_config(config), t).results[0].status

    # "fail when an action repeats more than 3 times in a row"; only bash is watched
    assert [status(max_repeat, bash(n, other=9)) for n in (3, 4)] == ["pass", "fail"]
    # ">3 retries in a row = a loop (a run of N identical calls is N-1 retries)"
    assert [status(loop_outcome, bash(n, other=9)) for n in (4, 5)] == ["pass", "fail"]


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
    # deep-equal: key order is ignored, 1 equals 1.0, true is not 1, strings compare exactly
    same = run(tool("f", {"a": {"x": 1, "y": [1, 2]}, "b": 2}), tool("f", {"b": 2.0, "a": {"y": [1, 2], "x": 1}}))
    assert grade("type: max-repeat\n    max: 1\n    match: name-args\n", same).status == "fail"
    for a, b in (({"v": True}, {"v": 1}), ({"q": "Rust"}, {"q": "rust"}), ({"q": "a"}, {"q": "a "})):
        t3 = run(tool("f", a), tool("f", b))
        assert grade("type: max-repeat\n    max: 1\n    match: name-args\n", t3).status == "pass", (a, b)


def test_cycles_need_max_cycle_period() -> None:
    steps = []
    for _ in range(3):
        steps += [tool("open", {"f": "a"}, result="x"), tool("close", {"f": "a"}, result="y")]
    t = run(*steps)
    assert grade("type: max-repeat\n    max: 2\n", t).status == "pass"
    r = grade("type: max-repeat\n    max: 2\n    max_cycle_period: 2\n", t)
    assert r.status == "fail" and "[open, close] 3 times in a row" in r.explanation
    assert r.details["period"] == 2 and len(r.evidence[0].span_ids) == 6
    # the same calls as loop-outcome: 3 blocks = 2 retries
    r = grade("type: loop-outcome\n    max_acceptable_retries: 1\n    max_cycle_period: 2\n", t)
    assert (r.status, r.value) == ("fail", 2)


def test_tools_scope_and_not_evaluable() -> None:
    t = run(*[tool("search", {"q": 1}, result="r") for _ in range(4)], tool("read", {"p": 1}, result="r"))
    assert grade("type: max-repeat\n    max: 3\n    tools: ['^read$']\n", t).status == "pass"
    assert grade("type: max-repeat\n    max: 3\n    tools: ['^sea']\n", t).status == "fail"
    blind = run(tool("search"), tool("search"))
    r = grade("type: max-repeat\n    max: 1\n", blind)
    assert r.error_type == "not_evaluable" and "did not capture the results of 2 watched tool call(s)" in r.explanation
    assert grade("type: max-repeat\n    max: 1\n    match: name\n", blind).status == "fail"
    # repetitions found among captured calls decide a fail without the blind ones
    mixed = run(*[tool("search", {"q": 1}, result="r") for _ in range(3)], tool("search"))
    assert grade("type: max-repeat\n    max: 2\n", mixed).status == "fail"
    assert grade("type: max-repeat\n    max: 3\n", mixed).error_type == "not_evaluable"
    # a failed call without a captured result is observed as its error
    errors = run(*[tool("fetch", {"u": 1}, error=True, error_type="Timeout") for _ in range(3)])
    assert grade("type: max-repeat\n    max: 2\n", errors).status == "fail"


def test_loop_outcome_retries_and_should_loop() -> None:
    stuck = same_call(4)  # 3 retries
    r = grade("type: loop-outcome\n    max_acceptable_retries: 3\n", stuck)
    assert (r.status, r.value, r.limit) == ("pass", 3, 3)
    assert r.explanation.startswith("no loop (3 retries <= 3): search 4 times in a row (match: name-args)")
    r = grade("type: loop-outcome\n    max_acceptable_retries: 2\n", stuck)
    assert (r.status, r.value, r.score) == ("fail", 3, 0.0)
    assert "a loop (3 retries > 2 acceptable)" in r.explanation and len(r.evidence[0].span_ids) == 4
    once = same_call(1)
    assert grade("type: loop-outcome\n    max_acceptable_retries: 0\n", once).status == "pass"
    # should_loop: true expects the loop: it passes only past max_acceptable_retries
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 0\n", once).status == "fail"
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 2\n", stuck).status == "pass"
    assert grade("type: loop-outcome\n    should_loop: true\n    max_acceptable_retries: 3\n", stuck).status == "fail"
    # not evaluable only when the missing arguments could make a loop
    blind = run(tool("s"), tool("s"))
    assert grade("type: loop-outcome\n    max_acceptable_retries: 0\n", blind).error_type == "not_evaluable"
    assert grade("type: loop-outcome\n    max_acceptable_retries: 0\n    match: name\n", blind).status == "fail"


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
        ("type: loop-outcome\n    max_acceptable_retries: 1.5\n", "valid integer"),
        ("type: loop-outcome\n    max_acceptable_retries: 1\n    match: exact\n", "match"),
        ("type: loop-outcome\n    max_acceptable_retries: 1\n    max_cycle_period: 0\n", "greater than or equal to 1"),
        ("type: loop-outcome\n    max_acceptable_retries: 1\n    tools: ['']\n", "empty regex"),
        ("type: loop-outcome\n    max_acceptable_retries: 1\n    should_loop: maybe\n", "should_loop"),
        ("type: max-repeat\n    max: 2\n    window: 5\n", "unknown field"),
    ],
)
def test_configuration_errors(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - " + entry)
    assert message in str(e.value)


_TEXTS = (
    '{"q": "a", "n": 1}',
    '{"n": 1, "q": "a"}',  # the same value, keys in another order
    '{"q": "a", "n": 1.0}',  # 1.0 equals 1 as JSON
    '{"q": "a", "n": true}',  # true does not
    '{"q": "a", "n": NaN}',  # equal to nothing, not even a NaN parsed from the same text
    '{"q": "\\u00e9"}',
    '{"q": "\u00e9"}',  # the same string, escaped or not
    "not json",
)
_RUNS = repeating_calls(_TEXTS, _TEXTS)


@settings(max_examples=300, derandomize=True)
@given(_RUNS, st.integers(1, 4))
def test_calls_of_equal_text_repeat_as_when_each_is_compared_alone(
    calls: list[tuple[str, str, str]], max_period: int
) -> None:
    """A pass compares the calls of two texts once: what it finds is what it finds when every call's arguments and
    result are given parsed (no text kept), each pair compared on its own."""
    by_text, alone = tool_steps(calls), tool_steps(calls, parsed=True)
    for match in ("observation", "name", "name-args"):
        assert longest_repetitions(by_text, match, max_period) == longest_repetitions(alone, match, max_period)


def test_a_nan_parsed_from_equal_text_repeats_nothing() -> None:
    nan = tool_steps([("search", '{"n": NaN}', '{"r": NaN}')] * 3)
    assert longest_repetitions(nan, "name-args", 1)[1] == (1, 0, 1)
    assert longest_repetitions(nan, "observation", 1)[1] == (1, 0, 1)
    assert longest_repetitions(nan, "name", 1)[1] == (3, 0, 1)
    equal = tool_steps([("search", t, "r") for t in ('{"n": 1, "q": "a"}', '{"q": "a", "n": 1.0}')] * 2)
    assert longest_repetitions(equal, "name-args", 1)[1] == (4, 0, 1)
