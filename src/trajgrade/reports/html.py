"""Graded runs as one self-contained HTML file: nothing fetched, inline CSS and a small script.

Per run: a summary line (verdict, tokens, cost, duration), the graders with their verdicts and explanations,
and the trajectory on a time axis, one lane per agent (model calls above, tool calls below, overlapping calls
stacked), failed steps outlined in red and the evidence steps of failed graders marked; clicking a step shows
its arguments and result, clicking a grader highlights its evidence. The runs travel as JSON inside the page
(arguments and results cut to ``MAX_TEXT`` characters), so a 1,000-step run stays small and opens quickly.
The style and the script are ``report.css`` and ``report.js`` beside this module, inlined into every page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from trajgrade.core.running import RunReport
from trajgrade.reports.dicts import jsonable
from trajgrade.reports.labels import run_label

__all__ = ["MAX_TEXT", "to_html"]

MAX_TEXT = 1_000


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(jsonable(value), ensure_ascii=False)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text)} characters)"


def _run(source: str, r: RunReport) -> dict[str, Any]:
    t = r.trajectory
    s = t.summary
    t0 = t.start_unix_nano
    steps = []
    for step in t.steps:
        usage = step.usage
        steps.append(
            {
                "id": step.span_id,
                "kind": step.kind,
                "name": step.tool.name if step.tool else step.name,
                "agent": step.agent or t.agent_name or "agent",
                "t0": (step.start_unix_nano - t0) / 1e6,
                "d": max(step.duration_ms, 0.0),
                "err": step.status == "error",
                "error": step.error_type,
                "model": step.model,
                "tokens": usage.total_tokens if usage else None,
                "args": _text(step.tool.arguments) if step.tool else None,
                "result": _text(step.tool.result) if step.tool else None,
            }
        )
    return {
        "label": run_label(r),
        "source": source,
        "passed": r.passed,
        "score": round(r.score, 4),
        "partial": t.partial,
        "notes": list(t.notes),
        "summary": {
            "llm_calls": s.llm_calls,
            "tool_calls": s.tool_calls,
            "tokens": s.total_tokens,
            "cost": s.cost_usd,
            "duration": s.duration_ms,
        },
        "graders": [
            {
                "name": x.name,
                "type": x.type,
                "status": "not evaluable" if x.error_type == "not_evaluable" else x.status,
                "score": round(x.score, 4),
                "explanation": x.explanation,
                "evidence": sorted({sid for e in x.evidence for sid in e.span_ids}),
            }
            for x in r.results
        ],
        "steps": steps,
    }


def to_html(groups: Sequence[tuple[str, Sequence[RunReport]]], title: str = "trajgrade report") -> str:
    runs = [_run(source, r) for source, reports in groups for r in reports]
    data = json.dumps(runs, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    failed = sum(not r["passed"] for r in runs)
    headline = f"{len(runs)} run(s): {len(runs) - failed} passed, {failed} failed"
    return _PAGE.format(title=html.escape(title), headline=headline, data=data, css=_CSS, script=_SCRIPT)


_HERE = resources.files(__package__)
_CSS = (_HERE / "report.css").read_text(encoding="utf-8")
_SCRIPT = (_HERE / "report.js").read_text(encoding="utf-8")

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body><header><h1>{title}</h1><div id="headline">{headline}</div></header><main id="main"></main>
<script type="application/json" id="runs">{data}</script>
<script>{script}</script>
</body></html>
"""
