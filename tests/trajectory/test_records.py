"""The trajectory records are built with keyword arguments only, so that a new field changes no call site."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.model import AgentSummary, Step, Summary, ToolCall, Trajectory, Usage
from trajgrade.core.trajectory.normalize import SpanRecord

POSITIONAL: dict[str, Callable[[], Any]] = {
    "Usage": lambda: Usage(1, 2),  # type: ignore[misc]
    "ToolCall": lambda: ToolCall("search"),  # type: ignore[misc]
    "Step": lambda: Step(0, "llm_call", "a1", None, "chat", None, 0, 1, 2, "ok"),  # type: ignore[misc]
    "AgentSummary": lambda: AgentSummary("a", None, "s1", 1, 1, 0, (), 1, 1, False),  # type: ignore[misc]
    "Summary": lambda: Summary(1, 0, 0, 1, 0, 1, 1, 2, None, 1.0, (), False),  # type: ignore[misc]
    "Price": lambda: Price(1.0, 2.0),  # type: ignore[misc]
    "SpanRecord": lambda: SpanRecord("t", "s", None, "chat", "llm_call", 1, 2, False),  # type: ignore[misc]
}


@pytest.mark.parametrize("record", sorted(POSITIONAL))
def test_positional_construction_is_refused(record: str) -> None:
    with pytest.raises(TypeError):
        POSITIONAL[record]()


def test_keyword_construction_sets_every_field() -> None:
    usage = Usage(input_tokens=3, output_tokens=4, reasoning_tokens=1)
    tool = ToolCall(name="search", call_id="c1", arguments={"q": "x"}, arguments_captured=True)
    step = Step(
        index=0,
        kind="tool_call",
        span_id="s1",
        parent_span_id="r",
        name="execute_tool search",
        agent="a",
        turn=0,
        start_unix_nano=1_000_000,
        end_unix_nano=3_000_000,
        status="error",
        tool=tool,
        depth=1,
    )
    summary = Summary(
        llm_calls=0,
        tool_calls=1,
        tool_errors=1,
        turns=0,
        errors=1,
        input_tokens=None,
        output_tokens=None,
        total_tokens=None,
        cost_usd=None,
        duration_ms=2.0,
        tool_names=("search",),
        failed=False,
    )
    t = Trajectory(
        trace_id="t",
        root_span_id="r",
        root_span_name="run",
        agent_name="a",
        service_name=None,
        start_unix_nano=0,
        end_unix_nano=4_000_000,
        steps=(step,),
        agents=(),
        summary=summary,
    )
    assert (usage.total_tokens, usage.reasoning_tokens, usage.cache_read_tokens) == (7, 1, None)
    assert t.tool_steps == (step,) and t.llm_steps == ()
    assert step.failed and step.duration_ms == 2.0
    assert step.tool is not None and step.tool.arguments == {"q": "x"} and step.tool.result is None
    assert (step.depth, step.model, step.requested_tool_call_ids) == (1, None, ())
