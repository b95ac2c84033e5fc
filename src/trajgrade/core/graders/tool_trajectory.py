"""``tool_trajectory``: the run's tool calls against an expected trajectory.

``mode``:

- ``any_order``: ``minimums`` maps tool names to a minimum number of calls; each tool is one check;
- ``in_order``: the ``expected`` calls must appear in this order (other calls may come between): a greedy
  forward scan; a call of the expected tool whose arguments do not match is used up and counts as a miss;
- ``exact``: the calls are exactly the expected ones, position by position (a different number of calls is
  one more miss);
- ``superset``: every expected call is found among the calls (each call used once; extra calls are fine);
- ``subset``: every call the run made matches some expected item (items can be used again).

An ``expected`` item is ``{tool, args, args_match, max_duration_ms}``; ``tool`` is an exact name, ``args``
an object or ``any``. Arguments are compared by ``args_match`` (per item, else the grader's): ``exact``
(the default: deep-equal), ``superset`` (the call has every expected argument, extra ones are fine),
``subset`` (every argument of the call is expected), ``ignore``, or a list of dot paths compared alone.
``max_duration_ms`` adds a latency check for the matched call.

The score is hits / checks; the verdict is a pass when it reaches ``min_score`` (default 0.8). Arguments compared
but not captured by the spans: not evaluable.
"""

from __future__ import annotations

from typing import Any

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, not_evaluable
from trajgrade.core.graders.options import ArgsMatch, ExpectedCall, ToolTrajectoryConfig
from trajgrade.core.graders.steps import all_arguments_captured, tool_calls, tool_names
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]

_MISSING = object()


def _path(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _args_ok(item: ExpectedCall, actual: Any, default: ArgsMatch) -> bool:
    how = item.args_match if item.args_match is not None else default
    if item.args == "any" or how == "ignore":
        return True
    expected = item.args
    actual = actual if isinstance(actual, dict) else {}
    if how == "exact":
        return bool(actual == expected)
    if how == "superset":
        return all(k in actual and actual[k] == v for k, v in expected.items())
    if how == "subset":
        return all(k in expected and expected[k] == v for k, v in actual.items())
    return all(_path(actual, p) == _path(expected, p) for p in how)


def _needs_args(c: ToolTrajectoryConfig) -> bool:
    return any(
        item.args != "any" and (item.args_match if item.args_match is not None else c.args_match) != "ignore"
        for item in c.expected or ()
    )


def _call(step: Step) -> str:
    assert step.tool is not None
    return f"{step.tool.name} (span {step.span_id})"


def _matches(item: ExpectedCall, step: Step, c: ToolTrajectoryConfig) -> bool:
    assert step.tool is not None
    return step.tool.name == item.tool and _args_ok(item, step.tool.arguments, c.args_match)


class _Tally:
    """Hits and misses as evidence, and the expected items each call matched (for latency checks)."""

    def __init__(self) -> None:
        self.hits: list[Evidence] = []
        self.misses: list[Evidence] = []
        self.matched: list[tuple[ExpectedCall, Step]] = []

    def hit(self, text: str, *steps: Step) -> None:
        self.hits.append(Evidence(text, tuple(s.span_id for s in steps)))

    def miss(self, text: str, *steps: Step) -> None:
        self.misses.append(Evidence(text, tuple(s.span_id for s in steps)))

    def check(self, ok: bool, text: str, *steps: Step) -> None:
        (self.hit if ok else self.miss)(text, *steps)


def _any_order(calls: list[Step], c: ToolTrajectoryConfig, tally: _Tally) -> None:
    for tool, minimum in (c.minimums or {}).items():
        mine = [s for s in calls if _tool_is(s, tool)]
        tally.check(len(mine) >= minimum, f"{tool}: {len(mine)} call(s), minimum {minimum}", *mine)


def _in_order(calls: list[Step], c: ToolTrajectoryConfig, tally: _Tally) -> None:
    names: list[str | None] = list(tool_names(calls))  # each call's tool name, looked up by the list's own index
    if len(names) != len(calls):
        names = [s.tool.name if s.tool is not None else None for s in calls]
    position = 0
    for item in c.expected or ():
        try:
            j: int | None = names.index(item.tool, position)
        except ValueError:
            j = None
        if j is None:
            tally.miss(f"{item.tool}: not called after the previous expected call")
            continue
        position = j + 1
        if _matches(item, calls[j], c):
            tally.hit(f"{item.tool}: called in order", calls[j])
            tally.matched.append((item, calls[j]))
        else:
            tally.miss(f"{item.tool}: called in order but its arguments do not match", calls[j])


def _exact(calls: list[Step], c: ToolTrajectoryConfig, tally: _Tally) -> None:
    expected = c.expected or ()
    for i, item in enumerate(expected):
        if i >= len(calls):
            tally.miss(f"position {i}: expected {item.tool}, the run made only {len(calls)} call(s)")
        elif _matches(item, calls[i], c):
            tally.hit(f"position {i}: {item.tool}", calls[i])
            tally.matched.append((item, calls[i]))
        else:
            tally.miss(f"position {i}: expected {item.tool}, got {_call(calls[i])}", calls[i])
    if len(calls) != len(expected):
        tally.miss(f"{len(calls)} tool call(s), expected exactly {len(expected)}", *calls[len(expected) :])


def _superset(calls: list[Step], c: ToolTrajectoryConfig, tally: _Tally) -> None:
    used: set[int] = set()
    for item in c.expected or ():
        j = next((k for k, s in enumerate(calls) if k not in used and _matches(item, s, c)), None)
        if j is None:
            tally.miss(f"{item.tool}: no matching call")
        else:
            used.add(j)
            tally.hit(f"{item.tool}: found", calls[j])
            tally.matched.append((item, calls[j]))


def _subset(calls: list[Step], c: ToolTrajectoryConfig, tally: _Tally) -> None:
    for s in calls:
        found = next((e for e in c.expected or () if _matches(e, s, c)), None)
        if found is None:
            tally.miss(f"{_call(s)}: not among the expected calls", s)
        else:
            tally.hit(f"{_call(s)}: expected", s)
            tally.matched.append((found, s))


_MODES = {"any_order": _any_order, "in_order": _in_order, "exact": _exact, "superset": _superset, "subset": _subset}


def tool_trajectory(t: Trajectory, c: ToolTrajectoryConfig, name: str) -> GraderResult:
    calls = tool_calls(t)
    if _needs_args(c) and not all_arguments_captured(calls):
        return not_evaluable(name, "tool_trajectory", "arguments are compared but the spans did not capture them")
    tally = _Tally()
    _MODES[c.mode](calls, c, tally)
    for item, s in tally.matched:
        if item.max_duration_ms is not None:
            text = f"{item.tool} took {s.duration_ms:.1f}ms, max {item.max_duration_ms:g}ms"
            tally.check(s.duration_ms <= item.max_duration_ms, text, s)
    hits, misses = tally.hits, tally.misses
    total = len(hits) + len(misses)
    score = len(hits) / total if total else 1.0
    passed = score >= c.min_score - 1e-12
    summary = "; ".join(e.description for e in misses) if misses else f"all {total} check(s) met"
    return GraderResult(
        name=name,
        type="tool_trajectory",
        status="pass" if passed else "fail",
        score=score,
        explanation=f"{c.mode}: {len(hits)}/{total} hits; {summary}",
        value=len(hits),
        limit=total,
        evidence=(*hits, *misses),
        details={"hits": [e.description for e in hits], "misses": [e.description for e in misses]},
    )


def _tool_is(step: Step, tool: str) -> bool:
    return step.tool is not None and step.tool.name == tool


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "tool_trajectory",
        ToolTrajectoryConfig,
        tool_trajectory,
        "tool calls against an expected trajectory (any_order, in_order, exact, subset, superset)",
        needs=("tool_arguments",),
    ),
)
