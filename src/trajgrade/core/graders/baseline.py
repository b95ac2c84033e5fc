"""The ``baseline`` grader: a run must not drift from its golden run.

The baseline runs are read when the config loads, from ``path`` (a trace file or a directory of them, as
``trajgrade trajectory`` reads them); the run graded is matched with one by ``key`` (``agent``, ``root``,
``attribute:NAME``; see :func:`trajgrade.core.compare.run_key`). It fails when the tool sequence needs more than
``max_tool_edits`` edits (calls with their arguments; ``null`` to not check it), or when a count grew past its
``max_increase`` (a fraction: ``{total_tokens: 0.1}`` allows 10% more). Score: the share of checks that held.
A run with no baseline of its key is not evaluable, named.
"""

from __future__ import annotations

from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from trajgrade.core.compare import METRICS, Edit, compare, run_key
from trajgrade.core.graders.base import Evidence, GraderResult, GraderSpec, Taxonomy, not_evaluable
from trajgrade.core.graders.options import BaselineConfig
from trajgrade.core.running import grading_fact
from trajgrade.core.trajectory.call_texts import call_texts
from trajgrade.core.trajectory.model import Trajectory

if TYPE_CHECKING:
    from trajgrade.core.runfiles import FileRun

__all__ = ["SPECS", "against"]


def _percent(x: float) -> str:
    return "+inf%" if x == float("inf") else f"{x:+.0%}"


#: The calls of one side of an edit that the explanation names; the rest it counts (the evidence names every span,
#: ``details`` every call).
_SHOWN_CALLS = 10


def _edit_words(e: Edit, out: list[str]) -> None:
    """An edit as ``-removed +added``, each call a word, appended to ``out`` in pieces; a side of more than
    ``_SHOWN_CALLS`` calls as its first ones and the count of the rest (a long run's edit would be megabytes)."""
    if e.baseline:
        _words("-", e.baseline, out)
        if e.candidate:
            out.append(" ")
    if e.candidate:
        _words("+", e.candidate, out)


def _words(sign: str, calls: tuple[str, ...], out: list[str]) -> None:
    """``sign + (" " + sign).join(calls)``, in pieces; past ``_SHOWN_CALLS`` calls, `` (and N more)``."""
    first = len(out)
    out.extend(chain.from_iterable(zip(repeat(" " + sign), calls[:_SHOWN_CALLS])))
    out[first] = sign
    if len(calls) > _SHOWN_CALLS:
        out.append(f" (and {len(calls) - _SHOWN_CALLS:,} more)")


def baseline(t: Trajectory, c: BaselineConfig, name: str) -> GraderResult:
    key: str | None = run_key(t, c.key)
    if key is None:
        return not_evaluable(name, "baseline", f"no baseline run with {c.key} {key!r} in {c.path} (the run has none)")
    golden = next((r for r in c.runs if run_key(r.trajectory, c.key, r.path) == key), None)
    if golden is None:
        return not_evaluable(name, "baseline", f"no baseline run with {c.key} {key!r} in {c.path}")
    return against(golden, t, c, name)


def against(golden: FileRun, t: Trajectory, c: BaselineConfig, name: str = "baseline") -> GraderResult:
    """``t`` graded against the baseline run ``golden`` (``trajgrade compare`` matches the runs itself)."""
    comparison = compare(golden.trajectory, t, grading_fact(t, call_texts))
    problems: list[str] = []  # but the tool call edits'
    edits: list[str] | None = None  # the tool call edits' problem, in pieces
    checks = 0
    evidence: list[Evidence] = []
    if c.max_tool_edits is not None:
        checks += 1
        if comparison.edit_count > c.max_tool_edits:
            changed = [e for e in comparison.edits if e.op != "equal"]
            edits = [f"{comparison.edit_count} tool call edit(s) from the baseline (max {c.max_tool_edits}): "]
            for k, e in enumerate(changed[:3]):
                if k:
                    edits.append("; ")
                _edit_words(e, edits)
            spans = tuple(chain.from_iterable(e.candidate_spans for e in changed))
            evidence.append(Evidence("tool calls not in the baseline's sequence", spans))
    for metric, allowed in c.max_increase.items():
        checks += 1
        grew = comparison.increase(metric)
        if grew is None:
            problems.append(f"{metric}: not known for both runs")
        elif grew > allowed:
            before, after = comparison.metrics[metric]
            problems.append(f"{metric} {before:g} -> {after:g} ({_percent(grew)}, max {allowed:+.0%})")
    details: dict[str, Any] = {"baseline_trace_id": golden.trajectory.trace_id, "baseline_file": golden.path}
    details.update(comparison.to_dict())
    failed = len(problems) + (edits is not None)
    if failed:
        if edits is None:
            explanation = "; ".join(problems)
        else:
            edits.extend(chain.from_iterable(("; ", p) for p in problems))
            explanation = "".join(edits)
        return GraderResult(
            name=name,
            type="baseline",
            status="fail",
            score=(checks - failed) / checks,
            explanation=explanation,
            value=comparison.edit_count,
            limit=c.max_tool_edits,
            evidence=(*evidence, *(Evidence(p) for p in problems)),
            details=details,
        )
    moved = ", ".join(f"{m} {_percent(g)}" for m in METRICS if (g := comparison.increase(m)) is not None and g != 0)
    text = f"within the baseline's tolerance: {comparison.edit_count} tool call edit(s)" + (
        f"; {moved}" if moved else ""
    )
    return GraderResult(
        name=name,
        type="baseline",
        status="pass",
        score=1.0,
        explanation=text,
        value=comparison.edit_count,
        limit=c.max_tool_edits,
        evidence=(Evidence(text),),
        details=details,
    )


SPECS: tuple[GraderSpec, ...] = (
    GraderSpec(
        "baseline",
        BaselineConfig,
        baseline,
        "the run stays within tolerance of its golden run: tool sequence edits, growth of calls, tokens, cost, time",
        taxonomy=Taxonomy(reference="reference-based"),
        needs=("tool_arguments", "tokens", "cost"),
    ),
)
