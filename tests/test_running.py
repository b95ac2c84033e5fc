"""Running graders and aggregating their results: errors and timeouts as results, the run's verdict and score,
suites chosen by match, and composites run as the suite runs its graders."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from factories import llm, run, tool

from trajgrade.core import running
from trajgrade.core.config import Config, Grader, Match, Scoring, Suite
from trajgrade.core.graders import composite as composite_module
from trajgrade.core.graders.base import Evidence, GraderConfig, GraderResult, GraderSpec, Status
from trajgrade.core.graders.catalogue import lookup
from trajgrade.core.graders.options import CompositeConfig
from trajgrade.core.patterns import PatternTimeout
from trajgrade.core.running import aggregate, grade_run, run_grader
from trajgrade.core.trajectory import Trajectory

T = run(llm(), tool("search", {"q": "x"}, result="ok"), llm())


def custom(name: str, grade: Callable[[Trajectory], GraderResult], weight: float = 1.0) -> Grader:
    """A grader of a type made for the test, graded by ``grade``."""
    spec = GraderSpec("custom", GraderConfig, lambda t, _c, _n: grade(t), "a grader made for a test")
    return Grader(name=name, type="custom", weight=weight, spec=spec, options=GraderConfig())


def fixed(name: str, status: Status, score: float, weight: float = 1.0, error_type: str | None = None) -> Grader:
    result = GraderResult(name=name, type="custom", status=status, score=score, explanation="", error_type=error_type)
    return custom(name, lambda _t: result, weight)


def results(*graders: Grader) -> tuple[list[Grader], list[GraderResult]]:
    return list(graders), [run_grader(g, T) for g in graders]


def test_an_exception_in_a_grader_is_an_internal_error_result(caplog: pytest.LogCaptureFixture) -> None:
    def boom(_t: Trajectory) -> GraderResult:
        raise KeyError("missing")

    with caplog.at_level(logging.ERROR, logger="trajgrade.core.running"):
        r = run_grader(custom("broken", boom), T)
    assert (r.name, r.type, r.status, r.score, r.error_type) == ("broken", "custom", "error", 0.0, "internal")
    assert r.explanation == "internal error in the grader: KeyError: 'missing'"
    assert "grader broken (custom) failed on trace" in caplog.text


def test_a_grader_past_its_time_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def slow(_t: Trajectory) -> GraderResult:
        clock[0] += 2.5
        return GraderResult(name="slow", type="custom", status="pass", score=1.0, explanation="")

    r = run_grader(custom("slow", slow), T, timeout_s=2.0)
    assert (r.status, r.score, r.error_type) == ("error", 0.0, "timeout")
    assert r.explanation == "over its time budget: took 2.50s, over its time budget of 2s"
    assert run_grader(custom("slow", slow), T, timeout_s=3.0).status == "pass"


def test_a_regex_past_its_budget_is_a_timeout() -> None:
    def hangs(_t: Trajectory) -> GraderResult:
        raise PatternTimeout("regex '(a+)+$' took too long")

    r = run_grader(custom("regex", hangs), T)
    assert (r.status, r.error_type) == ("error", "timeout")
    assert "regex '(a+)+$' took too long" in r.explanation


def test_without_a_threshold_every_counted_result_must_pass() -> None:
    assert aggregate(*results(fixed("a", "pass", 1.0), fixed("b", "pass", 0.5)), Scoring()) == (True, 0.75)
    passed, score = aggregate(*results(fixed("a", "pass", 1.0), fixed("b", "fail", 0.9)), Scoring())
    assert (passed, score) == (False, pytest.approx(0.95))
    assert aggregate(*results(fixed("a", "pass", 1.0), fixed("b", "error", 0.0)), Scoring())[0] is False


def test_with_a_threshold_the_weighted_mean_decides() -> None:
    graders, rs = results(fixed("a", "pass", 1.0), fixed("b", "fail", 0.5))
    assert aggregate(graders, rs, Scoring(threshold=0.75)) == (True, 0.75)
    assert aggregate(graders, rs, Scoring(threshold=0.76)) == (False, 0.75)


def test_weights_from_scoring_override_the_graders_own() -> None:
    graders, rs = results(fixed("a", "pass", 1.0, weight=3.0), fixed("b", "fail", 0.0))
    assert aggregate(graders, rs, Scoring(threshold=0.5))[1] == pytest.approx(0.75)  # the graders' weights: 3 and 1
    passed, score = aggregate(graders, rs, Scoring(threshold=0.5, weights={"a": 1.0}))
    assert (passed, score) == (True, 0.5)
    assert aggregate(graders, rs, Scoring(weights={"a": 0.0, "b": 0.0})) == (False, 0.0)  # no weight at all


def test_an_error_scores_zero_whatever_score_it_carries() -> None:
    graders, rs = results(fixed("a", "pass", 1.0), fixed("b", "error", 0.8, error_type="not_evaluable"))
    assert aggregate(graders, rs, Scoring(threshold=0.5)) == (True, 0.5)


def test_skipped_results_are_left_out() -> None:
    skipped = fixed("judge", "error", 0.0, weight=5.0, error_type="skipped")
    graders, rs = results(fixed("a", "pass", 0.6), skipped)
    assert aggregate(graders, rs, Scoring()) == (True, 0.6)
    assert aggregate(graders, rs, Scoring(threshold=0.6)) == (True, 0.6)
    assert aggregate(*results(skipped), Scoring(threshold=0.9)) == (True, 1.0)  # nothing counted: nothing failed


def test_the_first_matching_suite_grades_the_run() -> None:
    config = Config(
        suites=(
            Suite(name="other", graders=(fixed("x", "fail", 0.0),), match=Match(agent_name="^other$")),
            Suite(name="agents", graders=(fixed("y", "pass", 1.0),), match=Match(agent_name="^ag")),
            Suite(name="any", graders=(fixed("z", "fail", 0.0),)),
        )
    )
    report = grade_run(config, T)
    assert (report.suite, report.passed, report.score) == ("agents", True, 1.0)
    assert [r.name for r in report.results] == ["y"]
    assert report.trajectory is T


def test_a_run_no_suite_matches_passes_with_no_results() -> None:
    config = Config(suites=(Suite(name="other", graders=(fixed("x", "fail", 0.0),), match=Match(agent_name="^no")),))
    report = grade_run(config, T)
    assert (report.suite, report.results, report.passed, report.score) == (None, (), True, 1.0)


def test_the_suite_timeout_applies_to_each_grader(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def six_seconds(_t: Trajectory) -> GraderResult:
        clock[0] += 6.0
        return GraderResult(name="slow", type="custom", status="pass", score=1.0, explanation="")

    slow = custom("slow", six_seconds)
    assert grade_run(Config(suites=(Suite(name="s", graders=(slow,)),)), T).results[0].error_type == "timeout"
    patient = Config(suites=(Suite(name="s", graders=(slow,), scoring=Scoring(timeout=30.0)),))
    assert grade_run(patient, T).results[0].status == "pass"


def composite_of(*children: Grader, **options: Any) -> Grader:
    spec = lookup("composite")
    assert spec is not None
    config = CompositeConfig(evaluators=children, **options)
    return Grader(name="all", type="composite", weight=1.0, spec=spec, options=config)


def test_composite_children_get_the_suite_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def six_seconds(_t: Trajectory) -> GraderResult:
        clock[0] += 6.0  # over the default 5 s, well within the suite's 30 s
        return GraderResult(name="slow", type="custom", status="pass", score=1.0, explanation="")

    both = composite_of(custom("slow", six_seconds), fixed("quick", "pass", 1.0))
    report = grade_run(Config(suites=(Suite(name="s", graders=(both,), scoring=Scoring(timeout=30.0)),)), T)
    (r,) = report.results
    assert [c["status"] for c in r.details["children"]] == ["pass", "pass"]
    assert (r.status, r.score, report.passed) == ("pass", 1.0, True)
    short = Config(suites=(Suite(name="s", graders=(both,), scoring=Scoring(timeout=4.0)),))
    assert grade_run(short, T).results[0].error_type == "timeout"  # the composite as a whole is bounded too


@pytest.mark.parametrize(
    "children",
    [
        (fixed("a", "pass", 1.0, weight=2.0), fixed("b", "fail", 0.25)),
        (fixed("a", "pass", 1.0), fixed("b", "error", 0.7, error_type="not_evaluable")),  # an error scores 0
        (fixed("a", "pass", 0.9), fixed("j", "error", 0.0, weight=4.0, error_type="skipped")),  # left out
    ],
)
def test_a_composite_averages_its_children_as_the_suite_aggregates_them(children: tuple[Grader, ...]) -> None:
    assert composite_module.aggregate is running.aggregate  # the suite's own function, not a copy
    suite = Config(suites=(Suite(name="s", graders=children, scoring=Scoring(threshold=0.0)),))
    r = run_grader(composite_of(*children, threshold=0.0), T)
    assert r.score == pytest.approx(grade_run(suite, T).score)


def test_a_composites_weights_override_its_childrens_as_scoring_weights_do() -> None:
    children = (fixed("a", "pass", 1.0, weight=3.0), fixed("b", "fail", 0.0))
    r = run_grader(composite_of(*children, aggregator={"type": "weighted_average", "weights": {"a": 1.0}}), T)
    suite = Config(suites=(Suite(name="s", graders=children, scoring=Scoring(weights={"a": 1.0})),))
    assert r.score == pytest.approx(grade_run(suite, T).score) == pytest.approx(0.5)


def test_a_grader_listed_again_with_the_same_options_runs_once_per_grading() -> None:
    calls: list[str] = []

    def counted(_t: Trajectory, _c: GraderConfig, name: str) -> GraderResult:
        calls.append(name)
        return GraderResult(name=name, type="custom", status="fail", score=0.5, explanation="counted")

    spec = GraderSpec("custom", GraderConfig, counted, "a grader made for a test")
    top = Grader(name="top", type="custom", weight=1.0, spec=spec, options=GraderConfig())
    inner = Grader(name="inner", type="custom", weight=1.0, spec=spec, options=GraderConfig())
    other = fixed("other", "pass", 1.0)
    config = Config(suites=(Suite(name="s", graders=(top, composite_of(inner, other))),))
    report = grade_run(config, T)
    assert calls == ["top"]  # the composite's child is the suite's grader again: its result, under its own name
    assert [c["name"] for c in report.results[1].details["children"]] == ["inner", "other"]
    assert report.results[1].evidence[0].description == "inner: counted"
    grade_run(config, T)
    assert calls == ["top", "top"]  # once per grading, not once for good
    assert [run_grader(g, T).name for g in (top, inner)] == ["top", "inner"]  # outside a grading: each runs
    assert calls == ["top", "top", "top", "inner"]


class _Probe:
    """An option value that counts how often it is compared."""

    compared: list[tuple[int, int]] = []

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        _Probe.compared.append((self.n, getattr(other, "n", -1)))
        return isinstance(other, _Probe) and other.n == self.n

    def __hash__(self) -> int:
        return hash(self.n)


class _ProbedOptions(GraderConfig):
    probe: _Probe
    arguments: dict[str, int] | None = None  # given: options that cannot be hashed


def test_graders_of_one_type_are_matched_by_their_options_hash_not_against_each_other() -> None:
    """Many graders of one type (a count per tool): each is looked up among the earlier graders with options of
    its hash, so a grading compares no options of distinct graders; equal options still run once, hashable or
    not."""
    calls: list[str] = []

    def counted(_t: Trajectory, _c: GraderConfig, name: str) -> GraderResult:
        calls.append(name)
        return GraderResult(name=name, type="probed", status="pass", score=1.0, explanation="")

    spec = GraderSpec("probed", _ProbedOptions, counted, "a grader made for a test")

    def grader(name: str, n: int, arguments: dict[str, int] | None = None) -> Grader:
        options = _ProbedOptions(probe=_Probe(n), arguments=arguments)
        return Grader(name=name, type="probed", weight=1.0, spec=spec, options=options)

    distinct = [grader(f"g{n}", n) for n in range(30)]
    again = grader("again", 7)  # equal to g7's options, another object
    unhashable = [grader("u1", 1, {"a": 1}), grader("u2", 1, {"a": 1}), grader("u3", 2, {"a": 1})]
    config = Config(suites=(Suite(name="s", graders=(*distinct, again, *unhashable)),))
    _Probe.compared.clear()
    report = grade_run(config, T)
    assert calls == [f"g{n}" for n in range(30)] + ["u1", "u3"]
    assert [r.name for r in report.results] == [f"g{n}" for n in range(30)] + ["again", "u1", "u2", "u3"]
    assert _Probe.compared == [(7, 7), (1, 1), (1, 2)]  # g7 against "again"; u1 against u2 and u3


def test_a_result_renamed_is_the_same_result_under_the_other_name() -> None:
    """A grader listed again gets the earlier result under its own name: every other field is the earlier one's."""
    evidence = (Evidence("why", ("00000000000000a1",)),)
    earlier = GraderResult(
        name="a",
        type="loop",
        status="error",
        score=0.25,
        explanation="because",
        value={"v": 1},
        limit=[2],
        evidence=evidence,
        details={"d": 3},
        error_type="timeout",
    )
    assert earlier.renamed("b") == dataclasses.replace(earlier, name="b")
    assert [f.name for f in dataclasses.fields(GraderResult)] == [
        "name",
        "type",
        "status",
        "score",
        "explanation",
        "value",
        "limit",
        "evidence",
        "details",
        "error_type",
    ]  # the order renamed passes them in
