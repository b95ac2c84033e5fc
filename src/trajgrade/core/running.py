"""Running graders: choose the suite for a run, run its graders, and aggregate their results into a verdict.

A run passes when no result is ``fail`` or ``error``; with ``scoring.threshold`` it passes when the
weighted mean of the scores reaches the threshold instead (a result in ``error`` scores 0 there: what
could not be judged does not help a run pass). The run's score is that weighted mean either way. A skipped
result (an LLM judge, which trajgrade does not run) is left out of both.

Each grader runs under the suite's time limit (``scoring.timeout``), and so does each child of a composite:
``run_children`` runs them with the limit of the grader running them.

A grader is a pure function of the run and its options: within one ``grade_run``, a grader of the same type and
equal options as one already run (a composite's child that is also one of the suite's graders) is not run again;
its result is the earlier one under its own name. Graders that read the same fact of the run (the same comparisons
of its calls, the numbering of its calls by text) share it through ``grading_facts``: it is made once per
``grade_run``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from trajgrade.core.config import Config, Grader, Scoring
from trajgrade.core.graders.base import GraderConfig, GraderResult, GraderSpec
from trajgrade.core.patterns import PatternTimeout, end_budget, start_budget
from trajgrade.core.trajectory.model import Trajectory

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RunReport",
    "aggregate",
    "grade_run",
    "grading_fact",
    "grading_facts",
    "run_children",
    "run_grader",
    "score_of",
]

logger = logging.getLogger(__name__)

#: Seconds a grader may take on a run when nothing says otherwise (``Scoring.timeout``'s default).
DEFAULT_TIMEOUT_S = Scoring().timeout


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run, the suite that graded it, and the verdict."""

    trajectory: Trajectory
    suite: str | None
    results: tuple[GraderResult, ...]
    passed: bool
    score: float


#: The graders run so far in one grading, by ``Grader.same_as``: (spec, options, result).
_Done = dict[tuple[str, int] | str, list[tuple[GraderSpec, GraderConfig, GraderResult]]]


class _Running:
    """The time limit of the grader running on a thread, for the children it runs (a composite's); the run
    ``grade_run`` is grading on that thread, the graders run on it so far, and the facts they share."""

    def __init__(self) -> None:
        self.timeout_s: float = DEFAULT_TIMEOUT_S
        self.trajectory: Trajectory | None = None
        self.done: _Done | None = None
        self.facts: dict[Hashable, Any] | None = None


_threads = threading.local()


def _state() -> _Running:
    """This thread's ``_Running`` (a plain class kept in a ``threading.local``, which a compiled class cannot
    extend)."""
    try:
        return cast(_Running, _threads.running)
    except AttributeError:
        running = _threads.running = _Running()
        return running


def grading_facts(trajectory: Trajectory) -> dict[Hashable, Any] | None:
    """The facts of ``trajectory`` that the graders of its grading share, by key, while ``grade_run`` grades it on
    this thread (None otherwise): a grader that makes one keeps it there for the next that needs it. A fact is
    read-only once kept."""
    running = _state()
    return running.facts if running.trajectory is trajectory else None


F = TypeVar("F")


def grading_fact(trajectory: Trajectory, make: Callable[[Trajectory], F]) -> F:
    """``make(trajectory)``, made once per grading: kept in ``grading_facts`` under ``make`` while ``grade_run``
    grades the run (the graders of its grading, a composite's children too, share it), made anew outside it."""
    facts = grading_facts(trajectory)
    if facts is None:
        return make(trajectory)
    kept = facts.get(make)
    if kept is None:
        kept = facts[make] = make(trajectory)
    return cast(F, kept)


def run_grader(grader: Grader, trajectory: Trajectory, timeout_s: float = DEFAULT_TIMEOUT_S) -> GraderResult:
    """One grader on one run; an exception inside it, or a run past ``timeout_s``, becomes an ``error`` result.

    A grader is pure Python and is not interrupted; what could make one slow on hostile content (its config
    regexes) stops itself within the grader's budget (``trajgrade.core.patterns.budget``), and the budget is checked
    again when it returns.
    """
    running = _state()
    done = running.done if running.trajectory is trajectory else None
    if done is None:
        return _run(grader, trajectory, timeout_s)
    return _run_once(grader, trajectory, timeout_s, done)


def _run_once(grader: Grader, trajectory: Trajectory, timeout_s: float, done: _Done) -> GraderResult:
    """``grader``'s result, or the result of a grader of the same type and options already run (``done``)."""
    spec, options = grader.spec, grader.options
    alike = done.get(grader.same_as)
    if alike is None:
        alike = done[grader.same_as] = []
    else:
        for other_spec, other_options, earlier in alike:
            if other_spec is spec and (other_options is options or other_options == options):
                return earlier if earlier.name == grader.name else earlier.renamed(grader.name)
    result = _run(grader, trajectory, timeout_s)
    alike.append((spec, options, result))
    return result


def _run(grader: Grader, trajectory: Trajectory, timeout_s: float) -> GraderResult:
    running = _state()
    outer = running.timeout_s
    if outer != timeout_s:
        running.timeout_s = timeout_s
    started = time.perf_counter()
    outer_budget = start_budget(timeout_s)
    try:
        result = grader.spec.grade(trajectory, grader.options, grader.name)
    except PatternTimeout as e:  # a config regex on hostile input: bounded, reported, never a hang
        return _timeout(grader, str(e))
    except Exception as e:  # a grader bug must not take the run's other results with it
        logger.exception("grader %s (%s) failed on trace %s", grader.name, grader.type, trajectory.trace_id)
        return _error(grader, f"internal error in the grader: {type(e).__name__}: {e}", "internal")
    finally:
        end_budget(outer_budget)
        if outer != timeout_s:
            running.timeout_s = outer
    elapsed = time.perf_counter() - started
    if elapsed > timeout_s:
        return _timeout(grader, f"took {elapsed:.2f}s, over its time budget of {timeout_s:g}s")
    return result


def run_children(graders: Sequence[Grader], trajectory: Trajectory) -> list[GraderResult]:
    """The graders a grader runs (a composite's children), each with the time limit of the grader running them."""
    timeout_s = _state().timeout_s
    return [run_grader(g, trajectory, timeout_s) for g in graders]


def _timeout(grader: Grader, why: str) -> GraderResult:
    return _error(grader, f"over its time budget: {why}", "timeout")


def _error(grader: Grader, explanation: str, error_type: str) -> GraderResult:
    """The result of a grader that could not judge the run."""
    return GraderResult(
        name=grader.name, type=grader.type, status="error", score=0.0, explanation=explanation, error_type=error_type
    )


def score_of(result: GraderResult) -> float:
    """What a result counts for in an aggregate: its score, or 0 when the grader could not judge."""
    return 0.0 if result.status == "error" else result.score


def aggregate(graders: Sequence[Grader], results: Sequence[GraderResult], scoring: Scoring) -> tuple[bool, float]:
    """(passed, score) of a list of results: the weighted mean of the counted results' scores (``scoring.weights``
    over the graders' own weights), and whether it reaches ``scoring.threshold`` (without one, whether every
    counted result passed). Skipped results are not counted; when none is counted, the list passes with 1."""
    by_name = scoring.weights
    weights: list[float] = []
    weighted: list[float] = []
    passed = True
    for g, r in zip(graders, results, strict=True):
        if r.error_type == "skipped":
            continue
        w = by_name.get(g.name, g.weight) if by_name else g.weight
        weights.append(w)
        weighted.append(w * score_of(r))
        passed = passed and r.status == "pass"
    if not weights:
        return True, 1.0
    total = sum(weights)
    score = sum(weighted) / total if total else 0.0
    if scoring.threshold is not None:
        return score >= scoring.threshold, score
    return passed, score


def grade_run(config: Config, trajectory: Trajectory) -> RunReport:
    """Grade one run with the first suite that matches it (a run no suite matches passes with no results)."""
    suite = config.suite_for(trajectory)
    if suite is None:
        return RunReport(trajectory=trajectory, suite=None, results=(), passed=True, score=1.0)
    running = _state()
    outer = running.trajectory, running.done, running.facts, running.timeout_s
    done: _Done = {}
    timeout_s = running.timeout_s = suite.scoring.timeout
    running.trajectory, running.done, running.facts = trajectory, done, {}
    try:
        results = tuple([_run_once(g, trajectory, timeout_s, done) for g in suite.graders])
    finally:
        running.trajectory, running.done, running.facts, running.timeout_s = outer
    passed, score = aggregate(suite.graders, results, suite.scoring)
    return RunReport(trajectory=trajectory, suite=suite.name, results=results, passed=passed, score=score)
