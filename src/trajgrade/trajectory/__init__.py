"""Agent trajectories rebuilt from spans."""

from trajgrade.trajectory.build import build_trajectories, build_trajectory
from trajgrade.trajectory.model import AgentSummary, Step, Summary, ToolCall, Trajectory, Usage
from trajgrade.trajectory.normalize import SpanRecord, normalize

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
