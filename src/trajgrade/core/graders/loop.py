"""The ``loop`` grader: an agent thrashing, repeating the same action.

An action is a tool call: its tool name and its argument values. Model calls are judged through the actions
they ask for, since what an agent does is its tool calls. Two calls are *similar* when they call the same tool
and the fraction of their argument values that are equal reaches ``similarity_threshold`` (default 0.9).
Values are compared, not text: arguments are flattened to leaf paths (``filters.page``); numbers, booleans
and nulls must be equal; strings must be equal after trimming, folding case and collapsing white space. So a
page number or a cursor that changes makes two calls different (paging is progress), and so does a retry
with a corrected query. Similarity is ``equal leaves / all leaves`` over the union of paths (two calls with
no arguments are identical).

A loop is a block of 1 to ``max_cycle_period`` (default 3) consecutive calls that repeats back to back,
each call similar to the one a period before it (A A A A, or A B A B A B), more than ``max_repeats`` times
(default 3) in a row. Model calls between the tool calls do not break a repetition. Calls whose results are
captured and change from one repetition to the next are progress (polling that moves on, retries that now
succeed), not a loop: a repetition counts only while the results stay the same or were not captured.

``tools`` (regexes, unanchored) limits the check to matching tools. The score is 1 without loops, else
``max_repeats / longest repetition``. Evidence lists each loop's span ids and the similarity of each call
to the one a period before it. Arguments not captured: not evaluable (nothing to compare).
"""

from __future__ import annotations

from typing import Any

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, not_evaluable
from trajgrade.core.graders.loop_search import LoopWatch, describe_loops, find_loops, repeated
from trajgrade.core.graders.options import LoopConfig
from trajgrade.core.graders.steps import any_arguments_captured, calls_named, tool_columns, tool_names
from trajgrade.core.graders.steps import span_ids as span_ids_of
from trajgrade.core.graders.watch import ON_TOOL_CALLS, Gate
from trajgrade.core.running import grading_fact
from trajgrade.core.trajectory.call_texts import call_texts
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["SPECS"]


def loop(t: Trajectory, c: LoopConfig, name: str) -> GraderResult:
    calls = calls_named(t, c.tools)
    if calls and not any_arguments_captured(calls):
        return not_evaluable(
            name, "loop", "tool arguments were not captured (enable content capture)", limit=c.max_repeats
        )
    names_of, ids_of = tool_columns(t, calls)  # a long run's calls told and written without reading its steps again
    texts = grading_fact(t, call_texts)
    loops = find_loops(calls, c.max_repeats, c.similarity_threshold, c.max_cycle_period, texts, names_of)
    if not loops:
        text = f"no action repeated more than {c.max_repeats} times in a row ({len(calls)} tool calls checked)"
        return GraderResult(
            name=name,
            type="loop",
            status="pass",
            score=1.0,
            explanation=text,
            value=0,
            limit=c.max_repeats,
            evidence=(Evidence(text),),
            details={"loops": []},
        )
    longest, evidence, details = describe_loops(loops, names_of, ids_of, c.max_repeats)
    return _loop_found(name, c, longest, evidence, details)


def _loop_found(
    name: str, c: LoopConfig, longest: int, evidence: list[Evidence], details: list[dict[str, Any]]
) -> GraderResult:
    return GraderResult(
        name=name,
        type="loop",
        status="fail",
        score=c.max_repeats / longest,
        explanation=f"loop detected: {evidence[0].description}",
        value=longest,
        limit=c.max_repeats,
        evidence=tuple(evidence),
        details={"loops": details},
    )


def watch_loop(c: LoopConfig, name: str) -> Gate:
    """Fails on the call that makes a block repeat more than ``max_repeats`` times, each call similar to the one a
    period before and its result not changed (``loop_search.LoopWatch``). A call whose arguments were not captured
    is similar to none."""

    def found(repeats: int, period: int, block: list[Step]) -> GraderResult:
        names, text = repeated(tool_names(block[:period]), repeats, period, c.max_repeats)
        span_ids = span_ids_of(block)
        details = {"tools": names, "period": period, "repeats": repeats, "span_ids": span_ids}
        return _loop_found(name, c, repeats, [Evidence(text, span_ids)], [details])

    watch = LoopWatch(c.similarity_threshold, c.max_repeats, c.max_cycle_period, found)
    return Gate(watch.check, start=watch.start, on=ON_TOOL_CALLS, tools=c.tools)


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "loop",
        LoopConfig,
        loop,
        "no action (tool + argument values) repeated more than max_repeats times",
        needs=("tool_arguments",),
        watch=watch_loop,
    ),
)
