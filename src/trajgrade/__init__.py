"""trajgrade: grade AI-agent runs from the OpenTelemetry spans they already emit.

The names below are imported when first used (PEP 562), so ``import trajgrade`` and ``trajgrade --version``
load nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trajgrade.version import __version__

if TYPE_CHECKING:
    from trajgrade.core.config import Config
    from trajgrade.core.config_loading import load_config, parse_config
    from trajgrade.core.graders.base import Evidence, GraderResult
    from trajgrade.core.running import RunReport, grade_run
    from trajgrade.core.trajectory import Trajectory, build_trajectories
    from trajgrade.doors.exporter import GradingSpanExporter
    from trajgrade.doors.processor import GradingSpanProcessor
    from trajgrade.exceptions import BudgetExceeded, ConfigError, TraceDecodeError, TrajgradeError

#: Each public name and the module that defines it.
_WHERE = {
    "Config": "trajgrade.core.config",
    "load_config": "trajgrade.core.config_loading",
    "parse_config": "trajgrade.core.config_loading",
    "BudgetExceeded": "trajgrade.exceptions",
    "ConfigError": "trajgrade.exceptions",
    "TraceDecodeError": "trajgrade.exceptions",
    "TrajgradeError": "trajgrade.exceptions",
    "GradingSpanExporter": "trajgrade.doors.exporter",
    "Evidence": "trajgrade.core.graders.base",
    "GraderResult": "trajgrade.core.graders.base",
    "GradingSpanProcessor": "trajgrade.doors.processor",
    "RunReport": "trajgrade.core.running",
    "grade_run": "trajgrade.core.running",
    "Trajectory": "trajgrade.core.trajectory",
    "build_trajectories": "trajgrade.core.trajectory",
}

__all__ = [
    "BudgetExceeded",
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
