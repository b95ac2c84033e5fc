"""trajgrade inside rotel, the OpenTelemetry collector that runs Python trace processors.

Give rotel this file as a trace processor, with the graders file in ``TRAJGRADE_CONFIG``::

    TRAJGRADE_CONFIG=graders.yaml rotel-agent start --otlp-with-trace-processor \\
        "$(python -c 'import trajgrade.doors.rotel as m; print(m.__file__)')" ...

rotel hands ``process_spans`` one ``ResourceSpans`` at a time and exports it when the call returns, so a
root cannot be held back: each span is reduced to a record in its trace's buffer as it passes, and a run is
graded when its root passes, from the records of its trace so far (in-process exporters send a run's spans
in end order, so its children come first). The result events and verdict attributes are added to the root
in place. An exception escaping ``process_spans`` kills the whole collector, so none does: trajgrade's own
errors are logged once and counted.

In flight, the open runs of each batch are checked once its spans are recorded (``inflight``): a breach counts
``trajgrade.breaches`` at once. A Python processor cannot add log records to rotel's pipeline, so the log-based
``gen_ai.evaluation.result`` events (breaches, and each graded run's results, with the run's resource) are sent
over OTLP/HTTP when the standard environment names an endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``): rotel's own OTLP receiver, or any collector. Environment:
``TRAJGRADE_CONFIG`` (the graders file), ``TRAJGRADE_SETTLE_S`` (0), ``TRAJGRADE_MAX_TRACE_AGE_S`` (600),
``TRAJGRADE_IN_FLIGHT`` and ``TRAJGRADE_LOG_EVENTS`` (``false`` or ``0`` turns them off).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.collector import RunCollector, is_own, is_root
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import InFlightChecks
from trajgrade.core.result_attributes import report_attributes, results_attributes
from trajgrade.core.run_logs import RunLogs, emit_breaches
from trajgrade.core.spans import SpanEvent, make_event, otlp_parent_is_remote
from trajgrade.core.trajectory.normalize import normalize
from trajgrade.core.worker import Graded, GradingWorker

__all__ = ["RotelGrader", "process_spans"]

logger = logging.getLogger(__name__)
_EMPTY: Mapping[str, Any] = {}


#: The types of a rotel AnyValue's content that are plain Python values already (most attributes' are).
_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})


def _value(v: Any) -> Any:
    """A rotel AnyValue's content as a plain Python value."""
    return _content(getattr(v, "value", v))


def _content(inner: Any) -> Any:
    """The content of a rotel AnyValue (``AnyValue.value``) as a plain Python value."""
    if type(inner) in _PLAIN or isinstance(inner, str | bool | int | float | bytes):
        return inner
    try:  # ArrayValue or KeyValueList
        items = [inner[i] for i in range(len(inner))]
    except TypeError:
        return str(inner)
    if items and hasattr(items[0], "key"):
        return {kv.key: _value(kv.value) for kv in items}
    return tuple(_value(i) for i in items)


def _attributes(kvs: Any) -> dict[str, Any]:
    attributes = {}
    for kv in kvs:
        v = kv.value
        inner = getattr(v, "value", v)
        attributes[kv.key] = inner if type(inner) in _PLAIN else _content(inner)  # an array, a list of pairs
    return attributes


class RotelSpan:
    """A :class:`trajgrade.core.spans.SpanView` over a rotel span. Its ids are read once, when it is made: each read
    of a rotel span's field makes a new Python object of it, and every span's ids are read more than once."""

    __slots__ = ("_attributes", "_parent", "_resource", "_scope", "_span", "parent_span_id", "span_id", "trace_id")

    def __init__(self, span: Any, resource: Mapping[str, Any], scope: str) -> None:
        self._span = span
        self._resource = resource
        self._scope = scope
        self._attributes: dict[str, Any] | None = None
        self.trace_id = bytes(span.trace_id).hex()
        self.span_id = bytes(span.span_id).hex()
        self._parent = bytes(span.parent_span_id)
        self.parent_span_id = self._parent.hex() or None

    name = property(lambda self: self._span.name)
    kind = property(lambda self: int(self._span.kind))
    start_unix_nano = property(lambda self: int(self._span.start_time_unix_nano))
    end_unix_nano = property(lambda self: int(self._span.end_time_unix_nano) or int(self._span.start_time_unix_nano))
    resource_attributes = property(lambda self: self._resource)
    scope_name = property(lambda self: self._scope)

    @property
    def parent_is_remote(self) -> bool | None:
        return otlp_parent_is_remote(self._parent, int(self._span.flags))

    @property
    def status_code(self) -> int:
        status = self._span.status
        return int(status.code) if status is not None else 0

    @property
    def status_message(self) -> str:
        status = self._span.status
        return str(status.message) if status is not None else ""

    @property
    def attributes(self) -> Mapping[str, Any]:
        if self._attributes is None:
            self._attributes = _attributes(self._span.attributes)
        return self._attributes

    @property
    def events(self) -> tuple[SpanEvent, ...]:
        return tuple(make_event(e.name, int(e.time_unix_nano), _attributes(e.attributes)) for e in self._span.events)


@functools.cache
def _rotel_types() -> tuple[Any, Any, Any, Any]:
    """rotel's ``AnyValue``, ``ArrayValue``, ``KeyValue`` and ``Event`` (only rotel's interpreter has them), imported
    when first needed rather than at each value written."""
    from rotel_sdk.open_telemetry.common.v1 import AnyValue, ArrayValue, KeyValue
    from rotel_sdk.open_telemetry.trace.v1 import Event

    return AnyValue, ArrayValue, KeyValue, Event


def _key_value(key: str, value: Any) -> Any:
    AnyValue, ArrayValue, KeyValue, _ = _rotel_types()
    if isinstance(value, list | tuple):
        array = ArrayValue()
        for item in value:
            array.append(AnyValue(item))
        return KeyValue.new_array_value(key, array)
    return KeyValue(key, AnyValue(value))


def _switch(name: str) -> bool:
    """An on/off environment variable, on unless ``false`` or ``0``."""
    return os.environ.get(name, "true").strip().lower() not in ("false", "0")


def _exporting(signal: str) -> bool:
    """Whether the standard environment names an OTLP endpoint for ``signal`` (``METRICS``, ``LOGS``)."""
    names = (f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    return any(os.environ.get(name) for name in names)


def _meter_provider() -> MeterProvider | None:
    """Metrics over OTLP when the standard environment asks for them (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``): rotel has no meter provider of its own for Python processors."""
    if not _exporting("METRICS"):
        return None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    resource = Resource({"service.name": "trajgrade-rotel"}).merge(OTELResourceDetector().detect())
    provider = SdkMeterProvider([PeriodicExportingMetricReader(OTLPMetricExporter())], resource=resource)
    atexit.register(provider.shutdown)
    return provider


def _log_exporters() -> list[LogRecordExporter]:
    """Log events over OTLP/HTTP when the standard environment names an endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``
    or ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``) and ``TRAJGRADE_LOG_EVENTS`` is not off."""
    if not (_switch("TRAJGRADE_LOG_EVENTS") and _exporting("LOGS")):
        return []
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    return [OTLPLogExporter()]


class RotelGrader:
    """Records spans as they pass and grades each run when its root passes, or ``settle_s`` later.

    rotel exports a batch when ``process_spans`` returns, so a root cannot be held: with ``settle_s`` 0 (the
    default) a run is graded as its root passes, from the spans that passed before it, and its results are
    added to the root; with ``settle_s`` the run waits for spans in later batches and its results go to the
    metrics (and the log events) only. ``in_flight`` checks the open runs after each batch; breaches and results
    go as log events through ``log_exporters``.
    """

    def __init__(
        self,
        config_path: str,
        *,
        settle_s: float = 0.0,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 600.0,
        meter_provider: MeterProvider | None = None,
        in_flight: bool = True,
        log_exporters: Sequence[LogRecordExporter] = (),
    ) -> None:
        from trajgrade.core.config_loading import load_config

        config = load_config(config_path)
        self._grading = Grading(config, meter_provider=meter_provider, active=self._active)
        self._logs: RunLogs | None = None
        if log_exporters:
            self._logs = RunLogs(log_exporters, max_runs=max_traces, on_error=self._grading.count_internal_error)
            atexit.register(self._logs.shutdown)  # runs after the worker's close below: the last runs are graded first
        self._collector: RunCollector[Any] = RunCollector(
            settle_s=settle_s,
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            on_drop=self._grading.count_drop,
            checks=InFlightChecks(config) if in_flight else None,
        )
        self._checking = self._collector.checks is not None
        self._worker = GradingWorker(
            self._collector,
            self._grading,
            self._finish,
            thread=settle_s > 0,
            on_breach=lambda breaches: emit_breaches(breaches, self._grading, self._logs),
        )
        atexit.register(self._worker.close, 5.0)

    def _active(self) -> int:
        return len(self._collector)

    def process(self, resource_spans: Any) -> None:
        resource = _attributes(resource_spans.resource.attributes) if resource_spans.resource is not None else {}
        hold = self._collector.settle_s == 0  # the root is still here when its run is graded
        traces: dict[str, Mapping[str, Any]] = {}
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name if scope_spans.scope is not None else ""
            if is_own(scope):
                continue
            for span in scope_spans.spans:
                view = RotelSpan(span, resource, scope)
                trace = view.trace_id
                traces[trace] = resource
                if is_root(view.parent_span_id, view.parent_is_remote):
                    self._collector.root(trace, normalize(view, keep_attributes=True), span if hold else None)
                else:
                    self._collector.add(trace, normalize(view, keep_attributes=False))
        if self._logs is not None and traces:
            self._logs.remember(traces)
        if self._checking:  # before grading: no run is graded with spans the checks have not seen
            for trace in traces:
                self._worker.check_open(trace)
        self._worker.run_due()

    def _finish(self, graded: list[Graded[Any]]) -> None:
        made = [results_attributes(report.results) if report is not None else None for _, report in graded]
        _add_results(graded, made)
        if self._logs is not None:
            for (run, report), attributes in zip(graded, made, strict=True):
                self._logs.graded(run, report, None, attributes)  # the resource remembered when its spans passed


def _add_results(graded: list[Graded[Any]], made: list[list[dict[str, AttributeValue]] | None]) -> None:
    """A graded run's results as events and attributes of its root, when it is still passing; ``made``: each run's
    results' attributes (``results_attributes``)."""
    Event = _rotel_types()[3]
    for (run, report), attributes in zip(graded, made, strict=True):
        span = run.payload
        if span is None or report is None or attributes is None:
            continue
        when = run.root.end_unix_nano
        for event_attributes in attributes:
            event = Event()
            event.name = sc.EVALUATION_RESULT_EVENT
            event.time_unix_nano = when
            for key, value in event_attributes.items():
                event.attributes.append(_key_value(key, value))
            span.events.append(event)
        for key, value in report_attributes(report).items():
            span.attributes.append(_key_value(key, value))


_grader: RotelGrader | None = None
_grader_lock = threading.Lock()
_failed = False


def process_spans(resource_spans: Any) -> None:
    """rotel's entry point. Never raises: an exception here would stop the collector."""
    global _grader, _failed
    try:
        if _failed:
            return
        with _grader_lock:
            if _grader is None:
                path = os.environ.get("TRAJGRADE_CONFIG")
                if not path:
                    _failed = True
                    logger.error("trajgrade: set TRAJGRADE_CONFIG to a graders file; spans pass ungraded")
                    return
                _grader = RotelGrader(
                    path,
                    settle_s=float(os.environ.get("TRAJGRADE_SETTLE_S", "0")),
                    max_trace_age_s=float(os.environ.get("TRAJGRADE_MAX_TRACE_AGE_S", "600")),
                    meter_provider=_meter_provider(),
                    in_flight=_switch("TRAJGRADE_IN_FLIGHT"),
                    log_exporters=_log_exporters(),
                )
            _grader.process(resource_spans)
    except Exception:
        if _grader is None:
            _failed = True  # the config did not load: say so once, then pass spans on
        try:
            logger.exception("trajgrade: internal error in the rotel processor (spans pass on unchanged)")
        except Exception:
            pass
