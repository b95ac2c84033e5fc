"""In-flight checks inside real agents: a looping pydantic-ai agent and a looping OpenAI Agents SDK agent (on the
scripted OpenAI-compatible server), each with ``GradingSpanProcessor`` on its tracer provider.

The breach reaches the application while the run is open: the event on the root span that has not ended, the log
event, the ``trajgrade.breaches`` counter and the callback (on the grading thread). With ``enforce: true`` the run
stops: the model or tool call after the one that broke the 3-call budget raises ``BudgetExceeded`` in the agent,
and its trace says why. Without it, nothing raises.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from readings import metric_points

from trajgrade import BudgetExceeded, GradingSpanProcessor, RunReport, parse_config
from trajgrade.core import semconv as sc
from trajgrade.core.inflight import Breach

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from demo_agent import scripted  # a scripted model: no API key, no network
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings

LOOP = [("search", {"query": "flight status AF123"})] * 10  # the model asks for the same search ten times


def looping_agent(provider: TracerProvider, search: Any) -> Agent[None, str]:
    """A real pydantic-ai agent, instrumented on ``provider``, whose model asks for ``search`` ten times."""
    instrumentation = Instrumentation(InstrumentationSettings(tracer_provider=provider))
    agent: Agent[None, str] = Agent(scripted(LOOP), name="looper", capabilities=[instrumentation])
    agent.tool_plain(search)
    return agent


def budget(enforce: bool) -> Any:
    return parse_config(
        "graders:\n"
        f"  - {{type: tool-call-count, name: calls, max: 3, enforce: {str(enforce).lower()}}}\n"
        "  - {type: max-repeat, name: repeat, max: 3, match: name-args}\n"
    )


class Agentless:
    """The telemetry an application sets up: spans, logs and metrics kept in memory, and what trajgrade reports."""

    def __init__(self, enforce: bool, on_breach: Any = None) -> None:
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.metrics = InMemoryMetricReader()
        self.breaches: list[tuple[Breach, str]] = []
        self.reports: list[RunReport] = []
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.provider = TracerProvider()
        self.processor = GradingSpanProcessor(
            budget(enforce),
            downstream=SimpleSpanProcessor(self.spans),
            meter_provider=MeterProvider(metric_readers=[self.metrics]),
            logger_provider=logger_provider,
            on_breach=on_breach or self.record,
            on_report=self.reports.append,
        )
        self.provider.add_span_processor(self.processor)

    def record(self, breach: Breach) -> None:
        self.breaches.append((breach, threading.current_thread().name))

    def root(self) -> ReadableSpan:
        (root,) = [s for s in self.spans.get_finished_spans() if s.parent is None]
        return root

    def in_flight_events(self, span: ReadableSpan) -> dict[str, dict[str, Any]]:
        return {
            str(e.attributes[sc.EVALUATION_NAME]): dict(e.attributes)
            for e in span.events
            if e.name == sc.EVALUATION_RESULT_EVENT and e.attributes and e.attributes.get(sc.TRAJGRADE_IN_FLIGHT)
        }


def test_a_looping_pydantic_ai_run_is_caught_while_it_is_open() -> None:
    """The tool waits, inside the run, until the breach has been reported: what it sees then arrived before the
    root span could end."""
    breached = threading.Event()
    app = Agentless(enforce=False, on_breach=lambda b: (app.record(b), breached.set()))
    seen: dict[str, Any] = {}
    calls = 0
    agent_thread = threading.current_thread().name

    def search(query: str) -> str:
        """Search the web."""
        nonlocal calls
        calls += 1
        if calls == 5:  # the 4th call has ended: its breach must come while this run is still going
            seen["breach_arrived"] = breached.wait(10)
            (live_root,) = next(iter(app.processor._open_roots.values()))
            seen["root_open"] = live_root.end_time is None
            seen["root_events"] = app.in_flight_events(live_root)
            seen["logs"] = [r.log_record for r in app.logs.get_finished_logs()]
            seen["counter"] = metric_points(app.metrics, "trajgrade.breaches")
        return "no results yet"

    agent = looping_agent(app.provider, search)
    agent.run_sync("Is flight AF123 on time?")
    app.provider.force_flush()

    assert seen["breach_arrived"] and seen["root_open"]
    assert set(seen["root_events"]) == {"calls", "repeat"}  # the 4th identical call: 4 > 3 calls, 4 > 3 repeats
    event = seen["root_events"]["calls"]
    assert (event[sc.EVALUATION_SCORE_LABEL], event["trajgrade.value"], event["trajgrade.limit"]) == ("fail", 4, 3)
    (log,) = [r for r in seen["logs"] if r.attributes.get(sc.EVALUATION_NAME) == "calls"]
    assert log.event_name == sc.EVALUATION_RESULT_EVENT and log.attributes[sc.TRAJGRADE_IN_FLIGHT] is True
    fourth = sorted((s for s in app.spans.get_finished_spans() if s.name == "execute_tool search"), key=_end)[3]
    assert log.span_id == fourth.context.span_id  # the event is parented to the call past the limit
    (point,) = [p for p in seen["counter"] if p.attributes[sc.EVALUATION_NAME] == "calls"]
    assert point.value == 1 and point.attributes[sc.AGENT_NAME] == "looper"
    # the callback: once per run and grader, on trajgrade's thread, not the agent's
    assert sorted(b.result.name for b, _ in app.breaches) == ["calls", "repeat"]
    assert {thread for _, thread in app.breaches} == {"trajgrade-grader"} != {agent_thread}
    # the final grading agrees
    (report,) = app.reports
    assert {r.name: r.status for r in report.results} == {"calls": "fail", "repeat": "fail"}
    assert calls == 10  # not enforced: the run went on


def _end(span: ReadableSpan) -> int:
    return span.end_time or 0


def test_enforcement_stops_a_looping_pydantic_ai_run() -> None:
    app = Agentless(enforce=True)
    calls = 0

    def search(query: str) -> str:
        """Search the web."""
        nonlocal calls
        calls += 1
        return "no results yet"

    agent = looping_agent(app.provider, search)
    with pytest.raises(BudgetExceeded) as raised:
        agent.run_sync("Is flight AF123 on time?")
    app.provider.force_flush()

    stop = raised.value
    assert (stop.grader, stop.grader_type, stop.value, stop.limit) == ("calls", "tool-call-count", 4, 3)
    assert calls == 4  # the call past the budget ran; the next model call did not
    chats = [s for s in app.spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 4
    root = app.root()
    events = app.in_flight_events(root)
    assert events["calls"][sc.TRAJGRADE_ENFORCED] is True
    exceptions = [e for e in root.events if e.name == "exception"]
    assert exceptions and "BudgetExceeded" in str(exceptions[0].attributes)  # the trace says why the run failed
    (report,) = app.reports
    assert {r.name: r.status for r in report.results}["calls"] == "fail"


def test_without_enforcement_nothing_raises_into_the_agent() -> None:
    app = Agentless(enforce=False)

    def search(query: str) -> str:
        """Search the web."""
        return "no results yet"

    result = looping_agent(app.provider, search).run_sync("Is flight AF123 on time?")
    app.provider.force_flush()
    assert result.output.startswith("Done")
    assert {b.result.name for b, _ in app.breaches} == {"calls", "repeat"}


@pytest.fixture
def agents_sdk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agentless]:
    """The OpenAI Agents SDK's traces bridged to OpenTelemetry (its export to OpenAI off), and its OpenAI client
    instrumented, on the application's provider, content captured on spans; undone after the test."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    app = Agentless(enforce=request.param)
    bridge, client = OpenAIAgentsInstrumentor(), OpenAIInstrumentor()
    bridge.instrument(tracer_provider=app.provider, disable_openai_trace_export=True)
    client.instrument(tracer_provider=app.provider)
    try:
        yield app
    finally:
        client.uninstrument()
        bridge.uninstrument()


def run_agents_sdk_loop(calls: list[str]) -> tuple[BaseException | None, int]:
    from _fake_openai import FakeOpenAI
    from agents import Agent, Runner, function_tool
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    @function_tool
    def search(query: str) -> str:
        """Search the web."""
        calls.append(query)
        return "no results yet"

    async def run(server: FakeOpenAI) -> BaseException | None:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        agent = Agent(name="looper", model=model, tools=[search])
        try:
            await Runner.run(agent, "Is flight AF123 on time?", max_turns=50)
            return None
        except BudgetExceeded as e:
            return e
        finally:
            await client.close()

    script = [{"tool_calls": [["search", {"query": "flight status AF123"}]]}] * 10
    outcome: list[BaseException | None] = []
    with FakeOpenAI(script) as server:
        # on a thread of its own: asyncio.run leaves this thread's event loop (pydantic-ai's, from the tests above)
        thread = threading.Thread(target=lambda: outcome.append(asyncio.run(run(server))))
        thread.start()
        thread.join(60)
    return outcome[0], len(server.log)  # the server's ledger: the requests the agent made


@pytest.mark.parametrize("agents_sdk", [True], indirect=True)
def test_enforcement_stops_a_looping_openai_agents_sdk_run(agents_sdk: Agentless) -> None:
    app = agents_sdk
    calls: list[str] = []
    stopped, requests = run_agents_sdk_loop(calls)
    app.provider.force_flush()

    assert isinstance(stopped, BudgetExceeded) and (stopped.grader, stopped.value) == ("calls", 4)
    assert (len(calls), requests) == (4, 4)  # the 5th model request never left the agent
    root = app.root()
    assert app.in_flight_events(root)["calls"][sc.TRAJGRADE_ENFORCED] is True
    (report,) = app.reports
    assert {r.name: r.status for r in report.results}["calls"] == "fail"


@pytest.mark.parametrize("agents_sdk", [False], indirect=True)
def test_the_openai_agents_sdk_run_goes_on_without_enforcement(agents_sdk: Agentless) -> None:
    app = agents_sdk
    calls: list[str] = []
    stopped, requests = run_agents_sdk_loop(calls)
    app.provider.force_flush()
    assert stopped is None and (len(calls), requests) == (10, 11)
    assert {b.result.name for b, _ in app.breaches} == {"calls", "repeat"}
