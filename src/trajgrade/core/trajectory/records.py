"""What trajgrade keeps of one span: a record whose class holds only the fields its kind of span has.

A door buffers a record for every span of every open run, so its size is what a buffered step costs. Every record
has the fields of every span (ids, name, kind, times, status, agent, service); a tool call's record adds the
tool's (:class:`ToolRecord`), a model call's or an agent's the model's (:class:`ModelRecord`), and the rare ones
(an error's type and message, a root's attributes) sit in one small object that most records do not have. The
fields a record's class does not hold read as their defaults through the base class, so that every reader reads
every record alike (mypyc compiles a subclass's attribute that overrides the base's property).

Records are read-only by contract (not frozen, which would make them slow to build); their ``__init__`` written
out, as in ``model.py``, for mypyc to compile it; keyword arguments only. :func:`span_record` builds the record
of the class its fields need, :func:`replace_record` a copy with some fields changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from trajgrade.core.trajectory.model import Usage

__all__ = ["MISSING", "ModelRecord", "SpanRecord", "ToolRecord", "replace_record", "share_strings", "span_record"]

#: A model call's tool calls found in flattened attributes: (id, name, raw arguments).
Requested = tuple[tuple[str | None, str | None, Any], ...]


class _Missing:
    """Marks a field the span did not record (distinct from a recorded ``null``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final[Any] = _Missing()


class _Rare:
    """The fields few records have: an error's type and message, a root-like span's attributes."""

    __slots__ = ("attributes", "error_message", "error_type")

    def __init__(self, error_type: str | None, error_message: str | None, attributes: Mapping[str, Any] | None) -> None:
        self.error_type = error_type
        self.error_message = error_message
        self.attributes = attributes


class SpanRecord:
    """The fields of every span; the others read as their defaults (a span of no tool or model call)."""

    __slots__ = (
        "_rare",
        "agent_name",
        "end_unix_nano",
        "error",
        "kind",
        "name",
        "parent_is_remote",
        "parent_span_id",
        "service_name",
        "span_id",
        "start_unix_nano",
        "trace_id",
    )

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_unix_nano: int
    end_unix_nano: int
    error: bool
    #: The parent is in another process (OTLP's flags, the SDK's remote context): its absence is expected. (Next to
    #: ``error``: the compiled record keeps the two flags in one word.)
    parent_is_remote: bool
    agent_name: str | None
    service_name: str | None
    _rare: _Rare | None

    def __init__(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        kind: str,
        start_unix_nano: int,
        end_unix_nano: int,
        error: bool,
        error_type: str | None = None,
        error_message: str | None = None,
        agent_name: str | None = None,
        service_name: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        parent_is_remote: bool = False,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.kind = kind
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.error = error
        self.parent_is_remote = parent_is_remote
        self.agent_name = agent_name
        self.service_name = service_name
        has_rare = error_type is not None or error_message is not None or attributes is not None
        self._rare = _Rare(error_type, error_message, attributes) if has_rare else None

    @property
    def error_type(self) -> str | None:
        rare = self._rare
        return rare.error_type if rare is not None else None

    @property
    def error_message(self) -> str | None:
        rare = self._rare
        return rare.error_message if rare is not None else None

    #: Kept for root-like spans only (suite matching reads them).
    @property
    def attributes(self) -> Mapping[str, Any] | None:
        rare = self._rare
        return rare.attributes if rare is not None else None

    # --- a model call's or an agent's (ModelRecord) --------------------------------------------------------------
    @property
    def model(self) -> str | None:
        return None

    @property
    def provider(self) -> str | None:
        return None

    #: LLM: the id the provider gave the model's response (``gen_ai.response.id``).
    @property
    def response_id(self) -> str | None:
        return None

    @property
    def usage(self) -> Usage | None:
        return None

    @property
    def cost_usd(self) -> float | None:
        return None

    #: LLM: the raw output messages, and the tool calls (id, name, raw arguments) found in flattened attributes.
    @property
    def output_messages(self) -> Any:
        return None

    @property
    def requested_tool_calls(self) -> Requested:
        return ()

    @property
    def tool_definitions(self) -> Any:
        return None

    #: Agent spans: their recorded final answer.
    @property
    def output(self) -> Any:
        return None

    # --- a tool call's (ToolRecord) ------------------------------------------------------------------------------
    @property
    def tool_name(self) -> str | None:
        return None

    @property
    def tool_call_id(self) -> str | None:
        return None

    @property
    def tool_arguments(self) -> Any:
        return MISSING

    @property
    def tool_result(self) -> Any:
        return MISSING

    # --- as a value ------------------------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        """Every field by name (those its class does not hold as their defaults): ``span_record``'s arguments."""
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "kind": self.kind,
            "start_unix_nano": self.start_unix_nano,
            "end_unix_nano": self.end_unix_nano,
            "error": self.error,
            "parent_is_remote": self.parent_is_remote,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "model": self.model,
            "provider": self.provider,
            "response_id": self.response_id,
            "usage": self.usage,
            "cost_usd": self.cost_usd,
            "agent_name": self.agent_name,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "tool_arguments": self.tool_arguments,
            "tool_result": self.tool_result,
            "output_messages": self.output_messages,
            "requested_tool_calls": self.requested_tool_calls,
            "tool_definitions": self.tool_definitions,
            "output": self.output,
            "service_name": self.service_name,
            "attributes": self.attributes,
        }

    def __eq__(self, other: object) -> bool:
        """Equal fields, whichever classes hold them."""
        return isinstance(other, SpanRecord) and self.fields() == other.fields()

    def __repr__(self) -> str:
        return "SpanRecord(" + ", ".join(f"{k}={v!r}" for k, v in self.fields().items()) + ")"


class ToolRecord(SpanRecord):
    """A tool call's record."""

    __slots__ = ("tool_arguments", "tool_call_id", "tool_name", "tool_result")

    tool_name: str | None
    tool_call_id: str | None
    tool_arguments: Any
    tool_result: Any

    def __init__(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        kind: str,
        start_unix_nano: int,
        end_unix_nano: int,
        error: bool,
        error_type: str | None = None,
        error_message: str | None = None,
        agent_name: str | None = None,
        service_name: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        parent_is_remote: bool = False,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        tool_arguments: Any = MISSING,
        tool_result: Any = MISSING,
    ) -> None:
        super().__init__(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            name=name,
            kind=kind,
            start_unix_nano=start_unix_nano,
            end_unix_nano=end_unix_nano,
            error=error,
            error_type=error_type,
            error_message=error_message,
            agent_name=agent_name,
            service_name=service_name,
            attributes=attributes,
            parent_is_remote=parent_is_remote,
        )
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.tool_arguments = tool_arguments
        self.tool_result = tool_result


class ModelRecord(SpanRecord):
    """A model call's record (an LLM or embedding request), or an agent's or workflow's."""

    __slots__ = (
        "cost_usd",
        "model",
        "output",
        "output_messages",
        "provider",
        "requested_tool_calls",
        "response_id",
        "tool_definitions",
        "usage",
    )

    model: str | None
    provider: str | None
    response_id: str | None
    usage: Usage | None
    cost_usd: float | None
    output_messages: Any
    requested_tool_calls: Requested
    tool_definitions: Any
    output: Any

    def __init__(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        kind: str,
        start_unix_nano: int,
        end_unix_nano: int,
        error: bool,
        error_type: str | None = None,
        error_message: str | None = None,
        agent_name: str | None = None,
        service_name: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        parent_is_remote: bool = False,
        model: str | None = None,
        provider: str | None = None,
        response_id: str | None = None,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        output_messages: Any = None,
        requested_tool_calls: Requested = (),
        tool_definitions: Any = None,
        output: Any = None,
    ) -> None:
        super().__init__(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            name=name,
            kind=kind,
            start_unix_nano=start_unix_nano,
            end_unix_nano=end_unix_nano,
            error=error,
            error_type=error_type,
            error_message=error_message,
            agent_name=agent_name,
            service_name=service_name,
            attributes=attributes,
            parent_is_remote=parent_is_remote,
        )
        self.model = model
        self.provider = provider
        self.response_id = response_id
        self.usage = usage
        self.cost_usd = cost_usd
        self.output_messages = output_messages
        self.requested_tool_calls = requested_tool_calls
        self.tool_definitions = tool_definitions
        self.output = output


class _ModelToolRecord(ModelRecord):
    """A record with both a model's and a tool's fields (a delegation to an agent, taken as a tool call)."""

    __slots__ = ("tool_arguments", "tool_call_id", "tool_name", "tool_result")

    tool_name: str | None
    tool_call_id: str | None
    tool_arguments: Any
    tool_result: Any


def span_record(
    *,
    trace_id: str,
    span_id: str,
    parent_span_id: str | None,
    name: str,
    kind: str,
    start_unix_nano: int,
    end_unix_nano: int,
    error: bool,
    error_type: str | None = None,
    error_message: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    response_id: str | None = None,
    usage: Usage | None = None,
    cost_usd: float | None = None,
    agent_name: str | None = None,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    tool_arguments: Any = MISSING,
    tool_result: Any = MISSING,
    output_messages: Any = None,
    requested_tool_calls: Requested = (),
    tool_definitions: Any = None,
    output: Any = None,
    service_name: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    parent_is_remote: bool = False,
) -> SpanRecord:
    """The record of these fields, of the smallest class that holds those that are not their defaults."""
    tool = (
        tool_name is not None or tool_call_id is not None or tool_arguments is not MISSING or tool_result is not MISSING
    )
    modelled = (
        model is not None
        or provider is not None
        or response_id is not None
        or usage is not None
        or cost_usd is not None
        or output_messages is not None
        or len(requested_tool_calls) > 0
        or tool_definitions is not None
        or output is not None
    )
    common: dict[str, Any] = {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent_span_id,
        "name": name,
        "kind": kind,
        "start_unix_nano": start_unix_nano,
        "end_unix_nano": end_unix_nano,
        "error": error,
        "error_type": error_type,
        "error_message": error_message,
        "agent_name": agent_name,
        "service_name": service_name,
        "attributes": attributes,
        "parent_is_remote": parent_is_remote,
    }
    if not modelled:
        if not tool:
            return SpanRecord(**common)
        return ToolRecord(
            **common,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            tool_arguments=tool_arguments,
            tool_result=tool_result,
        )
    record = (_ModelToolRecord if tool else ModelRecord)(
        **common,
        model=model,
        provider=provider,
        response_id=response_id,
        usage=usage,
        cost_usd=cost_usd,
        output_messages=output_messages,
        requested_tool_calls=requested_tool_calls,
        tool_definitions=tool_definitions,
        output=output,
    )
    if isinstance(record, _ModelToolRecord):
        record.tool_name = tool_name
        record.tool_call_id = tool_call_id
        record.tool_arguments = tool_arguments
        record.tool_result = tool_result
    return record


def replace_record(record: SpanRecord, **changes: Any) -> SpanRecord:
    """A copy of ``record`` with ``changes`` (field names as ``span_record`` takes them)."""
    return span_record(**{**record.fields(), **changes})


def share_strings(record: SpanRecord, earlier: SpanRecord) -> None:
    """Let a record hold the string objects of an earlier record of its trace wherever their values are equal: its
    trace id, its parent (a sibling's), its own id (when the earlier span is its child), its name, agent, tool
    name, model, provider and service. A buffered trace then holds one copy of each value that repeats, however
    its spans arrived (the readers make new strings for every span)."""
    if record.trace_id == earlier.trace_id:
        record.trace_id = earlier.trace_id
    parent = record.parent_span_id
    if parent is not None and parent == earlier.parent_span_id:
        record.parent_span_id = earlier.parent_span_id
    if record.span_id == earlier.parent_span_id:
        record.span_id = earlier.parent_span_id
    if record.name == earlier.name:
        record.name = earlier.name
    if record.agent_name is not None and record.agent_name == earlier.agent_name:
        record.agent_name = earlier.agent_name
    if record.service_name is not None and record.service_name == earlier.service_name:
        record.service_name = earlier.service_name
    if isinstance(record, ToolRecord) or isinstance(record, _ModelToolRecord):
        if record.tool_name is not None and record.tool_name == earlier.tool_name:
            record.tool_name = earlier.tool_name
    if isinstance(record, ModelRecord):
        if record.model is not None and record.model == earlier.model:
            record.model = earlier.model
        if record.provider is not None and record.provider == earlier.provider:
            record.provider = earlier.provider
