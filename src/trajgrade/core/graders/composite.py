"""``composite``: graders nested under one, their results combined by an aggregator.

Children are listed under ``evaluators`` (``graders`` and ``assert`` are read the same way); each is a full
grader entry with an optional ``weight`` (default 1), and can itself be a composite. ``aggregator`` is a
type name or ``{type, ...}``:

- ``weighted_average`` (the default; ``weights: {child: w}`` overrides the children's own weights);
- ``minimum`` / ``maximum`` of the children's scores;
- ``all_or_nothing`` with ``threshold``: 0 when any child scores below it, else the mean;
- ``safety_gate`` with ``required: [child, ...]``: 0 when a required child fails (scores below 0.6), else the
  weighted average.

The composite passes when its score reaches ``threshold`` (default 0.8; for ``all_or_nothing`` its own
threshold decides). A child in ``error`` scores 0, except a child that was skipped (an LLM judge, which
trajgrade does not run), which is left out: a member without a verdict neither helps nor hurts. The children
run as the suite runs its graders (``running.run_children``: each under the suite's timeout) and their
weighted average is the suite's own ``running.aggregate``.
"""

from __future__ import annotations

from trajgrade.core.config import Scoring
from trajgrade.core.graders.base import (
    Evidence,
    GraderResult,
    GraderSpec,
    evidence_span_ids,
    not_evaluable,
)
from trajgrade.core.graders.options import CompositeConfig
from trajgrade.core.running import aggregate, run_children, score_of
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["SPECS"]

_GATE = 0.6


def composite(t: Trajectory, c: CompositeConfig, name: str) -> GraderResult:
    children = run_children(c.evaluators, t)
    results = list(zip(c.evaluators, children, strict=True))
    counted = [(g, r) for g, r in results if r.error_type != "skipped"]
    if not counted:
        return not_evaluable(name, "composite", "every child was skipped (no deterministic grader to run)")
    agg = c.aggregator
    # The weighted average of the children is the suite's aggregate, with the aggregator's weights as its own.
    _, average = aggregate(c.evaluators, children, Scoring(weights=agg.weights or {}))
    scores = [score_of(r) for _, r in counted]
    threshold = c.threshold
    if agg.type == "minimum":
        score = min(scores)
    elif agg.type == "maximum":
        score = max(scores)
    elif agg.type == "all_or_nothing":
        threshold = agg.threshold if agg.threshold is not None else c.threshold
        score = 0.0 if any(s < threshold for s in scores) else sum(scores) / len(scores)
    elif agg.type == "safety_gate":
        gated = [
            g.name for (g, _), s in zip(counted, scores, strict=True) if g.name in (agg.required or ()) and s < _GATE
        ]
        score = 0.0 if gated else average
    else:
        score = average
    passed = score > 0 and score >= threshold - 1e-12
    parts = [f"{r.name}: {r.status} ({r.score:.2f})" for _, r in results]
    explanation = f"{agg.type} of {len(counted)} child result(s) = {score:.2f} (threshold {threshold:g}): " + ", ".join(
        parts
    )
    return GraderResult(
        name=name,
        type="composite",
        status="pass" if passed else "fail",
        score=score,
        explanation=explanation,
        value=round(score, 6),
        limit=threshold,
        evidence=tuple(Evidence(f"{r.name}: {r.explanation}", _ids(r)) for _, r in results),
        details={"children": [{"name": r.name, "status": r.status, "score": r.score} for _, r in results]},
    )


def _ids(result: GraderResult) -> tuple[str, ...]:
    return evidence_span_ids(result.evidence)


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec("composite", CompositeConfig, composite, "child graders combined by an aggregator"),
)
