"""Choose the graders for a run, run them, and aggregate their results into the run's verdict.

A run passes when no result is ``fail`` or ``error``; with ``scoring.threshold`` it passes when the
weighted mean of the scores reaches the threshold instead (a result in ``error`` scores 0 there: what
could not be judged does not help a run pass). The run's score is that weighted mean either way. A skipped
result (an LLM judge, which trajgrade does not run) is left out of both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from trajgrade.core.config import Config, Grader, Scoring
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.patterns import PatternTimeout, budget
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["RunReport", "aggregate", "grade_run", "run_grader"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run, the suite that graded it, and the verdict."""

    trajectory: Trajectory
    suite: str | None
    results: tuple[GraderResult, ...]
    passed: bool
    score: float


def run_grader(grader: Grader, trajectory: Trajectory, timeout_s: float = 5.0) -> GraderResult:
    """One grader on one run; an exception inside it, or a run past ``timeout_s``, becomes an ``error`` result.

    A grader is pure Python and is not interrupted; what could make one slow on hostile content (its config
    regexes) stops itself within the grader's budget (``trajgrade.core.patterns.budget``), and the budget is checked
    again when it returns.
    """
    started = time.perf_counter()
    try:
        with budget(timeout_s):
            result = grader.spec.grade(trajectory, grader.options, grader.name)
    except PatternTimeout as e:  # a config regex on hostile input: bounded, reported, never a hang
        return _timeout(grader, str(e))
    except Exception as e:  # a grader bug must not take the run's other results with it
        logger.exception("grader %s (%s) failed on trace %s", grader.name, grader.type, trajectory.trace_id)
        return GraderResult(
            name=grader.name,
            type=grader.type,
            status="error",
            score=0.0,
            explanation=f"internal error in the grader: {type(e).__name__}: {e}",
            error_type="internal",
        )
    elapsed = time.perf_counter() - started
    if elapsed > timeout_s:
        return _timeout(grader, f"took {elapsed:.2f}s, over its time budget of {timeout_s:g}s")
    return result


def _timeout(grader: Grader, why: str) -> GraderResult:
    return GraderResult(
        name=grader.name,
        type=grader.type,
        status="error",
        score=0.0,
        explanation=f"over its time budget: {why}",
        error_type="timeout",
    )


def aggregate(graders: Sequence[Grader], results: Sequence[GraderResult], scoring: Scoring) -> tuple[bool, float]:
    """(passed, score) of a list of results."""
    counted = [(g, r) for g, r in zip(graders, results, strict=True) if r.error_type != "skipped"]
    if not counted:
        return True, 1.0
    weights = [scoring.weights.get(g.name, g.weight) for g, _ in counted]
    total = sum(weights)
    score = sum(w * r.score for w, (_, r) in zip(weights, counted, strict=True)) / total if total else 0.0
    if scoring.threshold is not None:
        return score >= scoring.threshold, score
    return all(r.status == "pass" for _, r in counted), score


def grade_run(config: Config, trajectory: Trajectory) -> RunReport:
    """Grade one run with the first suite that matches it (a run no suite matches passes with no results)."""
    suite = config.suite_for(trajectory)
    if suite is None:
        return RunReport(trajectory, None, (), True, 1.0)
    results = tuple(run_grader(g, trajectory, suite.scoring.timeout) for g in suite.graders)
    passed, score = aggregate(suite.graders, results, suite.scoring)
    return RunReport(trajectory, suite.name, results, passed, score)
