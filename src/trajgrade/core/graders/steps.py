"""The passes over a run's steps that graders make: its tool calls, their names, the calls of some tools, span ids.

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as graders
run these over every step of every run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from trajgrade.core.patterns import name_filter
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = [
    "all_arguments_captured",
    "any_arguments_captured",
    "call_names",
    "calls_named",
    "count_named",
    "each_name",
    "not_plainly_valid",
    "positions_named",
    "span_ids",
    "span_ids_by_name",
    "span_ids_named",
    "tool_calls",
    "tool_columns",
    "tool_names",
]


def tool_calls(t: Trajectory) -> list[Step]:
    """The run's tool calls: its tool steps that carry a tool (every one of a built run's, copied at once, told from
    its ``tool_names`` without reading the steps)."""
    steps = t.tool_steps
    for name in t.tool_names:
        if name is None:  # compiled: a comparison of pointers, where ``None in`` asks each name for its equality
            return [s for s in steps if s.tool is not None]
    return list(steps)


def tool_columns(t: Trajectory, calls: Sequence[Step]) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    """The tool name and span id of each of ``calls``, some of ``t``'s tool calls in order: the run's own
    ``tool_names`` and ``tool_span_ids`` when they are all of them (as many), which a long run's graders read
    without reading its steps again."""
    if len(calls) == len(t.tool_steps):
        return t.tool_names, t.tool_span_ids
    return call_names(calls), span_ids(calls)


def call_names(calls: Sequence[Step]) -> tuple[str | None, ...]:
    """The tool name of each call, None for a call without a tool: beside the calls, as a run's ``tool_names``."""
    return tuple([s.tool.name if s.tool is not None else None for s in calls])


def tool_names(calls: Sequence[Step]) -> list[str]:
    """The tool name of each call (of calls that carry a tool)."""
    return [s.tool.name for s in calls if s.tool is not None]


def calls_named(t: Trajectory, tools: Sequence[str] | None) -> list[Step]:
    """The run's tool calls of the tools a grader's ``tools`` option names (regexes, ``patterns.name_filter``; all of
    them without it: ``tool_calls``)."""
    if not tools:
        return tool_calls(t)
    steps = t.tool_steps
    return [steps[i] for i in positions_named(t, name_filter(tools))]


def span_ids_named(t: Trajectory, tools: Sequence[str] | None) -> tuple[str, ...]:
    """The span ids of the run's tool calls of the tools ``tools`` names (all its tool steps' without it)."""
    if not tools:
        return t.tool_span_ids
    ids = t.tool_span_ids
    return tuple([ids[i] for i in positions_named(t, name_filter(tools))])


def positions_named(t: Trajectory, keep: Callable[[str], bool]) -> list[int]:
    """The positions among the run's tool calls of those whose tool name ``keep`` accepts, asked once per name, read
    from its ``tool_names`` without its steps."""
    names = t.tool_names
    kept: dict[str, bool] = {}
    out: list[int] = []
    for i in range(len(names)):
        name = names[i]
        if name is None:
            continue
        hit = kept.get(name)
        if hit is None:
            hit = kept[name] = keep(name)
        if hit:
            out.append(i)
    return out


def count_named(calls: Sequence[Step], names: Collection[str]) -> int:
    """How many of the calls are calls of a tool in ``names`` (exact names)."""
    return sum(1 for s in calls if s.tool is not None and s.tool.name in names)


def any_arguments_captured(calls: Sequence[Step]) -> bool:
    """Whether the spans captured the arguments of some call."""
    for s in calls:
        if s.tool is not None and s.tool.arguments_captured:
            return True
    return False


def all_arguments_captured(calls: Sequence[Step]) -> bool:
    """Whether the spans captured the arguments of every call."""
    for s in calls:
        if s.tool is not None and not s.tool.arguments_captured:
            return False
    return True


def each_name(names: Sequence[str], verdicts: dict[str, bool]) -> list[bool | None]:
    """The verdict on each name."""
    return [verdicts[name] for name in names]


def not_plainly_valid(
    calls: Sequence[Step],
    names: tuple[str | None, ...],
    approved: set[str],
    validators: dict[str, Any],
    numbers: list[int | None],
) -> list[int]:
    """The positions of the calls (their tool ``names`` beside them, ``tool_columns``) that are not plainly valid:
    of a tool not ``approved``, or of a tool with a validator whose arguments were not captured or are not valid.

    A validator has ``is_valid(arguments)``, and ``all_valid(list of arguments)``, true when one check of them all
    finds every one valid: the calls of a tool are checked together first, and one by one only when that fails.
    ``numbers``: each call's number by its argument text, among ``calls`` (``CallTexts.arguments_of``): a call
    of the same tool and text as an earlier one has equal arguments, and is judged as that one was, not checked
    again. (A set and a dict, not any collection and mapping: compiled code then looks names up in them directly.)
    """
    valid = _all_valid(calls, names, validators, numbers)
    out: list[int] = []
    invalid: set[int] = set()  # the positions of the first calls of their text found not valid
    for i in range(len(calls)):
        name = names[i]
        if name is None:
            continue
        if name not in approved:
            out.append(i)
            continue
        validator = validators.get(name)
        if validator is None or name in valid:
            continue
        tool = calls[i].tool
        if tool is None:
            continue
        if not tool.arguments_captured:
            out.append(i)
            continue
        first = numbers[i]
        if first is not None and first < i:
            if first in invalid:
                out.append(i)
        elif not validator.is_valid(tool.arguments):
            out.append(i)
            invalid.add(i)
    return out


def _all_valid(
    calls: Sequence[Step], names: tuple[str | None, ...], validators: dict[str, Any], numbers: list[int | None]
) -> set[str]:
    """The tools whose calls all had their arguments captured, and which one check of them all (each text once)
    finds valid: their calls need no other look."""
    batches: dict[str, list[Any]] = {}
    uncaptured: set[str] = set()
    for i in range(len(calls)):
        name = names[i]
        if name is None or name not in validators:
            continue
        tool = calls[i].tool
        if tool is None:
            continue
        if not tool.arguments_captured:
            uncaptured.add(name)
            continue
        first = numbers[i]
        if first is not None and first < i:
            continue
        batch = batches.get(name)
        if batch is None:
            batch = batches[name] = []
        batch.append(tool.arguments)
    return {name for name, batch in batches.items() if name not in uncaptured and validators[name].all_valid(batch)}


def span_ids(steps: Sequence[Step]) -> tuple[str, ...]:
    return tuple([s.span_id for s in steps])


def span_ids_by_name(names: tuple[str | None, ...], span_ids: tuple[str, ...]) -> dict[str, list[str]]:
    """The span ids of the calls of each tool (of calls' ``tool_columns``), tools in the order of their first call."""
    out: dict[str, list[str]] = {}
    for i in range(len(span_ids)):
        name = names[i]
        if name is not None:
            ids = out.get(name)
            if ids is None:
                ids = out[name] = []
            ids.append(span_ids[i])
    return out
