"""An example agent, graded live by trajgrade: `make demo`.

A pydantic-ai agent with a scripted model (no API key, no network) answers three requests with trajgrade's
``GradingSpanProcessor`` installed in-process. Each run's report is printed as a table when its root span
ends, then the metrics a dashboard would read; the runs are also written as one HTML report
(``demo-report.html``, or the path in ``TRAJGRADE_DEMO_REPORT``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

HERE = Path(__file__).parent

#: Each scenario: the tool calls the scripted model asks for, one model response each, then an answer.
SCENARIOS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "weather": [("get_weather", {"city": "Paris"}), ("search", {"query": "Paris events"})],
    "stuck": [("search", {"query": "flight status AF123"})] * 6,
    "paging": [("list_items", {"page": p}) for p in range(1, 5)],
}


def scripted(calls: list[tuple[str, dict[str, Any]]]) -> FunctionModel:
    """Each response has an id, ``resp-<turn>``, as a provider's have (``gen_ai.response.id`` on its span)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        if turn < len(calls):
            name, args = calls[turn]
            parts: list[ModelResponsePart] = [ToolCallPart(name, args, tool_call_id=f"call_{turn}")]
        else:
            parts = [TextPart("Done: here is what I found.")]
        return ModelResponse(parts=parts, provider_response_id=f"resp-{turn}")

    return FunctionModel(respond, model_name="gpt-4o-mini")


def make_agent(name: str, calls: list[tuple[str, dict[str, Any]]], tracer_provider: TracerProvider) -> Agent[None, str]:
    instrumentation = Instrumentation(InstrumentationSettings(tracer_provider=tracer_provider))
    agent: Agent[None, str] = Agent(scripted(calls), name=name, capabilities=[instrumentation])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the web."""
        return "no results yet"

    @agent.tool_plain
    def list_items(page: int) -> list[str]:
        """One page of items."""
        if page > 10:
            raise ModelRetry("no such page")
        return [f"item {page}.{i}" for i in range(3)]

    return agent


def run_scenarios(tracer_provider: TracerProvider, names: list[str] | None = None) -> None:
    for name in names or list(SCENARIOS):
        make_agent(f"{name}-agent", SCENARIOS[name], tracer_provider).run_sync(f"please do the {name} task")


def main() -> int:
    from rich.console import Console

    from trajgrade import GradingSpanProcessor, RunReport, load_config
    from trajgrade.reports.html import to_html
    from trajgrade.reports.text import results_table

    console = Console(width=140)
    config = load_config(HERE / "configs" / "demo.yaml")
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    reports: list[RunReport] = []
    provider = TracerProvider()
    provider.add_span_processor(
        GradingSpanProcessor(
            config,
            downstream=SimpleSpanProcessor(spans),
            meter_provider=MeterProvider(metric_readers=[reader]),
            on_report=lambda report: (reports.append(report), console.print(results_table(report))),
        )
    )
    run_scenarios(provider)
    provider.force_flush()
    roots = [s for s in spans.get_finished_spans() if s.parent is None]
    events = sum(1 for s in roots for e in s.events if e.name == "gen_ai.evaluation.result")
    console.print(f"\n{len(roots)} runs exported, {events} gen_ai.evaluation.result events on their root spans\n")
    console.print("[bold]Metrics a dashboard reads[/]")
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name not in ("trajgrade.evaluations", "trajgrade.runs", "trajgrade.run.tokens"):
                    continue
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = f"count={point.count} sum={point.sum:g}"
                    attrs = ", ".join(f"{k}={v}" for k, v in sorted(point.attributes.items()))
                    console.print(f"  {metric.name}{{{attrs}}} {value}")
    provider.shutdown()
    report = Path(os.environ.get("TRAJGRADE_DEMO_REPORT", "demo-report.html")).resolve()
    report.write_text(to_html([("make demo", reports)], title="trajgrade demo"), encoding="utf-8")
    console.print(f"\nThe HTML report of these runs: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
