"""The trajectory records are built with keyword arguments only, so that a new field changes no call site."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.model import AgentSummary, Step, Summary, ToolCall, Trajectory, Usage
from trajgrade.core.trajectory.normalize import MISSING, SpanRecord
from trajgrade.core.trajectory.records import ModelRecord, ToolRecord, replace_record, span_record

POSITIONAL: dict[str, Callable[[], Any]] = {
    "Usage": lambda: Usage(1, 2),  # type: ignore[misc]
    "ToolCall": lambda: ToolCall("search"),  # type: ignore[misc]
    "Step": lambda: Step(0, "llm_call", "a1", None, "chat", None, 0, 1, 2, "ok"),  # type: ignore[misc]
    "AgentSummary": lambda: AgentSummary("a", None, "s1", 1, 1, 0, (), 1, 1, False),  # type: ignore[misc]
    "Summary": lambda: Summary(1, 0, 0, 1, 0, 1, 1, 2, None, 1.0, (), False),  # type: ignore[misc]
    "Price": lambda: Price(1.0, 2.0),  # type: ignore[misc]
    "SpanRecord": lambda: SpanRecord("t", "s", None, "chat", "llm_call", 1, 2, False),  # type: ignore[misc]
    "span_record": lambda: span_record("t", "s", None, "chat", "llm_call", 1, 2, False),  # type: ignore[misc]
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


COMMON: dict[str, Any] = {
    "trace_id": "t",
    "span_id": "s",
    "parent_span_id": "r",
    "name": "execute_tool search",
    "kind": "tool_call",
    "start_unix_nano": 1,
    "end_unix_nano": 2,
    "error": False,
}


def test_a_record_holds_only_the_fields_its_span_has_and_reads_the_others_as_defaults() -> None:
    """A tool call's record has no model fields, a model call's no tool fields, and neither has an error's or a
    root's unless it has one: each is smaller than one record of every field would be."""
    plain = span_record(**COMMON)
    tool = span_record(**COMMON, tool_name="search", tool_call_id="c1", tool_arguments='{"q": 1}')
    usage = Usage(input_tokens=3, output_tokens=4)
    model = span_record(**{**COMMON, "kind": "llm_call"}, model="gpt-4o", usage=usage, error_type="APIError")
    assert type(plain) is SpanRecord and type(tool) is ToolRecord and type(model) is ModelRecord
    assert (tool.model, tool.usage, tool.requested_tool_calls, tool.error_type, tool.attributes) == (
        None,
        None,
        (),
        None,
        None,
    )
    assert (model.tool_name, model.tool_arguments, model.tool_result) == (None, MISSING, MISSING)
    assert (model.model, model.usage, model.error_type, model.error_message) == ("gpt-4o", usage, "APIError", None)
    assert tool.fields() == {
        **plain.fields(),
        "tool_name": "search",
        "tool_call_id": "c1",
        "tool_arguments": '{"q": 1}',
    }
    assert sys.getsizeof(plain) < sys.getsizeof(tool) < sys.getsizeof(model) <= 216


def test_a_replaced_record_takes_the_class_its_new_fields_need_and_equals_by_fields() -> None:
    agent = span_record(**{**COMMON, "kind": "agent"}, agent_name="helper", output="done", model="gpt-4o")
    call = replace_record(agent, kind="tool_call", tool_name="helper", tool_result=agent.output)
    assert (call.kind, call.tool_name, call.tool_result, call.model, call.agent_name) == (
        "tool_call",
        "helper",
        "done",
        "gpt-4o",
        "helper",
    )
    assert agent.kind == "agent" and agent.tool_name is None  # the original is left as it was
    assert replace_record(agent) == agent and replace_record(agent) is not agent
    assert span_record(**COMMON) == SpanRecord(**COMMON) != span_record(**COMMON, tool_name="search")
    assert span_record(**COMMON, error_type="E") != span_record(**COMMON)
