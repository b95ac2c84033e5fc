"""The ``completed`` grader: the session finished in good health, rather than crashing or stopping mid-turn.

It checks three things: the agent produced a non-empty output, the trajectory has no error events, and at
least one turn completed (a ``turn_end`` event in an agent's session log). On spans that is:

- output: the run's final answer (the agent span's output, else the text of its last model call) is not
  empty or white space only;
- error events: model calls, agent spans (the run's own and its sub-agents') and the root span whose status
  is ERROR. A failed tool call is not one: the model receives it as a tool result, and an agent that
  recovers from it has not crashed (``error-count`` counts those spans too);
- a completed turn: at least one model call that ended without error.

It takes no options. Pass/fail, score 1 or 0; each failed check is one evidence item ("Agent produced no
output", "2 error event(s) in trajectory", "No turn_end events found — session may have crashed mid-turn").

When the spans did not capture the final output (content capture off, or an instrumentation whose output
attribute the trajectory builder does not read), the other two checks decide
and the explanation says the output was not checked (``details.output_captured`` is false). This departs
from the project's not-evaluable rule on purpose: the session-health checks that remain are still known,
and most runs recorded without content capture would otherwise never get a verdict.
"""

from __future__ import annotations

from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec
from trajgrade.core.graders.options import CompletedConfig
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["SPECS", "error_event_spans"]


def error_event_spans(t: Trajectory) -> tuple[str, ...]:
    """Span ids of the run's error events: failed model calls, failed agent spans, a failed root."""
    ids = list(t.failed_llm_span_ids)
    ids += [a.span_id for a in t.agents if a.failed]
    if t.summary.failed:
        ids.append(t.root_span_id)
    return tuple(dict.fromkeys(ids))


def completed(t: Trajectory, c: CompletedConfig, name: str) -> GraderResult:
    problems: list[Evidence] = []
    if t.output is not None and not t.output.strip():
        problems.append(Evidence("Agent produced no output", (t.root_span_id,)))
    errors = error_event_spans(t)
    if errors:
        problems.append(Evidence(f"{len(errors)} error event(s) in trajectory", errors))
    llm = t.llm_steps
    turns = len(llm) - len(t.failed_llm_span_ids)
    if not turns:
        what = f"none of the {len(llm)} model call(s) ended without error" if llm else "no model call"
        problems.append(Evidence(f"No turn_end events found ({what}) — session may have crashed mid-turn"))
    details = {
        "error_events": len(errors),
        "completed_turns": turns,
        "output_captured": t.output is not None,
    }
    if problems:
        return GraderResult(
            name=name,
            type="completed",
            status="fail",
            score=0.0,
            explanation="; ".join(p.description for p in problems),
            value=False,
            evidence=tuple(problems),
            details=details,
        )
    output = (
        f"output of {len(t.output)} characters"
        if t.output is not None
        else "final output not captured by the spans (not checked)"
    )
    text = (
        f"Agent session completed successfully: {details['completed_turns']} completed turn(s), "
        f"no error events, {output}"
    )
    return GraderResult(
        name=name,
        type="completed",
        status="pass",
        score=1.0,
        explanation=text,
        value=True,
        evidence=(Evidence(text),),
        details=details,
    )


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "completed",
        CompletedConfig,
        completed,
        "the session finished: non-empty output, no error events, a completed turn",
        needs=("output",),
    ),
)
