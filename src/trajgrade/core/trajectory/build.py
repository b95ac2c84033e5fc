"""Build trajectories from span records, by the rules in the module docstring of ``model.py``.

A run is the subtree under a local root: a span with no parent, or whose parent is not among the spans
(a remote parent, or one never received). Spans whose parent never arrived and is not remote, when there
are several of them, are one run under a stand-in for that parent: a root that never ended (a framework
that fails a run without ending its root), graded as a failed, partial run. Spans in a parent cycle belong
to no run. Double instrumentation is folded: nested LLM spans count once (the innermost that carries
usage), and a tool span inside a tool span of the same name or call id (an MCP ``tools/call`` under the
framework's ``execute_tool``) is the same call.

Tool calls are joined to the model call that requested them, by tool-call id, else by name in request
order: a tool span without arguments takes the requested ones, and a bare value is named by the request's
one parameter. A span whose children are agent steps (``semconv.AGENT_STEP``) is their agent, named by the
steps when they name it, else by its span name. A
sub-agent beside the tool span that started it (inside its time) is under that tool call, and a sub-agent
span without children of its own is over the sibling spans inside its time;
a sub-agent that no tool span started, whose name the model requested as a tool, is that tool call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from trajgrade.core import semconv as sc
from trajgrade.core.trajectory.content import final_output, requested, tool_call, tool_definitions
from trajgrade.core.trajectory.cost import Price, call_cost
from trajgrade.core.trajectory.model import Step, Trajectory
from trajgrade.core.trajectory.records import SpanRecord, span_record
from trajgrade.core.trajectory.summary import agent_summaries, run_summary
from trajgrade.core.trajectory.tool_requests import ToolRequests
from trajgrade.core.trajectory.tree import Node, delegations, fold_llm_spans, fold_tool_spans, walk

__all__ = ["build_trajectories", "build_trajectory", "is_run", "root_of"]

UNENDED_ROOT_NAME = "(root span never ended)"


def build_trajectories(
    records: Iterable[SpanRecord], *, prices: Mapping[str, Price] | None = None, partial: bool = False
) -> list[Trajectory]:
    """One trajectory per local root among ``records`` (any number of traces), in root start order."""
    by_trace: dict[str, list[SpanRecord]] = {}
    for record in records:
        by_trace.setdefault(record.trace_id, []).append(record)
    runs: list[Trajectory] = []
    for trace_records in by_trace.values():
        index: dict[str, SpanRecord] = {}
        duplicates = 0
        for r in trace_records:
            if r.span_id in index:
                duplicates += 1
                continue
            index[r.span_id] = r
        notes = (f"{duplicates} span(s) with a duplicate span id ignored",) if duplicates else ()
        roots, unended = _tops(index.values(), index)
        parents = {r.parent_span_id for r in index.values()}
        for root in roots:
            if is_run(root, root.span_id in parents):
                runs.append(_build(root, index, prices or {}, partial=partial, notes=notes))
        for children in unended.values():
            root = _unended_root(children)
            index[root.span_id] = root
            note = f"the root span {root.span_id} never ended: graded from the {len(children)} spans under it"
            runs.append(_build(root, index, prices or {}, partial=True, notes=(*notes, note)))
        if not roots and not unended and index:  # every span has a parent among them: their links form a cycle
            root = min(index.values(), key=lambda r: (r.start_unix_nano, r.span_id))
            note = f"the spans' parent links form a cycle: span {root.span_id} ({root.name}) taken as the root"
            runs.append(_build(root, index, prices or {}, partial=True, notes=(*notes, note)))
    runs.sort(key=lambda t: (t.start_unix_nano, t.trace_id, t.root_span_id))
    return runs


def is_run(root: SpanRecord, has_children: bool) -> bool:
    """Whether a local root is a run: any root but an agent's setup alone (``semconv.SETUP``)."""
    return has_children or root.kind != sc.SETUP


def _tops(
    records: Iterable[SpanRecord], index: Mapping[str, SpanRecord]
) -> tuple[list[SpanRecord], dict[str, list[SpanRecord]]]:
    """The local roots, and the spans that share a parent never received (not remote), by that parent."""
    roots: list[SpanRecord] = []
    by_missing: dict[str, list[SpanRecord]] = {}
    for r in records:
        parent = r.parent_span_id
        if parent is None or r.parent_is_remote:
            roots.append(r)
        elif parent not in index:
            by_missing.setdefault(parent, []).append(r)
    unended: dict[str, list[SpanRecord]] = {}
    for parent, children in by_missing.items():
        if len(children) == 1:
            roots.append(children[0])
        else:
            unended[parent] = children
    return roots, unended


def _unended_root(children: Sequence[SpanRecord]) -> SpanRecord:
    first = children[0]
    return span_record(
        trace_id=first.trace_id,
        span_id=str(first.parent_span_id),
        parent_span_id=None,
        name=UNENDED_ROOT_NAME,
        kind=sc.OTHER,
        start_unix_nano=min(c.start_unix_nano for c in children),
        end_unix_nano=max(c.end_unix_nano for c in children),
        error=True,
        error_type="unended_root",
        error_message="the root span never ended",
        service_name=first.service_name,
    )


def root_of(records: Sequence[SpanRecord]) -> SpanRecord:
    """The root to grade an incomplete trace from (its root never arrived): its top span when it has one, else
    a stand-in for the parent its top spans share (``records`` must then be graded with it)."""
    ids = {r.span_id for r in records}
    tops = [r for r in records if r.parent_span_id not in ids] or list(records)
    if len(tops) == 1:
        return tops[0]
    shared = [r for r in tops if r.parent_span_id is not None and r.parent_span_id == tops[0].parent_span_id]
    if len(shared) == len(tops):
        return _unended_root(tops)
    return min(tops, key=lambda r: r.start_unix_nano)


def build_trajectory(
    records: Sequence[SpanRecord], root: SpanRecord, *, prices: Mapping[str, Price] | None = None, partial: bool = False
) -> Trajectory:
    """The run under ``root`` (one trace's records)."""
    index: dict[str, SpanRecord] = {}
    for r in records:
        index.setdefault(r.span_id, r)
    return _build(root, index, prices or {}, partial=partial, notes=())


def _in_time_order(nodes: list[Node]) -> list[Node]:
    """``nodes`` by start, then end, then span id: sorted by start alone (integers compare faster than tuples), then
    each run of equal starts by the rest."""
    ordered = sorted(nodes, key=_start)
    i, n = 0, len(ordered)
    while i < n:
        start = ordered[i].record.start_unix_nano
        j = i + 1
        while j < n and ordered[j].record.start_unix_nano == start:
            j += 1
        if j - i > 1:
            ordered[i:j] = sorted(ordered[i:j], key=lambda m: (m.record.end_unix_nano, m.record.span_id))
        i = j
    return ordered


def _start(node: Node) -> int:
    return node.record.start_unix_nano


def _build(
    root: SpanRecord,
    index: Mapping[str, SpanRecord],
    prices: Mapping[str, Price],
    *,
    partial: bool,
    notes: tuple[str, ...],
) -> Trajectory:
    nodes = walk(root, index)
    node_by_id = {n.record.span_id: n for n in nodes}

    llm_nodes = fold_llm_spans([n for n in nodes if n.record.kind == sc.LLM], node_by_id)
    asked_by = {n.record.span_id: requested(n.record) for n in llm_nodes}
    tool_nodes = fold_tool_spans([n for n in nodes if n.record.kind == sc.TOOL])
    tool_nodes += delegations(nodes, asked_by)
    ordered = _in_time_order(llm_nodes + tool_nodes)

    outer_agent = next((n.record for n in nodes if n.record.kind == sc.AGENT), None)

    steps: list[Step] = []
    requests = ToolRequests()
    turn = -1
    for i, node in enumerate(ordered):
        r = node.record
        agent_rec = node.agent
        agent = agent_rec.agent_name if agent_rec is not None else r.agent_name
        status: Literal["ok", "error"] = "error" if r.error else "ok"
        if r.kind == sc.LLM:
            turn += 1
            asked = asked_by[r.span_id]
            requests.ask(asked, turn)
            call_ids = tuple(call[0] for call in asked if call[0] is not None)
            cost = r.cost_usd if r.cost_usd is not None else call_cost(r.model, r.provider, r.usage, prices)
            if cost is None and r.usage is None and r.error:
                cost = 0.0  # a failed request that reports no usage counts nothing (see summary.run_summary)
            steps.append(
                Step(
                    index=i,
                    kind="llm_call",
                    span_id=r.span_id,
                    parent_span_id=r.parent_span_id,
                    name=r.name,
                    agent=agent,
                    turn=turn,
                    start_unix_nano=r.start_unix_nano,
                    end_unix_nano=r.end_unix_nano,
                    status=status,
                    error_type=r.error_type,
                    error_message=r.error_message,
                    model=r.model,
                    provider=r.provider,
                    response_id=r.response_id,
                    usage=r.usage,
                    cost_usd=cost,
                    requested_tool_call_ids=call_ids,
                    depth=node.depth,
                )
            )
        else:
            request, tool_turn = requests.take(r, max(turn, 0))
            steps.append(
                Step(
                    index=i,
                    kind="tool_call",
                    span_id=r.span_id,
                    parent_span_id=r.parent_span_id,
                    name=r.name,
                    agent=agent,
                    turn=tool_turn,
                    start_unix_nano=r.start_unix_nano,
                    end_unix_nano=r.end_unix_nano,
                    status=status,
                    error_type=r.error_type,
                    error_message=r.error_message,
                    tool=tool_call(r, request),
                    depth=node.depth,
                )
            )

    summary = run_summary(root, outer_agent, steps, nodes, prices, requests)
    last = next((s for s in reversed(steps) if s.kind == "llm_call" and s.depth == 0), None)  # of the run's agent
    return Trajectory(
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        root_span_name=root.name,
        agent_name=outer_agent.agent_name if outer_agent is not None else None,
        service_name=root.service_name,
        start_unix_nano=root.start_unix_nano,
        end_unix_nano=root.end_unix_nano,
        steps=tuple(steps),
        agents=agent_summaries(nodes, steps),
        summary=summary,
        root_attributes=dict(root.attributes or {}),
        output=final_output(outer_agent, node_by_id[last.span_id].record.output_messages if last else None),
        tool_definitions=tool_definitions(n.record for n in nodes),
        partial=partial,
        notes=notes,
    )
