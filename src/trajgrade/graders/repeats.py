"""``max-repeat`` and ``loop-outcome``: the same action repeated back to back.

An action is a tool call, identified by ``match``:

- ``observation`` (max-repeat's default): the tool name and its result (the same thing seen again);
- ``name``: the tool name alone;
- ``name-args`` (loop-outcome's default): the tool name and its arguments, deep-equal (parsed JSON, key order
  ignored).

Different tools are never the same action. ``tools`` (regexes, unanchored) limits both graders to matching
tools; model calls between tool calls do not break a repetition. With ``max_cycle_period`` p > 1 a block of
up to p calls that repeats back to back (A B A B A B) is a repetition of that block.

- ``max-repeat`` fails when an action (or block) occurs more than ``max`` times in a row.
- ``loop-outcome``: a run of N identical calls is N - 1 retries. With ``should_loop: false`` (the default: the
  agent should recognise a dead end and stop) it passes when the longest run has at most
  ``max_acceptable_retries`` retries. With ``should_loop: true`` (retrying is the right thing, e.g. polling
  until ready) it passes when the agent did retry, at least once and at most ``max_acceptable_retries`` times.

Both are pass/fail (score 1 or 0). Evidence names the repeated calls' spans. When ``match`` needs arguments
or results the spans did not capture, the grader is not evaluable. These compare exactly, as the seeds'
systems do; the ``loop`` grader compares argument values with a similarity threshold instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator

from trajgrade.graders.base import Evidence, GraderConfig, GraderResult, GraderSpec, not_evaluable
from trajgrade.trajectory.model import Step, Trajectory

__all__ = ["SPECS", "longest_repetition"]

Match = Literal["observation", "name", "name-args"]


class _RepeatConfig(GraderConfig):
    tools: tuple[str, ...] | None = None
    max_cycle_period: Annotated[int, Field(ge=1, le=10, strict=True)] = 1

    @field_validator("tools")
    @classmethod
    def _regexes(cls, tools: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if tools is not None and not tools:
            raise ValueError("tools must list at least one regex (omit it to check every tool)")
        for pattern in tools or ():
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"invalid regex {pattern!r}: {e}") from None
        return tools


class MaxRepeatConfig(_RepeatConfig):
    max: Annotated[int, Field(ge=1, strict=True)]
    match: Match = "observation"


class LoopOutcomeConfig(_RepeatConfig):
    should_loop: bool = False
    max_acceptable_retries: Annotated[int, Field(ge=0, strict=True)]
    match: Match = "name-args"


def _keys(calls: Sequence[Step], match: Match) -> list[object]:
    """What makes two calls the same action, compared with ``==`` (dicts compare deeply, in any key order)."""
    if match == "name":
        return [s.tool.name if s.tool else None for s in calls]
    if match == "name-args":
        return [(s.tool.name, s.tool.arguments) if s.tool else None for s in calls]
    return [(s.tool.name, s.tool.result) if s.tool else None for s in calls]


def longest_repetition(keys: Sequence[object], max_period: int) -> tuple[int, int, int]:
    """(occurrences, start index, period) of the longest back-to-back repetition of a block of keys."""
    best = (1 if keys else 0, 0, 1)
    for period in range(1, max_period + 1):
        matched = 0
        for i in range(period, len(keys)):
            if keys[i] == keys[i - period]:
                matched += 1
                occurrences = (matched + period) // period
                if occurrences > best[0]:
                    best = (occurrences, i - matched - period + 1, period)
            else:
                matched = 0
    return best


def _repetition(
    t: Trajectory, c: MaxRepeatConfig | LoopOutcomeConfig, name: str, type_: str
) -> tuple[int, int, list[Step]] | GraderResult:
    calls = [s for s in t.tool_steps if s.tool is not None]
    if c.tools:
        patterns = [re.compile(p) for p in c.tools]
        calls = [s for s in calls if s.tool is not None and any(p.search(s.tool.name) for p in patterns)]
    if c.match == "name-args" and any(s.tool is not None and not s.tool.arguments_captured for s in calls):
        return not_evaluable(name, type_, "match: name-args, but the spans did not capture tool arguments")
    if c.match == "observation" and any(s.tool is not None and not s.tool.result_captured for s in calls):
        return not_evaluable(name, type_, "match: observation, but the spans did not capture tool results")
    occurrences, start, period = longest_repetition(_keys(calls, c.match), c.max_cycle_period)
    return occurrences, period, calls[start : start + occurrences * period]


def _describe(occurrences: int, period: int, steps: list[Step]) -> str:
    names = [s.tool.name for s in steps[:period] if s.tool is not None]
    what = names[0] if period == 1 and names else "[" + ", ".join(names) + "]"
    return f"{what} {occurrences} times in a row"


def max_repeat(t: Trajectory, c: MaxRepeatConfig, name: str) -> GraderResult:
    found = _repetition(t, c, name, "max-repeat")
    if isinstance(found, GraderResult):
        return found
    occurrences, period, steps = found
    ids = tuple(s.span_id for s in steps)
    ok = occurrences <= c.max
    if not steps:
        text = "no tool calls to compare"
    else:
        text = f"{_describe(occurrences, period, steps)} (match: {c.match}); max {c.max}"
    return GraderResult(
        name=name,
        type="max-repeat",
        status="pass" if ok else "fail",
        score=1.0 if ok else 0.0,
        explanation=text if ok else f"repeated more than max: {text}",
        value=occurrences,
        limit=c.max,
        evidence=(Evidence(text, ids if not ok else ()),),
        details={"value": occurrences, "max": c.max, "period": period},
    )


def loop_outcome(t: Trajectory, c: LoopOutcomeConfig, name: str) -> GraderResult:
    found = _repetition(t, c, name, "loop-outcome")
    if isinstance(found, GraderResult):
        return found
    occurrences, period, steps = found
    retries = max(0, occurrences - 1)
    limit = c.max_acceptable_retries
    if c.should_loop:
        ok = 1 <= retries <= limit
        why = "no retry, but this task needs the agent to retry" if retries == 0 else f"{retries} retries"
    else:
        ok = retries <= limit
        why = f"{retries} retries"
    shown = _describe(occurrences, period, steps) if steps else "no tool calls"
    text = f"{why}: {shown} (match: {c.match}); acceptable retries: {limit}; should_loop: {c.should_loop}"
    return GraderResult(
        name=name,
        type="loop-outcome",
        status="pass" if ok else "fail",
        score=1.0 if ok else 0.0,
        explanation=text,
        value=retries,
        limit=limit,
        evidence=(Evidence(text, tuple(s.span_id for s in steps) if retries else ()),),
        details={"retries": retries, "max_acceptable_retries": limit, "should_loop": c.should_loop},
    )


SPECS = (
    GraderSpec("max-repeat", MaxRepeatConfig, max_repeat, "no action repeated more than max times in a row"),
    GraderSpec(
        "loop-outcome",
        LoopOutcomeConfig,
        loop_outcome,
        "retries of the same call within what is acceptable (or required, with should_loop)",
    ),
)
