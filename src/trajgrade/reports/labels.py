"""How a graded run is named in the reports: its agent (or its root span) and the start of its trace id."""

from __future__ import annotations

from trajgrade.core.running import RunReport

__all__ = ["run_label"]


def run_label(report: RunReport) -> str:
    t = report.trajectory
    return f"{t.agent_name or t.root_span_name} [{t.trace_id[:16]}]"
