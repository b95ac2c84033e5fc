"""What a run is made of once its spans are read: steps, agents, a summary.

What counts:

- an LLM call is one model request (one span after removing double instrumentation), failed ones included;
- a tool call is one tool execution, failed ones included; a failed one is also a tool error;
- a turn is one LLM call; a tool call belongs to the turn of the model call that asked for it (by tool-call
  id), else of the model call that started before it; a run with no LLM call is all turn 0 and has 0 turns;
- tokens are summed over LLM calls only; ``None`` means unknown, never zero, except for a failed model
  request that reports no usage, which counts zero (as the frameworks' own accounting does);
- errors are the run's LLM, tool and agent spans, and its root, whose status is ERROR.

Every value here is read-only by contract. The classes are plain slotted ones (dataclasses for their comparison
and ``repr``) rather than frozen dataclasses, because a frozen dataclass of twenty fields costs about eight times
as much to build: a trajectory builds a ``Step`` per span, and its ``Summary`` and ``Trajectory`` once a run.
They also write their ``__init__`` out: this module is compiled with mypyc (``setup.py``), which compiles a written
``__init__`` but leaves the one ``@dataclass`` generates interpreted, at about eight times the cost.

Every record here is built with keyword arguments only (the written ``__init__`` methods take them after a
``*``, the dataclasses are ``kw_only``): adding a field touches the model, its builder and its test, not every
call site.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

StepKind = Literal["llm_call", "tool_call"]


@dataclass(slots=True, init=False)
class Usage:
    """Token counts of one LLM call (or a sum); ``None`` where the span did not say."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None

    def __init__(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens
        self.reasoning_tokens = reasoning_tokens

    @property
    def known(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class ToolCall:
    """The tool part of a tool-call step; ``arguments`` and ``result`` are parsed when they are JSON.

    ``arguments_captured`` / ``result_captured`` say whether the spans recorded them at all (content
    capture is opt-in in several instrumentations). With ``parse_arguments`` / ``parse_result``, the value
    given is raw and the function computes it on first read (tool arguments and results are JSON text on most
    spans, and most graders never look at the results).

    ``arguments_text`` / ``result_text`` keep the text a value is parsed from (by ``arguments_parser`` /
    ``result_parser``; None when the value was given as it is): two calls of equal text and the same parser have
    values parsed alike (equal, but for a NaN, which equals nothing), so a grader can compare or transform a value
    once per distinct text rather than once per call.
    """

    __slots__ = (
        "_arguments",
        "_parse_arguments",
        "_parse_result",
        "_result",
        "arguments_captured",
        "arguments_parser",
        "arguments_text",
        "call_id",
        "name",
        "result_captured",
        "result_parser",
        "result_text",
    )

    def __init__(
        self,
        *,
        name: str,
        call_id: str | None = None,
        arguments: Any = None,
        result: Any = None,
        arguments_captured: bool = False,
        result_captured: bool = False,
        parse_arguments: Callable[[Any], Any] | None = None,
        parse_result: Callable[[Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.call_id = call_id
        self._arguments = arguments
        self._result = result
        self.arguments_captured = arguments_captured
        self.result_captured = result_captured
        self._parse_arguments = parse_arguments
        self._parse_result = parse_result
        self.arguments_parser = parse_arguments
        self.arguments_text: str | None = arguments if parse_arguments is not None and type(arguments) is str else None
        self.result_parser = parse_result
        self.result_text: str | None = result if parse_result is not None and type(result) is str else None

    @property
    def arguments(self) -> Any:
        if self._parse_arguments is not None:
            self._arguments = self._parse_arguments(self._arguments)
            self._parse_arguments = None
        return self._arguments

    @property
    def result(self) -> Any:
        if self._parse_result is not None:
            self._result = self._parse_result(self._result)
            self._parse_result = None
        return self._result

    def same_result_text(self, other: ToolCall) -> bool:
        """Whether both results are parsed by the same function from equal text: then they are equal, whether
        parsed yet or not (the loop search compares results without encoding them when they are)."""
        text = self.result_text
        return text is not None and self.result_parser is other.result_parser and text == other.result_text

    def _key(self) -> tuple[Any, ...]:
        return (self.name, self.call_id, self.arguments, self.result, self.arguments_captured, self.result_captured)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ToolCall(name={self.name!r}, call_id={self.call_id!r}, arguments={self.arguments!r}, "
            f"result={self.result!r}, arguments_captured={self.arguments_captured!r}, "
            f"result_captured={self.result_captured!r})"
        )


@dataclass(slots=True, init=False)
class Step:
    """One LLM call or tool call of a run, in start order."""

    index: int
    kind: StepKind
    span_id: str
    parent_span_id: str | None
    name: str
    agent: str | None
    turn: int
    start_unix_nano: int
    end_unix_nano: int
    status: Literal["ok", "error"]
    error_type: str | None
    error_message: str | None
    model: str | None
    provider: str | None
    #: LLM calls: the id the provider gave the model's response (``gen_ai.response.id``), when the span has it.
    response_id: str | None
    usage: Usage | None
    cost_usd: float | None
    tool: ToolCall | None
    requested_tool_call_ids: tuple[str, ...]
    #: Nesting depth of delegation: 0 for the run's own agent, 1 for a sub-agent, ...
    depth: int

    def __init__(
        self,
        *,
        index: int,
        kind: StepKind,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        agent: str | None,
        turn: int,
        start_unix_nano: int,
        end_unix_nano: int,
        status: Literal["ok", "error"],
        error_type: str | None = None,
        error_message: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        response_id: str | None = None,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        tool: ToolCall | None = None,
        requested_tool_call_ids: tuple[str, ...] = (),
        depth: int = 0,
    ) -> None:
        self.index = index
        self.kind = kind
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.agent = agent
        self.turn = turn
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.status = status
        self.error_type = error_type
        self.error_message = error_message
        self.model = model
        self.provider = provider
        self.response_id = response_id
        self.usage = usage
        self.cost_usd = cost_usd
        self.tool = tool
        self.requested_tool_call_ids = requested_tool_call_ids
        self.depth = depth

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_unix_nano - self.start_unix_nano) / 1e6

    @property
    def failed(self) -> bool:
        return self.status == "error"


@dataclass(slots=True, init=False)
class AgentSummary:
    """One agent of a run (the run's own and each sub-agent it delegated to)."""

    name: str
    parent: str | None
    span_id: str
    turns: int
    llm_calls: int
    tool_calls: int
    tool_names: tuple[str, ...]
    input_tokens: int | None
    output_tokens: int | None
    failed: bool

    def __init__(
        self,
        *,
        name: str,
        parent: str | None,
        span_id: str,
        turns: int,
        llm_calls: int,
        tool_calls: int,
        tool_names: tuple[str, ...],
        input_tokens: int | None,
        output_tokens: int | None,
        failed: bool,
    ) -> None:
        self.name = name
        self.parent = parent
        self.span_id = span_id
        self.turns = turns
        self.llm_calls = llm_calls
        self.tool_calls = tool_calls
        self.tool_names = tool_names
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.failed = failed


@dataclass(slots=True, init=False)
class Summary:
    """The run's metrics, as graders and the CLI read them."""

    llm_calls: int
    tool_calls: int
    tool_errors: int
    turns: int
    errors: int
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    duration_ms: float
    tool_names: tuple[str, ...]
    failed: bool
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    #: LLM calls that carry no token counts although others do (the sums are then lower bounds).
    llm_calls_without_usage: int
    #: Where the token counts came from: "llm_calls", "agent_totals" (a fallback) or None.
    usage_source: str | None
    #: LLM calls whose cost could not be known (no span cost, no tokens, or an unknown model).
    llm_calls_without_cost: int
    #: Failed model requests that reported no usage: counted as zero tokens, as the frameworks count them.
    failed_llm_calls_without_usage: int
    #: Tool calls a model requested that no tool span executed (names, in request order), and tool calls that
    #: ran without a request among the run's model calls: known only where the spans record the requests.
    tool_calls_not_run: tuple[str, ...]
    tool_calls_not_requested: tuple[str, ...]

    def __init__(
        self,
        *,
        llm_calls: int,
        tool_calls: int,
        tool_errors: int,
        turns: int,
        errors: int,
        input_tokens: int | None,
        output_tokens: int | None,
        total_tokens: int | None,
        cost_usd: float | None,
        duration_ms: float,
        tool_names: tuple[str, ...],
        failed: bool,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        llm_calls_without_usage: int = 0,
        usage_source: str | None = None,
        llm_calls_without_cost: int = 0,
        failed_llm_calls_without_usage: int = 0,
        tool_calls_not_run: tuple[str, ...] = (),
        tool_calls_not_requested: tuple[str, ...] = (),
    ) -> None:
        self.llm_calls = llm_calls
        self.tool_calls = tool_calls
        self.tool_errors = tool_errors
        self.turns = turns
        self.errors = errors
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total_tokens = total_tokens
        self.cost_usd = cost_usd
        self.duration_ms = duration_ms
        self.tool_names = tool_names
        self.failed = failed
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens
        self.reasoning_tokens = reasoning_tokens
        self.llm_calls_without_usage = llm_calls_without_usage
        self.usage_source = usage_source
        self.llm_calls_without_cost = llm_calls_without_cost
        self.failed_llm_calls_without_usage = failed_llm_calls_without_usage
        self.tool_calls_not_run = tool_calls_not_run
        self.tool_calls_not_requested = tool_calls_not_requested


@dataclass(slots=True, init=False)
class Trajectory:
    """One agent run: the subtree under a local root span."""

    trace_id: str
    root_span_id: str
    root_span_name: str
    agent_name: str | None
    service_name: str | None
    start_unix_nano: int
    end_unix_nano: int
    steps: tuple[Step, ...]
    agents: tuple[AgentSummary, ...]
    summary: Summary
    #: Attributes of the root span (for suite matching).
    root_attributes: dict[str, Any]
    #: The run's final answer when the spans captured it.
    output: str | None
    #: JSON Schemas of the tools' arguments by tool name, when the spans carried tool definitions.
    tool_definitions: dict[str, Any]
    #: True when the run was graded from an incomplete trace (spans dropped, root never ended, ...).
    partial: bool
    #: Why the trace is partial, or other remarks a reader should see.
    notes: tuple[str, ...]

    #: The steps that are model calls, and those that are tool calls, in order (kept: every grader reads them).
    llm_steps: tuple[Step, ...] = field(init=False, repr=False, compare=False)
    tool_steps: tuple[Step, ...] = field(init=False, repr=False, compare=False)
    #: The span ids of ``steps``, ``llm_steps`` and ``tool_steps``, in order: the evidence of a limit crossed quotes
    #: the spans past it, a slice of these, without reading the steps again (on a long run, each step read anew by
    #: each grader is a read from memory rather than from the processor's caches).
    span_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    llm_span_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    tool_span_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    #: The tool name of each of ``tool_steps`` (None for a step without a tool, which a built run does not have).
    tool_names: tuple[str | None, ...] = field(init=False, repr=False, compare=False)
    #: The span ids of the steps that failed (status ERROR), and of the model calls among them.
    failed_span_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    failed_llm_span_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        *,
        trace_id: str,
        root_span_id: str,
        root_span_name: str,
        agent_name: str | None,
        service_name: str | None,
        start_unix_nano: int,
        end_unix_nano: int,
        steps: tuple[Step, ...],
        agents: tuple[AgentSummary, ...],
        summary: Summary,
        root_attributes: dict[str, Any] | None = None,
        output: str | None = None,
        tool_definitions: dict[str, Any] | None = None,
        partial: bool = False,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.trace_id = trace_id
        self.root_span_id = root_span_id
        self.root_span_name = root_span_name
        self.agent_name = agent_name
        self.service_name = service_name
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.steps = steps
        self.agents = agents
        self.summary = summary
        self.root_attributes = {} if root_attributes is None else root_attributes
        self.output = output
        self.tool_definitions = {} if tool_definitions is None else tool_definitions
        self.partial = partial
        self.notes = notes
        llm: list[Step] = []
        tools: list[Step] = []
        ids: list[str] = []
        llm_ids: list[str] = []
        tool_ids: list[str] = []
        names: list[str | None] = []
        failed_ids: list[str] = []
        failed_llm_ids: list[str] = []
        for s in steps:
            ids.append(s.span_id)
            failed = s.status == "error"
            if failed:
                failed_ids.append(s.span_id)
            if s.kind == "llm_call":
                llm.append(s)
                llm_ids.append(s.span_id)
                if failed:
                    failed_llm_ids.append(s.span_id)
            elif s.kind == "tool_call":
                tools.append(s)
                tool_ids.append(s.span_id)
                names.append(s.tool.name if s.tool is not None else None)
        self.llm_steps = tuple(llm)
        self.tool_steps = tuple(tools)
        self.span_ids = tuple(ids)
        self.llm_span_ids = tuple(llm_ids)
        self.tool_span_ids = tuple(tool_ids)
        self.tool_names = tuple(names)
        self.failed_span_ids = tuple(failed_ids)
        self.failed_llm_span_ids = tuple(failed_llm_ids)
