"""trajgrade: grade AI-agent runs from the OpenTelemetry spans they already emit.

The names below are imported when first used (PEP 562), so ``import trajgrade`` and ``trajgrade --version``
load nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trajgrade.version import __version__

if TYPE_CHECKING:
    from trajgrade.config import Config, load_config, parse_config
    from trajgrade.exceptions import ConfigError, TraceDecodeError, TrajgradeError
    from trajgrade.exporter import GradingSpanExporter
    from trajgrade.graders.base import Evidence, GraderResult
    from trajgrade.processor import GradingSpanProcessor
    from trajgrade.suite import RunReport, grade_run
    from trajgrade.trajectory import Trajectory, build_trajectories

#: Each public name and the module that defines it.
_WHERE = {
    "Config": "trajgrade.config",
    "load_config": "trajgrade.config",
    "parse_config": "trajgrade.config",
    "ConfigError": "trajgrade.exceptions",
    "TraceDecodeError": "trajgrade.exceptions",
    "TrajgradeError": "trajgrade.exceptions",
    "GradingSpanExporter": "trajgrade.exporter",
    "Evidence": "trajgrade.graders.base",
    "GraderResult": "trajgrade.graders.base",
    "GradingSpanProcessor": "trajgrade.processor",
    "RunReport": "trajgrade.suite",
    "grade_run": "trajgrade.suite",
    "Trajectory": "trajgrade.trajectory",
    "build_trajectories": "trajgrade.trajectory",
}

__all__ = [
    "Config",
    "ConfigError",
    "Evidence",
    "GraderResult",
    "GradingSpanExporter",
    "GradingSpanProcessor",
    "RunReport",
    "TraceDecodeError",
    "Trajectory",
    "TrajgradeError",
    "__version__",
    "build_trajectories",
    "grade_run",
    "load_config",
    "parse_config",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'trajgrade' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
