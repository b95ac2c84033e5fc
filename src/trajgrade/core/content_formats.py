"""What the values of content attributes look like, per instrumentation, as data.

:mod:`trajgrade.core.semconv` says which attribute, event or span name holds a fact; this module says how the
value found there is laid out once parsed from JSON: the wrappers instrumentations put around a tool's
arguments and result, each dialect's tool definitions, and the parts of GenAI messages. The trajectory
builder (``trajectory/content.py``) only walks these tables; it holds no format knowledge of its own.
"""

from __future__ import annotations

from typing import Final

# --- tool arguments and results ---------------------------------------------------------------------
#: Wrappers an instrumentation puts around a tool's named arguments, tried in order on the parsed value:
#: (keys the wrapper must have, keys it may have besides, the path to the named arguments, a key that must be
#: empty for the wrapper to come off: positional arguments whose names cannot be known).
Wrapper = tuple[frozenset[str], frozenset[str], tuple[str, ...], str | None]
TOOL_ARGUMENT_WRAPPERS: Final[tuple[Wrapper, ...]] = (
    # OpenLLMetry's decorators: {"args": [], "kwargs": {...}}
    (frozenset({"args", "kwargs"}), frozenset(), ("kwargs",), "args"),
    # smolagents (OpenInference): {"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}
    (frozenset({"kwargs", "sanitize_inputs_outputs"}), frozenset({"args"}), ("kwargs",), "args"),
    # LlamaIndex (OpenInference): {"kwargs": {...}}
    (frozenset({"kwargs"}), frozenset(), ("kwargs",), None),
    # OpenLLMetry's LangChain: {"input_str": ..., "tags": ..., "metadata": ..., "inputs": {...}, "kwargs": ...}
    (frozenset({"input_str", "inputs"}), frozenset({"tags", "metadata", "kwargs"}), ("inputs",), None),
    # Strands' legacy tool event: {"name", "toolUseId", "input"}
    (frozenset({"toolUseId", "input"}), frozenset({"name"}), ("input",), None),
)
#: The same for a tool's result (any value at the path, not only an object).
TOOL_RESULT_WRAPPERS: Final[tuple[Wrapper, ...]] = (
    # LangChain's ToolMessage as OpenInference records it: {"type": "tool", "data": {"content": ..., ...}}
    (frozenset({"type", "data"}), frozenset(), ("data", "content"), None),
    # OpenLLMetry's LangChain: {"output": <a serialized ToolMessage>, "kwargs": ...}
    (frozenset({"output"}), frozenset({"kwargs"}), ("output",), None),
    # LangChain's serialized object: {"lc": 1, "type": "constructor", "id": [...], "kwargs": {"content": ...}}
    (frozenset({"lc", "type", "id", "kwargs"}), frozenset(), ("kwargs", "content"), None),
)
#: Result wrappers nest (OpenLLMetry's LangChain output holds a serialized ToolMessage): how many come off at most.
TOOL_RESULT_WRAPPER_DEPTH: Final = 4

# --- tool definitions -------------------------------------------------------------------------------
#: A tool definition in each dialect, tried in order on each item of a definitions list: (the key of the object
#: inside the item that holds the definition, or None for the item itself; the key of the tool's name; the key
#: of the JSON Schema of its arguments). The first whose name is text and whose schema is an object wins.
ToolDefinitionFormat = tuple[str | None, str, str]
TOOL_DEFINITION_FORMATS: Final[tuple[ToolDefinitionFormat, ...]] = (
    # OpenAI Chat Completions (OpenInference's llm.tools.<i>.tool.json_schema too):
    # {"type": "function", "function": {"name", "parameters"}}
    ("function", "name", "parameters"),
    # GenAI gen_ai.tool.definitions and OpenAI Responses: {"type": "function", "name", "parameters"}
    (None, "name", "parameters"),
    # pydantic-ai: {"name", "description", "parameters_json_schema"}
    (None, "name", "parameters_json_schema"),
    # Anthropic and MCP: {"name", "input_schema"}
    (None, "name", "input_schema"),
)

# --- GenAI messages ---------------------------------------------------------------------------------
#: ``gen_ai.input.messages`` / ``gen_ai.output.messages``: ``[{"role": ..., "parts": [{"type": ..., ...}]}]``.
MESSAGE_PARTS: Final = "parts"
PART_TYPE: Final = "type"
#: A tool call the model requested: ``{"type": "tool_call", "id", "name", "arguments"}``.
TOOL_CALL_PART: Final = "tool_call"
TOOL_CALL_ID: Final = "id"
TOOL_CALL_NAME: Final = "name"
TOOL_CALL_ARGUMENTS: Final = "arguments"
#: A tool's response: ``{"type": "tool_call_response", "id", "response"}``.
TOOL_RESPONSE_PART: Final = "tool_call_response"
TOOL_RESPONSE: Final = "response"
#: Text: ``{"type": "text", "content"}``.
TEXT_PART: Final = "text"
TEXT_CONTENT: Final = "content"
