"""The ``budget`` grader: resource limits, with how much of each limit the run used.

Limits (any of them, at least one): ``max_input_tokens``, ``max_output_tokens``, ``max_tokens`` (input +
output), ``max_reasoning_tokens``, ``max_tool_calls``, ``max_llm_calls``, ``max_duration_ms`` (or
``max_duration`` as "30s", "2m").
Each limit reports its utilisation ("used 3000/5000 tokens = 60%"); a call limit that is exceeded names the
span ids of the calls past it. The score is the lowest of the per-limit scores, each degrading linearly past
its limit as the metric-threshold graders do; the run fails when any limit is exceeded.

Missing data: a token limit on a run whose spans carry no token counts is not evaluable (status ``error``),
unless ``on_missing: fail``, AgentV's rule. Token counts known for only some LLM calls are a lower bound: a
sum over the limit fails, a sum within it is not evaluable.
"""

from __future__ import annotations

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, Number, linear_score, not_evaluable
from trajgrade.core.graders.options import BudgetConfig, parse_duration
from trajgrade.core.graders.thresholds import failed_requests_note
from trajgrade.core.graders.watch import (
    DURATION_MS,
    INPUT_TOKENS,
    LLM_CALLS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
    TOOL_CALLS,
    TOTAL_TOKENS,
    Gate,
    RunSoFar,
)
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]

_TOKEN_LIMITS = (
    ("max_input_tokens", "input tokens", "input_tokens"),
    ("max_output_tokens", "output tokens", "output_tokens"),
    ("max_tokens", "tokens", "total_tokens"),
    ("max_reasoning_tokens", "reasoning tokens", "reasoning_tokens"),
)


def _fmt(n: Number) -> str:
    return str(int(n)) if float(n).is_integer() else f"{n:.1f}"


def _check(what: str, used: Number, limit: Number, span_ids: tuple[str, ...] = ()) -> tuple[Evidence, float, bool]:
    pct = f"{used / limit * 100:.0f}%" if limit else ("0%" if used == 0 else "over")
    over = used > limit
    text = f"used {_fmt(used)}/{_fmt(limit)} {what} = {pct}" + (" (over the limit)" if over else "")
    if over and span_ids:
        text += f"; {len(span_ids)} past the limit"
    return Evidence(text, span_ids if over else ()), linear_score(used, limit), over


def budget(t: Trajectory, c: BudgetConfig, name: str) -> GraderResult:
    s = t.summary
    evidence: list[Evidence] = []
    scores: list[float] = []
    missing: list[str] = []
    exceeded = 0
    values: dict[str, Number | None] = {}
    limits: dict[str, Number] = {}

    def add(key: str, what: str, used: Number, limit: Number, span_ids: tuple[str, ...] = ()) -> None:
        nonlocal exceeded
        ev, score, over = _check(what, used, limit, span_ids)
        evidence.append(ev)
        scores.append(score)
        exceeded += over
        values[key], limits[key] = used, limit

    for key, what, attr in _TOKEN_LIMITS:
        limit = getattr(c, key)
        if limit is None:
            continue
        used = getattr(s, attr)
        if used is None:
            missing.append(f"{what}: no span of this run carries token counts")
            values[key], limits[key] = None, limit
        elif s.llm_calls_without_usage and used <= limit:
            missing.append(
                f"{what}: {s.llm_calls_without_usage} of {s.llm_calls} LLM calls carry no token counts, "
                f"so {used} is a lower bound"
            )
            values[key], limits[key] = used, limit
        else:
            add(key, what + failed_requests_note(t), used, limit)
    if c.max_tool_calls is not None:
        tools = t.tool_span_ids
        add("max_tool_calls", "tool calls", len(tools), c.max_tool_calls, tools[int(c.max_tool_calls) :])
    if c.max_llm_calls is not None:
        llms = t.llm_span_ids
        add("max_llm_calls", "LLM calls", len(llms), c.max_llm_calls, llms[int(c.max_llm_calls) :])
    duration_limit = parse_duration(c.max_duration) * 1000 if c.max_duration else c.max_duration_ms
    if duration_limit is not None:
        add("max_duration_ms", "ms", round(s.duration_ms, 3), duration_limit, (t.root_span_id,))

    if missing and not exceeded and c.on_missing == "error":
        return not_evaluable(
            name,
            "budget",
            "; ".join(missing),
            value=values,
            limit=limits,
            evidence=tuple(evidence),
            details={"values": values, "limits": limits},
        )
    for m in missing:
        if c.on_missing == "fail":
            evidence.append(Evidence(f"missing data counts as over the limit: {m}"))
            scores.append(0.0)
            exceeded += 1
        else:
            evidence.append(Evidence(f"not checked: {m}"))
    score = min(scores) if scores else 0.0
    over_texts = [e.description for e in evidence if "over the limit" in e.description]  # the failing limits
    explanation = "; ".join(over_texts) if exceeded else "; ".join(e.description for e in evidence)
    return GraderResult(
        name=name,
        type="budget",
        status="fail" if exceeded else "pass",
        score=score,
        explanation=explanation,
        value=values,
        limit=limits,
        evidence=tuple(evidence),
        details={"values": values, "limits": limits},
    )


def watch_budget(c: BudgetConfig, name: str) -> Gate:
    """Fails on the span that takes any limit past it (token limits once some LLM call reported usage)."""
    duration_limit = parse_duration(c.max_duration) * 1000 if c.max_duration else c.max_duration_ms

    def check(run: RunSoFar, step: Step | None, _: None) -> GraderResult | None:
        used: list[tuple[str, str, Number, Number]] = []
        if run.usage_known:
            for key, what, attr in _TOKEN_LIMITS:
                limit = getattr(c, key)
                if limit is not None:
                    used.append((key, what, getattr(run, attr), limit))
        for key, what, calls in (
            ("max_tool_calls", "tool calls", run.tool_calls),
            ("max_llm_calls", "LLM calls", run.llm_calls),
        ):
            limit = getattr(c, key)
            if limit is not None:
                used.append((key, what, calls, limit))
        if duration_limit is not None:
            used.append(("max_duration_ms", "ms", round(run.duration_ms, 3), duration_limit))
        span_ids = (run.last_span_id,)
        over = [(key, _check(what, n, limit, span_ids)) for key, what, n, limit in used if n > limit]
        if not over:
            return None
        return GraderResult(
            name=name,
            type="budget",
            status="fail",
            score=min(score for _, (_, score, _) in over),
            explanation="; ".join(evidence.description for _, (evidence, _, _) in over),
            value={key: n for key, _, n, limit in used if n > limit},
            limit={key: limit for key, _, n, limit in used if n > limit},
            evidence=tuple(evidence for _, (evidence, _, _) in over),
        )

    # A millisecond below the duration limit: no rounding of the duration to the microsecond takes it past.
    limits = (
        (INPUT_TOKENS, c.max_input_tokens),
        (OUTPUT_TOKENS, c.max_output_tokens),
        (TOTAL_TOKENS, c.max_tokens),
        (REASONING_TOKENS, c.max_reasoning_tokens),
        (TOOL_CALLS, c.max_tool_calls),
        (LLM_CALLS, c.max_llm_calls),
        (DURATION_MS, duration_limit - 1 if duration_limit is not None else None),
    )
    return Gate(check, over=tuple((count, limit) for count, limit in limits if limit is not None))


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "budget",
        BudgetConfig,
        budget,
        "token, call and duration limits with utilisation",
        needs=("tokens",),
        watch=watch_budget,
    ),
)
