"""The ``tool-schema`` grader: only approved tools called, each with arguments valid for its schema.

- ``allowlist``: tool names the agent may call (exact names); any other tool is a violation.
- ``blocklist``: tool names it must not call.
- ``schemas``: a JSON Schema per tool name for its arguments; with ``use_trace_definitions`` (default true)
  the tool definitions the spans captured (``gen_ai.tool.definitions`` and the dialects' equivalents) are
  used for tools the config gives no schema for.

Every tool call is checked, nested ones (a tool called inside another tool, or by a sub-agent) included.
Each violation names the call (tool and span id), the argument (its JSON path) and why. A run with no tool
calls passes ("no tool calls to check"). A call whose arguments were not captured cannot be checked against
a schema: when that is the only thing left unknown the result is not evaluable.

Nothing is ever fetched: a schema with a ``$ref`` outside itself (a URL, a file) is refused. In a config that is a
config error; in a schema the spans carried (which anyone who can send spans chooses), the tool's calls are left
unchecked and, when nothing else fails, the result is not evaluable and names the reference.

A schema is checked against the meta-schema of draft 2020-12 (:func:`_problem`), and arguments against a schema, by
jsonschema-rs; jsonschema, the reference implementation, decides what jsonschema-rs might decide otherwise and
names what is wrong. Both are imported when first needed: jsonschema-rs when a schema is first checked (a graders
file that gives schemas, or a run graded with this grader), jsonschema when a call is not valid or a schema needs
it. A command whose graders check no schema loads neither.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, not_evaluable
from trajgrade.core.graders.json_schemas import canonical_json, remote_reference, schema_problem
from trajgrade.core.graders.options import ToolSchemaConfig
from trajgrade.core.graders.steps import not_plainly_valid, span_ids_by_name, tool_calls, tool_columns
from trajgrade.core.memo import ByObject
from trajgrade.core.running import grading_fact
from trajgrade.core.trajectory.call_texts import call_texts
from trajgrade.core.trajectory.model import Step, Trajectory

if TYPE_CHECKING:
    from referencing import Registry

__all__ = ["SPECS"]

_MAX_ERRORS_PER_CALL = 5


def _has_dollar_key(schema: Any) -> bool:
    """Whether any object in ``schema`` has a key starting with ``$``."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(isinstance(k, str) and k.startswith("$") for k in node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _never_retrieve(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class, unseen by mypy


def _never_retrieve_rs(uri: str) -> Any:
    raise ValueError(f"{uri}: trajgrade never fetches a schema")


@functools.cache
def _no_fetch() -> Registry[Any]:
    """The registry of every schema compiled here: it resolves no reference outside the schema."""
    from referencing import Registry

    return Registry(retrieve=_never_retrieve)  # type: ignore[call-arg]


def _path(error: Any) -> str:
    parts = list(error.absolute_path)
    if error.validator == "required":
        return "arguments"
    return "arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _where(step: Step) -> str:
    return f"{step.tool.name if step.tool else step.name} (span {step.span_id}, turn {step.turn})"


def tool_schema(t: Trajectory, c: ToolSchemaConfig, name: str) -> GraderResult:
    calls = tool_calls(t)
    if not calls:
        text = "no tool calls to check"
        return GraderResult(
            name=name,
            type="tool-schema",
            status="pass",
            score=1.0,
            explanation=text,
            value=0,
            evidence=(Evidence(text),),
            details={"checked": 0, "violations": []},
        )
    schemas = dict(t.tool_definitions) if c.use_trace_definitions else {}
    schemas.update(c.schemas)
    validators, refused = _validators(schemas)
    violations: list[dict[str, Any]] = []
    evidence: list[Evidence] = []
    unchecked: list[str] = []
    unfetched: list[str] = []
    names, span_ids = tool_columns(t, calls)
    by_tool = span_ids_by_name(names, span_ids)
    approved = {
        tool
        for tool in by_tool
        if (c.allowlist is None or tool in c.allowlist) and tool not in c.blocklist and tool not in refused
    }
    # The calls' numbering by argument text (shared by the grading), when there are schemas to check them against.
    numbers = grading_fact(t, call_texts).arguments_of(calls) if validators else []
    for i in not_plainly_valid(calls, names, approved, validators, numbers):  # the other calls add nothing below
        step = calls[i]
        assert step.tool is not None
        tool = step.tool.name
        if c.allowlist is not None and tool not in c.allowlist:
            violations.append(
                {"span_id": step.span_id, "tool": tool, "argument": None, "reason": "not in the allowlist"}
            )
            evidence.append(Evidence(f"{_where(step)}: tool not in the allowlist {list(c.allowlist)}", (step.span_id,)))
        if tool in c.blocklist:
            violations.append({"span_id": step.span_id, "tool": tool, "argument": None, "reason": "in the blocklist"})
            evidence.append(Evidence(f"{_where(step)}: tool is in the blocklist", (step.span_id,)))
        if tool in refused:
            unfetched.append(f"{_where(step)}: its schema refers to {refused[tool]!r}, which is never fetched")
            continue
        validator = validators.get(tool)
        if validator is None:
            continue
        if not step.tool.arguments_captured:
            unchecked.append(_where(step))
            continue
        if validator.is_valid(step.tool.arguments):
            continue
        errors = sorted(
            validator.iter_errors(step.tool.arguments),
            key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator), e.message),
        )
        for error in errors[:_MAX_ERRORS_PER_CALL]:
            argument = _path(error)
            violations.append({"span_id": step.span_id, "tool": tool, "argument": argument, "reason": error.message})
            evidence.append(Evidence(f"{_where(step)}: {argument}: {error.message}", (step.span_id,)))
    checked = len(calls) - len(unchecked) - len(unfetched)
    if not violations and (unchecked or unfetched):
        why = [f"{len(unfetched)} call(s) not checked: {'; '.join(unfetched[:3])}"] if unfetched else []
        if unchecked:
            why.append(f"arguments not captured for {len(unchecked)} call(s) with a schema: {', '.join(unchecked[:3])}")
        return not_evaluable(
            name, "tool-schema", "; ".join(why), details={"checked": checked, "unchecked": len(calls) - checked}
        )
    if violations:
        shown = "; ".join(e.description for e in evidence[:3]) + ("; ..." if len(evidence) > 3 else "")
        explanation = f"{len(violations)} violation(s) in {len(calls)} tool call(s): {shown}"
        score = 1 - len({v["span_id"] for v in violations}) / len(calls)
        return GraderResult(
            name=name,
            type="tool-schema",
            status="fail",
            score=score,
            explanation=explanation,
            value=len(violations),
            evidence=tuple(evidence),
            details={"checked": checked, "violations": violations, "unchecked": len(unchecked)},
        )
    validated = sum(len(spans) for tool, spans in by_tool.items() if tool in validators)
    text = (
        f"all {len(calls)} tool call(s) checked: tools approved, {validated} argument set(s) valid "
        f"against their schema ({', '.join(sorted(by_tool))})"
    )
    return GraderResult(
        name=name,
        type="tool-schema",
        status="pass",
        score=1.0,
        explanation=text,
        value=0,
        evidence=tuple(Evidence(f"{tool}: {len(spans)} call(s) ok", tuple(spans)) for tool, spans in by_tool.items()),
        details={"checked": checked, "violations": []},
    )


class _Schema:
    """One tool's schema, compiled twice: jsonschema-rs answers "valid?" in about a microsecond, and for the
    few calls that are not, jsonschema (the reference implementation) says which argument and why.

    A schema with no ``$`` keyword (no reference, identifier or anchor, whose meaning would change under another
    root) is also compiled as the ``items`` of an array, which checks all the calls of a tool in one call. The
    reference implementation's validator is made when first asked for."""

    __slots__ = ("_full", "each", "fast", "schema")

    def __init__(self, schema: dict[str, Any]) -> None:
        import jsonschema_rs

        self.schema = schema
        self._full: Any = None
        try:
            self.fast: Any = jsonschema_rs.Draft202012Validator(schema, retriever=_never_retrieve_rs)
        except Exception:  # a schema jsonschema-rs cannot compile is checked by jsonschema alone
            self.fast = None
        self.each: Any = None
        if self.fast is not None and not _has_dollar_key(schema):
            try:
                self.each = jsonschema_rs.Draft202012Validator({"type": "array", "items": schema})
            except Exception:  # the calls are checked one by one
                self.each = None

    def all_valid(self, instances: list[Any]) -> bool:
        """True when one check of them all finds every instance valid (False: check each)."""
        if self.each is not None:
            try:
                return bool(self.each.is_valid(instances))
            except Exception:  # an instance it cannot take: each is checked alone
                pass
        return False

    def is_valid(self, instance: Any) -> bool:
        if self.fast is not None:
            try:
                return bool(self.fast.is_valid(instance))
            except Exception:  # an instance it cannot take (e.g. a non-JSON value): ask jsonschema
                pass
        return bool(self.full.is_valid(instance))

    def iter_errors(self, instance: Any) -> Any:
        return self.full.iter_errors(instance)

    @property
    def full(self) -> Any:
        """jsonschema's validator of the schema."""
        if self._full is None:
            from jsonschema import Draft202012Validator

            self._full = Draft202012Validator(self.schema, registry=_no_fetch())
        return self._full


def _validators(schemas: dict[str, Any]) -> tuple[dict[str, _Schema], dict[str, str]]:
    """The validator of each tool's schema, and the tools whose schema refers outside itself (to what)."""
    validators: dict[str, _Schema] = {}
    refused: dict[str, str] = {}
    for tool, schema in schemas.items():
        v = _validator(schema)
        if isinstance(v, str):
            refused[tool] = v
        elif v is not None:
            validators[tool] = v
    return validators, refused


_COMPILED: dict[str, _Schema | str | None] = {}
_COMPILED_MAX = 512


def _by_text(schema: Any) -> _Schema | str | None:
    """A validator for a tool's schema; None when it is not a valid JSON Schema (then it is not checked); the
    reference when it refers outside itself (never fetched).

    Checking and compiling a schema costs up to milliseconds and the same definitions arrive with every run, so
    validators are kept by the schema's canonical JSON (a small, bounded cache).
    """
    key = canonical_json(schema) if isinstance(schema, dict) else None
    if key is None:  # not JSON: not a schema
        return None
    if key not in _COMPILED:
        validator: _Schema | str | None = None
        if schema_problem(schema, key) is None:
            validator = remote_reference(schema) or _Schema(schema)
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = validator
    return _COMPILED[key]


#: The same, by the schema object itself: a config's schemas, and the definitions of a trajectory graded again, are
#: the same objects run after run, and need no canonical JSON to be found.
_validator = ByObject(_by_text, _COMPILED_MAX)


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "tool-schema",
        ToolSchemaConfig,
        tool_schema,
        "allowlist, blocklist and JSON Schema of tool arguments",
        needs=("tool_arguments",),
    ),
)
