"""Forwarding spans downstream: one bounded queue and one sender thread per target, retries with back-off.

A target is a base URL as in ``OTEL_EXPORTER_OTLP_ENDPOINT``: ``http(s)://host:port[/prefix]`` (``/v1/traces``
is added) for OTLP/HTTP protobuf, or ``grpc://host:port`` for OTLP/gRPC. The same sender takes another signal's
requests (:data:`LOGS`: the sidecar's log events, to ``/v1/logs`` or the logs service). Capacity is counted in spans and
reserved when a request is admitted, so the receiver can refuse a request (and the collector keeps it in its
own queue) instead of accepting what it cannot hold; bytes are counted the same way. A batch leaves the queue
only when the target took it.

Batches queued while a send was under way go out merged, up to ``MAX_SEND_SPANS`` spans and ``max_send_bytes``
bytes (below gRPC's default 4 MiB message limit). What the target answers decides what happens next:

- retry later (connection errors, HTTP 429/502/503/504, gRPC UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED,
  CANCELLED, and RESOURCE_EXHAUSTED with a ``RetryInfo`` detail, as OTLP specifies): the same bytes again,
  with exponential back-off, while running;
- too large (HTTP 413; gRPC RESOURCE_EXHAUSTED without ``RetryInfo``, as gRPC C-core and Go servers refuse a
  message over their size limit, or OUT_OF_RANGE, as tonic servers such as rotel do): the request is cut in
  two and each half sent on its own, down to a single span;
- refused for good (another 4xx, INVALID_ARGUMENT, a single span too large): a merged request is sent again
  as the requests it was made of, so one client's bad request never takes another's spans with it; what the
  target still refuses is counted and logged, never silent, and never retried.
"""

from __future__ import annotations

import enum
import http.client
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import grpc
import requests
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from trajgrade.doors.sidecar.wire import split_request

__all__ = ["LOGS", "RETRY_HTTP", "TRACES", "Batch", "Forwarder", "HttpPost", "Signal"]

logger = logging.getLogger(__name__)

_PROTOBUF = "application/x-protobuf"
RETRY_HTTP = frozenset({429, 502, 503, 504})
MAX_SEND_SPANS = 8192
#: Merged requests stay under this many bytes: gRPC servers refuse messages over 4 MiB (4,194,304) by default.
MAX_SEND_BYTES = 4_000_000
_RETRY_GRPC = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)
_RETRY_INFO = error_details_pb2.RetryInfo.DESCRIPTOR.full_name


class Outcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"  # the same bytes later
    TOO_LARGE = "too_large"  # the same spans in smaller requests
    REFUSED = "refused"  # never these bytes again


@dataclass(frozen=True, slots=True)
class Signal:
    """What a forwarder sends: OTLP/HTTP's path, OTLP/gRPC's method and response, what an item is called, and how
    one request is cut in two (None: it is not)."""

    path: str
    grpc_method: str
    grpc_response: Callable[[bytes], Any]
    item: str
    split: Callable[[bytes], list[tuple[bytes, int]]] | None


TRACES = Signal(
    "/v1/traces",
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    ExportTraceServiceResponse.FromString,
    "span",
    split_request,
)
LOGS = Signal(
    "/v1/logs",
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    ExportLogsServiceResponse.FromString,
    "log record",
    None,
)


@dataclass(slots=True)
class Batch:
    """Spans to send: a binary ``ExportTraceServiceRequest``, its span count, and the bytes reserved for it."""

    body: bytes
    spans: int
    size: int = 0


def _raw(body: bytes) -> bytes:
    return body


def _merged(batches: list[Batch]) -> Batch:
    # Protobuf concatenation is merging: the bytes of several requests, one after the other, are one request
    # with all their resource_spans.
    if len(batches) == 1:
        return batches[0]
    return Batch(b"".join(b.body for b in batches), sum(b.spans for b in batches), sum(b.size for b in batches))


def _halves(batches: list[Batch], split: Callable[[bytes], list[tuple[bytes, int]]] | None) -> list[list[Batch]]:
    """Merged batches cut between the requests they were made of; one request cut inside by ``split`` ([] when it
    is one span, or cannot be cut)."""
    if len(batches) > 1:
        return [batches[: len(batches) // 2], batches[len(batches) // 2 :]]
    if split is None:
        return []
    try:
        return [[Batch(body, spans)] for body, spans in split(batches[0].body)]
    except Exception:  # bytes the receiver checked; were they not protobuf after all, they cannot be cut
        return []


def _retry_info(error: grpc.RpcError) -> bool:
    """Whether a gRPC error carries a ``RetryInfo`` detail (the server says: retry later)."""
    trailing: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in tuple(trailing or ()):
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            try:
                status = status_pb2.Status.FromString(value)
            except Exception:
                return False
            return any(d.type_url.endswith("/" + _RETRY_INFO) for d in status.details)
    return False


class HttpPost:
    """POSTs protobuf bodies to a plain-HTTP URL on one keep-alive connection (what the sender thread needs of
    an HTTP client, and no more); a connection the server closed while idle is opened again once."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(url)
        self._path = parts.path or "/"
        self._headers = {"Content-Type": _PROTOBUF, "Host": parts.netloc}
        self._conn = http.client.HTTPConnection(parts.hostname or "localhost", parts.port or 80, timeout=timeout_s)
        self._used = False  # the connection carried a request before: the server may have closed it since

    def __call__(self, body: bytes) -> int:
        """The response's status."""
        try:
            return self._send(body)
        except (OSError, http.client.HTTPException):
            self._conn.close()
            if not self._used:
                raise
        self._used = False
        try:
            return self._send(body)
        except (OSError, http.client.HTTPException):
            self._conn.close()
            raise

    def _send(self, body: bytes) -> int:
        self._conn.request("POST", self._path, body, self._headers)
        response = self._conn.getresponse()
        response.read()
        self._used = not response.will_close
        if response.will_close:
            self._conn.close()
        return response.status


def _session_post(url: str, timeout_s: float) -> Callable[[bytes], int]:
    """POSTs to an HTTPS URL through requests (its certificate bundle and proxy settings)."""
    session = requests.Session()

    def post(body: bytes) -> int:
        return session.post(url, data=body, headers={"Content-Type": _PROTOBUF}, timeout=timeout_s).status_code

    return post


class Forwarder:
    """Sends batches to one target, in order, holding at most ``max_spans`` spans (or items of another ``signal``)
    and ``max_bytes`` bytes."""

    def __init__(
        self,
        target: str,
        *,
        max_spans: int = 200_000,
        max_bytes: int = 128 * 1024 * 1024,
        max_send_bytes: int = MAX_SEND_BYTES,
        timeout_s: float = 10.0,
        max_backoff_s: float = 5.0,
        on_sent: Callable[[str, int], None] = lambda target, n: None,
        on_failure: Callable[[str, str, bool, int], None] = lambda target, reason, retry, spans: None,
        signal: Signal = TRACES,
    ) -> None:
        self.target = target
        self.signal = signal
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.max_send_bytes = max_send_bytes
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
        self._reserved_bytes = 0
        self._sending = False
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"trajgrade-forward {target}", daemon=True)
        self._thread.start()

    # --- capacity -------------------------------------------------------------------------------------------
    def has_room(self, spans: int, size: int) -> bool:
        return self._reserved + spans <= self.max_spans and self._reserved_bytes + size <= self.max_bytes

    def reserve(self, spans: int, size: int) -> None:
        """Count ``spans`` and ``size`` bytes against capacity now (the caller checked ``has_room`` under its own
        lock); each queued batch's ``size`` is given back when it leaves."""
        with self._lock:
            self._reserved += spans
            self._reserved_bytes += size

    def put(self, batch: Batch) -> None:
        """Queue a batch whose spans were reserved."""
        with self._lock:
            self._queue.append(batch)
            self._cond.notify_all()

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
            item = self.signal.item
            logger.error("trajgrade: %d %s(s) not delivered to %s before shutdown", left, item, self.target)
        return left

    # --- sending -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                # Batches queued while the last send was under way go out together (up to MAX_SEND_SPANS and
                # max_send_bytes): a slow or recovering target gets fewer, larger requests.
                taken = [self._queue[0]]
                spans, size = taken[0].spans, len(taken[0].body)
                for queued in itertools.islice(self._queue, 1, None):
                    if spans + queued.spans > MAX_SEND_SPANS or size + len(queued.body) > self.max_send_bytes:
                        break
                    taken.append(queued)
                    spans += queued.spans
                    size += len(queued.body)
                self._sending = True
            delivered = self._deliver(taken)
            with self._lock:
                self._sending = False
                if delivered:
                    for _ in taken:
                        self._queue.popleft()
                    self._reserved -= spans
                    self._reserved_bytes -= sum(b.size for b in taken)
                self._cond.notify_all()

    def _deliver(self, batches: list[Batch]) -> bool:
        """Send batches (merged) until the target took or refused for good every span (True), or shutdown (False)."""
        batch = _merged(batches)
        backoff = 0.05
        while not self._stop:
            try:
                error, outcome = self._send(batch)
            except Exception as e:  # a bug in sending must not stop the sender thread
                error, outcome = f"{type(e).__name__}: {e}", Outcome.RETRY
            if outcome is Outcome.SENT:
                self._on_sent(self.target, batch.spans)
                return True
            halves = [] if outcome is Outcome.RETRY else _halves(batches, self.signal.split)
            if outcome is Outcome.REFUSED and len(batches) == 1:
                halves = []  # one client's request, refused as it is: cutting it would not change the verdict
            permanent = outcome is not Outcome.RETRY and not halves
            self._on_failure(self.target, error or outcome.value, not permanent, batch.spans)
            if halves:
                return all(self._deliver(half) for half in halves)
            if permanent:
                item = self.signal.item
                logger.error("trajgrade: %s refused %d %s(s) for good: %s", self.target, batch.spans, item, error)
                return True
            with self._lock:
                self._cond.wait(backoff)
            backoff = min(backoff * 2, self._max_backoff)
        return False

    def _sender(self, target: str) -> Callable[[Batch], tuple[str | None, Outcome]]:
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            base = target.rstrip("/").removesuffix(TRACES.path)
            url = base if base.endswith(self.signal.path) else f"{base}{self.signal.path}"
            post = HttpPost(url, self._timeout) if parts.scheme == "http" else _session_post(url, self._timeout)

            def send_http(batch: Batch) -> tuple[str | None, Outcome]:
                try:
                    status = post(batch.body)
                except (OSError, http.client.HTTPException, requests.RequestException) as e:
                    return f"{type(e).__name__}", Outcome.RETRY
                if 200 <= status < 300:
                    return None, Outcome.SENT
                if status == 413:
                    return "HTTP 413", Outcome.TOO_LARGE
                return f"HTTP {status}", Outcome.RETRY if status in RETRY_HTTP else Outcome.REFUSED

            return send_http
        if parts.scheme == "grpc":
            channel = grpc.insecure_channel(parts.netloc)
            export = channel.unary_unary(
                self.signal.grpc_method, request_serializer=_raw, response_deserializer=self.signal.grpc_response
            )

            def send_grpc(batch: Batch) -> tuple[str | None, Outcome]:
                try:
                    export(batch.body, timeout=self._timeout)
                except grpc.RpcError as e:
                    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
                    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
                        return "gRPC RESOURCE_EXHAUSTED", Outcome.RETRY if _retry_info(e) else Outcome.TOO_LARGE
                    if code is grpc.StatusCode.OUT_OF_RANGE:
                        return "gRPC OUT_OF_RANGE", Outcome.TOO_LARGE
                    return f"gRPC {code.name}", Outcome.RETRY if code in _RETRY_GRPC else Outcome.REFUSED
                return None, Outcome.SENT

            return send_grpc
        raise ValueError(f"--forward {target!r}: use http://host:port, https://host:port or grpc://host:port")
