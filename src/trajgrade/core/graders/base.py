"""What every grader shares: its result, evidence, taxonomy, and its entry in the registry.

A grader is a pydantic config model (strict, ``extra="forbid"``, frozen) and a pure function
``(trajectory, config) -> GraderResult``. It never raises for a trajectory it cannot judge: it returns
``status="error"`` with an explanation of what was missing ("not evaluable").
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from trajgrade.core.trajectory.model import Trajectory

if TYPE_CHECKING:
    from trajgrade.core.graders.watch import Gate

__all__ = [
    "Evidence",
    "GraderConfig",
    "GraderResult",
    "GraderSpec",
    "Number",
    "Status",
    "Taxonomy",
    "evidence_span_ids",
    "linear_score",
    "not_evaluable",
]

Status = Literal["pass", "fail", "error"]
#: A count or a measure, kept as it came: an int stays an int in a result (compiled code makes a float of an int
#: that a ``float`` annotation receives).
Number = int | float


@dataclass(slots=True)
class Evidence:
    """What was checked, in words, and the spans involved (read-only by contract; not frozen, as graders make
    one per call and a frozen one costs three times as much to build)."""

    description: str
    span_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class GraderResult:
    """The verdict of one grader on one run (read-only by contract; not frozen, as a frozen one costs three times as
    much to build, and a run's grading builds one per grader)."""

    name: str
    type: str
    status: Status
    score: float
    explanation: str
    value: Any = None
    limit: Any = None
    evidence: tuple[Evidence, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    #: ``error.type`` when the grader could not judge (``not_evaluable``, ``timeout``, ``internal``).
    error_type: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def renamed(self, name: str) -> GraderResult:
        """The same result under another grader's name (``dataclasses.replace`` costs several times as much)."""
        return GraderResult(
            name,
            self.type,
            self.status,
            self.score,
            self.explanation,
            self.value,
            self.limit,
            self.evidence,
            self.details,
            self.error_type,
        )


@dataclass(frozen=True, slots=True)
class Taxonomy:
    """How a grader behaves: how deterministic, how costly, how portable, what it needs and what it scores."""

    determinism: str = "static"
    cost: str = "free"
    portability: str = "t1-universal"
    reference: str = "reference-free"
    temporal_scope: str = "trajectory-level"
    score_kind: str = "code"


class GraderConfig(BaseModel):
    """Base of every grader's options: unknown fields are errors, values cannot change after loading.

    Each model's validator is built when its first options are validated, not when the catalogue is imported: a
    graders file pays for the types it uses (about a millisecond each; the catalogue has over twenty).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, defer_build=True)


GradeFn = Callable[[Trajectory, Any, str], GraderResult]


@dataclass(frozen=True, slots=True)
class GraderSpec:
    """A grader type in the registry.

    ``grade(trajectory, config, name)`` returns the result; ``needs`` names the trajectory data it reads
    (``tokens``, ``cost``, ``tool_arguments``, ``tool_results``, ``output``), for ``trajgrade graders``.
    ``watch(config, name)``, for the graders whose verdict can only get worse as a run goes on, says how a run is
    checked span by span while it is open (a ``Gate``, see ``watch.py``); ``None`` when the config leaves nothing
    to watch.
    """

    type: str
    config: builtins.type[GraderConfig]
    grade: GradeFn
    summary: str
    taxonomy: Taxonomy = Taxonomy()
    needs: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    watch: Callable[[Any, str], Gate | None] | None = None


def evidence_span_ids(evidence: Sequence[Evidence]) -> tuple[str, ...]:
    """The span ids of a result's evidence, each once, in order."""
    if len(evidence) == 1:
        ids = evidence[0].span_ids
        if type(ids) is tuple and len(set(ids)) == len(ids):  # each once already (a set is the cheapest check)
            return ids
    return tuple(dict.fromkeys(chain.from_iterable([e.span_ids for e in evidence])))


def linear_score(value: float, limit: float) -> float:
    """A score that degrades past a limit: 1 within it, then ``max(0, 1 - (value - limit) / max(limit, 1))``."""
    if value <= limit:
        return 1.0
    return max(0.0, 1.0 - (value - limit) / max(limit, 1))


def not_evaluable(name: str, type_: str, missing: str, **extra: Any) -> GraderResult:
    """The result of a grader that cannot judge this run: neither a pass nor a silent fail."""
    return GraderResult(
        name=name,
        type=type_,
        status="error",
        score=0.0,
        explanation=f"not evaluable: {missing}",
        error_type="not_evaluable",
        **extra,
    )
