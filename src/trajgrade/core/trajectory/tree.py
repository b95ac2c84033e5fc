"""A run's spans as a tree: where each span stands (its agent, its delegation depth, the nearest model and tool
calls above it), agent spans put where their work is, and double instrumentation folded.

See the module docstring of ``build.py`` for the rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from trajgrade.core import semconv as sc
from trajgrade.core.trajectory.content import Request
from trajgrade.core.trajectory.records import MISSING, SpanRecord, replace_record

__all__ = ["Node", "delegations", "fold_llm_spans", "fold_tool_spans", "walk"]


class Node:
    """A record where it stands in the run (one per span; a plain class, see ``model.py``'s docstring)."""

    __slots__ = ("agent", "depth", "llm_ancestor", "record", "tool_ancestor")

    def __init__(
        self,
        *,
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


def walk(root: SpanRecord, index: Mapping[str, SpanRecord]) -> list[Node]:
    """The records under ``root`` (depth first), each where it stands; a span whose children are agent steps
    becomes their agent."""
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
    nodes: list[Node] = []
    stack = [Node(record=root, agent=None, depth=0, llm_ancestor=None, tool_ancestor=None)]
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
            r = node.record = replace_record(r, kind=sc.AGENT, agent_name=named)
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
            stack.append(Node(record=child, agent=agent, depth=depth, llm_ancestor=llm, tool_ancestor=tool))
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


def delegations(nodes: list[Node], requests: Mapping[str, tuple[Request, ...]]) -> list[Node]:
    """Sub-agents that no tool span started but that the model requested by name as a tool: the delegation call."""
    names = {call[1] for calls in requests.values() for call in calls}
    out: list[Node] = []
    for n in nodes:
        r = n.record
        if (
            r.kind == sc.AGENT
            and n.tool_ancestor is None
            and n.agent is not None
            and n.agent.agent_name != r.agent_name
            and r.agent_name in names
        ):
            call = replace_record(
                r,
                kind=sc.TOOL,
                tool_name=r.agent_name,
                tool_arguments=MISSING,
                tool_result=r.output if r.output is not None else MISSING,
            )
            out.append(Node(record=call, agent=n.agent, depth=n.depth, llm_ancestor=n.llm_ancestor, tool_ancestor=None))
    return out


def fold_llm_spans(llm_nodes: list[Node], node_by_id: Mapping[str, Node]) -> list[Node]:
    """Nested LLM spans (double instrumentation) count once: the innermost of each chain that has usage, failed
    when any of the chain failed, with the chain's response id when it has none of its own."""
    has_llm_child = {n.llm_ancestor for n in llm_nodes if n.llm_ancestor is not None}
    if not has_llm_child:
        return llm_nodes
    chosen: dict[str, Node] = {}
    for leaf in (n for n in llm_nodes if n.record.span_id not in has_llm_child):
        chain = [leaf]
        while chain[-1].llm_ancestor is not None:
            chain.append(node_by_id[chain[-1].llm_ancestor])
        pick = next((n for n in chain if n.record.usage is not None), leaf)
        record = pick.record
        if any(n.record.error for n in chain) and not record.error:
            failed = next(n.record for n in chain if n.record.error)
            record = replace_record(
                record, error=True, error_type=failed.error_type, error_message=failed.error_message
            )
        if record.response_id is None:
            response_id = next((n.record.response_id for n in chain if n.record.response_id is not None), None)
            if response_id is not None:
                record = replace_record(record, response_id=response_id)
        if record is not pick.record:
            pick = Node(
                record=record,
                agent=pick.agent,
                depth=pick.depth,
                llm_ancestor=pick.llm_ancestor,
                tool_ancestor=pick.tool_ancestor,
            )
        chosen.setdefault(pick.record.span_id, pick)
    return list(chosen.values())


def fold_tool_spans(tool_nodes: list[Node]) -> list[Node]:
    """A tool span inside a tool span for the same call (same name or call id) is merged into the outer one."""
    merged: dict[str, Node] = {n.record.span_id: n for n in tool_nodes}
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
        merged[o.span_id] = Node(
            record=replace_record(
                o,
                tool_call_id=o.tool_call_id or inner.tool_call_id,
                tool_arguments=o.tool_arguments if o.tool_arguments is not MISSING else inner.tool_arguments,
                tool_result=o.tool_result if o.tool_result is not MISSING else inner.tool_result,
                error=o.error or inner.error,
                error_type=o.error_type or inner.error_type,
            ),
            agent=outer.agent,
            depth=outer.depth,
            llm_ancestor=outer.llm_ancestor,
            tool_ancestor=outer.tool_ancestor,
        )
        del merged[inner.span_id]
    return list(merged.values())
