"""The sidecar's log events, written as binary OTLP ``ExportLogsServiceRequest`` bodies and forwarded like spans.

A graded run's events (and an in-flight breach's) make one request: the run's resource and trajgrade's scope
encoded once, each event a ``LogRecord`` as the SDK's OTLP encoder writes the record its ``Logger.emit`` makes (no
severity, an empty body, the ids and flags of the span it is about, the time it was observed), encoded by
``_protowire.c``, as the results on a root span are. The request goes to a :class:`~.forward.Forwarder` per target
(``/v1/logs`` or the logs service), which merges the requests queued while it sends, and retries with back-off.
No SDK log record is made for an event: the SDK's would clean each attribute value again, and its batch processor
would hand the records over to an encoder one at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.emit import span_ids
from trajgrade.core.run_logs import EventWriter
from trajgrade.doors.sidecar._protowire import encode_attributes, encode_log_record
from trajgrade.doors.sidecar.forward import Batch, Forwarder
from trajgrade.doors.sidecar.wire import delimited
from trajgrade.version import __version__

__all__ = ["WireEvents"]

logger = logging.getLogger(__name__)


#: trajgrade's instrumentation scope (``ScopeLogs.scope``): its name and version.
_SCOPE = delimited(1, delimited(1, sc.TRAJGRADE_SCOPE.encode()) + delimited(2, __version__.encode()))


class _RunEvents:
    """One run's events, sent as one request when the run's are all emitted."""

    __slots__ = ("_records", "_resource", "_sink")

    def __init__(self, sink: WireEvents, resource: bytes) -> None:
        self._sink = sink
        self._resource = resource
        self._records: list[bytes] = []

    def emit(self, attributes: dict[str, AttributeValue], trace_id: str, span_id: str | None) -> None:
        """A ``LogRecord`` (``ScopeLogs.log_records``) about the span of these ids, sampled, observed now."""
        ids = span_ids(trace_id, span_id) if span_id else None
        trace, span, flags = (ids[0].to_bytes(16, "big"), ids[1].to_bytes(8, "big"), 1) if ids else (b"", b"", 0)
        self._records.append(
            encode_log_record(attributes, trace, span, flags, time.time_ns(), sc.EVALUATION_RESULT_EVENT)
        )

    def close(self) -> None:
        if self._records:
            scope_logs = delimited(2, _SCOPE + b"".join(self._records))
            self._sink.send(delimited(1, self._resource + scope_logs), len(self._records))
            self._records = []


class WireEvents:
    """The log events of the sidecar (an :class:`~trajgrade.core.run_logs.EventSink`), to every forwarder. A
    forwarder without room for a run's events drops them, with a warning (once, until it has room again)."""

    def __init__(self, forwarders: Sequence[Forwarder]) -> None:
        self._forwarders = forwarders
        # Guards room and reservation together (breaches come from the receiving threads, results from the grader's)
        # and which forwarders are dropping.
        self._lock = threading.Lock()
        self._dropping: set[str] = set()

    def writer(self, resource: dict[str, Any]) -> EventWriter:
        return _RunEvents(self, delimited(1, encode_attributes(resource, 1)))

    def send(self, body: bytes, records: int) -> None:
        """Queue a request of ``records`` log records on every forwarder that has room for it."""
        for f in self._forwarders:
            with self._lock:
                room = f.has_room(records, len(body))
                if room:
                    f.reserve(records, len(body))
                    self._dropping.discard(f.target)
                elif f.target in self._dropping:
                    continue
                else:
                    self._dropping.add(f.target)
            if room:
                f.put(Batch(body, records, len(body)))
            else:
                logger.warning("trajgrade: log events dropped until the queue to %s has room: it is full", f.target)

    def flush(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        return all([f.flush(max(0.0, deadline - time.monotonic())) for f in self._forwarders])

    def shutdown(self) -> None:
        for f in self._forwarders:
            f.close()
