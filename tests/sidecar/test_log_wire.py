"""The sidecar's log events (sidecar/log_wire.py, sent by its forwarders) against the same events through the real
SDK's LoggerProvider and OTLP encoder: the same records, resources and scope once parsed, but the time each record
was observed; and what a target refuses or cannot take is retried, or dropped with the queue's bound."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from infra import sink
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as sdk_encode_logs
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from test_run_logs import CONFIG, RESOURCE, in_flight

from trajgrade import grade_run
from trajgrade.core.collector import CollectedRun
from trajgrade.core.graders.base import Evidence
from trajgrade.core.run_logs import RunLogs
from trajgrade.core.trajectory import build_trajectories
from trajgrade.doors.sidecar._protowire import encode_attributes
from trajgrade.doors.sidecar.forward import LOGS, Forwarder
from trajgrade.doors.sidecar.log_wire import WireEvents

Records = list[tuple[bytes, bytes, bytes]]  # each record's resource, scope, and itself without its observed time


def _emit(logs: RunLogs) -> None:
    """A breach of a run whose resource is remembered, and the run's results (two resources: the breach's has the
    run's attributes, the results' are given with its root)."""
    records, breach = in_flight()
    logs.remember({breach.trace_id: RESOURCE})
    logs.breach(breach)
    (trajectory,) = build_trajectories(records)
    root = next(r for r in records if r.parent_span_id is None)
    run = CollectedRun(breach.trace_id, root, [r for r in records if r is not root], False, (), None)
    logs.graded(run, grade_run(CONFIG, trajectory), {"service.name": "other", "process.pid": 7, "raw": b"\x00\x01"})
    assert logs.flush(10.0)


def _records(resource_logs: list[logs_pb2.ResourceLogs]) -> Records:
    out = []
    for rl in resource_logs:
        for sl in rl.scope_logs:
            for record in sl.log_records:
                assert record.observed_time_unix_nano > 0
                record.observed_time_unix_nano = 0
                out.append((rl.resource.SerializeToString(), sl.scope.SerializeToString(), record.SerializeToString()))
    return out


def _through_both(emit: Callable[[RunLogs], None]) -> tuple[Records, Records]:
    """The records ``emit`` makes through the SDK's pipeline, and through the sidecar's wire events to a target."""
    exporter = InMemoryLogRecordExporter()
    emit(RunLogs([exporter]))
    expected = _records(list(sdk_encode_logs(exporter.get_finished_logs()).resource_logs))
    with sink() as s:
        events = WireEvents([Forwarder(s.url, signal=LOGS)])
        emit(RunLogs(sink=events))
        events.shutdown()
        got = _records(s.resource_logs)
    return expected, got


def test_the_records_are_the_sdks() -> None:
    expected, got = _through_both(_emit)
    assert len(expected) == 1 + len(CONFIG.suites[0].graders)
    assert sorted(got) == sorted(expected)
    assert len({resource for resource, _, _ in got}) == 2


def test_breaches_about_no_valid_span_are_the_sdks_records_too() -> None:
    """A breach whose evidence names no span, and one whose span id is not hex: no ids on the record, as the SDK
    writes a record emitted outside any span."""
    _, breach = in_flight()
    no_span = dataclasses.replace(breach, result=dataclasses.replace(breach.result, evidence=()))
    not_hex = dataclasses.replace(
        breach, result=dataclasses.replace(breach.result, evidence=(Evidence("the call", ("not-hex",)),))
    )

    def emit(logs: RunLogs) -> None:
        logs.breach(no_span)
        logs.breach(not_hex)
        assert logs.flush(10.0)

    expected, got = _through_both(emit)
    assert len(got) == 2
    assert sorted(got) == sorted(expected)
    assert all(not logs_pb2.LogRecord.FromString(record).trace_id for _, _, record in got)


def test_a_target_that_refuses_for_a_while_gets_the_events_later() -> None:
    with sink() as s:
        s.status = 503
        events = WireEvents([Forwarder(s.url, signal=LOGS, max_backoff_s=0.05)])
        logs = RunLogs(sink=events)
        _, breach = in_flight()
        logs.breach(breach)
        assert not events.flush(0.3)
        s.status = 200
        assert events.flush(10.0)
        assert len(s.logs) == 1
        events.shutdown()


def test_events_past_the_queues_bound_are_dropped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with sink() as s:
        s.status = 503
        events = WireEvents([Forwarder(s.url, signal=LOGS, max_spans=1, max_backoff_s=0.05)])
        logs = RunLogs(sink=events)
        _, breach = in_flight()
        for _ in range(3):
            logs.breach(breach)
        assert caplog.text.count("log events dropped until the queue to") == 1
        s.status = 200
        assert events.flush(10.0)
        assert len(s.logs) == 1
        events.shutdown()


def test_a_bytes_value_is_written_as_protobuf_writes_it() -> None:
    kv = logs_pb2.LogRecord.FromString(encode_attributes({"raw": b"\x00\xff"}, 6)).attributes[0]
    assert (kv.key, kv.value.bytes_value) == ("raw", b"\x00\xff")
