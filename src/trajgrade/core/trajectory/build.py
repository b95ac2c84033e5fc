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

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from trajgrade.core import semconv as sc
from trajgrade.core.trajectory.cost import Price, call_cost
from trajgrade.core.trajectory.model import AgentSummary, Step, Summary, ToolCall, Trajectory, Usage
from trajgrade.core.trajectory.normalize import MISSING, SpanRecord, _PartsRef

__all__ = ["build_trajectories", "build_trajectory", "is_run", "parse_json_value", "root_of"]

#: A tool call the model requested: (tool-call id, tool name, raw arguments or MISSING).
Request = tuple[str | None, str | None, Any]
UNENDED_ROOT_NAME = "(root span never ended)"

_MAX_JSON_CHARS = 1_000_000
#: The standard decoder's own scanner: ``json.loads`` around it costs three times the scan on a short object.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_WHITESPACE = " \t\n\r"


class _Node:
    """A record where it stands in the run (one per span; a plain class, see ``model.py``'s docstring)."""

    __slots__ = ("agent", "depth", "llm_ancestor", "record", "tool_ancestor")

    def __init__(
        self,
        record: SpanRecord,
        agent: SpanRecord | None,  # nearest enclosing agent span (itself excluded)
        depth: int,  # agent nesting depth
        llm_ancestor: str | None,  # nearest LLM span above, with no agent span between
        tool_ancestor: str | None,  # nearest tool span above, with no agent span between
    ) -> None:
        self.record = record
        self.agent = agent
        self.depth = depth
        self.llm_ancestor = llm_ancestor
        self.tool_ancestor = tool_ancestor


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
    return SpanRecord(
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


def _walk(root: SpanRecord, index: Mapping[str, SpanRecord]) -> list[_Node]:
    children: dict[str, list[SpanRecord]] = {}
    agent_parents: list[str] = []
    for r in index.values():
        parent = r.parent_span_id
        if parent is not None and parent in index and r is not root:
            if parent in children:
                children[parent].append(r)
            else:
                children[parent] = [r]
            if r.kind == sc.AGENT:
                agent_parents.append(parent)
    for parent in dict.fromkeys(agent_parents):
        _reattach_agents(children, parent)
    # Every record has one parent and the root is no one's child, so the walk meets each record once at most
    # (records in a parent cycle are not reached from the root).
    nodes: list[_Node] = []
    stack = [_Node(root, None, 0, None, None)]
    while stack:
        node = stack.pop()
        nodes.append(node)
        r = node.record
        kids = children.get(r.span_id)
        if not kids:
            continue
        if r.kind == sc.OTHER and any(k.kind == sc.AGENT_STEP for k in kids):
            # the agent whose steps these are, named by its steps when they name it
            named = next((k.agent_name for k in kids if k.kind == sc.AGENT_STEP and k.agent_name), r.name)
            r = node.record = replace(r, kind=sc.AGENT, agent_name=named)
        if r.kind == sc.AGENT:
            # An agent span directly inside an agent span of the same name is the same agent (two instrumentations).
            same_agent = node.agent is not None and node.agent.agent_name == r.agent_name
            agent = node.agent if same_agent else r
            depth = node.depth + (1 if node.agent is not None and not same_agent else 0)
            llm = tool = None
        else:
            agent, depth = node.agent, node.depth
            llm = r.span_id if r.kind == sc.LLM else node.llm_ancestor
            tool = r.span_id if r.kind == sc.TOOL else node.tool_ancestor
        for child in kids:
            stack.append(_Node(child, agent, depth, llm, tool))
    return nodes


def _within(inner: SpanRecord, outer: SpanRecord) -> bool:
    return outer.start_unix_nano <= inner.start_unix_nano and inner.end_unix_nano <= outer.end_unix_nano


def _reattach_agents(children: dict[str, list[SpanRecord]], parent: str) -> None:
    """Put agent spans where their work is, for instrumentations that parent them to the caller's context: an
    agent span within the time of a sibling tool span goes under that tool (the call that started it), and an
    agent span with no children takes the sibling spans within its time (the work it wraps)."""
    for agent in [k for k in children[parent] if k.kind == sc.AGENT]:
        home = parent
        kids = children[home]
        tool = next((t for t in kids if t.kind == sc.TOOL and _within(agent, t)), None)
        if tool is not None:
            kids.remove(agent)
            home = tool.span_id
            children.setdefault(home, []).append(agent)
        if agent.span_id in children:
            continue
        siblings = children[home]
        work = {id(k) for k in siblings if k is not agent and k.kind != sc.AGENT and _within(k, agent)}
        if work:
            children[agent.span_id] = [k for k in siblings if id(k) in work]
            children[home] = [k for k in siblings if id(k) not in work]


def _build(
    root: SpanRecord,
    index: Mapping[str, SpanRecord],
    prices: Mapping[str, Price],
    *,
    partial: bool,
    notes: tuple[str, ...],
) -> Trajectory:
    nodes = _walk(root, index)
    node_by_id = {n.record.span_id: n for n in nodes}

    llm_nodes = _fold_llm_spans([n for n in nodes if n.record.kind == sc.LLM], node_by_id)
    requests = {n.record.span_id: _requested(n.record) for n in llm_nodes}
    tool_nodes = _fold_tool_spans([n for n in nodes if n.record.kind == sc.TOOL], node_by_id)
    tool_nodes += _delegations(nodes, requests)
    ordered = sorted(
        llm_nodes + tool_nodes, key=lambda n: (n.record.start_unix_nano, n.record.end_unix_nano, n.record.span_id)
    )

    outer_agent = next((n.record for n in nodes if n.record.kind == sc.AGENT), None)

    steps: list[Step] = []
    join = _Join()
    turn = -1
    for i, node in enumerate(ordered):
        r = node.record
        agent_rec = node.agent
        agent = agent_rec.agent_name if agent_rec is not None else r.agent_name
        status: Literal["ok", "error"] = "error" if r.error else "ok"
        if r.kind == sc.LLM:
            turn += 1
            asked = requests[r.span_id]
            join.ask(asked, turn)
            requested = tuple(call[0] for call in asked if call[0] is not None)
            cost = r.cost_usd if r.cost_usd is not None else call_cost(r.model, r.provider, r.usage, prices)
            if cost is None and r.usage is None and r.error:
                cost = 0.0  # a failed request that reports no usage counts nothing (see _summary)
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
                    usage=r.usage,
                    cost_usd=cost,
                    requested_tool_call_ids=requested,
                    depth=node.depth,
                )
            )
        else:
            request, tool_turn = join.take(r, max(turn, 0))
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
                    tool=_tool_call(r, request),
                    depth=node.depth,
                )
            )

    summary = _summary(root, outer_agent, steps, nodes, prices, join)
    return Trajectory(
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        root_span_name=root.name,
        agent_name=outer_agent.agent_name if outer_agent is not None else None,
        service_name=root.service_name,
        start_unix_nano=root.start_unix_nano,
        end_unix_nano=root.end_unix_nano,
        steps=tuple(steps),
        agents=_agents(nodes, steps),
        summary=summary,
        root_attributes=dict(root.attributes or {}),
        output=_output(outer_agent, steps, node_by_id),
        tool_definitions=_tool_definitions(n.record for n in nodes),
        partial=partial,
        notes=notes,
    )


class _Join:
    """Tool calls joined to the model calls that requested them: by tool-call id, else by name in request order.

    Tool spans are taken in start order, so a request is asked before the tools that run it are taken."""

    __slots__ = ("asked", "by_id", "by_name", "matched", "unrequested")

    def __init__(self) -> None:
        self.asked: list[tuple[Request, int]] = []  # every requested call and its turn, in request order
        self.by_id: dict[str, list[int]] = {}
        self.by_name: dict[str, list[int]] = {}
        self.matched: set[int] = set()
        self.unrequested: list[str] = []

    def ask(self, calls: tuple[Request, ...], turn: int) -> None:
        for call in calls:
            i = len(self.asked)
            self.asked.append((call, turn))
            if call[0] is not None:
                self.by_id.setdefault(call[0], []).append(i)
            if call[1] is not None:
                self.by_name.setdefault(call[1], []).append(i)

    def take(self, r: SpanRecord, turn: int) -> tuple[Request | None, int]:
        """The request a tool span executes, and its turn (``turn`` when it has none)."""
        found: int | None = None
        if r.tool_call_id is not None:
            # ids are unique only per response with some providers: the latest request not yet run, else the latest
            asked = self.by_id.get(r.tool_call_id)
            if asked:
                found = next((i for i in reversed(asked) if i not in self.matched), asked[-1])
        elif r.tool_name is not None:
            queue = self.by_name.get(r.tool_name)
            while queue and queue[0] in self.matched:
                queue.pop(0)
            found = queue[0] if queue else None
        if found is None:
            if self.asked:
                self.unrequested.append(r.tool_name or r.name)
            return None, turn
        self.matched.add(found)
        call, asked_turn = self.asked[found]
        return call, asked_turn

    def not_run(self) -> tuple[str, ...]:
        return tuple(call[1] or call[0] or "?" for i, (call, _) in enumerate(self.asked) if i not in self.matched)


def _delegations(nodes: list[_Node], requests: Mapping[str, tuple[Request, ...]]) -> list[_Node]:
    """Sub-agents that no tool span started but that the model requested by name as a tool: the delegation call."""
    names = {call[1] for calls in requests.values() for call in calls}
    out: list[_Node] = []
    for n in nodes:
        r = n.record
        if (
            r.kind == sc.AGENT
            and n.tool_ancestor is None
            and n.agent is not None
            and n.agent.agent_name != r.agent_name
            and r.agent_name in names
        ):
            call = replace(
                r,
                kind=sc.TOOL,
                tool_name=r.agent_name,
                tool_arguments=MISSING,
                tool_result=r.output if r.output is not None else MISSING,
            )
            out.append(_Node(call, n.agent, n.depth, n.llm_ancestor, None))
    return out


def _fold_llm_spans(llm_nodes: list[_Node], node_by_id: Mapping[str, _Node]) -> list[_Node]:
    """Nested LLM spans (double instrumentation) count once: the innermost of each chain that has usage."""
    has_llm_child = {n.llm_ancestor for n in llm_nodes if n.llm_ancestor is not None}
    if not has_llm_child:
        return llm_nodes
    chosen: dict[str, _Node] = {}
    for leaf in (n for n in llm_nodes if n.record.span_id not in has_llm_child):
        chain = [leaf]
        while chain[-1].llm_ancestor is not None:
            chain.append(node_by_id[chain[-1].llm_ancestor])
        pick = next((n for n in chain if n.record.usage is not None), leaf)
        if any(n.record.error for n in chain) and not pick.record.error:
            failed = next(n.record for n in chain if n.record.error)
            pick = _Node(
                replace(pick.record, error=True, error_type=failed.error_type, error_message=failed.error_message),
                pick.agent,
                pick.depth,
                pick.llm_ancestor,
                pick.tool_ancestor,
            )
        chosen.setdefault(pick.record.span_id, pick)
    return list(chosen.values())


def _fold_tool_spans(tool_nodes: list[_Node], node_by_id: Mapping[str, _Node]) -> list[_Node]:
    """A tool span inside a tool span for the same call (same name or call id) is merged into the outer one."""
    merged: dict[str, _Node] = {n.record.span_id: n for n in tool_nodes}
    for node in sorted(tool_nodes, key=lambda n: -n.depth):
        if node.tool_ancestor is None or node.tool_ancestor not in merged:
            continue
        outer = merged[node.tool_ancestor]
        inner = merged.get(node.record.span_id, node).record
        same_call = inner.tool_name == outer.record.tool_name or (
            inner.tool_call_id is not None and inner.tool_call_id == outer.record.tool_call_id
        )
        if not same_call:
            continue
        o = outer.record
        merged[o.span_id] = _Node(
            replace(
                o,
                tool_call_id=o.tool_call_id or inner.tool_call_id,
                tool_arguments=o.tool_arguments if o.tool_arguments is not MISSING else inner.tool_arguments,
                tool_result=o.tool_result if o.tool_result is not MISSING else inner.tool_result,
                error=o.error or inner.error,
                error_type=o.error_type or inner.error_type,
            ),
            outer.agent,
            outer.depth,
            outer.llm_ancestor,
            outer.tool_ancestor,
        )
        del merged[inner.span_id]
    return list(merged.values())


def parse_json_value(value: Any) -> Any:
    """A JSON string parsed (strings that are not JSON stay strings); other values as they are."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"') and len(value) <= _MAX_JSON_CHARS:
        try:
            parsed, end = _scan_json(value, 0)
        except (StopIteration, ValueError, RecursionError):
            return value
        if end == len(value) or not value[end:].strip(_JSON_WHITESPACE):  # what json.loads accepts after a value
            return parsed
    return value


def _requested(r: SpanRecord) -> tuple[Request, ...]:
    """The tool calls an LLM span's output asked for: its flattened ones, else the GenAI output messages' parts."""
    if r.requested_tool_calls:
        return r.requested_tool_calls
    messages = parse_json_value(r.output_messages)
    if not isinstance(messages, list | tuple):
        return ()
    calls: list[Request] = []
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list | tuple) else ():
            if isinstance(part, dict) and part.get("type") == "tool_call":
                call_id, name = part.get("id"), part.get("name")
                calls.append(
                    (
                        str(call_id) if call_id else None,
                        str(name) if name is not None else None,
                        part["arguments"] if "arguments" in part else MISSING,
                    )
                )
    return tuple(calls)


def _from_parts(ref: _PartsRef) -> Any:
    messages = parse_json_value(ref.messages)
    for message in messages if isinstance(messages, list | tuple) else ():
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list | tuple) else ():
            if isinstance(part, dict) and part.get("type") == ref.part_type and ref.field in part:
                return part[ref.field]
    return MISSING


def _tool_call(r: SpanRecord, request: Request | None) -> ToolCall:
    arguments = _from_parts(r.tool_arguments) if isinstance(r.tool_arguments, _PartsRef) else r.tool_arguments
    result = _from_parts(r.tool_result) if isinstance(r.tool_result, _PartsRef) else r.tool_result
    call_id = r.tool_call_id
    parse_arguments: Callable[[Any], Any] = _arguments
    if request is not None:
        call_id = call_id or request[0]
        asked = request[2]
        if arguments is MISSING:
            arguments = asked
        elif asked is not MISSING:

            def parse_arguments(raw: Any, asked: Any = asked) -> Any:
                return _named(_arguments(raw), asked)

    has_arguments, has_result = arguments is not MISSING, result is not MISSING
    return ToolCall(
        name=r.tool_name or r.name,
        call_id=call_id,
        arguments=arguments if has_arguments else None,
        result=result if has_result else None,
        arguments_captured=has_arguments,
        result_captured=has_result,
        parse_arguments=parse_arguments if has_arguments else None,
        parse_result=_result if has_result else None,
    )


def _arguments(raw: Any) -> Any:
    """A tool's arguments parsed, without the wrapper an instrumentation put around them."""
    arguments = parse_json_value(raw)
    inner = _unwrap(arguments, sc.TOOL_ARGUMENT_WRAPPERS)
    return inner if isinstance(inner, dict) else arguments


def _result(raw: Any) -> Any:
    """A tool's result parsed, without the wrapper an instrumentation put around it."""
    value = parse_json_value(raw)
    for _ in range(4):  # wrappers nest (a serialized message inside the instrumentation's own)
        inner = _unwrap(value, sc.TOOL_RESULT_WRAPPERS)
        if inner is MISSING:
            break
        value = inner
    return value


def _unwrap(
    value: Any, wrappers: tuple[tuple[frozenset[str], frozenset[str], tuple[str, ...], str | None], ...]
) -> Any:
    """The value inside the first wrapper of ``wrappers`` that fits ``value`` (``semconv``), else MISSING."""
    if not isinstance(value, dict):
        return MISSING
    for required, optional, path, empty in wrappers:
        if (
            all(k in value for k in required)
            and all(k in required or k in optional for k in value)
            and not (empty is not None and value.get(empty))
        ):
            inner: Any = value
            for key in path:
                inner = parse_json_value(inner.get(key, MISSING)) if isinstance(inner, dict) else MISSING
            if inner is not MISSING:
                return inner
    return MISSING


def _dumps(value: Any) -> str:
    return json.dumps(value)


def _named(value: Any, asked_raw: Any) -> Any:
    """A bare argument value (a one-parameter tool recorded without its parameter's name) named by the request."""
    if isinstance(value, dict):
        return value
    asked = _arguments(asked_raw)
    if not (isinstance(asked, dict) and len(asked) == 1):
        return value
    ((key, expected),) = asked.items()
    if value == expected or (
        isinstance(value, str) and not isinstance(expected, str) and value == json.dumps(expected)
    ):
        return {key: expected}
    return {key: value}


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


def _summary(
    root: SpanRecord,
    outer_agent: SpanRecord | None,
    steps: list[Step],
    nodes: list[_Node],
    prices: Mapping[str, Price],
    join: _Join,
) -> Summary:
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
        tool_calls_not_run=join.not_run(),
        tool_calls_not_requested=tuple(join.unrequested),
    )


def _agents(nodes: list[_Node], steps: list[Step]) -> tuple[AgentSummary, ...]:
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
            # the depth its own steps have: one below the agent that delegated to it (see _walk)
            depth = n.depth + (1 if n.agent is not None else 0)
            info[key] = {"span_id": r.span_id, "failed": r.error, "depth": depth}
        else:
            info[key]["failed"] = info[key]["failed"] or r.error
    if not order:
        return ()
    by_agent: dict[tuple[str | None, int], list[Step]] = {}
    for s in steps:
        group = (s.agent, s.depth)
        if group in by_agent:
            by_agent[group].append(s)
        else:
            by_agent[group] = [s]
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


def _text_of(messages: Any) -> str | None:
    messages = parse_json_value(messages)
    if isinstance(messages, str):
        return messages
    texts: list[str] = []
    for message in messages if isinstance(messages, list | tuple) else ():
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list | tuple) else ():
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
    return "\n".join(texts) if texts else None


def _output(outer_agent: SpanRecord | None, steps: list[Step], node_by_id: Mapping[str, _Node]) -> str | None:
    if outer_agent is not None and outer_agent.output is not None:
        value = parse_json_value(outer_agent.output)
        return value if isinstance(value, str) else (_text_of(value) or json.dumps(value, default=str))
    for step in reversed(steps):
        if step.kind == "llm_call" and step.depth == 0:
            return _text_of(node_by_id[step.span_id].record.output_messages)
    return None


def _tool_definitions(records: Iterable[SpanRecord]) -> dict[str, Any]:
    """Tool name -> JSON Schema of its arguments, from GenAI, OpenInference and OpenAI-style definitions."""
    found: dict[str, Any] = {}
    seen: set[str] = set()
    for r in records:
        if r.tool_definitions is None:
            continue
        if isinstance(r.tool_definitions, str):  # model calls often repeat the same definitions
            if r.tool_definitions in seen:
                continue
            seen.add(r.tool_definitions)
        raw = parse_json_value(r.tool_definitions)
        for item in raw if isinstance(raw, list | tuple) else ():
            item = parse_json_value(item)
            if not isinstance(item, dict):
                continue
            function = item.get("function")
            fn: dict[str, Any] = function if isinstance(function, dict) else item
            name = fn.get("name")
            schema = fn.get("parameters", fn.get("parameters_json_schema", fn.get("input_schema")))
            if isinstance(name, str) and isinstance(schema, dict):
                found.setdefault(name, schema)
    return found
