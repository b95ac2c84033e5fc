"""Agent trajectories rebuilt from spans."""

from trajgrade.core.trajectory.build import build_trajectories, build_trajectory
from trajgrade.core.trajectory.model import AgentSummary, Step, Summary, ToolCall, Trajectory, Usage
from trajgrade.core.trajectory.normalize import SpanRecord, normalize

__all__ = [
    "AgentSummary",
    "SpanRecord",
    "Step",
    "Summary",
    "ToolCall",
    "Trajectory",
    "Usage",
    "build_trajectories",
    "build_trajectory",
    "normalize",
]
