"""``GradingSpanExporter``: grade runs in the export path, wrapping any ``SpanExporter``.

    BatchSpanProcessor(GradingSpanExporter(config, OTLPSpanExporter()))

Spans may arrive in any batch order. Non-root spans are recorded and exported at once; when a batch holds a
run's local root, the run is graded from the spans seen so far and the root is exported as a copy with the
result events added. Grading runs on the exporting thread (the batch processor's worker), never the agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from trajgrade.core.collector import CollectedRun, RunCollector, is_own, is_root
from trajgrade.core.config import Config
from trajgrade.core.emit import EvaluationSpans, evaluation_logger, log_records, with_results
from trajgrade.core.grading import Grading
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.result_attributes import results_attributes
from trajgrade.core.running import RunReport
from trajgrade.core.trajectory.normalize import normalize_sdk

__all__ = ["GradingSpanExporter"]


class GradingSpanExporter(SpanExporter):
    """Wraps an exporter; runs are graded when their root span is exported.

    A root cannot wait here (the batch is exported when ``export`` returns), so a run is graded from the spans
    exported before or with its root. Runs whose root never comes are graded as partial after
    ``max_trace_age_s`` or at shutdown, their results on an ``evaluation {agent}`` span sent then.

    Results are also log-based ``gen_ai.evaluation.result`` events, through ``logger_provider``; by default the
    global one when it is the SDK's; ``False``: no log events.
    """

    def __init__(
        self,
        config: Config,
        exporter: SpanExporter,
        *,
        meter_provider: MeterProvider | None = None,
        logger_provider: Any = None,
        tracer_provider: Any = None,
        on_report: Callable[[RunReport], Any] | None = None,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 3600.0,
    ) -> None:
        self._exporter = exporter
        self._grading = Grading(config, meter_provider=meter_provider, on_report=on_report, active=self._active)
        self._logger = evaluation_logger(logger_provider)
        self._evaluation_spans = EvaluationSpans(tracer_provider)
        self._collector: RunCollector[int] = RunCollector(
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            on_drop=self._grading.count_drop,
        )

    def _active(self) -> int:
        return len(self._collector)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        out = list(spans)
        with internal_errors("export", self._grading.count_internal_error):
            for i, span in enumerate(spans):
                scope, parent = span.instrumentation_scope, span.parent
                if is_own(scope.name if scope is not None else None):
                    continue
                root = is_root(parent, parent.is_remote if parent is not None else None)
                record = normalize_sdk(span, keep_attributes=root)
                if not root:
                    self._collector.add(record.trace_id, record)
                elif not self._collector.root(record.trace_id, record, i):
                    continue
            self._emit(self._collector.due(), out)
        return self._exporter.export(out)

    def _emit(self, runs: list[CollectedRun[int]], batch: list[ReadableSpan]) -> None:
        for run in runs:
            report = self._grading.grade(run)
            if report is None:
                continue
            with internal_errors("emit", self._grading.count_internal_error):
                attributes = results_attributes(report.results)
                if self._logger is not None:
                    log_records(report, run.root, self._logger, attributes)
                if run.payload is not None:
                    batch[run.payload] = with_results(batch[run.payload], report, attributes)
                else:
                    self._evaluation_spans.emit(report, run.root, made=attributes)

    def shutdown(self) -> None:
        with internal_errors("shutdown", self._grading.count_internal_error):
            self._emit(self._collector.close(), [])
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)
