"""Log-based ``gen_ai.evaluation.result`` events reach a real collector: a rotel from PyPI, forwarding OTLP to the
sink of ``tests/sidecar/infra.py``. From the in-process ``GradingSpanProcessor`` with the SDK's LoggerProvider and
OTLP log exporter, and from an unmodified app under ``opentelemetry-instrument`` with ``OTEL_LOGS_EXPORTER=otlp``.

The app is the demo's pydantic-ai agent that loops (``stuck``: six identical searches, one model response each,
``resp-<turn>``). Each event is in the context of the span it evaluates: the loop's first repeated tool call, the
first model call past a limit (with that call's response id), the root for a run-level result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanProcessor, parse_config
from trajgrade.version import __version__

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "sidecar"))
sys.path.insert(0, str(ROOT / "examples"))

from demo_agent import run_scenarios  # noqa: E402
from infra import BIN, rotel, sink  # noqa: E402

GRADERS = (
    "graders:\n"
    "  - {name: no-loops, type: loop, max_repeats: 3}\n"
    "  - {name: three-calls, type: budget, max_llm_calls: 3}\n"
    "  - {name: tokens, type: token-budget, max: 100000}\n"
)
EVENT = "gen_ai.evaluation.result"


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


def _attributes(item: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in item.attributes}


def check_events(logs: list[logs_pb2.LogRecord], spans: list[trace_pb2.Span]) -> None:
    """The stuck run's three events, each on the span it evaluates, with the evaluator's identity."""
    (root,) = [s for s in spans if not s.parent_span_id and s.name == "invoke_agent stuck-agent"]
    run = sorted((s for s in spans if s.trace_id == root.trace_id), key=lambda s: s.start_time_unix_nano)
    searches = [s for s in run if s.name == "execute_tool search"]
    chats = [s for s in run if s.name.startswith("chat ")]
    assert (len(searches), len(chats)) == (6, 7)
    events = {str(_attributes(log)["gen_ai.evaluation.name"]): log for log in logs}
    assert set(events) == {"no-loops", "three-calls", "tokens"}
    expected = {"no-loops": searches[0], "three-calls": chats[3], "tokens": root}
    for name, log in events.items():
        attrs = _attributes(log)
        assert log.event_name == EVENT
        assert (log.trace_id, log.span_id) == (root.trace_id, expected[name].span_id), name
        assert attrs["gen_ai.evaluation.evaluator.id"] == name
        assert attrs["gen_ai.evaluation.evaluator.version"] == __version__
        assert attrs["gen_ai.evaluation.evaluator.type"] == "deterministic"
        assert isinstance(attrs["gen_ai.evaluation.score.value"], float)
    loop, calls, tokens = (_attributes(events[n]) for n in ("no-loops", "three-calls", "tokens"))
    assert loop["gen_ai.evaluation.score.label"] == "fail" and loop["trajgrade.grader.type"] == "loop"
    assert loop["trajgrade.evidence.span_ids"][0] == searches[0].span_id.hex()
    assert "gen_ai.response.id" not in loop  # a tool call has none
    assert calls["gen_ai.evaluation.score.label"] == "fail"
    assert calls["gen_ai.response.id"] == "resp-3" == _attributes(chats[3])["gen_ai.response.id"]
    assert tokens["gen_ai.evaluation.score.label"] == "pass" and "gen_ai.response.id" not in tokens


def test_log_events_from_the_processor_reach_a_real_collector(tmp_path: Path) -> None:
    with sink() as backend, rotel(tmp_path, backend.url) as ports:
        logger_provider = LoggerProvider()
        exporter = OTLPLogExporter(endpoint=f"http://127.0.0.1:{ports['http']}/v1/logs")
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporter, schedule_delay_millis=50))
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        processor = GradingSpanProcessor(
            parse_config(GRADERS), downstream=SimpleSpanProcessor(spans), logger_provider=logger_provider
        )
        provider.add_span_processor(processor)
        run_scenarios(provider, ["stuck"])
        assert provider.force_flush() and logger_provider.force_flush()
        assert backend.wait_for_logs(3), f"{len(backend.logs)} log records reached the sink"
        provider.shutdown()
        logger_provider.shutdown()
    check_events(list(backend.logs), [_to_proto(s) for s in spans.get_finished_spans()])


def _to_proto(span: ReadableSpan) -> trace_pb2.Span:
    """A span as the OTLP exporter encodes it (ids as bytes, attributes as AnyValues)."""
    (resource_spans,) = encode_spans([span]).resource_spans
    (scope_spans,) = resource_spans.scope_spans
    (encoded,) = scope_spans.spans
    return encoded


def test_log_events_flow_under_opentelemetry_instrument(tmp_path: Path) -> None:
    """The distro sets the logger provider up (``OTEL_LOGS_EXPORTER=otlp``): trajgrade's events go through it, by
    default; ``TRAJGRADE_LOG_EVENTS=false`` turns them off."""
    config = tmp_path / "graders.yaml"
    config.write_text(GRADERS)
    with sink() as backend, rotel(tmp_path, backend.url) as ports:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
        env.update(
            TRAJGRADE_CONFIG=str(config),
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_LOGS_EXPORTER="otlp",
            OTEL_METRICS_EXPORTER="none",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{ports['http']}",
            OTEL_SERVICE_NAME="zero-code-app",
        )
        app = [str(BIN / "opentelemetry-instrument"), sys.executable, str(ROOT / "tests/apps/zero_code_app.py")]
        out = subprocess.run(app, capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        assert backend.wait_for_logs(3), f"{len(backend.logs)} log records reached the sink; {out.stderr[-2000:]}"
        evaluation = [s for s in backend.spans if s.name == "evaluation stuck-agent"]
        assert backend.wait_for(15) and len(evaluation) == 1  # the run's 14 spans and the evaluation span
        check_events(list(backend.logs), list(backend.spans))
        # the span events stay as they were, on the evaluation span
        assert [e.name for e in evaluation[0].events] == [EVENT] * 3

        seen = (len(backend.spans), len(backend.logs))
        off = subprocess.run(app, capture_output=True, text=True, timeout=120, env={**env, "TRAJGRADE_LOG_EVENTS": "0"})
        assert off.returncode == 0, off.stderr[-2000:]
        assert backend.wait_for(seen[0] + 15)  # the second run's spans, its evaluation span among them
        time.sleep(1.0)  # the app flushed both signals when it exited: its logs would be as far along by now
        assert len(backend.logs) == seen[1]
