"""The ``completed`` grader: the run finished, rather than crashing or stopping mid-turn.

The seed's system checks three things: a non-empty final output, no error events, and at least one completed
turn. On spans that is:

- at least one model call that ended without error (a completed turn);
- no error event: the run's root span did not end in error and no model call failed (a failed tool call
  the agent recovered from is not a crash; ``error-count`` counts those);
- the final output, when the spans captured it, is not empty. Most instrumentations capture it only with
  content capture on; when it was not captured the first two checks decide, and the explanation says so.

It takes no options. Pass/fail, score 1 or 0.
"""

from __future__ import annotations

from trajgrade.graders.base import Evidence, GraderConfig, GraderResult, GraderSpec
from trajgrade.trajectory.model import Trajectory

__all__ = ["SPECS"]


class CompletedConfig(GraderConfig):
    pass


def completed(t: Trajectory, c: CompletedConfig, name: str) -> GraderResult:
    problems: list[Evidence] = []
    llm = t.llm_steps
    if not any(not s.failed for s in llm):
        problems.append(Evidence("no model call completed: the run may have crashed mid-turn"))
    root_failed = t.summary.failed
    if root_failed:
        problems.append(Evidence("the run's root span ended in error", (t.root_span_id,)))
    failed_llm = tuple(s.span_id for s in llm if s.failed)
    if failed_llm:
        problems.append(Evidence(f"{len(failed_llm)} model call(s) failed", failed_llm))
    if t.output is not None and not t.output.strip():
        problems.append(Evidence("the final output is empty", (t.root_span_id,)))
    output_note = "" if t.output is not None else " (final output not captured by the spans)"
    if problems:
        explanation = "; ".join(p.description for p in problems)
        return GraderResult(
            name=name,
            type="completed",
            status="fail",
            score=0.0,
            explanation=explanation + output_note,
            evidence=tuple(problems),
        )
    text = f"completed: {len(llm)} model call(s), no errors" + (
        f", final output of {len(t.output or '')} characters" if t.output is not None else output_note
    )
    return GraderResult(
        name=name, type="completed", status="pass", score=1.0, explanation=text, evidence=(Evidence(text),)
    )


SPECS = (GraderSpec("completed", CompletedConfig, completed, "the run finished: a completed turn, no errors"),)
