"""The ``tool-calls`` grader: tools that must be called, must not be called, or must be called in order.

``required``, ``disallowed`` and ``sequence`` list matchers; at least one of the three must be given. A
matcher is a string (a regex on the tool name) or a ToolMatch: ``name`` (regex, unanchored; ``^x$`` for an
exact match), ``command`` and ``path`` (regexes on those string arguments), ``args`` (``{argument: regex}``),
``result`` (regex on the result, JSON-stringified when not a string; not on ``sequence`` entries), and on
``required`` entries only ``min_count`` (default 1), ``final`` (the matching call is the run's last tool call),
``at_step`` (0-based) and ``before_step`` (>= 1; steps 0 .. before_step - 1), with ``at_step < before_step``
when both are set.

As the seed specifies: every tool call of the run is a completed invocation (failed ones included); a step is
the turn of the model call that asked for the tool (turn 0 when the run has no model call). Only string
arguments are matchable: a number, boolean, object or array counts as absent. An ``args`` argument that is
absent makes the call a non-match; a ``command`` or ``path`` argument absent from a call whose name matches
is a configuration error, reported as ``error`` (``error.type`` ``config_error``) since it is only known
once a trace is seen. A required matcher is met by ``min_count`` matching calls (in the step when a step is
set, the last call when ``final``); a disallowed matcher is violated by any matching call; the sequence
must match an ordered subsequence of distinct calls.

Where the seed is silent: when a matcher needs arguments (or results) and the spans did not capture them for
a call whose name matches, the grader is not evaluable rather than failing; the score is the fraction of
checks met (each required matcher, each disallowed matcher and the sequence count one each), with the
verdict binary as in the seed.
"""

from __future__ import annotations

import json
import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from trajgrade.graders.base import Evidence, GraderConfig, GraderResult, GraderSpec, Taxonomy, not_evaluable
from trajgrade.trajectory.model import Step, Trajectory

__all__ = ["SPECS", "ToolMatch"]


def _regex(pattern: str, field: str) -> str:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{field}: invalid regex {pattern!r}: {e}") from None
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

    def label(self) -> str:
        extras = [f"{k}={v!r}" for k in ("command", "path", "result") if (v := getattr(self, k)) is not None]
        extras += [f"args.{k}={v!r}" for k, v in (self.args or {}).items()]
        return f"{self.name!r}" + (f" ({', '.join(extras)})" if extras else "")


Entry = ToolMatch | str
_REQUIRED_ONLY = ("min_count", "final", "at_step", "before_step")


class ToolCallsConfig(GraderConfig):
    required: tuple[Entry, ...] | None = None
    disallowed: tuple[Entry, ...] | None = None
    sequence: tuple[Entry, ...] | None = None

    @field_validator("required", "disallowed", "sequence", mode="after")
    @classmethod
    def _entries(cls, entries: tuple[Entry, ...] | None) -> tuple[ToolMatch, ...] | None:
        if entries is None:
            return None
        return tuple(ToolMatch(name=_regex(e, "name")) if isinstance(e, str) else e for e in entries)

    @model_validator(mode="after")
    def _rules(self) -> ToolCallsConfig:
        if self.required is None and self.disallowed is None and self.sequence is None:
            raise ValueError("at least one of required, disallowed or sequence must be provided")
        for list_name in ("disallowed", "sequence"):
            for i, entry in enumerate(getattr(self, list_name) or ()):
                assert isinstance(entry, ToolMatch)
                used = [f for f in _REQUIRED_ONLY if getattr(entry, f) is not None]
                if used:
                    raise ValueError(f"{list_name}[{i}]: {', '.join(used)} is allowed on required entries only")
                if list_name == "sequence" and entry.result is not None:
                    raise ValueError(
                        f"sequence[{i}]: result is not supported on sequence entries "
                        "(they match when the tool is called, before its result is known)"
                    )
        return self


class _NeedsConfig(Exception):
    """A command/path matcher met a call without that argument."""


class _NotCaptured(Exception):
    """A matcher needs arguments or results that the spans did not capture."""


def _string_arg(step: Step, key: str) -> str | None:
    assert step.tool is not None
    arguments = step.tool.arguments
    if not isinstance(arguments, dict):
        return None
    value = arguments.get(key)
    return value if isinstance(value, str) else None


def _result_text(step: Step) -> str:
    assert step.tool is not None
    result = step.tool.result
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(result)


def _matches(m: ToolMatch, step: Step) -> bool:
    """Whether a call matches; raises when the answer needs data the trace lacks or breaks a config rule."""
    tool = step.tool
    if tool is None or not re.search(m.name, tool.name):
        return False
    needs_args = m.command is not None or m.path is not None or bool(m.args)
    if needs_args and not tool.arguments_captured:
        raise _NotCaptured(f"arguments of {tool.name} (span {step.span_id}) were not captured")
    for key in ("command", "path"):
        pattern = getattr(m, key)
        if pattern is None:
            continue
        value = _string_arg(step, key)
        if value is None:
            raise _NeedsConfig(
                f"{key} matcher on {tool.name!r}, but call {step.span_id} has no string {key!r} argument "
                f"(use args: {{{key}: ...}} to match across tools that may lack it)"
            )
        if not re.search(pattern, value):
            return False
    for key, pattern in (m.args or {}).items():
        value = _string_arg(step, key)
        if value is None or not re.search(pattern, value):
            return False
    if m.result is not None:
        if not tool.result_captured:
            raise _NotCaptured(f"result of {tool.name} (span {step.span_id}) was not captured")
        if not re.search(m.result, _result_text(step)):
            return False
    return True


def _required(m: ToolMatch, calls: list[Step]) -> tuple[bool, str, tuple[str, ...]]:
    hits = [s for s in calls if _matches(m, s)]
    where = ""
    if m.at_step is not None:
        hits = [s for s in hits if s.turn == m.at_step]
        where = f" in step {m.at_step}"
    if m.before_step is not None:
        hits = [s for s in hits if s.turn < m.before_step]
        where += f" before step {m.before_step}"
    if m.final:
        last = calls[-1] if calls else None
        hits = [s for s in hits if s is last]
        where += " as the final tool call"
    need = m.min_count or 1
    ids = tuple(s.span_id for s in hits)
    if len(hits) >= need:
        count = f"{len(hits)} call(s)" if need > 1 else f"call {hits[0].tool.name if hits[0].tool else ''}"
        return True, f"required {m.label()}{where}: found ({count})", ids
    found = f"{len(hits)} of {need} matching call(s)" if need > 1 else "no matching call"
    return False, f"required {m.label()}{where}: {found}", ids


def _sequence(entries: tuple[ToolMatch, ...], calls: list[Step]) -> tuple[bool, str, tuple[str, ...]]:
    ids: list[str] = []
    position = 0
    for i, m in enumerate(entries):
        while position < len(calls) and not _matches(m, calls[position]):
            position += 1
        if position == len(calls):
            done = f"matched {i} of {len(entries)} in order" if i else "nothing matched in order"
            return False, f"sequence: {m.label()} (entry {i}) not found after the previous entries ({done})", tuple(ids)
        ids.append(calls[position].span_id)
        position += 1
    labels = " -> ".join(m.label() for m in entries)
    return True, f"sequence {labels}: satisfied in order", tuple(ids)


def tool_calls(t: Trajectory, c: ToolCallsConfig, name: str) -> GraderResult:
    calls = [s for s in t.tool_steps if s.tool is not None]
    checks: list[tuple[bool, Evidence]] = []
    try:
        for m in c.required or ():
            assert isinstance(m, ToolMatch)
            ok, text, ids = _required(m, calls)
            checks.append((ok, Evidence(text, ids)))
        for m in c.disallowed or ():
            assert isinstance(m, ToolMatch)
            hits = [s for s in calls if _matches(m, s)]
            text = (
                f"disallowed {m.label()}: called {len(hits)} time(s)" if hits else f"disallowed {m.label()}: not called"
            )
            checks.append((not hits, Evidence(text, tuple(s.span_id for s in hits))))
        if c.sequence:
            ok, text, ids = _sequence(c.sequence, calls)  # type: ignore[arg-type]
            checks.append((ok, Evidence(text, ids)))
    except _NotCaptured as e:
        return not_evaluable(name, "tool-calls", str(e))
    except _NeedsConfig as e:
        return GraderResult(
            name=name,
            type="tool-calls",
            status="error",
            score=0.0,
            explanation=f"configuration error: {e}",
            error_type="config_error",
        )
    met = sum(ok for ok, _ in checks)
    passed = met == len(checks)
    failed_checks = [e.description for ok, e in checks if not ok]
    explanation = (
        f"all {len(checks)} check(s) met over {len(calls)} tool call(s)"
        if passed
        else f"{len(failed_checks)} of {len(checks)} check(s) not met: " + "; ".join(failed_checks)
    )
    return GraderResult(
        name=name,
        type="tool-calls",
        status="pass" if passed else "fail",
        score=met / len(checks) if checks else 1.0,
        explanation=explanation,
        value=met,
        limit=len(checks),
        evidence=tuple(e for _, e in checks),
        details={"checks": [{"passed": ok, "description": e.description} for ok, e in checks]},
    )


SPECS = (
    GraderSpec(
        "tool-calls",
        ToolCallsConfig,
        tool_calls,
        "required / disallowed / ordered tool calls, with argument and result regexes",
        taxonomy=Taxonomy(cost="low"),
        needs=("tool_arguments", "tool_results"),
    ),
)
