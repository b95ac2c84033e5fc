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

from trajgrade.core import semconv as sc
from trajgrade.core.assembler import Assembler
from trajgrade.core.config import Config
from trajgrade.core.emit import log_records, with_results
from trajgrade.core.grading import Grading
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.running import RunReport
from trajgrade.core.spans import SdkSpan
from trajgrade.core.trajectory.normalize import SpanRecord, normalize

__all__ = ["GradingSpanExporter"]


class GradingSpanExporter(SpanExporter):
    """Wraps an exporter; runs are graded when their root span is exported."""

    def __init__(
        self,
        config: Config,
        exporter: SpanExporter,
        *,
        meter_provider: MeterProvider | None = None,
        logger_provider: Any = None,
        on_report: Callable[[RunReport], Any] | None = None,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 3600.0,
    ) -> None:
        self._exporter = exporter
        self._grading = Grading(config, meter_provider=meter_provider, on_report=on_report, active=self._active)
        self._logger = logger_provider.get_logger(sc.TRAJGRADE_SCOPE) if logger_provider is not None else None
        self._assembler: Assembler[SpanRecord] = Assembler(
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            on_drop=self._grading.count_drop,
        )

    def _active(self) -> int:
        return len(self._assembler)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        out: list[ReadableSpan] = list(spans)
        with internal_errors("export", self._grading.count_internal_error):
            roots: list[int] = []
            for i, span in enumerate(spans):
                if span.instrumentation_scope is not None and span.instrumentation_scope.name == sc.TRAJGRADE_SCOPE:
                    continue
                if span.parent is None or span.parent.is_remote:
                    roots.append(i)
                else:
                    record = normalize(SdkSpan(span), keep_attributes=False)
                    self._assembler.add(record.trace_id, record)
            for i in roots:
                out[i] = self._grade_root(spans[i])
            for _trace_id, _buffer in self._assembler.expire():
                self._grading.count_drop("trace_age")
        return self._exporter.export(out)

    def _grade_root(self, root: ReadableSpan) -> ReadableSpan:
        record = normalize(SdkSpan(root), keep_attributes=True)
        buffer = self._assembler.pop(record.trace_id)
        report = self._grading.grade(buffer.records, record, partial=buffer.dropped_spans > 0)
        if report is None:
            return root
        if self._logger is not None and root.context is not None:
            log_records(report, root.context, self._logger)
        return with_results(root, report)

    def shutdown(self) -> None:
        with internal_errors("shutdown", self._grading.count_internal_error):
            for _trace_id, _buffer in self._assembler.drain():
                self._grading.count_drop("no_root_at_shutdown")
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)
