"""Log events of the doors that grade other processes' runs (trajgrade.core.run_logs), through the real SDK's
LoggerProvider and batch processor, exported in memory: each event carries the resource of its run's spans, a
breach is in the context of the span that broke the limit, a run's results in the context of the spans they
evaluate, and the resources remembered are bounded."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

from trajgrade import grade_run, parse_config
from trajgrade.core import semconv as sc
from trajgrade.core.collector import CollectedRun
from trajgrade.core.inflight import Breach, InFlightChecks
from trajgrade.core.readers import read_path
from trajgrade.core.run_logs import RunLogs
from trajgrade.core.trajectory import build_trajectories, normalize
from trajgrade.core.trajectory.normalize import SpanRecord

RUN = FIXTURES / "pydantic_ai" / "default" / "repeat_six.json"
CONFIG = parse_config("graders:\n  - {name: calls, type: tool-call-count, max: 3}\n")
RESOURCE = {
    "service.name": "planner-app",
    "service.instance.id": "i-1",
    "process.pid": 42,
    "process.command_args": ["python", "agent.py"],
    "deployment": {"region": "eu"},  # a key-value list: not a value an SDK resource holds
}


def in_flight(path: Path = RUN) -> tuple[list[SpanRecord], Breach]:
    records = [normalize(s) for s in read_path(str(path))]
    tracker = InFlightChecks(CONFIG).start()
    (breach,) = [b for r in sorted(records, key=lambda r: r.end_unix_nano) if r.parent_span_id for b in tracker.add(r)]
    return records, breach


def test_a_breach_carries_its_runs_resource_and_the_span_that_broke_the_limit() -> None:
    exporter = InMemoryLogRecordExporter()
    logs = RunLogs([exporter])
    records, breach = in_flight()
    logs.remember({breach.trace_id: RESOURCE})
    logs.breach(breach)
    assert logs.flush()
    (record,) = exporter.get_finished_logs()
    assert record.log_record.event_name == sc.EVALUATION_RESULT_EVENT
    assert (f"{record.log_record.trace_id:032x}", f"{record.log_record.span_id:016x}") == (
        breach.trace_id,
        breach.span_id,
    )
    assert record.log_record.attributes is not None
    assert record.log_record.attributes[sc.TRAJGRADE_IN_FLIGHT] is True
    assert dict(record.resource.attributes) == {
        "service.name": "planner-app",
        "service.instance.id": "i-1",
        "process.pid": 42,
        "process.command_args": ("python", "agent.py"),
    }
    assert record.instrumentation_scope is not None and record.instrumentation_scope.name == "trajgrade"
    logs.shutdown()


def test_results_carry_the_roots_resource_and_the_run_is_forgotten() -> None:
    exporter = InMemoryLogRecordExporter()
    logs = RunLogs([exporter], max_runs=2)
    records, breach = in_flight()
    (trajectory,) = build_trajectories(records)
    root = next(r for r in records if r.span_id == trajectory.root_span_id)
    run = CollectedRun(breach.trace_id, root, [r for r in records if r is not root], False, (), None)
    report = grade_run(CONFIG, trajectory)
    logs.remember({breach.trace_id: RESOURCE})
    logs.graded(run, report, {"service.name": "from-the-root"})
    logs.breach(breach)  # the run was forgotten: its service name alone is known
    assert logs.flush()
    result, late = exporter.get_finished_logs()
    assert dict(result.resource.attributes) == {"service.name": "from-the-root"}
    assert f"{result.log_record.span_id:016x}" == breach.span_id  # the call past the limit, as in flight
    assert result.log_record.attributes is not None and sc.TRAJGRADE_IN_FLIGHT not in result.log_record.attributes
    assert dict(late.resource.attributes) == {"service.name": "unknown_service:python"}  # the span's own
    logs.shutdown()


def test_the_resources_remembered_are_bounded_oldest_first() -> None:
    exporter = InMemoryLogRecordExporter()
    logs = RunLogs([exporter], max_runs=2)
    _, breach = in_flight()
    logs.remember({breach.trace_id: RESOURCE})
    logs.remember({"1" * 32: {"service.name": "b"}, "2" * 32: {"service.name": "c"}})
    logs.breach(breach)
    assert logs.flush()
    (record,) = exporter.get_finished_logs()
    assert dict(record.resource.attributes) == {"service.name": "unknown_service:python"}
    logs.shutdown()
