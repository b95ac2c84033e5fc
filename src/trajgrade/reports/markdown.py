"""Graded runs as Markdown for a pull-request comment.

A headline (runs passed, failed), a table of the runs (failed first), then each failed run's failed graders
with their explanations, folded in ``<details>``. It stays under GitHub's comment limit (65,536 characters):
past ``limit``, the run table keeps the failed runs and counts the rest, and explanations are cut short.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajgrade.core.running import RunReport
from trajgrade.reports.labels import run_label

__all__ = ["GITHUB_COMMENT_LIMIT", "to_markdown"]

GITHUB_COMMENT_LIMIT = 65_536
_EXPLANATION = 600


def _cell(text: str, limit: int = 200) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row(source: str, r: RunReport) -> str:
    s = r.trajectory.summary
    verdict = "✅ pass" if r.passed else "❌ fail"
    failed = ", ".join(x.name for x in r.results if x.status != "pass") or "—"
    cost = f"${s.cost_usd:.4f}" if s.cost_usd is not None else "—"
    return (
        f"| {verdict} | {_cell(run_label(r))} | {_cell(source, 60)} | {s.llm_calls} | {s.tool_calls} | "
        f"{s.total_tokens if s.total_tokens is not None else '—'} | {cost} | {s.duration_ms:.0f} ms | {_cell(failed)} |"
    )


def _details(source: str, r: RunReport, explanation: int) -> str:
    lines = [f"<details><summary>❌ <b>{_cell(run_label(r))}</b> ({_cell(source, 60)})</summary>", ""]
    for x in r.results:
        if x.status == "pass":
            continue
        what = "not evaluable" if x.error_type == "not_evaluable" else x.status
        lines.append(f"- **{_cell(x.name, 80)}** ({x.type}, {what}): {_cell(x.explanation, explanation)}")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _render(runs: list[tuple[str, RunReport]], table_rows: int, explanation: int, details: int) -> str:
    failed = [(src, r) for src, r in runs if not r.passed]
    passed = len(runs) - len(failed)
    head = [
        "## trajgrade",
        "",
        f"**{len(runs)} run(s): {passed} passed, {len(failed)} failed.**",
        "",
        "| verdict | run | from | LLM calls | tool calls | tokens | cost | duration | not passed |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    ordered = failed + [(src, r) for src, r in runs if r.passed]
    head += [_row(src, r) for src, r in ordered[:table_rows]]
    if len(ordered) > table_rows:
        rest = ordered[table_rows:]
        more_failed = sum(not r.passed for _, r in rest)
        head.append(f"| … | {len(rest)} more run(s) ({more_failed} failed) not listed | | | | | | | |")
    head.append("")
    if failed:
        head += ["### Failures", ""]
        head += [_details(src, r, explanation) for src, r in failed[:details]]
        if len(failed) > details:
            head.append(f"… and {len(failed) - details} more failed run(s): see the JUnit or HTML report.\n")
    return "\n".join(head)


def to_markdown(groups: Sequence[tuple[str, Sequence[RunReport]]], limit: int = GITHUB_COMMENT_LIMIT) -> str:
    runs = [(source, r) for source, reports in groups for r in reports]
    failed = sum(not r.passed for _, r in runs)
    table_rows, explanation, details = len(runs), _EXPLANATION, len(runs)
    text = _render(runs, table_rows, explanation, details)
    while len(text) > limit:  # summarise: fewer passed rows, shorter explanations, fewer folded failures
        if table_rows > failed:
            table_rows = failed
        elif explanation > 120:
            explanation = 120
        elif details > 1:
            details //= 2
            table_rows = min(table_rows, max(details, 1) * 2)
        else:
            table_rows = max(1, table_rows // 2)
        text = _render(runs, table_rows, explanation, details)
        if table_rows == 1 and details == 1 and len(text) > limit:
            return text[: limit - 40] + "\n\n… (cut at GitHub's comment limit)\n"
    return text
