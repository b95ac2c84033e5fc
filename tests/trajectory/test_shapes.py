"""How instrumentations shape tool calls, model calls and agents, each rule on the smallest OTLP/JSON trace.

The fixtures made by the real libraries (``test_fixtures.py``) check every rule on real spans; these pin each rule
alone, so that a change that breaks one names it. The traces go through the file reader, as the command line reads
them (structured AnyValue maps and arrays included).
"""

from __future__ import annotations

import json
from typing import Any

from trajgrade import grade_run, parse_config
from trajgrade.core.readers import parse_json_request
from trajgrade.core.trajectory import Trajectory, build_trajectories, normalize

TRACE = "0af7651916cd43dd8448eb211c80319c"
MS = 1_000_000


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _value(x)} for k, x in v.items()]}}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": v}


def span(
    sid: int,
    parent: int | None,
    name: str,
    start: int,
    end: int,
    attributes: dict[str, Any],
    *,
    error: bool = False,
    events: tuple[tuple[str, dict[str, Any]], ...] = (),
    remote: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": TRACE,
        "spanId": f"{sid:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start * MS),
        "endTimeUnixNano": str(end * MS),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
        "status": {"code": 2 if error else 0},
        "events": [
            {
                "name": n,
                "timeUnixNano": str(end * MS),
                "attributes": [{"key": k, "value": _value(v)} for k, v in a.items()],
            }
            for n, a in events
        ],
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
        out["flags"] = 0x300 if remote else 0x100
    return out


def runs(*spans: dict[str, Any]) -> list[Trajectory]:
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}
    return build_trajectories(normalize(s) for s in parse_json_request(request))


def one(*spans: dict[str, Any]) -> Trajectory:
    (t,) = runs(*spans)
    return t


def grade(entry: dict[str, Any], t: Trajectory) -> Any:
    return grade_run(parse_config(json.dumps({"graders": [entry]})), t).results[0]


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant"}


def chat(tokens: tuple[int, int] | None = (10, 2), **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", **extra}
    if tokens is not None:
        out["gen_ai.usage.input_tokens"], out["gen_ai.usage.output_tokens"] = tokens
    return out


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **extra}


def asks(*calls: tuple[str, str, Any]) -> str:
    parts = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}])


# --- tool arguments ---------------------------------------------------------------------------------------------


def test_argument_wrappers_come_off() -> None:
    wrapped = {
        "openllmetry langchain": {
            "input_str": "{'city': 'Paris'}",
            "tags": [],
            "metadata": {},
            "inputs": {"city": "Paris"},
        },
        "openllmetry decorator": {"args": [], "kwargs": {"city": "Paris"}},
        "smolagents": {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}},
        "llamaindex": {"kwargs": {"city": "Paris"}},
    }
    for what, value in wrapped.items():
        t = one(
            span(1, None, "run", 0, 10, AGENT),
            span(2, 1, "get_weather", 1, 2, tool("get_weather", **{"input.value": json.dumps(value)})),
        )
        assert t.tool_steps[0].tool is not None
        assert t.tool_steps[0].tool.arguments == {"city": "Paris"}, what


def test_a_wrapper_with_positional_arguments_stays() -> None:
    raw = {"args": ["Paris"], "kwargs": {}}
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "get_weather", 1, 2, tool("get_weather", **{"input.value": json.dumps(raw)})),
    )
    assert t.tool_steps[0].tool is not None and t.tool_steps[0].tool.arguments == raw


def test_arguments_recorded_only_in_the_request_are_joined_by_call_id() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "chat", 1, 2, chat(**{"gen_ai.output.messages": asks(("c1", "search", {"query": "x"}))})),
        span(3, 1, "execute_tool search", 3, 4, tool("search", **{"gen_ai.tool.call.id": "c1"})),
    )
    call = t.tool_steps[0].tool
    assert call is not None and call.arguments_captured and call.arguments == {"query": "x"}
    assert t.summary.tool_calls_not_run == () and t.summary.tool_calls_not_requested == ()


def test_a_call_id_asked_again_joins_the_latest_request() -> None:
    # FakeOpenAI-like providers number their ids per response: the sub-agent's "call_0" is not the manager's
    def asks_one(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return chat(**{"gen_ai.output.messages": asks(("call_0", name, arguments))})

    t = one(
        span(1, None, "run", 0, 100, AGENT),
        span(2, 1, "chat", 1, 2, asks_one("research", {"topic": "t"})),
        span(3, 1, "execute_tool research", 3, 50, tool("research", **{"gen_ai.tool.call.id": "call_0"})),
        span(4, 3, "invoke_agent researcher", 4, 49, {**AGENT, "gen_ai.agent.name": "researcher"}),
        span(5, 4, "chat", 5, 6, asks_one("search", {"query": "q"})),
        span(6, 4, "execute_tool search", 7, 8, tool("search", **{"gen_ai.tool.call.id": "call_0"})),
    )
    assert [s.tool.arguments for s in t.tool_steps if s.tool is not None] == [{"topic": "t"}, {"query": "q"}]
    assert t.summary.tool_calls_not_run == ()


def test_a_bare_value_is_named_by_the_requests_one_parameter() -> None:
    def flat(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
        return {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            prefix + "function.name": name,
            prefix + "function.arguments": json.dumps(arguments),
        }

    oi_tool = {"openinference.span.kind": "TOOL"}
    t = one(
        span(1, None, "graph", 0, 20, {"openinference.span.kind": "AGENT", "agent.name": "assistant"}),
        span(2, 1, "ChatOpenAI", 1, 2, flat("get_weather", {"city": "Paris"})),
        span(3, 1, "get_weather", 3, 4, {**oi_tool, "tool.name": "get_weather", "input.value": "Paris"}),
        span(4, 1, "ChatOpenAI", 5, 6, flat("list_items", {"page": 3})),
        span(5, 1, "list_items", 7, 8, {**oi_tool, "tool.name": "list_items", "input.value": "3"}),
    )
    assert [s.tool.arguments for s in t.tool_steps if s.tool] == [{"city": "Paris"}, {"page": 3}]


def test_structured_arguments_are_read_as_they_are() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(
            2, 1, "execute_tool search", 1, 2, tool("search", **{"gen_ai.tool.call.arguments": {"query": "x", "n": 2}})
        ),
    )
    assert t.tool_steps[0].tool is not None and t.tool_steps[0].tool.arguments == {"query": "x", "n": 2}


# --- model calls ----------------------------------------------------------------------------------------------------


def test_an_llm_marked_span_without_a_request_is_not_a_call() -> None:
    # LlamaIndex's helper span: a model name and invocation parameters, but no message, usage or output
    configured = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.invocation_parameters": "{}"}
    request = {**configured, "llm.token_count.prompt": 5}
    failed = {**configured, "llm.input_messages.0.message.role": "user"}  # asked, then failed: no usage, no output
    t = one(
        span(1, None, "agent", 0, 10, {"openinference.span.kind": "AGENT", "agent.name": "a"}),
        span(2, 1, "OpenAI._prepare_chat_with_tools", 1, 2, configured),
        span(3, 1, "OpenAI.achat", 2, 3, request),
        span(4, 1, "OpenAI._prepare_chat_with_tools", 4, 5, configured),
        span(5, 1, "OpenAI.achat", 5, 6, failed, error=True),
    )
    assert (t.summary.llm_calls, t.summary.turns, t.summary.failed_llm_calls_without_usage) == (2, 2, 1)


def test_a_failed_request_without_usage_counts_zero_tokens() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT, error=True),
        span(2, 1, "chat", 1, 2, chat((10, 3))),
        span(3, 1, "chat", 3, 4, chat(None, **{"error.type": "InternalServerError"}), error=True),
    )
    s = t.summary
    assert (s.llm_calls, s.input_tokens, s.output_tokens, s.llm_calls_without_usage) == (2, 10, 3, 0)
    assert s.failed_llm_calls_without_usage == 1
    result = grade({"type": "token-budget", "max": 13}, t)
    assert result.status == "pass" and "1 failed model request(s) reported no usage" in result.explanation
    assert grade({"type": "token-budget", "max": 12}, t).status == "fail"


def test_a_request_that_did_not_fail_and_reports_no_usage_still_leaves_the_sum_a_lower_bound() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "chat", 1, 2, chat((10, 3))),
        span(3, 1, "chat", 3, 4, chat(None)),
    )
    assert t.summary.llm_calls_without_usage == 1
    assert grade({"type": "token-budget", "max": 100}, t).status == "error"


def test_newest_usage_keys() -> None:
    usage = {
        "gen_ai.usage.cache_read.input_tokens": 4,
        "gen_ai.usage.cache_write.input_tokens": 3,
        "gen_ai.usage.reasoning.output_tokens": 7,
    }
    t = one(span(1, None, "run", 0, 10, AGENT), span(2, 1, "chat", 1, 2, chat((10, 9), **usage)))
    s = t.summary
    assert (s.cache_read_tokens, s.cache_write_tokens, s.reasoning_tokens) == (4, 3, 7)
    assert grade({"type": "budget", "max_reasoning_tokens": 6}, t).status == "fail"
    assert grade({"type": "budget", "max_reasoning_tokens": 7}, t).status == "pass"


# --- response ids ---------------------------------------------------------------------------------------------------


def test_a_model_calls_response_id_from_each_dialect() -> None:
    oi = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 5}
    t = one(
        span(1, None, "run", 0, 20, AGENT),
        span(2, 1, "chat", 1, 2, chat(**{"gen_ai.response.id": "chatcmpl-a"})),
        span(3, 1, "ChatCompletion", 3, 4, {**oi, "output.value": '{"id":"chatcmpl-b","choices":[]}'}),
        span(4, 1, "ChatCompletion", 5, 6, {**oi, "output.value": '{"choices":[],"id":"chatcmpl-c"}'}),
        span(5, 1, "ChatCompletion", 7, 8, {**oi, "output.value": "ChatCompletion(id='chatcmpl-d')"}),
        span(6, 1, "chat", 9, 10, chat()),
        span(7, 1, "execute_tool search", 11, 12, tool("search", **{"output.value": '{"id":"x"}'})),
    )
    # OpenInference's raw response is read only where the id leads it (as the OpenAI client writes it): reading
    # further would parse every response on the hot path
    assert [s.response_id for s in t.steps] == ["chatcmpl-a", "chatcmpl-b", None, None, None, None]


def test_nested_model_spans_keep_the_response_id_of_either() -> None:
    """Two instrumentations of one request: the call is the inner span that has usage, with the response id of the
    outer one when only that has it."""
    outer = chat(None, **{"gen_ai.response.id": "chatcmpl-outer"})
    t = one(
        span(1, None, "run", 0, 20, AGENT),
        span(2, 1, "chat", 1, 5, outer),
        span(3, 2, "openai.chat", 2, 4, chat((10, 2))),
        span(4, 1, "chat", 6, 10, outer),
        span(5, 4, "openai.chat", 7, 9, chat((10, 2), **{"gen_ai.response.id": "chatcmpl-inner"})),
    )
    assert [(s.span_id, s.response_id) for s in t.steps] == [
        (f"{3:016x}", "chatcmpl-outer"),
        (f"{5:016x}", "chatcmpl-inner"),
    ]


# --- agents ---------------------------------------------------------------------------------------------------------


def test_agent_steps_known_by_their_span_name_name_the_agent_around_them() -> None:
    chain = {"openinference.span.kind": "CHAIN"}

    def step(sid: int, parent: int, start: int, agent: str) -> dict[str, Any]:
        value = f"AgentSetup(input=[...], current_agent_name='{agent}')"
        return span(sid, parent, "BaseWorkflowAgent.run_agent_step", start, start + 3, {**chain, "input.value": value})

    request = {"openinference.span.kind": "LLM", "llm.model_name": "m", "llm.token_count.prompt": 5}
    t = one(
        span(1, None, "FunctionAgent.run", 0, 100, chain),
        step(2, 1, 1, "assistant"),
        span(3, 2, "OpenAI.astream_chat", 2, 3, request),
        span(4, 1, "FunctionTool.acall", 10, 60, {"openinference.span.kind": "TOOL", "tool.name": "research"}),
        span(5, 4, "FunctionAgent.run", 11, 59, chain),
        step(6, 5, 12, "researcher"),
        span(7, 6, "OpenAI.astream_chat", 13, 14, request),
    )
    counts = {a.name: (a.llm_calls, a.tool_calls, a.parent) for a in t.agents}
    assert counts == {"assistant": (1, 1, None), "researcher": (1, 0, "assistant")}


def test_a_sub_agent_beside_the_tool_that_started_it_is_under_it() -> None:
    t = one(
        span(1, None, "assistant.agent", 0, 100, {"traceloop.span.kind": "agent", "gen_ai.agent.name": "assistant"}),
        span(2, 1, "openai.chat", 1, 2, chat()),
        span(3, 1, "research.tool", 3, 50, {"traceloop.span.kind": "tool", "gen_ai.tool.name": "research"}),
        span(4, 1, "researcher.agent", 4, 40, {"traceloop.span.kind": "agent", "gen_ai.agent.name": "researcher"}),
        span(5, 4, "openai.chat", 5, 6, chat()),
        span(6, 1, "openai.chat", 60, 61, chat()),
    )
    counts = {a.name: (a.llm_calls, a.tool_calls, a.parent) for a in t.agents}
    assert counts == {"assistant": (2, 1, None), "researcher": (1, 0, "assistant")}


def test_a_sub_agent_requested_as_a_tool_without_a_tool_span_is_that_tool_call() -> None:
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    manager_llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        prefix + "id": "call_1",
        prefix + "function.name": "researcher",
        prefix + "function.arguments": json.dumps({"task": "solar panels"}),
    }
    t = one(
        span(1, None, "assistant.run", 0, 100, {"openinference.span.kind": "AGENT"}),
        span(2, 1, "Step 1", 1, 60, {"openinference.span.kind": "CHAIN"}),
        span(3, 2, "OpenAIServerModel.generate", 2, 3, manager_llm),
        span(4, 2, "researcher.run", 4, 50, {"openinference.span.kind": "AGENT"}),
        span(5, 4, "OpenAIServerModel.generate", 5, 6, {"openinference.span.kind": "LLM", "llm.model_name": "m"}),
    )
    (call,) = t.tool_steps
    assert call.tool is not None and call.tool.name == "researcher" and call.agent == "assistant"
    assert call.tool.arguments == {"task": "solar panels"} and call.tool.call_id == "call_1"
    assert {a.name: a.parent for a in t.agents} == {"assistant": None, "researcher": "assistant"}
    assert t.summary.tool_calls_not_run == ()


# --- roots ----------------------------------------------------------------------------------------------------------


def test_spans_under_a_root_that_never_ended_are_one_failed_partial_run() -> None:
    t = one(
        span(2, 1, "chat", 1, 2, chat()),
        span(3, 1, "execute_tool search", 3, 4, tool("search")),
        span(4, 1, "chat", 5, 6, chat()),
    )
    assert (t.summary.llm_calls, t.summary.tool_calls) == (2, 1)
    assert t.partial and t.summary.failed and t.root_span_id == f"{1:016x}"
    assert any("never ended" in n for n in t.notes)


def test_spans_under_a_remote_parent_stay_runs_of_their_own() -> None:
    found = runs(
        span(2, 1, "invoke_agent a", 1, 2, AGENT, remote=True), span(3, 1, "invoke_agent b", 3, 4, AGENT, remote=True)
    )
    assert len(found) == 2 and not any(t.partial for t in found)


# --- errors and requests --------------------------------------------------------------------------------------------


def test_the_tool_exception_event_marks_a_tool_failed() -> None:
    event = ("gen_ai.execute_tool.exception", {"exception.type": "FileNotFoundError", "exception.message": "missing"})
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "execute_tool read_file", 1, 2, tool("read_file"), events=(event,)),
    )
    step = t.tool_steps[0]
    assert (step.status, step.error_type, step.error_message) == ("error", "FileNotFoundError", "missing")
    assert t.summary.tool_errors == 1


def test_requested_and_executed_tool_calls_are_told_apart() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(
            2,
            1,
            "chat",
            1,
            2,
            chat(**{"gen_ai.output.messages": asks(("c1", "search", {}), ("c2", "delete_file", {}))}),
        ),
        span(3, 1, "execute_tool search", 3, 4, tool("search", **{"gen_ai.tool.call.id": "c1"})),
        span(4, 1, "execute_tool shell", 5, 6, tool("shell", **{"gen_ai.tool.call.id": "c9"})),
    )
    assert t.summary.tool_calls_not_run == ("delete_file",)
    assert t.summary.tool_calls_not_requested == ("shell",)
    assert grade({"type": "tool-calls", "requested_run": True}, t).status == "fail"
    assert grade({"type": "tool-calls", "only_requested": True}, t).status == "fail"
    assert grade({"type": "tool-calls", "required": ["^search$"], "requested_run": False}, t).status == "pass"


def test_without_any_recorded_request_nothing_is_reported_unrequested() -> None:
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "chat", 1, 2, chat()),
        span(3, 1, "execute_tool x", 3, 4, tool("x")),
    )
    assert t.summary.tool_calls_not_requested == () and t.summary.tool_calls_not_run == ()
    assert grade({"type": "tool-calls", "only_requested": True}, t).status == "pass"


def test_structured_output_messages_are_read_as_they_are() -> None:
    parts = [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {"query": "x"}}]
    messages = [{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}]
    t = one(
        span(1, None, "run", 0, 10, AGENT),
        span(2, 1, "chat", 1, 2, chat(**{"gen_ai.output.messages": messages})),
        span(3, 1, "execute_tool search", 3, 4, tool("search", **{"gen_ai.tool.call.id": "c1"})),
    )
    (call,) = t.tool_steps
    assert call.tool is not None and call.tool.arguments == {"query": "x"} and call.tool.call_id == "c1"
    assert t.summary.tool_calls_not_run == () and t.summary.tool_calls_not_requested == ()


def test_invoke_agent_client_and_internal_and_invoke_workflow_are_agents() -> None:
    remote = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "remote_helper"}
    workflow = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "pipeline"}
    client = span(2, 1, "invoke_agent remote_helper", 1, 5, remote)
    client["kind"] = 3  # CLIENT: an agent in another service
    t = one(
        span(1, None, "invoke_workflow pipeline", 0, 20, workflow),
        client,
        span(3, 1, "invoke_agent assistant", 6, 19, AGENT),
        span(4, 3, "chat", 7, 8, chat()),
    )
    assert t.summary.llm_calls == 1
    # the workflow is the run around them, not an agent; the remote agent is one, with no work of its own here
    assert {a.name: (a.parent, a.llm_calls) for a in t.agents} == {"assistant": (None, 1), "remote_helper": (None, 0)}


def test_an_agents_setup_alone_is_not_a_run() -> None:
    setup = {"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "assistant"}
    found = runs(span(1, None, "create_agent assistant", 0, 1, setup))
    assert found == []
    t = one(span(1, None, "create_agent assistant", 0, 10, setup), span(2, 1, "chat", 1, 2, chat()))
    assert t.summary.llm_calls == 1  # with work under it, it is the run's root like any other span


def test_a_span_summarising_parallel_tool_calls_is_not_a_call() -> None:
    merged = tool("(merged tools)", **{"gen_ai.tool.call.id": "e1"})
    t = one(
        span(1, None, "invoke_agent assistant", 0, 10, AGENT),
        span(2, 1, "execute_tool a", 1, 2, tool("a")),
        span(3, 1, "execute_tool b", 1, 2, tool("b")),
        span(4, 1, "execute_tool (merged)", 2, 3, merged),
    )
    assert t.summary.tool_names == ("a", "b")
