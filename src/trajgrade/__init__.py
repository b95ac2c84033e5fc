"""trajgrade: grade AI-agent runs from the OpenTelemetry spans they already emit."""

from __future__ import annotations

__version__ = "0.1.0"

from trajgrade.config import Config, load_config, parse_config
from trajgrade.exceptions import ConfigError, TraceDecodeError, TrajgradeError
from trajgrade.exporter import GradingSpanExporter
from trajgrade.graders.base import Evidence, GraderResult
from trajgrade.processor import GradingSpanProcessor
from trajgrade.suite import RunReport, grade_run
from trajgrade.trajectory import Trajectory, build_trajectories

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
