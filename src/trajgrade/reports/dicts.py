"""Trajectories and grading results as the JSON other tools read (``trajgrade trajectory|grade --format json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajgrade.core.trajectory.model import Step, Trajectory, Usage

if TYPE_CHECKING:
    from trajgrade.core.graders.base import GraderResult
    from trajgrade.core.running import RunReport

__all__ = ["jsonable", "report_to_dict", "result_to_dict", "trajectory_to_dict"]


def jsonable(value: Any) -> Any:
    """A value made JSON-safe: tuples become lists, bytes become hex, unknown objects their ``str``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def _step(step: Step) -> dict[str, Any]:
    tool = step.tool
    return {
        "kind": step.kind,
        "span_id": step.span_id,
        "name": step.name,
        "agent": step.agent,
        "turn": step.turn,
        "start_unix_nano": step.start_unix_nano,
        "duration_ms": step.duration_ms,
        "status": step.status,
        "error_type": step.error_type,
        "model": step.model,
        "response_id": step.response_id,
        "usage": _usage(step.usage),
        "cost_usd": step.cost_usd,
        "tool": None
        if tool is None
        else {
            "name": tool.name,
            "call_id": tool.call_id,
            "arguments": jsonable(tool.arguments),
            "result": jsonable(tool.result),
        },
    }


def trajectory_to_dict(t: Trajectory) -> dict[str, Any]:
    """The contract shape of one run (more keys than the contract are allowed)."""
    s = t.summary
    return {
        "trace_id": t.trace_id,
        "root_span_id": t.root_span_id,
        "root_span_name": t.root_span_name,
        "agent_name": t.agent_name,
        "service_name": t.service_name,
        "partial": t.partial,
        "notes": list(t.notes),
        "summary": {
            "llm_calls": s.llm_calls,
            "tool_calls": s.tool_calls,
            "tool_errors": s.tool_errors,
            "turns": s.turns,
            "errors": s.errors,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "total_tokens": s.total_tokens,
            "cost_usd": s.cost_usd,
            "duration_ms": s.duration_ms,
            "tool_names": list(s.tool_names),
            "failed": s.failed,
            "cache_read_tokens": s.cache_read_tokens,
            "cache_write_tokens": s.cache_write_tokens,
            "reasoning_tokens": s.reasoning_tokens,
            "usage_source": s.usage_source,
            "llm_calls_without_usage": s.llm_calls_without_usage,
            "failed_llm_calls_without_usage": s.failed_llm_calls_without_usage,
            "tool_calls_not_run": list(s.tool_calls_not_run),
            "tool_calls_not_requested": list(s.tool_calls_not_requested),
        },
        "agents": [
            {
                "name": a.name,
                "parent": a.parent,
                "turns": a.turns,
                "llm_calls": a.llm_calls,
                "tool_calls": a.tool_calls,
                "tool_names": list(a.tool_names),
                "input_tokens": a.input_tokens,
                "output_tokens": a.output_tokens,
                "failed": a.failed,
            }
            for a in t.agents
        ],
        "output": t.output,
        "steps": [_step(step) for step in t.steps],
    }


def result_to_dict(r: GraderResult) -> dict[str, Any]:
    """One grader result in the contract shape."""
    return {
        "name": r.name,
        "type": r.type,
        "status": r.status,
        "score": round(r.score, 6),
        "explanation": r.explanation,
        "value": jsonable(r.value),
        "limit": jsonable(r.limit),
        "evidence": [{"description": e.description, "span_ids": list(e.span_ids)} for e in r.evidence],
        "details": jsonable(dict(r.details)),
        "error_type": r.error_type,
    }


def report_to_dict(report: RunReport) -> dict[str, Any]:
    """A graded run: the trajectory's keys plus the verdict."""
    out = trajectory_to_dict(report.trajectory)
    out.update(
        suite=report.suite,
        passed=report.passed,
        score=round(report.score, 6),
        results=[result_to_dict(r) for r in report.results],
    )
    return out
