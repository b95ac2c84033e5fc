"""``execution_metrics`` and the single-metric ``latency``, ``cost`` and ``token_usage`` graders.

``execution_metrics`` checks every threshold it is given (at least one) and reports each as a hit or a miss,
in words like "Tool calls (8) within limit (10)":

- ``max_tool_calls``: tool executions; ``max_llm_calls``: model calls;
- ``max_tokens``: input + output tokens (input tokens include cached ones, as the GenAI conventions count
  them); ``max_input_tokens``, ``max_output_tokens``;
- ``max_cost_usd``: the run's cost; ``max_duration_ms``: the root span's duration;
- ``target_exploration_ratio`` with ``exploration_tolerance`` (default 0.2): the share of tool calls made to
  read-only tools (``exploration_tools``, by exact name; default AgentV's list,
  ``DEFAULT_EXPLORATION_TOOLS``) must be within the tolerance of the target. A run without tool calls has no
  ratio.

Missing data counts as a miss (tokens or cost the spans do not carry, no ratio): this grader fails such a
check rather than being not evaluable. ``scoring``: ``proportional`` (the default): score
``hits / (hits + misses)``, a pass when the score reaches ``min_score`` (default 0.8); ``all_or_nothing``:
score 1 when every check is a hit, else 0. Details hold ``hits``, ``misses`` and the measured values.

``latency`` (``max_ms``, or its alias ``threshold``), ``cost`` (``max_usd`` or
``budget``) and ``token_usage`` (``max_total_tokens`` / ``max_total``, ``max_input_tokens`` / ``max_input``,
``max_output_tokens`` / ``max_output``) are all-or-nothing checks of one metric each.
"""

from __future__ import annotations

from typing import NamedTuple

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec
from trajgrade.core.graders.options import CostConfig, ExecutionMetricsConfig, LatencyConfig, TokenUsageConfig
from trajgrade.core.graders.steps import count_named, tool_calls
from trajgrade.core.graders.watch import (
    COST_USD,
    DURATION_MS,
    INPUT_TOKENS,
    ON_CALLS,
    OUTPUT_TOKENS,
    TOTAL_TOKENS,
    Gate,
    RunSoFar,
)
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]


class _Check(NamedTuple):
    """One bound checked (a tuple: a run's grading makes a dozen, and a frozen dataclass costs several times as
    much to build)."""

    hit: bool
    text: str


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _max_check(label: str, value: float | None, limit: float, unit: str = "", money: bool = False) -> _Check:
    def show(v: float) -> str:
        return f"${v:.4g}" if money else f"{_num(v)}{unit}"

    if value is None:
        return _Check(False, f"{label} not available (the spans do not carry it); limit {show(limit)}")
    if value <= limit:
        return _Check(True, f"{label} ({show(value)}) within limit ({show(limit)})")
    return _Check(False, f"{label} ({show(value)}) exceeds limit ({show(limit)})")


def _checks(t: Trajectory, c: ExecutionMetricsConfig, ratio: float | None) -> list[_Check]:
    s = t.summary
    checks = []
    if c.max_tool_calls is not None:
        checks.append(_max_check("Tool calls", s.tool_calls, c.max_tool_calls))
    if c.max_llm_calls is not None:
        checks.append(_max_check("LLM calls", s.llm_calls, c.max_llm_calls))
    if c.max_tokens is not None:
        checks.append(_max_check("Tokens", s.total_tokens, c.max_tokens))
    if c.max_input_tokens is not None:
        checks.append(_max_check("Input tokens", s.input_tokens, c.max_input_tokens))
    if c.max_output_tokens is not None:
        checks.append(_max_check("Output tokens", s.output_tokens, c.max_output_tokens))
    if c.max_cost_usd is not None:
        checks.append(_max_check("Cost", s.cost_usd, c.max_cost_usd, money=True))
    if c.max_duration_ms is not None:
        checks.append(_max_check("Duration", round(s.duration_ms, 1), c.max_duration_ms, unit="ms"))
    if c.target_exploration_ratio is not None:
        target, tol = c.target_exploration_ratio, c.exploration_tolerance
        if ratio is None:
            checks.append(_Check(False, f"Exploration ratio not available (no tool calls); target {target:g}"))
        else:
            hit = abs(ratio - target) <= tol + 1e-12
            relation = "within" if hit else "outside"
            checks.append(_Check(hit, f"Exploration ratio ({ratio:.2f}) {relation} {target:g} ± {tol:g}"))
    return checks


def exploration_ratio(t: Trajectory, tools: tuple[str, ...]) -> float | None:
    """Share of tool calls made to read-only tools (exact names); None without tool calls."""
    calls = tool_calls(t)
    if not calls:
        return None
    return count_named(calls, set(tools)) / len(calls)


def execution_metrics(t: Trajectory, c: ExecutionMetricsConfig, name: str) -> GraderResult:
    ratio = exploration_ratio(t, c.exploration_tools)
    checks = _checks(t, c, ratio)
    hits = [k.text for k in checks if k.hit]
    misses = [k.text for k in checks if not k.hit]
    if c.scoring == "all_or_nothing":
        score = 1.0 if not misses else 0.0
        passed = not misses
    else:
        score = len(hits) / len(checks)
        passed = score >= c.min_score - 1e-12
    s = t.summary
    summary = "; ".join(misses) if misses else "; ".join(hits)
    explanation = f"{len(hits)}/{len(checks)} within bounds ({c.scoring}): {summary}"
    return GraderResult(
        name=name,
        type="execution_metrics",
        status="pass" if passed else "fail",
        score=score,
        explanation=explanation,
        value=len(hits),
        limit=len(checks),
        evidence=tuple(Evidence(k.text) for k in checks),
        details={
            "hits": hits,
            "misses": misses,
            "tool_calls": s.tool_calls,
            "llm_calls": s.llm_calls,
            "total_tokens": s.total_tokens,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "cost_usd": s.cost_usd,
            "duration_ms": s.duration_ms,
            "exploration_ratio": ratio,
        },
    )


def _single(
    name: str, type_: str, checks: list[_Check], value: object, limit: object, span_ids: tuple[str, ...] = ()
) -> GraderResult:
    passed = all(k.hit for k in checks)
    return GraderResult(
        name=name,
        type=type_,
        status="pass" if passed else "fail",
        score=1.0 if passed else 0.0,
        explanation="; ".join(k.text for k in checks),
        value=value,
        limit=limit,
        evidence=tuple(Evidence(k.text, span_ids if not k.hit else ()) for k in checks),
        details={"hits": [k.text for k in checks if k.hit], "misses": [k.text for k in checks if not k.hit]},
    )


def latency(t: Trajectory, c: LatencyConfig, name: str) -> GraderResult:
    ms = round(t.summary.duration_ms, 1)
    return _single(name, "latency", [_max_check("Duration", ms, c.max_ms, unit="ms")], ms, c.max_ms)


def cost(t: Trajectory, c: CostConfig, name: str) -> GraderResult:
    usd = t.summary.cost_usd
    return _single(name, "cost", [_max_check("Cost", usd, c.max_usd, money=True)], usd, c.max_usd)


def _token_checks(c: TokenUsageConfig, total: int | None, input_: int | None, output: int | None) -> list[_Check]:
    return [
        _max_check(label, value, limit)
        for label, value, limit in (
            ("Total tokens", total, c.max_total_tokens),
            ("Input tokens", input_, c.max_input_tokens),
            ("Output tokens", output, c.max_output_tokens),
        )
        if limit is not None
    ]


def _token_limits(c: TokenUsageConfig) -> dict[str, float]:
    limits = {"max_total_tokens": c.max_total_tokens, "max_input_tokens": c.max_input_tokens}
    limits["max_output_tokens"] = c.max_output_tokens
    return {k: v for k, v in limits.items() if v is not None}


def token_usage(t: Trajectory, c: TokenUsageConfig, name: str) -> GraderResult:
    s = t.summary
    checks = _token_checks(c, s.total_tokens, s.input_tokens, s.output_tokens)
    return _single(name, "token_usage", checks, s.total_tokens, _token_limits(c))


# --- in flight: each check fails on the span that takes its number past the limit -------------------------------
def watch_latency(c: LatencyConfig, name: str) -> Gate:
    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        ms = round(run.duration_ms, 1)
        if ms <= c.max_ms:
            return None
        span_ids = (run.last_span_id,)
        return _single(name, "latency", [_max_check("Duration", ms, c.max_ms, unit="ms")], ms, c.max_ms, span_ids)

    # A millisecond below the limit: no rounding of the duration to the millisecond or finer takes it past.
    return Gate(check, over=((DURATION_MS, c.max_ms - 1),))


def watch_cost(c: CostConfig, name: str) -> Gate:
    """Once every LLM call so far has a known cost (the run's cost is unknown otherwise)."""

    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        assert step is not None
        if run.cost_unknown or run.cost_usd <= c.max_usd:
            return None
        usd = run.cost_usd
        return _single(name, "cost", [_max_check("Cost", usd, c.max_usd, money=True)], usd, c.max_usd, (step.span_id,))

    return Gate(check, on=ON_CALLS, over=((COST_USD, c.max_usd),))


def watch_token_usage(c: TokenUsageConfig, name: str) -> Gate:
    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        assert step is not None
        if not run.usage_known:
            return None
        checks = _token_checks(c, run.total_tokens, run.input_tokens, run.output_tokens)
        if all(k.hit for k in checks):
            return None
        return _single(name, "token_usage", checks, run.total_tokens, _token_limits(c), (step.span_id,))

    limits = (
        (TOTAL_TOKENS, c.max_total_tokens),
        (INPUT_TOKENS, c.max_input_tokens),
        (OUTPUT_TOKENS, c.max_output_tokens),
    )
    return Gate(check, on=ON_CALLS, over=tuple((count, limit) for count, limit in limits if limit is not None))


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "execution_metrics",
        ExecutionMetricsConfig,
        execution_metrics,
        "tool/LLM calls, tokens, cost, duration and exploration ratio within bounds (hits / misses)",
        needs=("tokens", "cost"),
    ),
    GraderSpec("latency", LatencyConfig, latency, "run duration <= max_ms", watch=watch_latency),
    GraderSpec("cost", CostConfig, cost, "run cost <= max_usd", needs=("cost",), watch=watch_cost),
    GraderSpec(
        "token_usage",
        TokenUsageConfig,
        token_usage,
        "total / input / output tokens within bounds",
        needs=("tokens",),
        watch=watch_token_usage,
    ),
)
