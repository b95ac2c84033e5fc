"""A loaded graders file: its suites, each with its graders, scoring and the runs it matches, and its prices.

``config_loading`` reads and validates a file into these; ``running`` grades a run with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trajgrade.core.graders.base import GraderConfig, GraderSpec
from trajgrade.core.patterns import search
from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["Config", "Grader", "Match", "Scoring", "Suite"]


@dataclass(frozen=True, slots=True)
class Grader:
    """One configured grader: its name, weight, type and validated options; ``enforce``: a breach of its limit
    while the run is open stops the run (see ``inflight``)."""

    name: str
    type: str
    weight: float
    spec: GraderSpec
    options: GraderConfig
    enforce: bool = False
    #: Graders of the same type with equal options have the same key (their type and their options' hash, or the
    #: type alone for options that cannot be hashed): a grading looks among those alone for one it ran already.
    same_as: tuple[str, int] | str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            same_as: tuple[str, int] | str = (self.spec.type, hash(self.options))
        except Exception:  # options holding a dict or a list (a schema, arguments to match)
            same_as = self.spec.type
        object.__setattr__(self, "same_as", same_as)


@dataclass(frozen=True, slots=True)
class Scoring:
    threshold: float | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    #: Seconds one grader may take on one run; past it its result is ``error`` (``timeout``).
    timeout: float = 5.0


@dataclass(frozen=True, slots=True)
class Match:
    """Which runs a suite grades; every given regex must match (searched, bounded as in ``patterns``)."""

    agent_name: str | None = None
    root_span_name: str | None = None
    service_name: str | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)

    def matches(self, t: Trajectory) -> bool:
        for pattern, value in (
            (self.agent_name, t.agent_name),
            (self.root_span_name, t.root_span_name),
            (self.service_name, t.service_name),
        ):
            if pattern is not None and (value is None or not search(pattern, value)):
                return False
        for key, pattern in self.attributes.items():
            value = t.root_attributes.get(key)
            if value is None or not search(pattern, str(value)):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    graders: tuple[Grader, ...]
    scoring: Scoring = Scoring()
    match: Match | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded graders file."""

    suites: tuple[Suite, ...]
    prices: Mapping[str, Price] = field(default_factory=dict)
    source: str = "<config>"

    def suite_for(self, t: Trajectory) -> Suite | None:
        """The first suite whose match selects this run (a suite without match selects every run)."""
        for suite in self.suites:
            if suite.match is None or suite.match.matches(t):
                return suite
        return None
