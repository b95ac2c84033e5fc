"""``GradingSpanProcessor``: grade every agent run inside the agent's process, when its root span ends.

Wiring::

    # trajgrade owns the export path: results become events on a copy of the run's root span
    provider.add_span_processor(GradingSpanProcessor(config, downstream=BatchSpanProcessor(exporter)))
    # beside other processors: results go on a short child span `evaluation {agent}` of the root
    provider.add_span_processor(GradingSpanProcessor(config))

The hot path (``on_end`` of a non-root span) appends the span's fields to the collector's inbox (no lock, nothing
parsed: ``sdk_held``; the span itself goes when the SDK lets it go, as without trajgrade) and hands the span
downstream at once; the worker reads them into the span's compact record within ``check_interval_s`` (a second with
in-flight checks off). Only the root waits, and only for grading, which runs on a worker thread. Nothing raises into
the application; every drop is counted with a reason; ``shutdown`` and ``force_flush`` follow the SDK's contract,
and runs still open at shutdown are graded as partial.

In flight, the worker reads the spans of open runs as they end (every ``check_interval_s``) and checks the
graders that can break before the end (``inflight``). A breach is emitted at once: a ``gen_ai.evaluation.result``
event marked ``trajgrade.in_flight`` on the still-open root span and as a log event, the ``trajgrade.breaches``
counter, and ``on_breach``. With enforcement (``enforce: true`` on a grader, or ``enforce=True`` here), a span
started in a run reads that run's spans ended so far first, and a model or tool call of a run that broke an
enforced limit raises :class:`~trajgrade.exceptions.BudgetExceeded` in the agent: the one thing that ever raises.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import TracerProvider

from trajgrade.core import semconv as sc
from trajgrade.core.collector import CollectedRun, RunCollector, is_own
from trajgrade.core.config import Config
from trajgrade.core.emit import (
    EvaluationSpans,
    add_breach_event,
    evaluation_logger,
    log_breach,
    log_records,
    with_results,
)
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import Breach, InFlightChecks
from trajgrade.core.internal_errors import internal_errors, report_internal_error
from trajgrade.core.result_attributes import results_attributes
from trajgrade.core.running import RunReport
from trajgrade.core.spans import sdk_trace
from trajgrade.core.trajectory.normalize import SpanRecord, classify, normalize_sdk, sdk_held, sdk_intake
from trajgrade.core.worker import Graded, GradingWorker

logger = logging.getLogger(__name__)

__all__ = ["GradingSpanProcessor"]

_SUPPRESS = otel_context.create_key("suppress_instrumentation")
#: Without a worker thread, spans put and not read yet past which the hot path reads them.
_INBOX_READ_AT = 1024


@dataclass(frozen=True, slots=True)
class _Root:
    """A run's root as the SDK handed it over, and the span processor of the provider that recorded it (the
    live span's: the evaluation span goes there)."""

    span: ReadableSpan
    pipeline: Any


def _flush_at_exit(ref: weakref.ref[GradingSpanProcessor]) -> None:
    processor = ref()
    if processor is not None and not processor._shutdown:
        with internal_errors("exit", processor._grading.count_internal_error):
            processor.shutdown(5_000)


def _root_record(span: ReadableSpan) -> Callable[[], SpanRecord]:
    """A root's record, made when its run is graded (on the worker)."""
    return lambda: normalize_sdk(span, keep_attributes=True)


class GradingSpanProcessor(SpanProcessor):
    """Grades each run when its local root span ends.

    Args:
        config: graders, from :func:`trajgrade.load_config`.
        downstream: a span processor (usually a ``BatchSpanProcessor``) that receives every span, the root with
            the result events added. Without it, results go on a child span ``evaluation {agent}`` of the root,
            started in the pipeline of the provider that recorded the run.
        meter_provider: where the metrics go (default: the global one).
        logger_provider: where results are also emitted as log-based ``gen_ai.evaluation.result`` events; by
            default the global one when it is the SDK's; ``False``: no log events.
        tracer_provider: the provider for the evaluation span when the run's own cannot be reached (a root that
            is not an SDK span); default: the global one.
        on_report: called with each run's :class:`~trajgrade.core.running.RunReport`.
        max_traces, max_spans_per_trace, max_trace_age_s: memory bounds; drops are counted by reason.
        settle_s: how long after the root ends to wait for spans of the run that end after it.
        worker: grade on a background thread (default); ``False`` grades in the thread that ends the root, or,
            with ``settle_s``, at the next root's end, ``force_flush`` or ``shutdown`` (it never sleeps there).
        max_pending: runs waiting for the worker; past it a root is passed on ungraded and counted.
        on_breach: called with each in-flight :class:`~trajgrade.core.inflight.Breach` (once per run and grader), on
            the worker thread.
        enforce: stop a run that breaks any in-flight limit (else only the graders marked ``enforce: true`` do).
        in_flight: check the open runs as their spans end (default); ``False`` grades at the root's end only.
        check_interval_s: how often the worker reads the spans that ended in open runs.
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
        on_breach: Callable[[Breach], Any] | None = None,
        enforce: bool = False,
        in_flight: bool = True,
        check_interval_s: float = 0.05,
    ) -> None:
        self._downstream = downstream
        self._logger = evaluation_logger(logger_provider)
        self._evaluation_spans = EvaluationSpans(tracer_provider)
        checks = InFlightChecks(config, enforce=enforce) if in_flight else None
        self._enforcing = checks is not None and checks.enforcing
        self._collector: RunCollector[_Root] = RunCollector(
            settle_s=settle_s,
            max_pending=max_pending,
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            on_drop=self._count_drop,
            on_error=lambda error_type: self._grading.count_internal_error(error_type),
            checks=checks,
            intake=sdk_intake,
        )
        # on_end runs for every span the agent ends: bound once. Without a worker thread, nothing reads the inbox
        # until a root ends, so the hot path reads it past a bound.
        self._put = self._collector.put if worker else self._put_and_read
        self._grading = Grading(
            config, meter_provider=meter_provider, on_report=on_report, on_breach=on_breach, active=self._active
        )
        self._worker = GradingWorker(
            self._collector,
            self._grading,
            self._finish,
            thread=worker,
            on_breach=self._breached,
            check_interval_s=check_interval_s,
            gather=True,
        )
        # Guards _open_roots (roots started, not ended, by trace in the order they started: a breach finds its run's
        # root without a walk over every open run) and _stopped; held only to read or change them.
        self._lock = threading.Lock()
        self._open_roots: dict[int, list[Span]] = {}
        self._stopped: dict[int, Breach] = {}  # runs that broke an enforced limit, by trace
        self._on_root: set[int] = set()  # breaches put on their root by the thread that found them (by id)
        self._shutdown = False
        # Registered after the tracer provider's own exit hook, so it runs first: pending runs are graded and
        # their results emitted while the exporting processors are still up.
        atexit.register(_flush_at_exit, weakref.ref(self))

    # --- SDK lifecycle ------------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            parent = span._parent  # the SDK span's field: the property costs a call, on every span
        except AttributeError:
            parent = span.parent
        # parent[2]: the SpanContext tuple's is_remote, read without its property (this runs for every span)
        if parent is None or parent[2]:  # only a run's root is remembered (graded at shutdown if open)
            try:
                if span.context is not None and not self._is_own(span):
                    context = span.context
                    with self._lock:
                        same_trace = self._open_roots.get(context.trace_id)
                        if same_trace is None:
                            self._open_roots[context.trace_id] = [span]
                        else:
                            same_trace.append(span)
            except Exception as e:
                report_internal_error("on_start", e, self._grading.count_internal_error)
        elif self._enforcing:
            breach = self._stopping(span)
            if breach is not None:
                raise breach.exception()  # enforcement, asked for: the run's next model or tool call fails
        if self._downstream is not None:
            self._downstream.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        held = False
        try:
            kept = sdk_held(span)  # None for a run's root
            if kept is not None and not self._shutdown:
                self._put(kept)  # the hot path: the worker reads it (``sdk_intake``)
            elif self._shutdown:
                if not self._is_own(span):
                    self._count_drop("already_shutdown")
            elif not self._is_own(span):
                held = self._root_ended(span)
        except Exception as e:
            report_internal_error("on_end", e, self._grading.count_internal_error)
        if not held and self._downstream is not None:
            self._downstream.on_end(span)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Grade what is open and held, then stop; within ``timeout_millis`` (the SDK's processors' default):
        grading still unfinished then is abandoned, logged and counted, and the application exits on time."""
        if self._shutdown:
            return
        with internal_errors("shutdown", self._grading.count_internal_error):
            self._hold_open_runs()
            self._shutdown = True
            if not self._worker.close(timeout_millis / 1000):
                logger.warning("trajgrade: grading did not finish within %d ms of shutdown", timeout_millis)
                self._grading.count_internal_error("shutdown_timeout")
        if self._downstream is not None:
            self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        flushed = True
        with internal_errors("force_flush", self._grading.count_internal_error):
            flushed = self._worker.flush(timeout_millis / 1000)
        if self._downstream is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            flushed = self._downstream.force_flush(remaining_ms) and flushed
        return flushed

    # --- internals ----------------------------------------------------------------------------------------
    @staticmethod
    def _is_own(span: ReadableSpan) -> bool:
        scope = span.instrumentation_scope
        return is_own(scope.name if scope is not None else None)

    def _put_and_read(self, held: Any) -> None:
        self._collector.put(held)
        if self._collector.inbox >= _INBOX_READ_AT:
            self._collector.read_inbox()

    def _active(self) -> int:
        return len(self._collector)

    def _count_drop(self, reason: str) -> None:
        self._grading.count_drop(reason)

    def _stopping(self, span: Span) -> Breach | None:
        """The enforced breach that stops this span's run, if it is a model or tool call of a run that broke an
        enforced limit (the run's spans ended so far are checked first, so the breach is never late)."""
        try:
            if span.context is None:
                return None
            found = self._worker.check_open(sdk_trace(span), emit=False)  # the worker emits them, but on the root now
            for b in found:
                self._put_on_root(b)
            with self._lock:
                self._on_root.update(id(b) for b in found)
                breach = self._stopped.get(span.context.trace_id)
            if breach is None or classify(span.name, span.attributes or {}) not in (sc.LLM, sc.TOOL):
                return None  # as marked when it starts: a model request's usage and content come later
            return breach
        except Exception as e:
            report_internal_error("on_start", e, self._grading.count_internal_error)
            return None

    def _breached(self, breaches: list[Breach]) -> None:
        """Emit in-flight breaches (on the worker thread): an event on the open root, a log event, the counter and
        the application's callback; an enforced one stops its run."""
        token = otel_context.attach(otel_context.set_value(_SUPPRESS, True))
        agents: dict[int, str | None] = {}  # the agent of each open root met, by span id: read once per call
        try:
            for breach in breaches:
                with self._lock:
                    on_root = id(breach) in self._on_root
                    self._on_root.discard(id(breach))
                root = self._put_on_root(breach) if not on_root else self._open_root(breach)
                if breach.agent is None and root is not None:  # the run's agent may be its root, still open
                    with internal_errors("emit breach", self._grading.count_internal_error):
                        span_id = root.context.span_id
                        if span_id not in agents:
                            agents[span_id] = normalize_sdk(root, keep_attributes=False).agent_name
                        breach = replace(breach, agent=agents[span_id])
                if self._logger is not None:
                    with internal_errors("emit breach", self._grading.count_internal_error):
                        log_breach(breach, self._logger, root.context if root is not None else None)
                self._grading.breached(breach)
        finally:
            otel_context.detach(token)

    def _open_root(self, breach: Breach) -> Span | None:
        """The first root of the breach's trace that started and has not ended."""
        with self._lock:
            same_trace = self._open_roots.get(int(breach.trace_id, 16))
            return same_trace[0] if same_trace else None

    def _put_on_root(self, breach: Breach) -> Span | None:
        """Put a breach on its run's open root span (an enforced one stops the run); the root, if open."""
        root = self._open_root(breach)
        if breach.enforce:
            with self._lock:
                self._stopped.setdefault(int(breach.trace_id, 16), breach)
        if root is not None:
            with internal_errors("emit breach", self._grading.count_internal_error):
                add_breach_event(root, breach)
        return root

    def _root_ended(self, span: ReadableSpan) -> bool:
        """Hold the root until its run is graded (False: it was not held, pass it on)."""
        assert span.context is not None
        trace_id, span_id = span.context.trace_id, span.context.span_id
        with self._lock:
            same_trace = self._open_roots.get(trace_id) or []  # one root, as a rule
            live = next((r for r in same_trace if r.get_span_context().span_id == span_id), None)
            if live is not None:
                same_trace.remove(live)
                if not same_trace:
                    del self._open_roots[trace_id]
            self._stopped.pop(trace_id, None)
        root = _Root(span, getattr(live, "_span_processor", None))
        if not self._collector.root(sdk_trace(span), _root_record(span), root):
            return False
        if self._worker.threaded:
            self._worker.run_held()
        else:
            self._worker.run_due()
        return True

    def _hold_open_runs(self) -> None:
        """Runs whose root has not ended at shutdown are graded from what arrived, as partial."""
        with self._lock:
            open_roots = [span for same_trace in self._open_roots.values() for span in same_trace]
            self._open_roots.clear()
        for span in open_roots:
            assert span.context is not None
            self._count_drop("open_at_shutdown")
            root = _Root(span, getattr(span, "_span_processor", None))
            self._collector.root(sdk_trace(span), _root_record(span), root, partial=True)

    def _finish(self, graded: list[Graded[_Root]]) -> None:
        token = otel_context.attach(otel_context.set_value(_SUPPRESS, True))
        try:
            for run, report in graded:
                self._emit(run, report)
        finally:
            otel_context.detach(token)

    def _emit(self, run: CollectedRun[_Root], report: RunReport | None) -> None:
        root = run.payload.span if run.payload is not None else None
        pipeline = run.payload.pipeline if run.payload is not None else None
        passing_on = self._downstream is not None and root is not None and root.end_time is not None
        if report is not None:
            with internal_errors("emit", self._grading.count_internal_error):
                attributes = results_attributes(report.results)
                if self._logger is not None:
                    log_records(report, run.root, self._logger, attributes)
                if passing_on:
                    assert root is not None
                    root = with_results(root, report, attributes)
                else:
                    self._evaluation_spans.emit(report, run.root, root, pipeline, attributes)
        if passing_on and root is not None and self._downstream is not None:
            self._downstream.on_end(root)
