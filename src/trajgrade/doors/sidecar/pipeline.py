"""The sidecar's core: admit a request, forward its spans, hold each run's root until it is graded.

What happens to a request:

1. Admission, before a span of it is read: its spans and bytes are reserved on every forwarder; when one
   cannot hold them the request is refused whole (the receiver answers HTTP 429 / gRPC RESOURCE_EXHAUSTED and
   the collector retries it later), so nothing is accepted that cannot be kept. A request larger than the
   buffers could ever hold is refused for good (:class:`TooLarge`).
2. Every span is reduced to a record in its trace's buffer (bounded by traces, spans per trace, bytes of all
   the buffers together, and age; a span past a bound is dropped from grading, counted, and its run graded as
   partial, and it is still forwarded).
3. Spans that are not a run's root (a span with no parent, or whose parent is remote) are forwarded at once,
   byte for byte: the request's own bytes, with the roots spliced out when there are any. Roots are held.
4. A root is graded when ``settle_s`` has passed since it arrived, from the records its trace has by then;
   its result events and verdict attributes are added to it and it is forwarded, together with the other
   roots graded in the same pass. A trace is released when none of its roots is held; a span arriving after
   that is still forwarded, counted ungraded.
5. A trace whose root never arrives is graded as partial (metrics and log events only: it has no root to carry
   span events) after ``max_trace_age_s``, then released.

In flight (``in_flight``, on by default): once a request's spans are in their traces' buffers, and before any of
their roots is held, the open runs of those traces are checked (``inflight``), so a breach is emitted while the
request that caused it is received: the ``trajgrade.breaches`` counter, the application's ``on_breach``, and a log
event. Log events (``log_events``, on by default) go to every forward target over OTLP logs, beside the spans: an
in-flight breach in the context of the span that broke the limit, and each graded run's results, each with the
resource of the run's spans.

At shutdown, held roots are graded as partial and forwarded, and the forwarders and the log events are flushed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import MeterProvider, get_meter_provider

from trajgrade.core import semconv as sc
from trajgrade.core.collector import RunCollector
from trajgrade.core.config import Config
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import Breach, InFlightChecks
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.result_attributes import results_attributes
from trajgrade.core.run_logs import RunLogs, emit_breaches
from trajgrade.core.running import RunReport
from trajgrade.core.trajectory.normalize import SpanRecord, normalize
from trajgrade.core.worker import Graded, GradingWorker
from trajgrade.doors.sidecar._protowire import Span, read_span, splice_spans
from trajgrade.doors.sidecar.forward import LOGS, Batch, Forwarder
from trajgrade.doors.sidecar.log_wire import WireEvents
from trajgrade.doors.sidecar.otlp import TraceRequest, result_fields
from trajgrade.doors.sidecar.records import split_roots
from trajgrade.doors.sidecar.wire import delimited
from trajgrade.version import __version__

__all__ = ["Pipeline", "TooLarge"]

logger = logging.getLogger(__name__)
_SEEN_ROOTS = 65_536
#: Roots graded in one pass go downstream together (concatenated requests are one request), this many at most.
_ROOTS_PER_BATCH = 512
#: A record's memory beyond its span's size on the wire (the record object, its strings' headers).
_RECORD_OVERHEAD = 256
#: How often the grading thread looks for spans the in-flight checks have not seen: the receivers check each
#: request's runs as they admit it, so it finds none.
_CHECK_INTERVAL_S = 1.0
#: Log events queued for a target, at most (records, bytes): past them a run's events are dropped, with a warning.
_MAX_QUEUED_EVENTS = (65_536, 32 * 1024 * 1024)


@dataclass(slots=True)
class _Held:
    """A root spliced out of its request, waiting for its run to be graded."""

    trace_id: str
    span: bytes  # the root, as it arrived
    resource: dict[str, Any]  # its resource's attributes
    scope: str
    resource_fields: bytes  # its ResourceSpans' resource and schema_url fields, as they arrived
    scope_fields: bytes  # its ScopeSpans' scope and schema_url fields

    def record(self) -> SpanRecord:
        return normalize(read_span(self.span, self.resource, self.scope), True)

    def request(self, extra: bytes = b"") -> bytes:
        """A one-span request of the root, with ``extra`` (encoded fields: the results) appended to the span."""
        scope_spans = self.scope_fields + delimited(2, self.span + extra)
        return delimited(1, self.resource_fields + delimited(2, scope_spans))


class SidecarMetrics:
    """Receive, forward and back-pressure counters (the grading metrics are ``Grading``'s)."""

    def __init__(self, meter_provider: MeterProvider | None) -> None:
        meter = (meter_provider or get_meter_provider()).get_meter(sc.TRAJGRADE_SCOPE, __version__)
        self.received = meter.create_counter("trajgrade.sidecar.spans.received", unit="{span}")
        self.forwarded = meter.create_counter("trajgrade.sidecar.spans.forwarded", unit="{span}")
        self.refused = meter.create_counter(
            "trajgrade.sidecar.requests.refused", unit="{request}", description="Requests refused, by reason"
        )
        self.forward_failures = meter.create_counter(
            "trajgrade.sidecar.forward.failures",
            unit="{attempt}",
            description="Failed sends, by target and retry",
        )
        self.downstream_rejected = meter.create_counter(
            "trajgrade.sidecar.spans.rejected_downstream", unit="{span}", description="Spans a target refused"
        )


class TooLarge(Exception):
    """A request larger than the sidecar could ever buffer: refused for good (HTTP 413), never "retry later"."""


class Pipeline:
    """Admits OTLP trace requests, grades runs, and forwards every span to every target.

    ``on_report`` and ``on_breach`` are called with each run's report and each in-flight breach; ``in_flight``
    checks open runs as their spans arrive; ``log_events`` sends breaches and results as OTLP log events to every
    target.
    """

    def __init__(
        self,
        config: Config,
        forward_to: Sequence[str],
        *,
        meter_provider: MeterProvider | None = None,
        settle_s: float = 2.0,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 300.0,
        max_buffered_spans: int = 200_000,
        max_buffered_bytes: int = 128 * 1024 * 1024,
        max_grading_bytes: int = 128 * 1024 * 1024,
        on_report: Callable[[RunReport], Any] | None = None,
        on_breach: Callable[[Breach], Any] | None = None,
        in_flight: bool = True,
        log_events: bool = True,
    ) -> None:
        self.metrics = SidecarMetrics(meter_provider)
        self._logs: RunLogs | None = None
        if log_events and forward_to:
            most, most_bytes = _MAX_QUEUED_EVENTS
            events = WireEvents([Forwarder(t, max_spans=most, max_bytes=most_bytes, signal=LOGS) for t in forward_to])
            self._logs = RunLogs(sink=events, max_runs=max_traces, on_error=self._count_internal_error)
        self._collector: RunCollector[_Held] = RunCollector(
            settle_s=settle_s,
            max_pending=max_traces,
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            max_bytes=max_grading_bytes,
            on_drop=self._count_drop,
            on_error=self._count_internal_error,
            checks=InFlightChecks(config) if in_flight else None,
        )
        self._checking = self._collector.checks is not None
        self._grading = Grading(
            config,
            meter_provider=meter_provider,
            on_report=on_report,
            on_breach=on_breach,
            active=lambda: len(self._collector),
        )
        self._forwarders = [
            Forwarder(
                target,
                max_spans=max_buffered_spans,
                max_bytes=max_buffered_bytes,
                on_sent=lambda t, n: self.metrics.forwarded.add(n, {"target": t}),
                on_failure=self._forward_failed,
            )
            for target in forward_to
        ]
        self._max_request = (max_buffered_spans, max_buffered_bytes)
        # Guards admission (capacity checks and reservations); never held while sending or grading.
        self._lock = threading.Lock()
        # Roots already taken for grading (a sender's retry can send one twice): graded once, forwarded as sent.
        self._seen_roots: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._closed = False
        self._worker = GradingWorker(
            self._collector,
            self._grading,
            self._forward_graded,
            name="trajgrade-sidecar",
            on_breach=lambda breaches: emit_breaches(breaches, self._grading, self._logs),
            check_interval_s=_CHECK_INTERVAL_S,
        )

    # --- receiving --------------------------------------------------------------------------------------------
    def submit(self, request: TraceRequest, protocol: str = "http") -> bool:
        """Admit a request (True), or refuse it whole because a buffer is full or the sidecar is stopping (False:
        the sender retries it later). A request no buffer could ever hold raises :class:`TooLarge`. Its spans are
        read only once it is admitted."""
        spans, size = request.span_count, len(request.body)
        max_spans, max_bytes = self._max_request
        if spans > max_spans or size > max_bytes:
            self.metrics.refused.add(1, {"reason": "too_large"})
            what = f"{spans} spans" if spans > max_spans else f"{size} bytes"
            most = f"{max_spans} spans" if spans > max_spans else f"{max_bytes} bytes"
            raise TooLarge(
                f"a request of {what} is more than the forward buffer holds ({most}): send it in smaller requests"
            )
        with self._lock:
            if self._closed:
                self.metrics.refused.add(1, {"reason": "shutting_down"})
                return False
            if not all(f.has_room(spans, size) for f in self._forwarders):
                self.metrics.refused.add(1, {"reason": "buffer_full"})
                return False
            for f in self._forwarders:
                f.reserve(spans, size)
        self.metrics.received.add(spans, {"protocol": protocol})
        held: list[_Held] = []
        traces: Mapping[str, Any] = {}
        rest = request.body
        with internal_errors("sidecar receive", self._grading.count_internal_error):
            held, rest, traces = self._split(request)
        if self._checking:  # before the roots are held: no run is graded with spans the checks have not seen
            for trace in traces:
                self._worker.check_open(trace)
        if spans > len(held):
            self._put(Batch(rest, spans - len(held), size - sum(len(h.span) for h in held)))
        passed_on = [h for h in held if not self._collector.root(h.trace_id, h.record, h)]
        if passed_on:  # too many roots held: forwarded ungraded (counted queue_full)
            self._put(
                Batch(b"".join(h.request() for h in passed_on), len(passed_on), sum(len(h.span) for h in passed_on))
            )
        if len(passed_on) < len(held):
            self._worker.run_held()
        return True

    def _split(self, request: TraceRequest) -> tuple[list[_Held], bytes, dict[str, Any]]:
        """Record every span; splice the roots out of the request's bytes (they wait for grading). Also the traces
        of the spans recorded, with their resource's attributes."""
        records, roots, traces = split_roots(request.spans, _RECORD_OVERHEAD)
        roots = [root for root in roots if self._first_time(root)]
        if self._logs is not None and traces:
            self._logs.remember(traces)
        self._collector.extend(records)
        if not roots:
            return [], request.body, traces
        rest, taken = splice_spans(request.body, [(r.resource_index, r.scope_index, r.index) for r in roots])
        held = [
            _Held(root.trace_id, span, root.resource_attributes, root.scope_name, resource, scope)
            for root, (span, resource, scope) in zip(roots, taken, strict=True)
        ]
        return held, rest, traces

    def _first_time(self, root: Span) -> bool:
        key = (root.trace_id, root.span_id)
        with self._lock:
            if key in self._seen_roots:
                return False
            self._seen_roots[key] = None
            if len(self._seen_roots) > _SEEN_ROOTS:
                self._seen_roots.popitem(last=False)
        return True

    def _put(self, batch: Batch) -> None:
        for f in self._forwarders:
            f.put(batch)

    # --- grading ----------------------------------------------------------------------------------------------
    def _forward_graded(self, graded: list[Graded[_Held]]) -> None:
        """Each graded root goes on as a one-span request with its results added; roots graded in one pass go
        together, in requests of at most ``_ROOTS_PER_BATCH``. The results go as log events too."""
        out: list[tuple[bytes, int]] = []
        for run, report in graded:
            h = run.payload
            made = None  # the results' event attributes, made once for the root and the log events
            if report is not None:
                with internal_errors("sidecar emit", self._grading.count_internal_error):
                    made = results_attributes(report.results)
            if self._logs is not None:
                self._logs.graded(run, report, h.resource if h is not None else None, made)
            if h is None:
                continue  # its root never arrived: no span to carry the results
            extra = b""
            if report is not None:
                with internal_errors("sidecar emit", self._grading.count_internal_error):
                    extra = result_fields(report, run.root.end_unix_nano, made)
            out.append((h.request(extra), len(h.span)))
        for start in range(0, len(out), _ROOTS_PER_BATCH):
            chunk = out[start : start + _ROOTS_PER_BATCH]
            self._put(Batch(b"".join(body for body, _ in chunk), len(chunk), sum(size for _, size in chunk)))

    # --- lifecycle --------------------------------------------------------------------------------------------
    def close(self, timeout_s: float = 10.0) -> int:
        """Stop admitting, grade held roots and orphans as partial, forward everything; spans left undelivered."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
        deadline = time.monotonic() + timeout_s
        self._worker.close(timeout_s)
        left = sum(f.close(max(0.1, deadline - time.monotonic())) for f in self._forwarders)
        if self._logs is not None:
            with internal_errors("sidecar close", self._grading.count_internal_error):
                self._logs.shutdown()
        return left

    def summary(self) -> str:
        """The runs graded so far, and what was dropped and what failed inside, by reason, in one line."""
        return self._grading.summary()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Grade what is due and wait until every forwarder has delivered its queue and every log event is
        exported (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        self._worker.flush(timeout_s)
        delivered = all(f.flush(max(0.0, deadline - time.monotonic())) for f in self._forwarders)
        if self._logs is not None:
            delivered = self._logs.flush(max(0.0, deadline - time.monotonic())) and delivered
        return delivered

    @property
    def accepting(self) -> bool:
        return not self._closed

    @property
    def held_roots(self) -> int:
        return self._collector.held

    def _count_drop(self, reason: str) -> None:
        self._grading.count_drop(reason)

    def _count_internal_error(self, error_type: str) -> None:
        self._grading.count_internal_error(error_type)

    def _forward_failed(self, target: str, reason: str, retry: bool, spans: int) -> None:
        self.metrics.forward_failures.add(1, {"target": target, "retry": retry})
        if not retry:
            self.metrics.downstream_rejected.add(spans, {"target": target})
