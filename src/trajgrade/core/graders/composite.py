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

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, InstanceOf, field_validator, model_validator

from trajgrade.core.config import Grader, Scoring
from trajgrade.core.graders.base import (
    Evidence,
    GraderConfig,
    GraderResult,
    GraderSpec,
    evidence_span_ids,
    not_evaluable,
)
from trajgrade.core.running import aggregate, run_children, score_of
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["SPECS"]

_GATE = 0.6
Score = Annotated[float, Field(ge=0, le=1)]


class Aggregator(GraderConfig):
    type: Literal["weighted_average", "minimum", "maximum", "all_or_nothing", "safety_gate"] = "weighted_average"
    weights: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None
    threshold: Score | None = None
    required: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _fields(self) -> Aggregator:
        if self.type == "safety_gate" and not self.required:
            raise ValueError("safety_gate needs required: the names of the children that must pass")
        if self.type != "safety_gate" and self.required is not None:
            raise ValueError(f"required is for the safety_gate aggregator, not {self.type}")
        if self.weights is not None and self.type not in ("weighted_average", "safety_gate"):
            raise ValueError(f"weights is for weighted_average and safety_gate, not {self.type}")
        return self


class CompositeConfig(GraderConfig):
    children_field: ClassVar[str] = "evaluators"

    evaluators: tuple[InstanceOf[Grader], ...]  # built by the loader from the children's entries
    aggregator: Aggregator = Aggregator.model_construct()  # the defaults, without building the validator at import
    threshold: Score = 0.8

    @field_validator("aggregator", mode="before")
    @classmethod
    def _aggregator(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _names(self) -> CompositeConfig:
        names = {g.name for g in self.evaluators}
        for field, listed in (("weights", self.aggregator.weights or {}), ("required", self.aggregator.required or ())):
            for child in listed:
                if child not in names:
                    raise ValueError(f"aggregator.{field}: no child named {child!r} (children: {sorted(names)})")
        return self


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


SPECS = (GraderSpec("composite", CompositeConfig, composite, "child graders combined by an aggregator"),)
