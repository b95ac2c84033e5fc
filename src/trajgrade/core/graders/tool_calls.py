"""The ``tool-calls`` grader: tools that must be called, must not be called, or must be called in order.

``required``, ``disallowed`` and ``sequence`` list matchers; at least one of them must list one, or one of
the two checks on requests be on: ``requested_run`` (every tool call a model requested ran) and
``only_requested`` (every tool call that ran was requested by a model call of the run), both known where the
spans record what the model asked for (see ``Summary.tool_calls_not_run``). A matcher is
a string (a regex on the tool name) or a ToolMatch: ``name`` (regex, unanchored; ``^x$`` for an exact match),
``command`` and ``path`` (regexes on those arguments), ``args`` (``{argument: regex}``), ``result`` (regex on
the result; not on ``sequence`` entries), and on ``required`` entries only ``min_count`` (default 1),
``final`` (the matching call is the run's last tool call), ``at_step`` (0-based) and ``before_step`` (>= 1:
steps 0 .. before_step - 1), with ``at_step < before_step`` when both are set.

What counts:

- every tool call of the run is a completed invocation (failed ones included: they returned an error);
- a step is the turn of the model call that asked for the tool; a run with no model call is all step 0;
- only string arguments are matchable: a number, boolean, object or array counts as absent. An ``args``
  argument that is absent makes the call a non-match; a ``command`` or ``path`` argument absent from a call
  whose name matches is a configuration error, reported as ``error`` with ``error.type`` ``config_error``
  (it is only known once a trace is seen; every call is checked, so the error does not depend on the order);
- a required matcher is met by ``min_count`` matching calls (in the step when a step is set); a disallowed
  matcher is violated by any matching call; the sequence must match an ordered subsequence of distinct calls.
- verdict and score are binary: 1 when every check holds, else 0. The counts of
  checks met are in ``value`` / ``limit`` and ``details.checks``.

Edge cases:

- ``final`` with ``min_count``: at least ``min_count`` matching calls, and the run's last tool call is one
  of them. ``min_count``/``final`` on ``disallowed`` or ``sequence`` entries are configuration errors, like
  ``at_step``/``before_step``; so is an empty ``name`` (it matches every tool: write ``.`` for that).
- a non-string result is matched as JSON, in compact form (as ``JSON.stringify`` writes it) and with spaces
  after separators (as Python's ``json.dumps`` writes it): either matching counts, since a result parsed
  from a span's JSON text has lost its original spacing.
- arguments or results the spans did not capture: a call whose name matches and whose missing data decides
  the match is "unknown". A check is decided without the unknown calls when it can be (a required matcher
  already met, a disallowed one already violated, a sequence met or impossible even if every unknown call
  matched); otherwise the run is not evaluable, naming the calls. A failing check decides the verdict.
"""

from __future__ import annotations

from itertools import compress
from typing import Literal

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, Taxonomy, not_evaluable
from trajgrade.core.graders.options import ToolCallsConfig, ToolMatch
from trajgrade.core.graders.steps import each_name, tool_names
from trajgrade.core.graders.steps import tool_calls as calls_of
from trajgrade.core.graders.tool_matching import ConfigProblem, DataMatcher, each_matched
from trajgrade.core.graders.watch import Gate, RunSoFar
from trajgrade.core.patterns import matcher, search
from trajgrade.core.running import grading_fact
from trajgrade.core.trajectory.call_texts import call_texts
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]

Verdict = Literal["met", "unmet", "unknown"]
Match = bool | None  # None: the call's name matches but the data that decides the rest was not captured


def _by_name(m: ToolMatch) -> bool:
    """Whether the matcher looks at the tool's name alone."""
    return m.command is None and m.path is None and not m.args and m.result is None


def _data_matcher(m: ToolMatch) -> DataMatcher:
    """Whether a call whose name matches ``m`` matches it (see ``DataMatcher``). The matcher's fields are read once:
    it runs on every such call."""
    return DataMatcher(
        tuple((key, matcher(p)) for key in ("command", "path") if (p := getattr(m, key)) is not None),
        tuple((key, matcher(p)) for key, p in (m.args or {}).items()),
        matcher(m.result) if m.result is not None else None,
    )


def _row(
    m: ToolMatch, calls: list[Step], names: list[str], distinct: list[str], numbers: list[int | None]
) -> list[Match]:
    """One matcher against every call (of tool ``names``), its name regex decided once per tool name (``distinct``
    lists them), its data once per argument text (``numbers``, the calls' numbering by text)."""
    matches = matcher(m.name)
    named = {name: matches(name) for name in distinct}
    if _by_name(m):
        return each_name(names, named)
    return each_matched(calls, names, named, _data_matcher(m), numbers)


def _in_step(m: ToolMatch, step: Step) -> bool:
    if m.at_step is not None and step.turn != m.at_step:
        return False
    return m.before_step is None or step.turn < m.before_step


def _ids(steps: list[Step]) -> tuple[str, ...]:
    return tuple(s.span_id for s in steps)


def _where(row: list[Match], calls: list[Step], value: Match) -> list[Step]:
    """The calls whose ``row`` entry is ``value`` (True or None)."""
    if value is True:
        return list(compress(calls, row))
    return [s for s, ok in zip(calls, row, strict=True) if ok is None] if None in row else []


def _required(m: ToolMatch, calls: list[Step], row: list[Match]) -> tuple[Verdict, Evidence, list[Step]]:
    sure, maybe = _where(row, calls, True), _where(row, calls, None)
    if m.at_step is not None or m.before_step is not None:
        sure, maybe = [s for s in sure if _in_step(m, s)], [s for s in maybe if _in_step(m, s)]
    need = m.min_count or 1
    where = "".join(
        (
            f" in step {m.at_step}" if m.at_step is not None else "",
            f" before step {m.before_step}" if m.before_step is not None else "",
            " as the final tool call" if m.final else "",
        )
    )
    last = calls[-1] if calls else None
    last_sure = last is not None and row[-1] is True and _in_step(m, last)
    last_maybe = last is not None and row[-1] is None and _in_step(m, last)
    label = f"required {m.label}{where}"
    found = f"{len(sure)} matching call(s)" + (f" of the {need} needed" if need > 1 else "")
    if len(sure) >= need and (not m.final or last_sure):
        return "met", Evidence(f"{label}: {found}", _ids(sure)), []
    if len(sure) + len(maybe) >= need and (not m.final or last_sure or last_maybe):
        return "unknown", Evidence(f"{label}: {found}, {len(maybe)} undecided", _ids(sure + maybe)), maybe
    if m.final and len(sure) >= need and last is not None:
        text = (
            f"{label}: {found}, but the last tool call is {last.tool.name if last.tool else '?'} (span {last.span_id})"
        )
        return "unmet", Evidence(text, _ids([*sure, last])), []
    return "unmet", Evidence(f"{label}: {found}" if sure else f"{label}: no matching call", _ids(sure)), []


def _disallowed(m: ToolMatch, calls: list[Step], row: list[Match]) -> tuple[Verdict, Evidence, list[Step]]:
    sure, maybe = _where(row, calls, True), _where(row, calls, None)
    if sure:
        return "unmet", Evidence(f"disallowed {m.label}: called {len(sure)} time(s)", _ids(sure)), []
    if maybe:
        return "unknown", Evidence(f"disallowed {m.label}: {len(maybe)} call(s) undecided", _ids(maybe)), maybe
    return "met", Evidence(f"disallowed {m.label}: not called"), []


def _subsequence(rows: list[list[Match]], accept: tuple[Match, ...]) -> tuple[int, list[int]]:
    """Greedy leftmost match of each entry in order (optimal for subsequences): entries matched, positions."""
    positions: list[int] = []
    j = 0
    for row in rows:
        found = [_index(row, value, j) for value in accept]
        j = min(found)
        if j == len(row):
            break
        positions.append(j)
        j += 1
    return len(positions), positions


def _index(row: list[Match], value: Match, start: int) -> int:
    """The first position from ``start`` where ``row`` holds ``value`` (True or None), else its length."""
    try:
        return row.index(value, start)  # rows hold only True, False and None: equal is identical here
    except ValueError:
        return len(row)


def _sequence(
    entries: tuple[ToolMatch, ...], calls: list[Step], rows: list[list[Match]]
) -> tuple[Verdict, Evidence, list[Step]]:
    labels = " -> ".join(m.label for m in entries)
    done, positions = _subsequence(rows, (True,))
    if done == len(entries):
        return "met", Evidence(f"sequence {labels}: satisfied in order", _ids([calls[p] for p in positions])), []
    possible, _ = _subsequence(rows, (True, None))
    matched = _ids([calls[p] for p in positions])
    if possible == len(entries):
        maybe = [s for k, s in enumerate(calls) if any(row[k] is None for row in rows)]
        return "unknown", Evidence(f"sequence {labels}: {done} of {len(entries)} matched in order", matched), maybe
    missing = entries[done]
    text = (
        f"sequence {labels}: {missing.label} (entry {done}) not found after the previous entries "
        f"({done} of {len(entries)} matched in order)"
    )
    return "unmet", Evidence(text, matched), []


def _names_check(names: tuple[str, ...], what: str, ok: str) -> tuple[Verdict, Evidence, list[Step]]:
    if names:
        return "unmet", Evidence(f"{len(names)} tool call(s) {what}: {', '.join(names)}"), []
    return "met", Evidence(ok), []


def tool_calls(t: Trajectory, c: ToolCallsConfig, name: str) -> GraderResult:
    calls = calls_of(t)
    names = tool_names(calls)
    distinct = list(dict.fromkeys(names))
    matchers = (*(c.required or ()), *(c.disallowed or ()), *(c.sequence or ()))
    # The calls' numbering by argument text (shared by the grading), when a matcher reads more than the tool's name.
    numbers = [] if all(_by_name(m) for m in matchers) else grading_fact(t, call_texts).arguments_of(calls)
    try:  # every matcher against every call, so a configuration problem never depends on the verdict
        required = [_row(m, calls, names, distinct, numbers) for m in c.required or ()]
        disallowed = [_row(m, calls, names, distinct, numbers) for m in c.disallowed or ()]
        sequence = [_row(m, calls, names, distinct, numbers) for m in c.sequence or ()]
    except ConfigProblem as e:
        return GraderResult(
            name=name,
            type="tool-calls",
            status="error",
            score=0.0,
            explanation=f"configuration error: {e}",
            error_type="config_error",
        )
    checks = [_required(m, calls, row) for m, row in zip(c.required or (), required, strict=True)]
    checks += [_disallowed(m, calls, row) for m, row in zip(c.disallowed or (), disallowed, strict=True)]
    if c.sequence:
        checks.append(_sequence(c.sequence, calls, sequence))
    if c.requested_run:
        checks.append(_names_check(t.summary.tool_calls_not_run, "requested but never ran", "every requested call ran"))
    if c.only_requested:
        checks.append(
            _names_check(t.summary.tool_calls_not_requested, "ran without a request", "every call ran on request")
        )
    met = sum(v == "met" for v, _, _ in checks)
    failed = [e.description for v, e, _ in checks if v == "unmet"]
    details = {"checks": [{"status": v, "description": e.description} for v, e, _ in checks]}
    if not failed and met < len(checks):
        undecided = sorted({s.span_id: s for _, _, maybe in checks for s in maybe}.values(), key=lambda s: s.index)
        what = ", ".join(f"{s.tool.name if s.tool else '?'} (span {s.span_id})" for s in undecided[:5])
        return not_evaluable(
            name,
            "tool-calls",
            f"{len(checks) - met} of {len(checks)} check(s) depend on tool arguments or results the spans did not "
            f"capture, of {len(undecided)} call(s): {what}",
            value=met,
            limit=len(checks),
            evidence=tuple(e for _, e, _ in checks),
            details=details,
        )
    passed = not failed
    explanation = (
        f"all {len(checks)} check(s) met over {len(calls)} tool call(s)"
        if passed
        else f"{len(failed)} of {len(checks)} check(s) not met: " + "; ".join(failed)
    )
    return GraderResult(
        name=name,
        type="tool-calls",
        status="pass" if passed else "fail",
        score=1.0 if passed else 0.0,
        explanation=explanation,
        value=met,
        limit=len(checks),
        evidence=tuple(e for _, e, _ in checks),
        details=details,
    )


def watch_tool_calls(c: ToolCallsConfig, name: str) -> Gate | None:
    """Fails on the first call a ``disallowed`` matcher matches (required and sequence matchers can still be met
    later). A matcher that meets a configuration problem stops watching its run: the final grading reports it."""
    if not c.disallowed:
        return None
    disallowed = [(m, _data_matcher(m)) for m in c.disallowed]

    def check(run: RunSoFar, step: Step | None, dropped: list[ToolMatch]) -> GraderResult | None:
        assert step is not None and step.tool is not None
        for m, data in disallowed:
            if dropped and any(m is d for d in dropped):
                continue
            if not search(m.name, step.tool.name):
                continue
            try:
                matched = data.match(step)
            except ConfigProblem:
                dropped.append(m)
                continue
            if matched is True:
                evidence = Evidence(f"disallowed {m.label}: called", (step.span_id,))
                return GraderResult(
                    name=name,
                    type="tool-calls",
                    status="fail",
                    score=0.0,
                    explanation=f"{evidence.description} ({step.tool.name}, span {step.span_id})",
                    evidence=(evidence,),
                )
        return None

    # Only the calls that some matcher's name matches can be disallowed: most calls stop at the gate.
    return Gate(check, start=list, tools=[m.name for m, _ in disallowed])


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "tool-calls",
        ToolCallsConfig,
        tool_calls,
        "required / disallowed / ordered tool calls, with argument and result regexes",
        taxonomy=Taxonomy(cost="low"),
        needs=("tool_arguments", "tool_results"),
        watch=watch_tool_calls,
    ),
)
