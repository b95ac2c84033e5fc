"""The options of every grader type, as a graders file gives them: pydantic models, validated when the file is loaded.

They live apart from the grader families (``thresholds.py``, ``tool_calls.py``, ...), which grade a run with them:
the families are compiled with mypyc, which compiles no pydantic model (a class with a metaclass), and pydantic
cannot read a compiled validator's signature. This module stays interpreted. Each model is strict about unknown
fields and frozen (``GraderConfig``); what its fields mean is in its family's module.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AliasChoices, ConfigDict, Field, InstanceOf, PrivateAttr, field_validator, model_validator

from trajgrade.core.config import Grader
from trajgrade.core.graders.base import GraderConfig
from trajgrade.core.graders.json_schemas import canonical_json, remote_reference, schema_problem
from trajgrade.core.patterns import check_pattern
from trajgrade.core.runfiles import FileRun, read_runs

__all__ = [
    "DEFAULT_EXPLORATION_TOOLS",
    "Aggregator",
    "ArgsMatch",
    "BaselineConfig",
    "BudgetConfig",
    "CompletedConfig",
    "CompositeConfig",
    "CostConfig",
    "ExecutionMetricsConfig",
    "ExpectedCall",
    "JudgeConfig",
    "LatencyConfig",
    "LoopConfig",
    "LoopOutcomeConfig",
    "MaxConfig",
    "MaxRepeatConfig",
    "RepeatMatch",
    "StepCountConfig",
    "TokenUsageConfig",
    "ToolCallCountConfig",
    "ToolCallsConfig",
    "ToolMatch",
    "ToolSchemaConfig",
    "ToolTrajectoryConfig",
    "WallTimeConfig",
    "parse_duration",
]

Limit = Annotated[float, Field(ge=0, allow_inf_nan=False)]


# --- the metric thresholds (thresholds.py) ------------------------------------------------------------------------
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _tool_regexes(tools: tuple[str, ...] | None, omitted: str) -> tuple[str, ...] | None:
    """A ``tools`` option: None, or at least one regex, none empty (``omitted``: what the grader does without it)."""
    if tools is not None:
        if not tools:
            raise ValueError(f"tools must list at least one regex (omit it to {omitted})")
        for pattern in tools:
            if not pattern:
                raise ValueError("an empty regex matches every tool; omit tools instead")
            check_pattern(pattern)
    return tools


def parse_duration(text: str) -> float:
    """Seconds in a duration string ("250ms", "30s", "2m", "1h"); the unit is required."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration: use a number with a unit, such as '30s', '2m' or '1h'")
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


class MaxConfig(GraderConfig):
    max: NonNegativeInt


class ToolCallCountConfig(MaxConfig):
    tools: tuple[str, ...] | None = None

    @field_validator("tools")
    @classmethod
    def _regexes(cls, tools: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _tool_regexes(tools, "count every tool")


class WallTimeConfig(GraderConfig):
    max: str

    @field_validator("max")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value


class StepCountConfig(GraderConfig):
    max: NonNegativeInt | None = None
    min: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _bounds(self) -> StepCountConfig:
        if self.max is None and self.min is None:
            raise ValueError("step-count needs max, min or both")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError("min must be <= max")
        return self


# --- budget (budget.py) -------------------------------------------------------------------------------------------
class BudgetConfig(GraderConfig):
    max_input_tokens: Limit | None = None
    max_output_tokens: Limit | None = None
    max_tokens: Limit | None = None
    #: Reasoning tokens (``gen_ai.usage.reasoning.output_tokens``), part of the output tokens.
    max_reasoning_tokens: Limit | None = None
    max_tool_calls: Limit | None = None
    max_llm_calls: Limit | None = None
    max_duration_ms: Limit | None = None
    max_duration: str | None = None
    on_missing: Literal["error", "fail"] = "error"

    @field_validator("max_duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetConfig:
        limits = (
            self.max_input_tokens,
            self.max_output_tokens,
            self.max_tokens,
            self.max_reasoning_tokens,
            self.max_tool_calls,
            self.max_llm_calls,
            self.max_duration_ms,
            self.max_duration,
        )
        if all(v is None for v in limits):
            raise ValueError("budget needs at least one limit (max_tokens, max_tool_calls, max_duration_ms, ...)")
        if self.max_duration is not None and self.max_duration_ms is not None:
            raise ValueError("give max_duration or max_duration_ms, not both")
        return self


# --- completed (completed.py) -------------------------------------------------------------------------------------
class CompletedConfig(GraderConfig):
    pass


# --- the execution metrics (execution_metrics.py) -----------------------------------------------------------------
DEFAULT_EXPLORATION_TOOLS = ("read", "grep", "glob", "search", "list", "Read", "Grep", "Glob", "WebSearch", "WebFetch")


class ExecutionMetricsConfig(GraderConfig):
    max_tool_calls: Limit | None = None
    max_llm_calls: Limit | None = None
    max_tokens: Limit | None = None
    max_input_tokens: Limit | None = None
    max_output_tokens: Limit | None = None
    max_cost_usd: Limit | None = None
    max_duration_ms: Limit | None = None
    target_exploration_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    exploration_tolerance: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.2
    exploration_tools: tuple[str, ...] = DEFAULT_EXPLORATION_TOOLS
    scoring: Literal["proportional", "all_or_nothing"] = "proportional"
    min_score: Annotated[float, Field(ge=0, le=1)] = 0.8

    @model_validator(mode="after")
    def _at_least_one(self) -> ExecutionMetricsConfig:
        thresholds = [f for f in type(self).model_fields if f.startswith("max_") or f == "target_exploration_ratio"]
        if all(getattr(self, f) is None for f in thresholds):
            raise ValueError(f"give at least one threshold: {', '.join(thresholds)}")
        return self


class LatencyConfig(GraderConfig):
    max_ms: Limit = Field(validation_alias=AliasChoices("max_ms", "threshold"))


class CostConfig(GraderConfig):
    max_usd: Limit = Field(validation_alias=AliasChoices("max_usd", "budget"))


class TokenUsageConfig(GraderConfig):
    max_total_tokens: Limit | None = Field(None, validation_alias=AliasChoices("max_total_tokens", "max_total"))
    max_input_tokens: Limit | None = Field(None, validation_alias=AliasChoices("max_input_tokens", "max_input"))
    max_output_tokens: Limit | None = Field(None, validation_alias=AliasChoices("max_output_tokens", "max_output"))

    @model_validator(mode="after")
    def _at_least_one(self) -> TokenUsageConfig:
        if self.max_total_tokens is None and self.max_input_tokens is None and self.max_output_tokens is None:
            raise ValueError("give at least one of max_total_tokens, max_input_tokens, max_output_tokens")
        return self


# --- loop (loop.py) -----------------------------------------------------------------------------------------------
class LoopConfig(GraderConfig):
    max_repeats: Annotated[int, Field(ge=1, strict=True)] = 3
    similarity_threshold: Annotated[float, Field(gt=0, le=1)] = 0.9
    tools: tuple[str, ...] | None = None
    max_cycle_period: Annotated[int, Field(ge=1, le=10, strict=True)] = 3

    @field_validator("tools")
    @classmethod
    def _regexes(cls, tools: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for pattern in tools or ():
            check_pattern(pattern)
        return tools


# --- max-repeat and loop-outcome (repeats.py) ---------------------------------------------------------------------
RepeatMatch = Literal["observation", "name", "name-args"]


class _RepeatConfig(GraderConfig):
    tools: tuple[str, ...] | None = None
    max_cycle_period: Annotated[int, Field(ge=1, le=10, strict=True)] = 1

    @field_validator("tools")
    @classmethod
    def _regexes(cls, tools: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _tool_regexes(tools, "watch every tool")


class MaxRepeatConfig(_RepeatConfig):
    max: Annotated[int, Field(ge=1, strict=True)]
    match: RepeatMatch = "observation"


class LoopOutcomeConfig(_RepeatConfig):
    should_loop: bool = False
    max_acceptable_retries: Annotated[int, Field(ge=0, strict=True)]
    match: RepeatMatch = "name-args"


# --- tool-calls (tool_calls.py) -----------------------------------------------------------------------------------
_REQUIRED_ONLY = ("min_count", "final", "at_step", "before_step")


def _regex(pattern: str, field: str) -> str:
    if not pattern and field == "name":
        raise ValueError("name: an empty regex matches every tool (write '.' to mean any tool)")
    try:
        check_pattern(pattern)
    except ValueError as e:
        raise ValueError(f"{field}: {e}") from None
    return pattern


class ToolMatch(GraderConfig):
    name: str
    command: str | None = None
    path: str | None = None
    args: dict[str, str] | None = None
    result: str | None = None
    min_count: Annotated[int, Field(ge=1, strict=True)] | None = None
    final: bool | None = None
    at_step: Annotated[int, Field(ge=0, strict=True)] | None = None
    before_step: Annotated[int, Field(ge=1, strict=True)] | None = None

    @model_validator(mode="after")
    def _check(self) -> ToolMatch:
        _regex(self.name, "name")
        for field in ("command", "path", "result"):
            value = getattr(self, field)
            if value is not None:
                _regex(value, field)
        for arg, pattern in (self.args or {}).items():
            _regex(pattern, f"args.{arg}")
        if self.at_step is not None and self.before_step is not None and self.at_step >= self.before_step:
            raise ValueError(
                f"at_step ({self.at_step}) must be less than before_step ({self.before_step}): no step satisfies both"
            )
        return self

    @cached_property
    def label(self) -> str:
        """The matcher as evidence names it (made once: evidence quotes it on every run; not a field, so neither
        compared nor dumped)."""
        extras = [f"{k}={v!r}" for k in ("command", "path", "result") if (v := getattr(self, k)) is not None]
        extras += [f"args.{k}={v!r}" for k, v in (self.args or {}).items()]
        return f"{self.name!r}" + (f" ({', '.join(extras)})" if extras else "")


class ToolCallsConfig(GraderConfig):
    required: tuple[ToolMatch, ...] | None = None
    disallowed: tuple[ToolMatch, ...] | None = None
    sequence: tuple[ToolMatch, ...] | None = None
    requested_run: bool = False
    only_requested: bool = False

    @field_validator("required", "disallowed", "sequence", mode="before")
    @classmethod
    def _shorthand(cls, entries: Any) -> Any:
        """A plain string is shorthand for ``{name: ...}``."""
        if entries is None:
            return None
        if not isinstance(entries, list | tuple):
            raise ValueError("expected a list of tool names (regexes) or ToolMatch entries ({name, ...})")
        for i, e in enumerate(entries):
            if not isinstance(e, str | dict | ToolMatch):
                raise ValueError(f"entry {i}: expected a tool name (a regex) or a ToolMatch {{name, ...}}, got {e!r}")
        return [{"name": e} if isinstance(e, str) else e for e in entries]

    @model_validator(mode="after")
    def _rules(self) -> ToolCallsConfig:
        if not (self.required or self.disallowed or self.sequence or self.requested_run or self.only_requested):
            raise ValueError(
                "at least one of required, disallowed or sequence must be provided (and not empty), "
                "or requested_run / only_requested be true"
            )
        for list_name in ("disallowed", "sequence"):
            for i, entry in enumerate(getattr(self, list_name) or ()):
                used = [f for f in _REQUIRED_ONLY if getattr(entry, f) is not None]
                if used:
                    raise ValueError(f"{list_name}[{i}]: {', '.join(used)} is allowed on required entries only")
                if list_name == "sequence" and entry.result is not None:
                    raise ValueError(
                        f"sequence[{i}]: result is not supported on sequence entries "
                        "(they match when the tool is called, before its result is known)"
                    )
        return self


# --- tool-schema (tool_schema.py) ---------------------------------------------------------------------------------
class ToolSchemaConfig(GraderConfig):
    allowlist: tuple[str, ...] | None = None
    blocklist: tuple[str, ...] = ()
    schemas: dict[str, dict[str, Any]] = {}
    use_trace_definitions: bool = True

    @field_validator("schemas")
    @classmethod
    def _valid_schemas(cls, schemas: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tool, schema in schemas.items():
            problem = schema_problem(schema, canonical_json(schema))
            if problem is not None:
                raise ValueError(f"schemas.{tool} is not a valid JSON Schema: {problem}")
            remote = remote_reference(schema)
            if remote is not None:
                raise ValueError(f"schemas.{tool} refers outside itself ({remote!r}): trajgrade never fetches a schema")
        return schemas

    @model_validator(mode="after")
    def _something_to_check(self) -> ToolSchemaConfig:
        if self.allowlist is None and not self.blocklist and not self.schemas and not self.use_trace_definitions:
            raise ValueError("tool-schema needs an allowlist, a blocklist, schemas or use_trace_definitions")
        both = set(self.allowlist or ()) & set(self.blocklist)
        if both:
            raise ValueError(f"{sorted(both)[0]!r} is in both allowlist and blocklist")
        return self


# --- tool_trajectory (tool_trajectory.py) -------------------------------------------------------------------------
ArgsMatch = Literal["exact", "superset", "subset", "ignore"] | tuple[str, ...]


class ExpectedCall(GraderConfig):
    tool: str
    args: dict[str, Any] | Literal["any"] = "any"
    args_match: ArgsMatch | None = None
    max_duration_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class ToolTrajectoryConfig(GraderConfig):
    mode: Literal["any_order", "in_order", "exact", "subset", "superset"]
    minimums: dict[str, Annotated[int, Field(ge=0, strict=True)]] | None = None
    expected: tuple[ExpectedCall, ...] | None = None
    args_match: ArgsMatch = "exact"
    min_score: Annotated[float, Field(ge=0, le=1)] = 0.8

    @model_validator(mode="after")
    def _fields_for_mode(self) -> ToolTrajectoryConfig:
        if self.mode == "any_order":
            if not self.minimums:
                raise ValueError("mode any_order needs minimums: {tool: count}")
            if self.expected is not None:
                raise ValueError("mode any_order takes minimums, not expected")
        else:
            if self.expected is None:
                raise ValueError(f"mode {self.mode} needs expected: a list of {{tool, args}}")
            if self.minimums is not None:
                raise ValueError(f"minimums is for mode any_order, not {self.mode}")
        return self


# --- baseline (baseline.py) ---------------------------------------------------------------------------------------
Metric = Literal["llm_calls", "tool_calls", "total_tokens", "cost_usd", "duration_ms"]


class BaselineConfig(GraderConfig):
    path: str
    key: str = "agent"
    max_tool_edits: int | None = 0
    max_increase: dict[Metric, float] = {}
    _runs: list[FileRun] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _load(self) -> BaselineConfig:
        if self.key not in ("agent", "root") and not self.key.startswith("attribute:"):
            raise ValueError(f"key: {self.key!r}: use agent, root or attribute:NAME")
        runs, problems = read_runs([self.path])
        if problems:
            raise ValueError(f"path: {problems[0]}")
        if not runs:
            raise ValueError(f"path: no run in {self.path}")
        self._runs = runs
        return self

    @property
    def runs(self) -> list[FileRun]:
        return self._runs


# --- composite (composite.py) -------------------------------------------------------------------------------------
Score = Annotated[float, Field(ge=0, le=1)]


class Aggregator(GraderConfig):
    type: Literal["weighted_average", "minimum", "maximum", "all_or_nothing", "safety_gate"] = "weighted_average"
    weights: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None
    threshold: Score | None = None
    required: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _fields(self) -> Aggregator:
        if self.type == "safety_gate" and not self.required:
            raise ValueError("safety_gate needs required: the names of the children that must pass")
        if self.type != "safety_gate" and self.required is not None:
            raise ValueError(f"required is for the safety_gate aggregator, not {self.type}")
        if self.weights is not None and self.type not in ("weighted_average", "safety_gate"):
            raise ValueError(f"weights is for weighted_average and safety_gate, not {self.type}")
        return self


class CompositeConfig(GraderConfig):
    children_field: ClassVar[str] = "evaluators"

    evaluators: tuple[InstanceOf[Grader], ...]  # built by the loader from the children's entries
    aggregator: Aggregator = Aggregator.model_construct()  # the defaults, without building the validator at import
    threshold: Score = 0.8

    @field_validator("aggregator", mode="before")
    @classmethod
    def _aggregator(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _names(self) -> CompositeConfig:
        names = {g.name for g in self.evaluators}
        for field, listed in (("weights", self.aggregator.weights or {}), ("required", self.aggregator.required or ())):
            for child in listed:
                if child not in names:
                    raise ValueError(f"aggregator.{field}: no child named {child!r} (children: {sorted(names)})")
        return self


# --- the LLM judges (judges.py) -----------------------------------------------------------------------------------
class JudgeConfig(GraderConfig):
    model_config = ConfigDict(extra="allow", frozen=True)
