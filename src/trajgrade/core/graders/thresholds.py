"""The metric-threshold graders: token-budget, tool-call-count, turn-count, error-count, wall-time, step-count.

Each checks one number of the run against ``max`` (a finite non-negative integer; wall-time takes a
duration string such as "30s", "2m", "1h"). Within budget the score is 1; over it the score degrades
linearly, ``max(0, 1 - (value - max) / max(max, 1))``. Result metadata is ``{value, max}``.

What counts:

- token-budget: input + output tokens over the run's LLM calls. No token counts at all: not evaluable.
  Some LLM calls without counts: the sum is a lower bound, so a sum over the limit fails and a sum within
  it is not evaluable.
- tool-call-count: tool executions, failed ones included; with ``tools`` (regexes, unanchored) only those
  whose name matches one of them.
- turn-count: model calls (one per LLM-call span, failed ones included).
- error-count: spans of the run with status ERROR (LLM calls, tool calls, agents, the root).
- wall-time: the root span's duration.
- step-count: steps of the run (LLM calls + tool calls: what ``trajgrade trajectory`` lists as steps); ``min``
  and/or ``max``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, Number, linear_score, not_evaluable
from trajgrade.core.graders.options import (
    MaxConfig,
    StepCountConfig,
    ToolCallCountConfig,
    WallTimeConfig,
    parse_duration,
)
from trajgrade.core.graders.steps import span_ids_named
from trajgrade.core.graders.watch import (
    DURATION_MS,
    ERRORS,
    LLM_CALLS,
    ON_TOOL_CALLS,
    STEPS,
    TOOL_CALLS,
    TOTAL_TOKENS,
    Gate,
    RunSoFar,
)
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]


def _threshold(
    name: str,
    type_: str,
    value: Number,
    limit: Number,
    unit: str,
    shown_limit: Any = None,
    evidence_spans: tuple[str, ...] = (),
) -> GraderResult:
    shown = shown_limit if shown_limit is not None else _fmt(limit)
    score = linear_score(value, limit)
    if value <= limit:
        text = f"{_fmt(value)}{unit} (within budget of {shown})"
    else:
        text = f"{_fmt(value)}{unit} exceeds max of {shown}"
    return GraderResult(
        name=name,
        type=type_,
        status="pass" if value <= limit else "fail",
        score=score,
        explanation=text,
        value=value,
        limit=shown_limit if shown_limit is not None else limit,
        evidence=(Evidence(text, evidence_spans),),
        details={"value": value, "max": shown_limit if shown_limit is not None else limit},
    )


def _fmt(number: Number) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:.3g}"


def token_budget(t: Trajectory, c: MaxConfig, name: str) -> GraderResult:
    s = t.summary
    if s.total_tokens is None:
        return not_evaluable(name, "token-budget", "no span of this run carries token counts", limit=c.max)
    if s.llm_calls_without_usage and s.total_tokens <= c.max:
        return not_evaluable(
            name,
            "token-budget",
            f"{s.llm_calls_without_usage} of {s.llm_calls} LLM calls carry no token counts; "
            f"the {s.total_tokens} tokens counted are a lower bound within the max of {c.max}",
            value=s.total_tokens,
            limit=c.max,
        )
    result = _threshold(name, "token-budget", s.total_tokens, c.max, " tokens")
    note = failed_requests_note(t)
    return replace(result, explanation=result.explanation + note) if note else result


def failed_requests_note(t: Trajectory) -> str:
    """What a token count includes for the run's failed model requests that reported no usage (counted as 0)."""
    n = t.summary.failed_llm_calls_without_usage
    return (
        f"; {n} failed model request(s) reported no usage and count 0 tokens, as the frameworks count them" if n else ""
    )


def tool_call_count(t: Trajectory, c: ToolCallCountConfig, name: str) -> GraderResult:
    ids = span_ids_named(t, c.tools)
    return _threshold(name, "tool-call-count", len(ids), c.max, " tool calls", evidence_spans=ids[c.max :])


def turn_count(t: Trajectory, c: MaxConfig, name: str) -> GraderResult:
    over = t.llm_span_ids[c.max :]
    return _threshold(name, "turn-count", t.summary.turns, c.max, " turns", evidence_spans=over)


def error_count(t: Trajectory, c: MaxConfig, name: str) -> GraderResult:
    return _threshold(name, "error-count", t.summary.errors, c.max, " errors", evidence_spans=t.failed_span_ids)


def wall_time(t: Trajectory, c: WallTimeConfig, name: str) -> GraderResult:
    seconds = t.summary.duration_ms / 1000
    return _threshold(
        name,
        "wall-time",
        round(seconds, 3),
        parse_duration(c.max),
        "s",
        shown_limit=c.max,
        evidence_spans=(t.root_span_id,),
    )


def step_count(t: Trajectory, c: StepCountConfig, name: str) -> GraderResult:
    n = len(t.steps)
    if c.min is not None and n < c.min:
        text = f"{n} steps is below the min of {c.min}"
        return GraderResult(
            name=name,
            type="step-count",
            status="fail",
            score=n / c.min if c.min else 0.0,
            explanation=text,
            value=n,
            limit={"min": c.min, "max": c.max},
            evidence=(Evidence(text),),
            details={"value": n, "min": c.min, "max": c.max},
        )
    if c.max is None:
        text = f"{n} steps (at least the min of {c.min})"
        return GraderResult(
            name=name,
            type="step-count",
            status="pass",
            score=1.0,
            explanation=text,
            value=n,
            limit={"min": c.min},
            evidence=(Evidence(text),),
            details={"value": n, "min": c.min},
        )
    return _threshold(name, "step-count", n, c.max, " steps", evidence_spans=t.span_ids[c.max :])


# --- in flight: each check fails on the span that takes its number past the max ------------------------------
def _evidence(run: RunSoFar) -> tuple[str, ...]:
    return (run.last_span_id,)


def watch_token_budget(c: MaxConfig, name: str) -> Gate:
    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        if not (run.usage_known and run.total_tokens > c.max):
            return None
        return _threshold(name, "token-budget", run.total_tokens, c.max, " tokens", evidence_spans=_evidence(run))

    return Gate(check, over=((TOTAL_TOKENS, c.max),))


def watch_tool_call_count(c: ToolCallCountConfig, name: str) -> Gate:
    def fail(calls: int, step: Step) -> GraderResult:
        return _threshold(name, "tool-call-count", calls, c.max, " tool calls", evidence_spans=(step.span_id,))

    if not c.tools:  # the run's own count of tool calls

        def check_all(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
            assert step is not None
            return fail(run.tool_calls, step) if run.tool_calls > c.max else None

        return Gate(check_all, on=ON_TOOL_CALLS, over=((TOOL_CALLS, c.max),))

    def check(run: RunSoFar, step: Step | None, calls: list[int]) -> GraderResult | None:
        assert step is not None
        calls[0] += 1  # the run's calls of the watched names
        return fail(calls[0], step) if calls[0] > c.max else None

    return Gate(check, start=lambda: [0], tools=c.tools)


def _count_gate(name: str, what: str, count: int, limit: int, unit: str) -> Gate:
    """The check of one of the run's counts (turns, errors, steps) against its max."""

    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        n = int(run.count(count))
        return _threshold(name, what, n, limit, unit, evidence_spans=_evidence(run)) if n > limit else None

    return Gate(check, over=((count, limit),))


def watch_turn_count(c: MaxConfig, name: str) -> Gate:
    return _count_gate(name, "turn-count", LLM_CALLS, c.max, " turns")


def watch_error_count(c: MaxConfig, name: str) -> Gate:
    return _count_gate(name, "error-count", ERRORS, c.max, " errors")


def watch_wall_time(c: WallTimeConfig, name: str) -> Gate:
    limit = parse_duration(c.max)

    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        seconds = round(run.duration_ms / 1000, 3)
        if seconds <= limit:
            return None
        return _threshold(name, "wall-time", seconds, limit, "s", shown_limit=c.max, evidence_spans=_evidence(run))

    # A millisecond below the limit: no rounding of the duration to the millisecond or finer takes it past.
    return Gate(check, over=((DURATION_MS, limit * 1000 - 1),))


def watch_step_count(c: StepCountConfig, name: str) -> Gate | None:
    if c.max is None:
        return None  # a min can still be met: nothing to check before the end
    return _count_gate(name, "step-count", STEPS, c.max, " steps")


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "token-budget",
        MaxConfig,
        token_budget,
        "total tokens (input + output) <= max",
        needs=("tokens",),
        watch=watch_token_budget,
    ),
    GraderSpec(
        "tool-call-count",
        ToolCallCountConfig,
        tool_call_count,
        "tool calls (optionally of `tools`) <= max",
        watch=watch_tool_call_count,
    ),
    GraderSpec("turn-count", MaxConfig, turn_count, "agent turns (model calls) <= max", watch=watch_turn_count),
    GraderSpec("error-count", MaxConfig, error_count, "spans with status ERROR <= max", watch=watch_error_count),
    GraderSpec(
        "wall-time",
        WallTimeConfig,
        wall_time,
        "root span duration <= max ('30s', '2m', '1h')",
        watch=watch_wall_time,
    ),
    GraderSpec(
        "step-count",
        StepCountConfig,
        step_count,
        "steps (LLM calls + tool calls) within min/max",
        watch=watch_step_count,
    ),
)
