"""``max-repeat`` and ``loop-outcome``: the same action repeated back to back.

An action is a tool call; ``match`` says when two calls are the same action:

- ``observation`` (max-repeat's default): the same tool and the same result (the same thing seen again);
- ``name``: the same tool, whatever its arguments and result;
- ``name-args`` (loop-outcome's default): the same tool with deep-equal arguments.

Different tools are never the same action. Values compare as JSON does: objects by keys in any order,
``1`` equals ``1.0``, ``true`` does not equal ``1``, strings exactly (no case or space folding: that is the
``loop`` grader's similarity, not these graders' equality). ``tools`` (regexes, unanchored) limits both
graders to the matching tools; other calls and model calls between them do not break a repetition. With
``max_cycle_period`` p (1 .. 10, default 1) a block of up to p calls repeated back to back (A B A B A B) is a
repetition of that block, counted in whole blocks; the shortest block is reported.

- ``max-repeat`` fails when an action (or block) occurs more than ``max`` times in a row: with ``max: 3``,
  three identical calls pass and a fourth fails.
- ``loop-outcome``: a run of N identical calls is N - 1 retries, and more than ``max_acceptable_retries``
  retries is a loop. The grader passes when the outcome is the expected one: no loop with ``should_loop:
  false`` (the default: the agent should recognise a dead end and stop), a loop with ``should_loop: true``.

Both are pass/fail (score 1 or 0); ``value`` is the longest repetition (max-repeat) or its retries
(loop-outcome). Evidence names the repeated calls' spans.

An ``observation`` of a failed call whose result was not captured is its
error (type and message), so the same failure seen again is the same observation. When ``match`` needs
arguments or results the spans did not capture, those calls count as different from every other: if the
repetitions found without them already decide the verdict it stands, else the run is not evaluable.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, not_evaluable
from trajgrade.core.graders.options import LoopOutcomeConfig, MaxRepeatConfig, RepeatMatch
from trajgrade.core.graders.repetition import (
    json_equal,
    longest_repetition,
    longest_repetitions,
    same_call,
    unknown_count,
)
from trajgrade.core.graders.steps import calls_named, span_ids, tool_columns
from trajgrade.core.graders.watch import ON_TOOL_CALLS, Gate, Repetitions, RunSoFar
from trajgrade.core.running import grading_fact, grading_facts
from trajgrade.core.trajectory.call_texts import call_texts
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS", "json_equal", "longest_repetition"]


def _of_run(t: Trajectory, c: MaxRepeatConfig | LoopOutcomeConfig) -> tuple[int, int, list[Step], int]:
    """(occurrences, period, the repeated calls, calls whose data ``c.match`` compares was not captured) over the
    watched calls.

    The graders of both types in one grading that watch the same tools with the same ``match`` share one pass over
    the calls (``grading_facts``): the first finds the longest repetition for every period up to its own
    ``max_cycle_period``, which answers the others with a period up to that."""
    facts = grading_facts(t)
    key = ("repeats", c.tools, c.match)
    kept: tuple[list[Step], list[tuple[int, int, int]], int] | None = facts.get(key) if facts is not None else None
    if kept is None or len(kept[1]) <= c.max_cycle_period:
        calls = calls_named(t, c.tools)
        names, _ = tool_columns(t, calls)
        longest = longest_repetitions(calls, c.match, c.max_cycle_period, grading_fact(t, call_texts), names)
        kept = calls, longest, unknown_count(calls, c.match)
        if facts is not None:
            facts[key] = kept
    calls, longest, unknown = kept
    occurrences, start, period = longest[c.max_cycle_period]
    return occurrences, period, calls[start : start + occurrences * period], unknown


def _describe(occurrences: int, period: int, steps: list[Step]) -> str:
    if not steps:
        return "no tool calls"
    names = [s.tool.name for s in steps[:period] if s.tool is not None]
    what = names[0] if period == 1 else "[" + ", ".join(names) + "]"
    return f"{what} once" if occurrences == 1 else f"{what} {occurrences} times in a row"


def _missing(match: RepeatMatch, unknown: int) -> str:
    data = "results" if match == "observation" else "arguments"
    return f"match: {match}, but the spans did not capture the {data} of {unknown} watched tool call(s)"


def max_repeat(t: Trajectory, c: MaxRepeatConfig, name: str) -> GraderResult:
    return _max_repeat(name, c, *_of_run(t, c))


def _max_repeat(
    name: str, c: MaxRepeatConfig, occurrences: int, period: int, steps: list[Step], unknown: int
) -> GraderResult:
    ok = occurrences <= c.max
    text = f"{_describe(occurrences, period, steps)} (match: {c.match}, max {c.max})"
    if ok and unknown:
        return not_evaluable(name, "max-repeat", _missing(c.match, unknown), value=occurrences, limit=c.max)
    return GraderResult(
        name=name,
        type="max-repeat",
        status="pass" if ok else "fail",
        score=1.0 if ok else 0.0,
        explanation=f"longest repetition: {text}" if ok else f"repeated more than {c.max} times: {text}",
        value=occurrences,
        limit=c.max,
        evidence=(Evidence(text, span_ids(steps) if occurrences > 1 else ()),),
        details={"value": occurrences, "max": c.max, "period": period, "match": c.match},
    )


def loop_outcome(t: Trajectory, c: LoopOutcomeConfig, name: str) -> GraderResult:
    return _loop_outcome(name, c, *_of_run(t, c))


def _loop_outcome(
    name: str, c: LoopOutcomeConfig, occurrences: int, period: int, steps: list[Step], unknown: int
) -> GraderResult:
    retries = max(0, occurrences - 1)
    limit = c.max_acceptable_retries
    looped = retries > limit
    ok = looped == c.should_loop
    if unknown and not looped:  # an undecided call could only lengthen a repetition
        return not_evaluable(name, "loop-outcome", _missing(c.match, unknown), value=retries, limit=limit)
    outcome = (
        f"a loop ({retries} retries > {limit} acceptable)" if looped else f"no loop ({retries} retries <= {limit})"
    )
    expected = "a loop was expected (should_loop: true)" if c.should_loop else "the agent should stop retrying"
    text = f"{outcome}: {_describe(occurrences, period, steps)} (match: {c.match})"
    return GraderResult(
        name=name,
        type="loop-outcome",
        status="pass" if ok else "fail",
        score=1.0 if ok else 0.0,
        explanation=f"{text}; {expected}",
        value=retries,
        limit=limit,
        evidence=(Evidence(text, span_ids(steps) if retries else ()),),
        details={
            "retries": retries,
            "max_acceptable_retries": limit,
            "should_loop": c.should_loop,
            "looped": looped,
            "period": period,
            "match": c.match,
        },
    )


# --- in flight: repetitions followed call by call ------------------------------------------------------------------
def _watch_repetition(
    c: MaxRepeatConfig | LoopOutcomeConfig, most: int, verdict: Callable[[int, int, list[Step], int], GraderResult]
) -> Gate:
    """Fails on the call that makes a block occur more than ``most`` times in a row."""
    match = c.match

    def same(a: Step, b: Step) -> bool:
        return same_call(a, b, match)

    def check(run: RunSoFar, step: Step | None, repetitions: Repetitions) -> GraderResult | None:
        assert step is not None
        occurrences, period = repetitions.add(step, step)
        if occurrences <= most:
            return None
        return verdict(occurrences, period, repetitions.last(occurrences * period), 0)

    return Gate(check, start=lambda: Repetitions(c.max_cycle_period, same), on=ON_TOOL_CALLS, tools=c.tools)


def watch_max_repeat(c: MaxRepeatConfig, name: str) -> Gate:
    return _watch_repetition(c, c.max, partial(_max_repeat, name, c))


def watch_loop_outcome(c: LoopOutcomeConfig, name: str) -> Gate | None:
    if c.should_loop:
        return None  # a loop that is expected can still come
    return _watch_repetition(c, c.max_acceptable_retries + 1, partial(_loop_outcome, name, c))


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "max-repeat",
        MaxRepeatConfig,
        max_repeat,
        "no action (observation, name or name + args) repeated more than max times in a row",
        needs=("tool_results", "tool_arguments"),
        watch=watch_max_repeat,
    ),
    GraderSpec(
        "loop-outcome",
        LoopOutcomeConfig,
        loop_outcome,
        "retries of the same call within max_acceptable_retries (or beyond it, with should_loop: true)",
        needs=("tool_arguments", "tool_results"),
        watch=watch_loop_outcome,
    ),
)
