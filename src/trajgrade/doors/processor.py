"""``GradingSpanProcessor``: grade every agent run inside the agent's process, when its root span ends.

Wiring::

    # trajgrade owns the export path: results become events on a copy of the run's root span
    provider.add_span_processor(GradingSpanProcessor(config, downstream=BatchSpanProcessor(exporter)))
    # beside other processors: results go on a short child span `evaluation {agent}` of the root
    provider.add_span_processor(GradingSpanProcessor(config))

The hot path (``on_end`` of a non-root span) reduces the span to a compact record, appends it under a lock
and hands the span downstream at once. Only the root waits, and only for grading, which runs on a worker
thread. Nothing raises into the application; every drop is counted with a reason; ``shutdown`` and
``force_flush`` follow the SDK's contract, and runs still open at shutdown are graded as partial.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import NonRecordingSpan, TracerProvider, set_span_in_context

from trajgrade.core import semconv as sc
from trajgrade.core.assembler import Assembler
from trajgrade.core.config import Config
from trajgrade.core.emit import log_records, report_attributes, result_attributes, with_results
from trajgrade.core.grading import Grading
from trajgrade.core.internal_errors import internal_errors, report_internal_error
from trajgrade.core.running import RunReport
from trajgrade.core.spans import SdkParts, SdkSpan, sdk_parts
from trajgrade.core.trajectory.normalize import normalize

logger = logging.getLogger(__name__)

__all__ = ["GradingSpanProcessor"]

_SUPPRESS = otel_context.create_key("suppress_instrumentation")
_OWN_SPAN_PREFIX = "evaluation "


@dataclass(slots=True)
class _Job:
    trace_id: int
    root: ReadableSpan | None  # None when the root never ended (graded at shutdown)
    root_view: SdkSpan
    ready_at: float
    partial: bool = False
    context: Any = None  # the root's SpanContext (set when the root never ended)


def _flush_at_exit(ref: weakref.ref[GradingSpanProcessor]) -> None:
    processor = ref()
    if processor is not None and not processor._shutdown:
        with internal_errors("exit", processor._grading.count_internal_error):
            processor._grade_open_runs()
            processor.force_flush(5_000)


class GradingSpanProcessor(SpanProcessor):
    """Grades each run when its local root span ends.

    Args:
        config: graders, from :func:`trajgrade.load_config`.
        downstream: a span processor (usually a ``BatchSpanProcessor``) that receives every span, the root with
            the result events added. Without it, results go on a child span ``evaluation {agent}`` of the root.
        meter_provider: where the metrics go (default: the global one).
        logger_provider: when given, results are also emitted as log-based ``gen_ai.evaluation.result`` events.
        tracer_provider: the provider for the evaluation span (default: the global one).
        on_report: called with each run's :class:`~trajgrade.core.suite.RunReport`.
        max_traces, max_spans_per_trace, max_trace_age_s: memory bounds; drops are counted by reason.
        settle_s: how long after the root ends to wait for spans of the run that end after it.
        worker: grade on a background thread (default); ``False`` grades in the thread that ends the root.
        max_pending: runs waiting for the worker; past it a root is passed on ungraded and counted.
    """

    def __init__(
        self,
        config: Config,
        downstream: SpanProcessor | None = None,
        *,
        meter_provider: MeterProvider | None = None,
        logger_provider: Any = None,
        tracer_provider: TracerProvider | None = None,
        on_report: Callable[[RunReport], Any] | None = None,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 3600.0,
        settle_s: float = 0.0,
        worker: bool = True,
        max_pending: int = 10_000,
    ) -> None:
        self._downstream = downstream
        self._tracer_provider = tracer_provider
        self._logger = logger_provider.get_logger(sc.TRAJGRADE_SCOPE) if logger_provider is not None else None
        self._assembler: Assembler[SdkParts] = Assembler(
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            on_drop=self._count_drop,
        )
        self._add = self._assembler.add  # bound once: on_end runs for every span the agent ends
        self._grading = Grading(config, meter_provider=meter_provider, on_report=on_report, active=self._active)
        self._settle_s = settle_s
        self._use_worker = worker
        self._max_pending = max_pending
        # Guards _open_roots (roots started, not ended) and _jobs; held only to read or change them.
        self._lock = threading.Lock()
        self._open_roots: dict[int, Span] = {}
        self._jobs: deque[_Job] = deque()
        self._wake = threading.Condition(self._lock)
        self._busy = 0
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self._last_expire = time.monotonic()
        if worker:
            self._start_worker()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=self._after_fork)
        # Registered after the tracer provider's own exit hook, so it runs first: pending runs are graded and
        # their results emitted while the exporting processors are still up.
        atexit.register(_flush_at_exit, weakref.ref(self))

    # --- SDK lifecycle ------------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            parent = span._parent  # the SDK span's field: the property costs a call, on every span
        except AttributeError:
            parent = span.parent
        if parent is None or parent.is_remote:  # only a run's root is remembered (graded at shutdown if open)
            try:
                if span.context is not None and not self._is_own(span):
                    with self._lock:
                        self._open_roots[span.context.span_id] = span
            except Exception as e:
                report_internal_error("on_start", e, self._grading.count_internal_error)
        if self._downstream is not None:
            self._downstream.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        handled_root = False
        try:
            try:
                parent = span._parent  # as in on_start
            except AttributeError:
                parent = span.parent
            if parent is not None and not parent.is_remote and not self._shutdown:
                # The hot path: keep references to the span's parts; normalizing waits for the worker.
                # (trajgrade's own evaluation span is a child of the root: its name is checked first, it is cheap.)
                parts = sdk_parts(span)
                if not (parts[2].startswith(_OWN_SPAN_PREFIX) and self._is_own(span)):
                    self._add(parts[0].trace_id, parts)
            elif self._shutdown:
                self._count_drop("already_shutdown")
            elif not self._is_own(span):
                handled_root = self._root_ended(span)
        except Exception as e:
            report_internal_error("on_end", e, self._grading.count_internal_error)
        if not handled_root and self._downstream is not None:
            self._downstream.on_end(span)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Grade what is open and queued, then stop; within ``timeout_millis`` (the SDK's processors' default):
        grading still unfinished then is abandoned, logged and counted, and the application exits on time."""
        if self._shutdown:
            return
        with internal_errors("shutdown", self._grading.count_internal_error):
            self._grade_open_runs()
            with self._lock:
                self._shutdown = True
                self._wake.notify_all()
            if self._thread is not None:
                self._thread.join(timeout_millis / 1000)
                if self._thread.is_alive():  # a grader stuck past the limit: the worker is a daemon, leave it
                    logger.warning("trajgrade: grading did not finish within %d ms of shutdown", timeout_millis)
                    self._grading.count_internal_error("shutdown_timeout")
                else:
                    self._run_jobs(block=False)
            else:
                self._run_jobs(block=False)
        if self._downstream is not None:
            self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        flushed = True
        with internal_errors("force_flush", self._grading.count_internal_error):
            if self._thread is None or not self._thread.is_alive():
                self._run_jobs(block=False)
            else:
                with self._lock:
                    while (self._jobs or self._busy) and not self._shutdown:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            flushed = False
                            break
                        self._wake.notify_all()
                        self._wake.wait(min(remaining, 0.05))
        if self._downstream is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            flushed = self._downstream.force_flush(remaining_ms) and flushed
        return flushed

    # --- internals ----------------------------------------------------------------------------------------
    @staticmethod
    def _is_own(span: ReadableSpan) -> bool:
        scope = span.instrumentation_scope
        return scope is not None and scope.name == sc.TRAJGRADE_SCOPE

    def _active(self) -> int:
        return len(self._assembler)

    def _count_drop(self, reason: str) -> None:
        self._grading.count_drop(reason)

    def _root_ended(self, span: ReadableSpan) -> bool:
        assert span.context is not None
        with self._lock:
            self._open_roots.pop(span.context.span_id, None)
        job = _Job(span.context.trace_id, span, SdkSpan(span), time.monotonic() + self._settle_s)
        if not self._use_worker:
            if self._settle_s:
                time.sleep(self._settle_s)
            self._finish(job)
            return True
        with self._lock:
            if len(self._jobs) >= self._max_pending:
                full = True
            else:
                full = False
                self._jobs.append(job)
                self._wake.notify()
        if full:
            self._count_drop("queue_full")
            self._assembler.pop(job.trace_id)
            return False
        return True

    def _start_worker(self) -> None:
        self._thread = threading.Thread(target=self._work, name="trajgrade-grader", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._jobs = deque()
        self._busy = 0
        self._start_worker()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs and not self._shutdown:
                    self._wake.wait(timeout=1.0)
                    if not self._jobs:
                        break
                if self._shutdown and not self._jobs:
                    return
            self._run_jobs(block=True)
            self._expire_old()

    def _run_jobs(self, *, block: bool) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._wake.notify_all()
                    return
                job = self._jobs[0]
                wait = job.ready_at - time.monotonic()
                if wait > 0 and block and not self._shutdown:
                    self._wake.wait(wait)
                    continue
                self._jobs.popleft()
                self._busy += 1
            try:
                self._finish(job)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._wake.notify_all()

    def _finish(self, job: _Job) -> None:
        buffer = self._assembler.pop(job.trace_id)
        partial = job.partial or buffer.dropped_spans > 0
        notes = (f"{buffer.dropped_spans} span(s) dropped: over max_spans_per_trace",) if buffer.dropped_spans else ()
        records = [normalize(SdkSpan.of(parts), keep_attributes=False) for parts in buffer.records]
        report = self._grading.grade(
            records, normalize(job.root_view, keep_attributes=True), partial=partial, notes=notes
        )
        token = otel_context.attach(otel_context.set_value(_SUPPRESS, True))
        try:
            with internal_errors("emit", self._grading.count_internal_error):
                if report is not None:
                    self._emit(job, report)
            if self._downstream is not None and job.root is not None:
                root = job.root
                if report is not None:
                    with internal_errors("emit", self._grading.count_internal_error):
                        root = with_results(job.root, report)
                self._downstream.on_end(root)
        finally:
            otel_context.detach(token)

    def _emit(self, job: _Job, report: RunReport) -> None:
        span_context = job.root.context if job.root is not None else job.context
        if self._logger is not None and span_context is not None:
            log_records(report, span_context, self._logger)
        if self._downstream is not None and job.root is not None:
            return  # the events go on the root's copy
        if span_context is None:
            return
        from opentelemetry import trace

        provider = self._tracer_provider or trace.get_tracer_provider()
        tracer = provider.get_tracer(sc.TRAJGRADE_SCOPE)
        end = (job.root.end_time if job.root is not None else None) or time.time_ns()
        agent = report.trajectory.agent_name or report.trajectory.root_span_name
        span = tracer.start_span(
            f"{_OWN_SPAN_PREFIX}{agent}",
            context=set_span_in_context(NonRecordingSpan(span_context)),
            start_time=end,
            attributes={**report_attributes(report), sc.OPERATION_NAME: "evaluation"},
        )
        for result in report.results:
            span.add_event(sc.EVALUATION_RESULT_EVENT, result_attributes(result), timestamp=end)
        span.end(end_time=end)

    def _expire_old(self) -> None:
        now = time.monotonic()
        if now - self._last_expire < 1.0:
            return
        self._last_expire = now
        for _trace_id, buffer in self._assembler.expire(now):
            self._count_drop("trace_age")
            del buffer

    def _grade_open_runs(self) -> None:
        """Runs whose root has not ended at shutdown are graded from what arrived, as partial."""
        with self._lock:
            open_roots = list(self._open_roots.values())
            self._open_roots.clear()
        for span in open_roots:
            job = _Job(span.context.trace_id, None, SdkSpan(span), 0.0, partial=True, context=span.context)
            with self._lock:
                self._jobs.append(job)
