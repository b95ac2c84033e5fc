"""Log-based ``gen_ai.evaluation.result`` events sent over OTLP, each with the resource of the run it is about.

The doors that grade other processes' runs (the sidecar, the rotel processor) have no application logger to emit
through: they send the events themselves, through the SDK's ``LoggerProvider`` with a ``BatchLogRecordProcessor`` per
exporter. An event carries the resource of its run's spans (``service.name``, ``service.instance.id``, ...), as the
run's spans do, so that a backend files it under the agent's service rather than trajgrade's: a door tells
:meth:`RunLogs.remember` the resource of each open run as its spans arrive (bounded: the oldest are forgotten
first), and a run's resource is forgotten once its results are out. The resource is put on each record by a log
record processor ahead of the exporting ones, where the SDK lets a record be changed.

Where the events go is an :class:`EventSink`: by default the SDK's pipeline above; a door that writes OTLP itself
(the sidecar) gives its own, which takes each run's events with the run's resource attributes, and writes them
without making an SDK record of each.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from opentelemetry._logs import Logger
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.collector import CollectedRun
from trajgrade.core.emit import log_events, span_in_context
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import Breach
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.result_attributes import breach_log_attributes
from trajgrade.core.running import RunReport
from trajgrade.version import __version__

__all__ = ["EventSink", "EventWriter", "RunLogs", "emit_breaches"]

_SCALARS = (str, bool, int, float, bytes)


def _resource(attributes: Mapping[str, Any] | None, service_name: str | None) -> dict[str, Any]:
    """A run's resource attributes from its spans' (the values an SDK resource can hold), or its service name alone
    when they are not known."""
    if attributes is None:
        return {sc.SERVICE_NAME: service_name} if service_name else {}
    kept: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, _SCALARS):
            kept[key] = value
        elif isinstance(value, list | tuple) and value and len({type(v) for v in value}) == 1:
            if isinstance(value[0], _SCALARS):
                kept[key] = tuple(value)
    return kept


class EventWriter(Protocol):
    """Writes one run's ``gen_ai.evaluation.result`` events."""

    def emit(self, attributes: dict[str, AttributeValue], trace_id: str, span_id: str | None) -> None:
        """An event about the span of these ids (hex); about no span when they are not valid ids."""

    def close(self) -> None:
        """The run's events are all emitted."""


class EventSink(Protocol):
    """Where the log events go."""

    def writer(self, resource: dict[str, Any]) -> EventWriter:
        """A writer of events with this resource (the attributes an SDK resource can hold)."""

    def flush(self, timeout_s: float) -> bool:
        """Export every event emitted so far; False when the deadline passed first."""

    def shutdown(self) -> None:
        """Export what is left, then stop."""


#: The resource of the run whose events are being emitted (set by ``_InResource`` around the logger's ``emit``).
_RUN_RESOURCE: ContextVar[Resource | None] = ContextVar("trajgrade_run_resource", default=None)


class _RunResource(LogRecordProcessor):
    """Gives each record the resource of its run, before the exporting processors see it."""

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        resource = _RUN_RESOURCE.get()
        if resource is not None:
            log_record.resource = resource

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class _InResource:
    """Emits a run's events through a logger, their records with the run's resource instead of the provider's."""

    __slots__ = ("_logger", "_resource")

    def __init__(self, logger: Logger, resource: Resource) -> None:
        self._logger = logger
        self._resource = resource

    def emit(self, attributes: dict[str, AttributeValue], trace_id: str, span_id: str | None) -> None:
        context = span_in_context(trace_id, span_id)
        token = _RUN_RESOURCE.set(self._resource)
        try:
            self._logger.emit(event_name=sc.EVALUATION_RESULT_EVENT, attributes=attributes, context=context)
        finally:
            _RUN_RESOURCE.reset(token)

    def close(self) -> None:
        pass


class _SdkSink:
    """The SDK's ``LoggerProvider``, with a ``BatchLogRecordProcessor`` per exporter."""

    def __init__(self, exporters: Sequence[LogRecordExporter]) -> None:
        self._provider = LoggerProvider(shutdown_on_exit=False)
        self._provider.add_log_record_processor(_RunResource())
        for exporter in exporters:
            self._provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
        self._logger = self._provider.get_logger(sc.TRAJGRADE_SCOPE, __version__)

    def writer(self, resource: dict[str, Any]) -> EventWriter:
        return _InResource(self._logger, Resource(resource))

    def flush(self, timeout_s: float) -> bool:
        return bool(self._provider.force_flush(int(timeout_s * 1000)))

    def shutdown(self) -> None:
        self._provider.shutdown()


class RunLogs:
    """Sends breaches and results as log events through ``exporters``, each with its run's resource.

    Args:
        exporters: where the events go (an OTLP log exporter per next hop), through the SDK's pipeline.
        sink: where the events go instead of ``exporters``.
        max_runs: how many open runs' resources are remembered at once.
        on_error: counts an error in emitting (it is logged, never raised).
    """

    def __init__(
        self,
        exporters: Sequence[LogRecordExporter] = (),
        *,
        sink: EventSink | None = None,
        max_runs: int = 10_000,
        on_error: Callable[[str], None] = lambda error_type: None,
    ) -> None:
        self._on_error = on_error
        self._sink: EventSink = sink if sink is not None else _SdkSink(exporters)
        self._max_runs = max_runs
        # Guards _resources (by trace; in the order they were first seen): set by the threads that receive spans,
        # read by the ones that emit.
        self._lock = threading.Lock()
        self._resources: dict[Hashable, Mapping[str, Any]] = {}

    def remember(self, resources: Mapping[str, Mapping[str, Any]]) -> None:
        """The resource attributes of the runs whose spans just arrived, by trace."""
        with self._lock:
            self._resources.update(resources)
            excess = len(self._resources) - self._max_runs
            for trace in list(itertools.islice(self._resources, max(excess, 0))):
                del self._resources[trace]

    def breach(self, breach: Breach) -> None:
        """An in-flight breach, in the context of the span that broke the limit."""
        with internal_errors("log event", self._on_error):
            with self._lock:
                attributes = self._resources.get(breach.trace_id)
            writer = self._sink.writer(_resource(attributes, breach.service_name))
            writer.emit(breach_log_attributes(breach), breach.trace_id, breach.span_id)
            writer.close()

    def graded(
        self,
        run: CollectedRun[Any],
        report: RunReport | None,
        resource: Mapping[str, Any] | None,
        made: Sequence[dict[str, AttributeValue]] | None = None,
    ) -> None:
        """A graded run's results (none when it was not a run), each in the context of the span it evaluates;
        ``resource``: the attributes of the root's resource, when the root arrived (else those remembered for its
        trace); ``made``: the results' attributes when made already (``results_attributes``). The run is
        forgotten."""
        with internal_errors("log event", self._on_error):
            with self._lock:
                remembered = self._resources.pop(run.trace, None)
            if report is not None:
                attributes = resource if resource is not None else remembered
                writer = self._sink.writer(_resource(attributes, run.root.service_name))
                for event, span_id in log_events(report, run.root, made):
                    writer.emit(event, run.root.trace_id, span_id)
                writer.close()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Export every event emitted so far; False when the deadline passed first."""
        return self._sink.flush(timeout_s)

    def shutdown(self) -> None:
        """Export what is left, then stop the exporters."""
        self._sink.shutdown()


def emit_breaches(breaches: list[Breach], grading: Grading, logs: RunLogs | None) -> None:
    """In-flight breaches of a door that has no open root to put them on: a log event each (with ``logs``), the
    ``trajgrade.breaches`` counter and the application's callback."""
    for breach in breaches:
        if logs is not None:
            logs.breach(breach)
        grading.breached(breach)
