"""Content read through the format tables of ``content_formats``: tool definitions of each dialect, wrapped tool
arguments and results, GenAI message parts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trajgrade.core import content_formats as cf
from trajgrade.core.trajectory.content import final_output, requested, tool_call, tool_definitions
from trajgrade.core.trajectory.normalize import MISSING, PartsRef, SpanRecord
from trajgrade.core.trajectory.records import span_record

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def _record(**fields: Any) -> SpanRecord:
    return span_record(
        trace_id="t",
        span_id="s",
        parent_span_id=None,
        name="execute_tool search",
        kind="tool_call",
        start_unix_nano=0,
        end_unix_nano=1,
        error=False,
        **fields,
    )


@pytest.mark.parametrize(
    "definition",
    [
        {"type": "function", "function": {"name": "search", "parameters": SCHEMA}},  # OpenAI Chat Completions
        {"type": "function", "name": "search", "parameters": SCHEMA},  # GenAI / OpenAI Responses
        {"name": "search", "description": "d", "parameters_json_schema": SCHEMA},  # pydantic-ai
        {"name": "search", "input_schema": SCHEMA},  # Anthropic, MCP
    ],
    ids=["chat-completions", "genai", "pydantic-ai", "anthropic"],
)
def test_every_tool_definition_format_gives_the_schema(definition: dict[str, Any]) -> None:
    assert len(cf.TOOL_DEFINITION_FORMATS) == 4
    assert tool_definitions([_record(tool_definitions=json.dumps([definition]))]) == {"search": SCHEMA}


def test_a_definition_without_a_schema_object_is_left_out() -> None:
    assert tool_definitions([_record(tool_definitions=[{"name": "search", "parameters": "none"}])]) == {}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"args": [], "kwargs": {"q": "x"}}, {"q": "x"}),  # OpenLLMetry's decorators
        ({"args": ["x"], "kwargs": {}}, {"args": ["x"], "kwargs": {}}),  # positional: names unknown, kept as is
        ({"kwargs": {"q": "x"}}, {"q": "x"}),  # LlamaIndex
        ({"toolUseId": "1", "name": "search", "input": {"q": "x"}}, {"q": "x"}),  # Strands' legacy event
        ({"q": "x"}, {"q": "x"}),  # no wrapper
    ],
)
def test_arguments_come_out_of_their_wrapper(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    call = tool_call(_record(tool_name="search", tool_arguments=json.dumps(raw)), None)
    assert call.arguments == expected


def test_nested_result_wrappers_come_off() -> None:
    message = {"lc": 1, "type": "constructor", "id": ["ToolMessage"], "kwargs": {"content": "42"}}
    call = tool_call(_record(tool_name="search", tool_result=json.dumps({"output": message, "kwargs": {}})), None)
    assert call.result == "42"


def test_message_parts_give_requests_arguments_results_and_text() -> None:
    asked = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}]}]
    model_call = _record(output_messages=json.dumps(asked))
    assert requested(model_call) == (("c1", "search", {}),)
    inputs = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "arguments": {"q": "x"}}]}]
    outputs = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "found"}]}]
    call = tool_call(
        _record(
            tool_name="search",
            tool_arguments=PartsRef(messages=inputs, part_type=cf.TOOL_CALL_PART, field=cf.TOOL_CALL_ARGUMENTS),
            tool_result=PartsRef(messages=outputs, part_type=cf.TOOL_RESPONSE_PART, field=cf.TOOL_RESPONSE),
        ),
        None,
    )
    assert (call.arguments, call.result) == ({"q": "x"}, "found")
    text = [{"role": "assistant", "parts": [{"type": "text", "content": "a"}, {"type": "text", "content": "b"}]}]
    assert final_output(None, json.dumps(text)) == "a\nb"
    assert final_output(None, None) is None


def test_a_request_completes_a_tool_call_without_arguments() -> None:
    call = tool_call(_record(tool_name="search"), ("c9", "search", '{"q": "y"}'))
    assert (call.call_id, call.arguments, call.arguments_captured) == ("c9", {"q": "y"}, True)
    bare = tool_call(_record(tool_name="search", tool_arguments='"y"'), ("c9", "search", '{"q": "y"}'))
    assert bare.arguments == {"q": "y"}  # a bare value named by the request's one parameter
    missing = tool_call(_record(tool_name="search"), ("c9", "search", MISSING))
    assert (missing.arguments, missing.arguments_captured) == (None, False)
