"""LLM and script judges: accepted in a config, never run.

Evaluation configs written for other tools (AgentV's among them) mix deterministic graders with judges
(``llm_judge``, ``code_judge``, ``rubric``, ...); they must load here unchanged. trajgrade runs deterministic
graders only, inside agents and collectors where calling a model per run is not an option, so a judge is reported
as skipped: status ``error`` with ``error.type`` ``skipped``. A skipped result is left out of a run's verdict and
score and of a composite's aggregate: a member without a verdict neither helps nor hurts.
"""

from __future__ import annotations

from trajgrade.core.graders.base import GraderResult, GraderSpec, Taxonomy
from trajgrade.core.graders.options import JudgeConfig
from trajgrade.core.trajectory.model import Trajectory

__all__ = ["SPECS"]


def judge(t: Trajectory, c: JudgeConfig, name: str) -> GraderResult:
    return GraderResult(
        name=name,
        type="llm_judge",
        status="error",
        score=0.0,
        explanation="skipped: trajgrade runs deterministic graders only (this is an LLM or script judge)",
        error_type="skipped",
    )


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "llm_judge",
        JudgeConfig,
        judge,
        "LLM and script judges of other evaluation tools' configs: accepted, reported as skipped",
        taxonomy=Taxonomy(determinism="non-deterministic", cost="high", score_kind="model"),
        aliases=(
            "llm-grader",
            "llm-rubric",
            "agent-rubric",
            "code_judge",
            "agent_judge",
            "rubric",
            "rubrics",
            "prompt",
        ),
    ),
)
