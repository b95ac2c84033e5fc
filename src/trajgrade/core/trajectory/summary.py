"""A run's summary and its agents' summaries, counted from its steps by the rules in ``model.py``'s docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trajgrade.core import semconv as sc
from trajgrade.core.trajectory.cost import Price, call_cost
from trajgrade.core.trajectory.model import AgentSummary, Step, Summary, Usage
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.core.trajectory.tool_requests import ToolRequests
from trajgrade.core.trajectory.tree import Node

__all__ = ["agent_summaries", "run_summary"]


def _add(total: int | None, value: int | None) -> int | None:
    return total if value is None else value if total is None else total + value


def _total(usages: list[Usage]) -> Usage:
    """The sum of LLM calls' usages; a count no call reported stays unknown."""
    total = Usage()
    for u in usages:
        total.input_tokens = _add(total.input_tokens, u.input_tokens)
        total.output_tokens = _add(total.output_tokens, u.output_tokens)
        if u.cache_read_tokens is not None or u.cache_write_tokens is not None or u.reasoning_tokens is not None:
            total.cache_read_tokens = _add(total.cache_read_tokens, u.cache_read_tokens)
            total.cache_write_tokens = _add(total.cache_write_tokens, u.cache_write_tokens)
            total.reasoning_tokens = _add(total.reasoning_tokens, u.reasoning_tokens)
    return total


def run_summary(
    root: SpanRecord,
    outer_agent: SpanRecord | None,
    steps: list[Step],
    nodes: list[Node],
    prices: Mapping[str, Price],
    requests: ToolRequests,
) -> Summary:
    """The run's metrics (``Summary``): counts, tokens and cost from its steps, errors from its spans."""
    llm: list[Step] = []
    tool_names: list[str] = []
    tool_calls = tool_errors = step_errors = 0
    for s in steps:
        if s.kind == "llm_call":
            llm.append(s)
        else:
            tool_calls += 1
            if s.tool is not None:
                tool_names.append(s.tool.name)
            if s.status == "error":
                tool_errors += 1
        if s.status == "error":
            step_errors += 1
    with_usage = [s.usage for s in llm if s.usage is not None]
    # A failed request that reports no usage counts zero tokens, as the frameworks' own accounting does.
    failed_without_usage = sum(1 for s in llm if s.usage is None and s.status == "error")
    usage_source: str | None = "llm_calls" if with_usage or failed_without_usage else None
    if with_usage:
        usage = _total(with_usage)
    elif failed_without_usage and failed_without_usage == len(llm):
        usage = Usage(input_tokens=0, output_tokens=0)
    elif outer_agent is not None and outer_agent.usage is not None:
        usage, usage_source = outer_agent.usage, "agent_totals"
    elif root.usage is not None:
        usage, usage_source = root.usage, "agent_totals"
    else:
        usage = Usage()

    costs = [s.cost_usd for s in llm]
    cost: float | None = None
    without_cost = costs.count(None)
    if llm and not without_cost:
        cost = sum(c for c in costs if c is not None)
    elif usage_source == "agent_totals" and outer_agent is not None:
        model = outer_agent.model or next((s.model for s in llm if s.model), None)
        provider = next((s.provider for s in llm if s.provider), None)
        cost = call_cost(model, provider, usage, prices)

    failed_agents = {n.record.span_id for n in nodes if n.record.kind == sc.AGENT and n.record.error}
    agent_errors = len(failed_agents - {s.span_id for s in steps}) if failed_agents else 0
    root_error = 1 if root.error and root.kind not in (sc.AGENT, sc.LLM, sc.TOOL) else 0
    failed = root.error or (outer_agent is not None and outer_agent.error)
    return Summary(
        llm_calls=len(llm),
        tool_calls=tool_calls,
        tool_errors=tool_errors,
        turns=len(llm),
        errors=step_errors + agent_errors + root_error,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cost_usd=cost,
        duration_ms=max(0, root.end_unix_nano - root.start_unix_nano) / 1e6,
        tool_names=tuple(tool_names),
        failed=bool(failed),
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        llm_calls_without_usage=(len(llm) - len(with_usage) - failed_without_usage) if with_usage else 0,
        usage_source=usage_source,
        llm_calls_without_cost=without_cost,
        failed_llm_calls_without_usage=failed_without_usage,
        tool_calls_not_run=requests.not_run(),
        tool_calls_not_requested=tuple(requests.unrequested),
    )


def agent_summaries(nodes: list[Node], steps: list[Step]) -> tuple[AgentSummary, ...]:
    """Per agent (merged by name and parent), its own steps only."""
    order: list[tuple[str, str | None]] = []
    info: dict[tuple[str, str | None], dict[str, Any]] = {}
    for n in nodes:
        r = n.record
        if r.kind != sc.AGENT or r.agent_name is None:
            continue
        if n.agent is not None and n.agent.agent_name == r.agent_name:
            continue  # the same agent instrumented twice
        key = (r.agent_name, n.agent.agent_name if n.agent is not None else None)
        if key not in info:
            order.append(key)
            # the depth its own steps have: one below the agent that delegated to it (see tree.walk)
            depth = n.depth + (1 if n.agent is not None else 0)
            info[key] = {"span_id": r.span_id, "failed": r.error, "depth": depth}
        else:
            info[key]["failed"] = info[key]["failed"] or r.error
    if not order:
        return ()
    by_agent: dict[tuple[str | None, int], list[Step]] = {}
    last_agent: str | None = None
    last_depth = -1
    last: list[Step] = []
    for s in steps:
        if s.agent is last_agent and s.depth == last_depth:  # most steps: the previous step's agent
            last.append(s)
            continue
        group = (s.agent, s.depth)
        if group in by_agent:
            last = by_agent[group]
            last.append(s)
        else:
            last = by_agent[group] = [s]
        last_agent, last_depth = s.agent, s.depth
    out: list[AgentSummary] = []
    for name, parent in order:
        own = by_agent.get((name, info[(name, parent)]["depth"]), [])
        llm = [s for s in own if s.kind == "llm_call"]
        tools = [s for s in own if s.kind == "tool_call"]
        usage = _total([s.usage for s in llm if s.usage is not None])
        out.append(
            AgentSummary(
                name=name,
                parent=parent,
                span_id=info[(name, parent)]["span_id"],
                turns=len(llm),
                llm_calls=len(llm),
                tool_calls=len(tools),
                tool_names=tuple(s.tool.name for s in tools if s.tool is not None),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                failed=bool(info[(name, parent)]["failed"]),
            )
        )
    return tuple(out)
