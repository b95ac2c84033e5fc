"""Readable tables for the terminal (rich); only the CLI and the demo print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from trajgrade.core.trajectory.model import Trajectory

if TYPE_CHECKING:
    from trajgrade.core.running import RunReport

__all__ = ["print_catalogue", "print_reports", "print_trajectories"]

_STATUS_STYLE = {"pass": "green", "fail": "red", "error": "yellow"}


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=140)


def _n(value: Any) -> str:
    return "?" if value is None else (f"{value:.6f}" if isinstance(value, float) else str(value))


def _short(value: Any, limit: int = 60) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def trajectory_table(t: Trajectory) -> Table:
    s = t.summary
    title = (
        f"{t.root_span_name}  trace {t.trace_id}  agent {t.agent_name or '-'}  "
        f"{s.llm_calls} LLM calls, {s.tool_calls} tool calls ({s.tool_errors} failed), {s.turns} turns, "
        f"tokens {_n(s.input_tokens)} in / {_n(s.output_tokens)} out"
        f"{f' ({s.reasoning_tokens} reasoning)' if s.reasoning_tokens else ''}, cost {_n(s.cost_usd)} USD, "
        f"{s.duration_ms:.1f} ms{', FAILED' if s.failed else ''}{', PARTIAL' if t.partial else ''}"
    )
    if s.tool_calls_not_run:
        title += f"\nrequested, never run: {', '.join(s.tool_calls_not_run)}"
    if s.tool_calls_not_requested:
        title += f"\nran without a request: {', '.join(s.tool_calls_not_requested)}"
    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("#", "turn", "kind", "agent", "name", "status", "ms", "tokens in/out", "arguments"):
        table.add_column(col, overflow="fold")
    for step in t.steps:
        usage = f"{_n(step.usage.input_tokens)}/{_n(step.usage.output_tokens)}" if step.usage else ""
        args = _short(step.tool.arguments) if step.tool and step.tool.arguments_captured else ""
        table.add_row(
            str(step.index),
            str(step.turn),
            step.kind,
            step.agent or "",
            _short(step.name, 40),
            f"[{_STATUS_STYLE['pass' if step.status == 'ok' else 'fail']}]{step.status}[/]",
            f"{step.duration_ms:.1f}",
            usage,
            args,
        )
    return table


def print_trajectories(runs: Sequence[Trajectory]) -> None:
    console = _console()
    if not runs:
        console.print("no runs found")
    for t in runs:
        console.print(trajectory_table(t))


def results_table(report: RunReport) -> Table:
    t = report.trajectory
    verdict = "[green]PASS[/]" if report.passed else "[red]FAIL[/]"
    table = Table(
        title=f"{verdict} {t.agent_name or t.root_span_name}  trace {t.trace_id}  score {report.score:.2f}"
        f"  suite {report.suite or '-'}",
        title_justify="left",
    )
    for col in ("grader", "type", "status", "score", "explanation"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        table.add_row(r.name, r.type, f"[{_STATUS_STYLE[r.status]}]{r.status}[/]", f"{r.score:.2f}", r.explanation)
    return table


def print_reports(reports: Sequence[RunReport], console: Console | None = None) -> None:
    console = console or _console()
    if not reports:
        console.print("no runs found")
    for report in reports:
        console.print(results_table(report))


def print_catalogue(rows: Sequence[dict[str, Any]]) -> None:
    table = Table(title="trajgrade graders", title_justify="left", show_lines=True)
    for col in ("type", "checks", "fields", "taxonomy"):
        table.add_column(col, overflow="fold")
    for row in rows:
        fields = "\n".join(f"{k}: {v}" for k, v in row["fields"].items())
        tax = ", ".join(f"{k}={v}" for k, v in row["taxonomy"].items())
        table.add_row(row["type"], row["summary"], fields, tax)
    _console().print(table)
