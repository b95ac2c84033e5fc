"""The grader catalogue: every grader type, as data.

Each type has one canonical name (its ``GraderSpec.type``) and may have aliases; ``lookup`` also accepts the
kebab-case and snake_case forms of each (``tool-calls`` / ``tool_calls``, ``execution_metrics`` /
``execution-metrics``).
"""

from __future__ import annotations

from trajgrade.core.graders import (
    baseline,
    budget,
    completed,
    composite,
    execution_metrics,
    judges,
    loop,
    repeats,
    thresholds,
    tool_calls,
    tool_schema,
    tool_trajectory,
)
from trajgrade.core.graders.base import GraderSpec

__all__ = ["CATALOGUE", "lookup"]

CATALOGUE: tuple[GraderSpec, ...] = (
    *thresholds.SPECS,
    *budget.SPECS,
    *loop.SPECS,
    *tool_schema.SPECS,
    *tool_calls.SPECS,
    *repeats.SPECS,
    *completed.SPECS,
    *execution_metrics.SPECS,
    *tool_trajectory.SPECS,
    *baseline.SPECS,
    *composite.SPECS,
    *judges.SPECS,
)


def _key(type_name: str) -> str:
    return type_name.strip().lower().replace("_", "-")


_BY_KEY: dict[str, GraderSpec] = {}
for _spec in CATALOGUE:
    for _name in (_spec.type, *_spec.aliases):
        _BY_KEY[_key(_name)] = _spec


def lookup(type_name: str) -> GraderSpec | None:
    """The registry entry of a grader type, in any of its accepted spellings (``None`` when unknown)."""
    return _BY_KEY.get(_key(type_name))
