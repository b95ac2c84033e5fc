"""The sidecar's log encoder (sidecar/log_wire.py) against the SDK's OTLP encoder, on records of the real SDK's
LoggerProvider: the same ExportLogsServiceRequest once parsed, whatever the resources, scopes, contexts and values;
a value it does not write is left to the SDK's encoder."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as sdk_encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from trajgrade.doors.sidecar.log_wire import encode_logs

ATTRIBUTES = {
    "gen_ai.evaluation.name": "calls",
    "gen_ai.evaluation.score.value": 0.25,
    "trajgrade.passed": False,
    "trajgrade.calls": 4,
    "trajgrade.big": 2**62,
    "trajgrade.negative": -3,
    "trajgrade.tools": ("search", "fetch"),
    "trajgrade.unicode": "d\u00e9j\u00e0 \U0001f600",
}


def records(resources: list[Resource], attributes: dict[str, object] = ATTRIBUTES) -> list:
    exporter = InMemoryLogRecordExporter()
    for i, resource in enumerate(resources):
        provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        for scope, version in (("trajgrade", "1.2.3"), ("other", None)):
            logger = provider.get_logger(scope, version, schema_url="https://example.com/s" if version else None)
            span = SpanContext(0xABC + i, 0x12 + i, is_remote=False, trace_flags=TraceFlags(1))
            logger.emit(
                event_name="gen_ai.evaluation.result",
                attributes=attributes,
                context=set_span_in_context(NonRecordingSpan(span)),
            )
            logger.emit(attributes={"n": i}, severity_text="WARN")
    return list(exporter.get_finished_logs())


def test_the_requests_are_the_sdks() -> None:
    resources = [
        Resource({"service.name": "planner", "process.pid": 42, "process.command_args": ("python", "a.py")}),
        Resource({}, schema_url="https://example.com/r"),
        Resource({"service.name": "other"}),
    ]
    batch = records(resources)
    ours = encode_logs(batch)
    assert ours is not None
    expected = sdk_encode_logs(batch)
    got = ExportLogsServiceRequest.FromString(ours)
    assert got == expected
    assert len(got.resource_logs) == 3 and sum(len(r.scope_logs) for r in got.resource_logs) == 6


def test_a_value_it_does_not_write_is_left_to_the_sdk() -> None:
    assert encode_logs(records([Resource({"service.name": "x"})], {"raw": b"\x00\x01"})) is None
    assert encode_logs(records([Resource({"blob": b"\x00"})])) is None
    assert encode_logs(records([Resource({"service.name": "x"})], {"n": 2**64})) is None
    assert encode_logs([]) == b""
