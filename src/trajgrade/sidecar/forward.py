"""Forwarding spans downstream: one bounded queue and one sender thread per target, retries with back-off.

A target is a base URL as in ``OTEL_EXPORTER_OTLP_ENDPOINT``: ``http(s)://host:port[/prefix]`` (``/v1/traces``
is added) for OTLP/HTTP protobuf, or ``grpc://host:port`` for OTLP/gRPC. Capacity is counted in spans and
reserved when a request is admitted, so the receiver can refuse a request (and the collector keeps it in its
own queue) instead of accepting what it cannot hold. A batch leaves the queue only when the target took it:
retryable failures (connection errors, HTTP 429/502/503/504, gRPC UNAVAILABLE, RESOURCE_EXHAUSTED,
DEADLINE_EXCEEDED, ABORTED) are retried with exponential back-off, forever while running; a permanent
rejection (another 4xx, INVALID_ARGUMENT) is counted and logged, never silent.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

__all__ = ["Batch", "Forwarder"]

logger = logging.getLogger(__name__)

_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_RETRY_HTTP = frozenset({429, 502, 503, 504})
MAX_SEND_SPANS = 8192
_RETRY_GRPC = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)


@dataclass(slots=True)
class Batch:
    """Spans to send: a binary ``ExportTraceServiceRequest`` and its span count."""

    body: bytes
    spans: int


def _raw(body: bytes) -> bytes:
    return body


def _merged(batches: list[Batch]) -> Batch:
    # Protobuf concatenation is merging: the bytes of several requests, one after the other, are one request
    # with all their resource_spans.
    return Batch(b"".join(b.body for b in batches), sum(b.spans for b in batches))


class Forwarder:
    """Sends batches to one target, in order, holding at most ``max_spans`` spans."""

    def __init__(
        self,
        target: str,
        *,
        max_spans: int = 200_000,
        timeout_s: float = 10.0,
        max_backoff_s: float = 5.0,
        on_sent: Callable[[str, int], None] = lambda target, n: None,
        on_failure: Callable[[str, str, bool, int], None] = lambda target, reason, retry, spans: None,
    ) -> None:
        self.target = target
        self.max_spans = max_spans
        self._timeout = timeout_s
        self._max_backoff = max_backoff_s
        self._on_sent = on_sent
        self._on_failure = on_failure
        self._send = self._sender(target)
        # Guards _queue, _reserved and _sending; _cond wakes the sender and flush().
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[Batch] = deque()
        self._reserved = 0  # spans admitted and not yet taken by the target
        self._sending = False
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"trajgrade-forward {target}", daemon=True)
        self._thread.start()

    # --- capacity -------------------------------------------------------------------------------------------
    @property
    def free(self) -> int:
        return self.max_spans - self._reserved

    def reserve(self, spans: int) -> None:
        """Count ``spans`` against capacity now (the caller checked ``free`` under its own lock)."""
        with self._lock:
            self._reserved += spans

    def unreserve(self, spans: int) -> None:
        with self._lock:
            self._reserved -= spans
            self._cond.notify_all()

    def put(self, batch: Batch) -> None:
        """Queue a batch whose spans were reserved."""
        with self._lock:
            self._queue.append(batch)
            self._cond.notify_all()

    @property
    def pending_spans(self) -> int:
        return self._reserved

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued batch was taken by the target; False when the deadline passed first."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._queue or self._sending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.1))
        return True

    def close(self, timeout_s: float = 5.0) -> int:
        """Flush, then stop the sender; returns the spans that could not be delivered before the deadline."""
        self.flush(timeout_s)
        with self._lock:
            self._stop = True
            left = sum(b.spans for b in self._queue)
            self._cond.notify_all()
        self._thread.join(timeout=1.0)
        if left:
            logger.error("trajgrade: %d span(s) not delivered to %s before shutdown", left, self.target)
        return left

    # --- sending -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                # Batches queued while the last send was under way go out together (up to MAX_SEND_SPANS):
                # a slow or recovering target gets fewer, larger requests.
                taken = [self._queue[0]]
                spans = taken[0].spans
                for queued in itertools.islice(self._queue, 1, None):
                    if spans + queued.spans > MAX_SEND_SPANS:
                        break
                    taken.append(queued)
                    spans += queued.spans
                self._sending = True
            delivered = self._deliver(taken[0] if len(taken) == 1 else _merged(taken))
            with self._lock:
                self._sending = False
                if delivered:
                    for _ in taken:
                        self._queue.popleft()
                    self._reserved -= spans
                self._cond.notify_all()

    def _deliver(self, batch: Batch) -> bool:
        """Send one batch until the target takes it or refuses it for good (True), or shutdown (False)."""
        backoff = 0.05
        while not self._stop:
            try:
                error, retry = self._send(batch)
            except Exception as e:  # a bug in sending must not stop the sender thread
                error, retry = f"{type(e).__name__}: {e}", True
            if error is None:
                self._on_sent(self.target, batch.spans)
                return True
            self._on_failure(self.target, error, retry, batch.spans)
            if not retry:
                logger.error("trajgrade: %s refused %d span(s) for good: %s", self.target, batch.spans, error)
                return True
            with self._lock:
                self._cond.wait(backoff)
            backoff = min(backoff * 2, self._max_backoff)
        return False

    def _sender(self, target: str) -> Callable[[Batch], tuple[str | None, bool]]:
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            path = parts.path.rstrip("/")
            url = target.rstrip("/") if path.endswith("/v1/traces") else f"{target.rstrip('/')}/v1/traces"
            session = requests.Session()

            def send_http(batch: Batch) -> tuple[str | None, bool]:
                try:
                    r = session.post(
                        url,
                        data=batch.body,
                        headers={"Content-Type": "application/x-protobuf"},
                        timeout=self._timeout,
                    )
                except requests.RequestException as e:
                    return f"{type(e).__name__}", True
                if 200 <= r.status_code < 300:
                    return None, False
                return f"HTTP {r.status_code}", r.status_code in _RETRY_HTTP

            return send_http
        if parts.scheme == "grpc":
            channel = grpc.insecure_channel(parts.netloc)
            export = channel.unary_unary(
                _EXPORT, request_serializer=_raw, response_deserializer=ExportTraceServiceResponse.FromString
            )

            def send_grpc(batch: Batch) -> tuple[str | None, bool]:
                try:
                    export(batch.body, timeout=self._timeout)
                except grpc.RpcError as e:
                    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
                    return f"gRPC {code.name}", code in _RETRY_GRPC
                return None, False

            return send_grpc
        raise ValueError(f"--forward {target!r}: use http://host:port, https://host:port or grpc://host:port")
