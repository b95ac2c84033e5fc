"""Hand-built runs for grader tests: explicit ids and time offsets, built by the real trajectory builder.

    t = run(llm(in_=100, out=10), tool("search", {"q": "x"}, result="ok"), llm(), agent="helper")

Each step starts 1 ms after the previous one; LLM calls get turn numbers as the builder assigns them.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from trajgrade.core.trajectory import SpanRecord, Step, Trajectory, build_trajectories
from trajgrade.core.trajectory.normalize import MISSING
from trajgrade.core.trajectory.records import span_record

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT_ID = "00f067aa0ba902b7"
MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def llm(
    in_: int | None = 100,
    out: int | None = 10,
    *,
    model: str = "gpt-4o-mini",
    error: bool = False,
    cost: float | None = None,
    tool_call_ids: tuple[str, ...] = (),
    duration_ms: float = 0.5,
    response_id: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": "llm_call",
        "response_id": response_id,
        "in": in_,
        "out": out,
        "model": model,
        "error": error,
        "cost": cost,
        "ids": tool_call_ids,
        "duration_ms": duration_ms,
    }


def tool(
    name: str,
    arguments: Any = MISSING,
    result: Any = MISSING,
    *,
    error: bool = False,
    call_id: str | None = None,
    error_type: str | None = None,
    duration_ms: float = 0.5,
    children: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    return {
        "kind": "tool_call",
        "name": name,
        "arguments": arguments,
        "result": result,
        "error": error,
        "call_id": call_id,
        "error_type": error_type,
        "duration_ms": duration_ms,
        "children": children,
    }


def run(
    *steps: dict[str, Any],
    agent: str | None = "agent",
    failed: bool = False,
    duration_ms: float | None = None,
    tool_definitions: Any = None,
    output: str | None = None,
    root_attributes: dict[str, Any] | None = None,
) -> Trajectory:
    """A one-trace run: a root (an ``invoke_agent`` span when ``agent`` is given) with the steps under it."""
    from trajgrade.core.trajectory.model import Usage

    ids = (f"{n:016x}" for n in itertools.count(1))
    records: list[SpanRecord] = []
    clock = T0 + MS

    def emit(items: tuple[dict[str, Any], ...], parent: str) -> None:
        nonlocal clock
        for item in items:
            span_id = next(ids)
            start = clock
            end = start + int(item["duration_ms"] * MS)
            clock += MS
            if item["kind"] == "llm_call":
                usage = (
                    Usage(input_tokens=item["in"], output_tokens=item["out"])
                    if item["in"] is not None or item["out"] is not None
                    else None
                )
                records.append(
                    span_record(
                        trace_id=TRACE_ID,
                        span_id=span_id,
                        parent_span_id=parent,
                        name=f"chat {item['model']}",
                        kind="llm_call",
                        start_unix_nano=start,
                        end_unix_nano=end,
                        error=item["error"],
                        error_type="APIError" if item["error"] else None,
                        model=item["model"],
                        provider="openai",
                        response_id=item["response_id"],
                        usage=usage,
                        cost_usd=item["cost"],
                        requested_tool_calls=tuple((i, None, MISSING) for i in item["ids"]),
                        tool_definitions=json.dumps(tool_definitions) if tool_definitions is not None else None,
                    )
                )
            else:
                records.append(
                    span_record(
                        trace_id=TRACE_ID,
                        span_id=span_id,
                        parent_span_id=parent,
                        name=f"execute_tool {item['name']}",
                        kind="tool_call",
                        start_unix_nano=start,
                        end_unix_nano=end,
                        error=item["error"],
                        error_type=item["error_type"] or ("ToolError" if item["error"] else None),
                        tool_name=item["name"],
                        tool_call_id=item["call_id"],
                        tool_arguments=json.dumps(item["arguments"]) if item["arguments"] is not MISSING else MISSING,
                        tool_result=(
                            item["result"]
                            if isinstance(item["result"], str) or item["result"] is MISSING
                            else json.dumps(item["result"])
                        ),
                    )
                )
                emit(item["children"], span_id)

    emit(steps, ROOT_ID)
    end = max([r.end_unix_nano for r in records], default=T0) + MS
    if duration_ms is not None:
        end = T0 + int(duration_ms * MS)
    root = span_record(
        trace_id=TRACE_ID,
        span_id=ROOT_ID,
        parent_span_id=None,
        name=f"invoke_agent {agent}" if agent else "run",
        kind="agent" if agent else "other",
        start_unix_nano=T0,
        end_unix_nano=end,
        error=failed,
        agent_name=agent,
        output=output,
        attributes=root_attributes or {},
    )
    (t,) = build_trajectories([root, *records])
    return t


def root_record(trace: str, n: int) -> SpanRecord:
    """The root span of a run of trace ``trace`` (its span id and times from ``n``), alone: what a door holds until
    the run is graded."""
    return span_record(
        trace_id=trace,
        span_id=f"{n:016x}",
        parent_span_id=None,
        name="invoke_agent",
        kind="agent",
        start_unix_nano=n,
        end_unix_nano=n,
        error=False,
    )


def repeating_calls(arguments: tuple[str, ...], results: tuple[str, ...]) -> Any:
    """A hypothesis strategy of runs for :func:`tool_steps`: up to 20 calls drawn from a few (tool ``a`` or ``b``,
    argument text, result text), so that calls of equal text come again and again."""
    from hypothesis import strategies as st

    pool = st.tuples(st.sampled_from("ab"), st.sampled_from(arguments), st.sampled_from(results))
    return st.lists(pool, min_size=1, max_size=4).flatmap(lambda calls: st.lists(st.sampled_from(calls), max_size=20))


def tool_steps(calls: list[tuple[str, str, str]], *, parsed: bool = False) -> list[Step]:
    """Tool-call steps of (tool, argument text, result text): arguments and result parsed on first read by the
    parsers a span's text gets (so calls of equal text share their text's number in a grader's pass), or, with
    ``parsed``, given parsed already (no text kept: each call compared on its own)."""
    from trajgrade.core.trajectory.content import _arguments, _result
    from trajgrade.core.trajectory.model import ToolCall

    steps = []
    for i, (name, arguments, result) in enumerate(calls):
        tool = (
            ToolCall(
                name=name,
                arguments=_arguments(arguments),
                result=_result(result),
                arguments_captured=True,
                result_captured=True,
            )
            if parsed
            else ToolCall(
                name=name,
                arguments=arguments,
                result=result,
                arguments_captured=True,
                result_captured=True,
                parse_arguments=_arguments,
                parse_result=_result,
            )
        )
        steps.append(
            Step(
                index=i,
                kind="tool_call",
                span_id=f"{i + 1:016x}",
                parent_span_id=ROOT_ID,
                name=f"execute_tool {name}",
                agent=None,
                turn=0,
                start_unix_nano=T0 + i * MS,
                end_unix_nano=T0 + i * MS,
                status="ok",
                tool=tool,
            )  # fmt: skip
        )
    return steps
