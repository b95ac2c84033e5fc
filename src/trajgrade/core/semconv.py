"""Every attribute, event and span-name convention trajgrade reads or writes, as data.

The OpenTelemetry GenAI conventions (current and deprecated keys), OpenInference and OpenLLMetry (its
three eras) name the same facts differently. Each table below lists the keys for one fact in priority
order: the first key a span carries wins. Normalization (``trajectory/normalize.py``) only walks these
tables; it holds no convention knowledge of its own. What the values under these keys look like (tool
arguments and results inside an instrumentation's wrapper, tool definitions, message parts) is in
:mod:`trajgrade.core.content_formats`.

Names that ``opentelemetry-semantic-conventions`` defines are imported from it (reading its constants
raises no warning; its enums are never called); the rest are spelled here once.
"""

from __future__ import annotations

import re
from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _genai
from opentelemetry.semconv.attributes import error_attributes as _error

# --- step kinds -------------------------------------------------------------------------------------
LLM: Final = "llm_call"
TOOL: Final = "tool_call"
AGENT: Final = "agent"
WORKFLOW: Final = "workflow"
EMBEDDING: Final = "embedding"
OTHER: Final = "other"
#: A span marked as an agent that names no agent (``UNNAMED_AGENT_IS_STEP``): a step of the agent around it.
#: The span it sits in (a LangGraph graph around its node spans) is then the agent, named by its span name.
AGENT_STEP: Final = "agent_step"
#: Setting an agent up (``create_agent``): alone at the root of a trace (AutoGen traces each agent's creation on
#: its own), it is not a run.
SETUP: Final = "setup"

# --- OpenTelemetry GenAI keys (current) ---------------------------------------------------------------
OPERATION_NAME: Final = _genai.GEN_AI_OPERATION_NAME
PROVIDER_NAME: Final = _genai.GEN_AI_PROVIDER_NAME
SYSTEM: Final = _genai.GEN_AI_SYSTEM
REQUEST_MODEL: Final = _genai.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL: Final = _genai.GEN_AI_RESPONSE_MODEL
RESPONSE_ID: Final = _genai.GEN_AI_RESPONSE_ID
INPUT_TOKENS: Final = _genai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS: Final = _genai.GEN_AI_USAGE_OUTPUT_TOKENS
PROMPT_TOKENS: Final = _genai.GEN_AI_USAGE_PROMPT_TOKENS
COMPLETION_TOKENS: Final = _genai.GEN_AI_USAGE_COMPLETION_TOKENS
CACHE_READ_TOKENS: Final = _genai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
CACHE_CREATION_TOKENS: Final = _genai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
CACHE_WRITE_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
REASONING_TOKENS: Final = _genai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
TOOL_NAME: Final = _genai.GEN_AI_TOOL_NAME
TOOL_CALL_ID: Final = _genai.GEN_AI_TOOL_CALL_ID
TOOL_CALL_ARGUMENTS: Final = _genai.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT: Final = _genai.GEN_AI_TOOL_CALL_RESULT
TOOL_DEFINITIONS: Final = _genai.GEN_AI_TOOL_DEFINITIONS
AGENT_NAME: Final = _genai.GEN_AI_AGENT_NAME
OUTPUT_MESSAGES: Final = _genai.GEN_AI_OUTPUT_MESSAGES
ERROR_TYPE: Final = _error.ERROR_TYPE
SERVICE_NAME: Final = "service.name"

# --- what trajgrade writes --------------------------------------------------------------------------
EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = _genai.GEN_AI_EVALUATION_NAME
EVALUATION_SCORE_VALUE: Final = _genai.GEN_AI_EVALUATION_SCORE_VALUE
EVALUATION_SCORE_LABEL: Final = _genai.GEN_AI_EVALUATION_SCORE_LABEL
EVALUATION_EXPLANATION: Final = _genai.GEN_AI_EVALUATION_EXPLANATION
#: The evaluator's identity, as semantic-conventions-genai PR #359 proposes it (not merged): the grader's name,
#: trajgrade's version, and how the result is decided, one of the PR's values (``llm_judge``, ``deterministic``,
#: ``human``), by the grader's ``Taxonomy.score_kind``.
EVALUATOR_ID: Final = "gen_ai.evaluation.evaluator.id"
EVALUATOR_VERSION: Final = "gen_ai.evaluation.evaluator.version"
EVALUATOR_TYPE: Final = "gen_ai.evaluation.evaluator.type"
EVALUATOR_TYPE_BY_SCORE_KIND: Final = {"code": "deterministic", "model": "llm_judge"}

# --- what kind of step a span is --------------------------------------------------------------------
#: (attribute key, {value: kind}); the first key present with a known value decides.
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
#: Kinds that need an agent name (an attribute, or a span name of ``AGENT_NAME_FROM_SPAN_NAME``) to be an
#: agent, else they are an ``AGENT_STEP``: OpenInference marks LangGraph's node spans AGENT (named after the
#: node, "agent"; the graph's span around them is a CHAIN named after the graph), and its openai-agents bridge
#: marks the trace's root (the SDK's workflow, named by ``trace.name``) AGENT, both without ``agent.name``.
UNNAMED_AGENT_IS_STEP: Final = ((OPENINFERENCE_SPAN_KIND, "AGENT"),)
KIND_BY_ATTRIBUTE: Final[tuple[tuple[str, dict[str, str]], ...]] = (
    (
        OPERATION_NAME,
        {
            "chat": LLM,
            "text_completion": LLM,
            "generate_content": LLM,
            "responses": LLM,
            "execute_tool": TOOL,
            "invoke_agent": AGENT,
            "invoke_workflow": WORKFLOW,
            "create_agent": SETUP,
            "embeddings": EMBEDDING,
        },
    ),
    (OPENINFERENCE_SPAN_KIND, {"LLM": LLM, "TOOL": TOOL, "AGENT": AGENT, "EMBEDDING": EMBEDDING}),
    ("traceloop.span.kind", {"tool": TOOL, "agent": AGENT, "workflow": WORKFLOW}),
    ("llm.request.type", {"chat": LLM, "completion": LLM, "embedding": EMBEDDING}),
)

#: (span-name pattern, kind) for spans that carry no kind attribute (older emitters); first match wins.
KIND_BY_NAME: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"^(chat|text_completion|generate_content)( |$)"), LLM),
    (re.compile(r"^execute_tool( |$)"), TOOL),
    (re.compile(r"^running (tool|output function)$"), TOOL),  # pydantic-ai instrumentation v2
    (re.compile(r"^invoke_agent( |$)"), AGENT),
    (re.compile(r"^agent run$"), AGENT),  # pydantic-ai v2
    (re.compile(r"^agent_run \["), AGENT),  # ADK (old)
    (re.compile(r"^invoke_workflow( |$)"), WORKFLOW),
    (re.compile(r"^create_agent( |$)"), SETUP),
    # OpenLLMetry's vendor-dotted LLM span names (openai.chat, anthropic.completion, bedrock.converse, ...):
    # the attributes that mark them can be dropped by the SDK's attribute limit on long histories.
    (re.compile(r"^[a-z][a-z0-9_]*\.(chat|completion|response|converse)$"), LLM),
)

#: An MCP ``tools/call`` client span describes the same call as the framework's tool span around it.
MCP_TOOL_SPAN: Final = re.compile(r"^tools/call( |$)")

# --- fields, each a tuple of keys in priority order -------------------------------------------------
#: The id the model's provider gave its response (LLM spans): GenAI, OpenLLMetry.
RESPONSE_ID_KEYS: Final = (RESPONSE_ID,)
#: OpenInference records no response id of its own; its OpenAI instrumentation records the whole response as
#: JSON in ``output.value``, the id its first member: (key, pattern whose first group is the id).
RESPONSE_ID_IN_VALUE: Final = (("output.value", re.compile(r'^\{\s*"id"\s*:\s*"([^"\\]+)"')),)
MODEL_KEYS: Final = (
    RESPONSE_MODEL,
    REQUEST_MODEL,
    "llm.response.model_name",
    "llm.model_name",
    "llm.request.model_name",
)
#: Agent spans: pydantic-ai v2 names the model ``model_name``.
AGENT_MODEL_KEYS: Final = (*MODEL_KEYS, "model_name")
PROVIDER_KEYS: Final = (PROVIDER_NAME, SYSTEM, "llm.system", "llm.provider")
#: Values of the provider keys that name a framework, not the model's vendor (useless for pricing).
FRAMEWORK_PROVIDERS: Final = frozenset({"strands-agents", "gcp.vertex.agent", "pydantic-ai", "function", "test"})

INPUT_TOKEN_KEYS: Final = (INPUT_TOKENS, PROMPT_TOKENS, "llm.token_count.prompt")
OUTPUT_TOKEN_KEYS: Final = (OUTPUT_TOKENS, COMPLETION_TOKENS, "llm.token_count.completion")
CACHE_READ_KEYS: Final = (
    CACHE_READ_TOKENS,
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
CACHE_WRITE_KEYS: Final = (
    CACHE_WRITE_TOKENS,
    CACHE_CREATION_TOKENS,
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_write_input_tokens",
    "llm.token_count.prompt_details.cache_write",
)
REASONING_KEYS: Final = (
    REASONING_TOKENS,
    "gen_ai.usage.reasoning_tokens",
    "llm.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
)
#: Run totals that agent spans repeat: a fallback when no LLM span carries usage, never added on top.
AGENT_INPUT_TOKEN_KEYS: Final = ("gen_ai.aggregated_usage.input_tokens", *INPUT_TOKEN_KEYS)
AGENT_OUTPUT_TOKEN_KEYS: Final = ("gen_ai.aggregated_usage.output_tokens", *OUTPUT_TOKEN_KEYS)

#: Cost in USD; the first present wins. ``llm.cost.prompt`` + ``llm.cost.completion`` is the last resort.
COST_KEYS: Final = ("gen_ai.usage.cost.amount", "llm.cost.total", "gen_ai.usage.cost", "operation.cost")
COST_PART_KEYS: Final = ("llm.cost.prompt", "llm.cost.completion")

TOOL_NAME_KEYS: Final = (TOOL_NAME, "tool.name", "code.function.name", "traceloop.entity.name")
TOOL_CALL_ID_KEYS: Final = (TOOL_CALL_ID, "tool.id", "tool_call.id")
TOOL_ARGUMENT_KEYS: Final = (
    TOOL_CALL_ARGUMENTS,
    "tool_arguments",  # pydantic-ai v2
    "traceloop.entity.input",  # OpenLLMetry: {"args": [], "kwargs": {...}}
    "input.value",  # OpenInference (tool.parameters is the schema, not the call)
    "gcp.vertex.agent.tool_call_args",  # ADK v1
)
TOOL_RESULT_KEYS: Final = (
    TOOL_CALL_RESULT,
    "tool_response",
    "traceloop.entity.output",
    "output.value",
    "gcp.vertex.agent.tool_response",
    "code.function.return.value",
)
#: google-genai records each argument as ``code.function.parameters.<name>.value``.
TOOL_ARGUMENT_PREFIX: Final = "code.function.parameters."
TOOL_ARGUMENT_SUFFIX: Final = ".value"
TOOL_STATUS_KEY: Final = "gen_ai.tool.status"  # Strands: success | error
TOOL_STATUS_ERROR: Final = "error"

AGENT_NAME_KEYS: Final = (AGENT_NAME, "agent_name", "agent.name", "traceloop.entity.name", "gen_ai.workflow.name")
#: Span-name patterns that carry the agent's name when no attribute does.
AGENT_NAME_FROM_SPAN_NAME: Final = (
    re.compile(r"^invoke_agent (.+)$"),
    re.compile(r"^agent_run \[(.+)\]$"),
    re.compile(r"^(.+)\.agent$"),
    re.compile(r"^(.+)\.run$"),  # smolagents (OpenInference): "<agent name>.run"
    re.compile(r"^(.+)\._execute_core$"),  # CrewAI (OpenInference): "<agent role>._execute_core"
)
#: Agent steps known by their span name, whose agent is named only inside an attribute's value: LlamaIndex's
#: workflow agents (OpenInference marks ``FunctionAgent.run`` and its steps CHAIN; the agent's name is only in the
#: steps' input, a repr holding ``current_agent_name='assistant'``). The span around such steps is their agent.
#: (span-name pattern, attribute key, value pattern whose first group is the agent's name)
AGENT_STEP_BY_NAME: Final = (
    (
        re.compile(r"^BaseWorkflowAgent\.(setup_agent|run_agent_step)$"),
        "input.value",
        re.compile(r"current_agent_name='([^']+)'"),
    ),
)
TOOL_NAME_FROM_SPAN_NAME: Final = (
    re.compile(r"^execute_tool (.+)$"),
    re.compile(r"^tools/call (.+)$"),
    re.compile(r"^(.+)\.tool$"),
)

#: Tool names of spans that summarise other tool spans rather than run a tool: ADK ends a step's parallel calls
#: with an ``execute_tool (merged)`` span beside them.
SUMMARY_TOOL_NAMES: Final = frozenset({"(merged tools)"})

#: Where the final answer of an agent span is recorded.
AGENT_OUTPUT_KEYS: Final = ("final_result", "output.value", "traceloop.entity.output", OUTPUT_MESSAGES)

#: The model's output messages (to link tool calls to the model call that asked for them).
OUTPUT_MESSAGE_KEYS: Final = (OUTPUT_MESSAGES,)
#: Flattened tool calls in a model's output (OpenInference, then OpenLLMetry before 0.55): the pattern's
#: groups are the message and call indices and the field, named by the mapping (id, name or arguments).
FLAT_TOOL_CALL_PREFIXES: Final = ("llm.output_messages.", "gen_ai.completion.")
FLAT_TOOL_CALL: Final = (
    (
        re.compile(
            r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
        ),
        {"id": "id", "function.name": "name", "function.arguments": "arguments"},
    ),
    (
        re.compile(r"^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$"),
        {"id": "id", "name": "name", "arguments": "arguments"},
    ),
)

#: What shows that an LLM-marked span is a model request: the GenAI request or response model, token counts, the
#: request's first message or the model's output (as attributes, flattened attributes or events). OpenInference's
#: model name and invocation parameters are not: LlamaIndex's helper spans around a request
#: (``OpenAI._prepare_chat_with_tools``) carry both, and are not calls. Only keys the sidecar's lean reader keeps
#: (``READ_KEYS``) can be evidence.
LLM_REQUEST_KEYS: Final = frozenset(
    {
        REQUEST_MODEL,
        RESPONSE_MODEL,
        *INPUT_TOKEN_KEYS,
        *OUTPUT_TOKEN_KEYS,
        OUTPUT_MESSAGES,
        "llm.input_messages.0.message.role",
        "gen_ai.prompt.0.role",
    }
)
LLM_REQUEST_PREFIXES: Final = FLAT_TOOL_CALL_PREFIXES
LLM_REQUEST_EVENTS: Final = frozenset(
    {
        "gen_ai.client.inference.operation.details",
        "gen_ai.user.message",
        "gen_ai.system.message",
        "gen_ai.assistant.message",
        "gen_ai.choice",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
    }
)

#: Tool definitions (JSON Schemas of the arguments) recorded on model-call or agent spans.
TOOL_DEFINITION_KEYS: Final = (TOOL_DEFINITIONS, "gen_ai.agent.tools")
#: OpenInference: ``llm.tools.<i>.tool.json_schema``.
FLAT_TOOL_SCHEMA_PREFIX: Final = "llm.tools."
FLAT_TOOL_SCHEMA: Final = re.compile(r"^llm\.tools\.\d+\.tool\.json_schema$")
FLAT_TOOL_SCHEMA_FIRST: Final = "llm.tools.0.tool.json_schema"

#: Every attribute key normalization reads, and the prefixes of the flattened ones: a reader that must
#: decode each value (OTLP protobuf) decodes only these for spans whose other attributes are not kept.
READ_KEYS: Final = frozenset(
    {
        *(key for key, _ in KIND_BY_ATTRIBUTE),
        *RESPONSE_ID_KEYS,
        *(key for key, _ in RESPONSE_ID_IN_VALUE),
        *MODEL_KEYS,
        *AGENT_MODEL_KEYS,
        *PROVIDER_KEYS,
        *AGENT_INPUT_TOKEN_KEYS,
        *AGENT_OUTPUT_TOKEN_KEYS,
        *CACHE_READ_KEYS,
        *CACHE_WRITE_KEYS,
        *REASONING_KEYS,
        *COST_KEYS,
        *COST_PART_KEYS,
        *TOOL_NAME_KEYS,
        *TOOL_CALL_ID_KEYS,
        *TOOL_ARGUMENT_KEYS,
        *TOOL_RESULT_KEYS,
        TOOL_STATUS_KEY,
        ERROR_TYPE,
        *AGENT_NAME_KEYS,
        *AGENT_OUTPUT_KEYS,
        *OUTPUT_MESSAGE_KEYS,
        *TOOL_DEFINITION_KEYS,
        *LLM_REQUEST_KEYS,
    }
)
READ_PREFIXES: Final = (TOOL_ARGUMENT_PREFIX, *FLAT_TOOL_CALL_PREFIXES, FLAT_TOOL_SCHEMA_PREFIX)

# --- span events ------------------------------------------------------------------------------------
EXCEPTION_EVENT: Final = "exception"
#: Events that record an exception with ``exception.type`` / ``exception.message``: the span event, the GenAI
#: client's operation exception, and the tool's (a tool span carrying one failed, whatever its status).
EXCEPTION_EVENTS: Final = frozenset(
    {EXCEPTION_EVENT, "gen_ai.client.operation.exception", "gen_ai.execute_tool.exception"}
)
TOOL_EXCEPTION_EVENT: Final = "gen_ai.execute_tool.exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
#: Content recorded in span events instead of attributes (Strands, older conventions):
#: (event name, attribute holding the arguments or result).
TOOL_ARGUMENT_EVENTS: Final = (("gen_ai.tool.message", "content"),)
TOOL_RESULT_EVENTS: Final = (("gen_ai.choice", "message"),)
#: Strands' latest mode and the opt-in details event hold the messages in structured parts.
OPERATION_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
INPUT_MESSAGES: Final = _genai.GEN_AI_INPUT_MESSAGES

# --- trajgrade's own attributes and instruments -----------------------------------------------------------
TRAJGRADE_GRADER_TYPE: Final = "trajgrade.grader.type"
TRAJGRADE_VALUE: Final = "trajgrade.value"
TRAJGRADE_LIMIT: Final = "trajgrade.limit"
TRAJGRADE_EVIDENCE_SPAN_IDS: Final = "trajgrade.evidence.span_ids"
TRAJGRADE_PASSED: Final = "trajgrade.passed"
TRAJGRADE_SCORE: Final = "trajgrade.score"
TRAJGRADE_PARTIAL: Final = "trajgrade.partial"
#: On a ``gen_ai.evaluation.result`` found while the run was still open (an in-flight breach).
TRAJGRADE_IN_FLIGHT: Final = "trajgrade.in_flight"
#: On an in-flight breach of an enforced grader: the run is stopped at its next model or tool call.
TRAJGRADE_ENFORCED: Final = "trajgrade.enforced"
TRAJGRADE_SCOPE: Final = "trajgrade"
#: The name of the span that carries a run's results when its root cannot: ``evaluation {agent}``.
EVALUATION_SPAN_PREFIX: Final = "evaluation "
#: Metric attribute keys (bounded values only).
METRIC_RESULT: Final = "trajgrade.result"  # passed | failed (trajgrade.runs)
METRIC_REASON: Final = "trajgrade.reason"  # why a trace was dropped
