"""The bare receiver's work on a request: the baseline of the sidecar benchmarks.

A module of its own that imports protobuf and the standard library only, so that the bare receiver's process
holds nothing of trajgrade (whose objects its garbage collector would otherwise walk too).

The bare receiver does what any OTLP hop in Python must: parse the request, walk every attribute of every span,
and forward the request's bytes to the next hop (:class:`Forward`, as ``trajgrade serve`` forwards: a queue
and one sender thread on a keep-alive connection, the requests queued during a send merged into the next one).
"""

from __future__ import annotations

import http.client
import threading
from collections import deque
from urllib.parse import urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

#: A merged send stays under this many bytes, as the sidecar's does.
MAX_SEND_BYTES = 4_000_000
#: Bytes queued past which a request is refused (HTTP 429), as the sidecar's forward buffer refuses it.
MAX_QUEUED_BYTES = 128 * 1024 * 1024


def read_every_attribute(body: bytes) -> int:
    """Parse a request and read every attribute of every span (and of its resource)."""
    message = ExportTraceServiceRequest.FromString(body)
    n = 0
    for rs in message.resource_spans:
        for kv in rs.resource.attributes:
            n += len(kv.key)
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    v = kv.value
                    n += len(kv.key) + len(str(getattr(v, v.WhichOneof("value") or "string_value")))
    return n


class Forward:
    """Request bodies sent on to ``target`` (an OTLP/HTTP base URL) by one thread, in order."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._path = f"{parts.path.rstrip('/')}/v1/traces"
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def put(self, body: bytes) -> bool:
        """Queue a body; False when the queue is full (the sender is to retry later)."""
        with self._cond:
            if self._queued + len(body) > MAX_QUEUED_BYTES:
                return False
            self._queue.append(body)
            self._queued += len(body)
            self._cond.notify()
        return True

    def flush(self) -> None:
        """Wait until every body queued so far has been sent."""
        with self._cond:
            while self._queued:
                self._cond.wait(0.01)

    def _run(self) -> None:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=30)
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                taken = [self._queue.popleft()]
                size = len(taken[0])
                while self._queue and size + len(self._queue[0]) <= MAX_SEND_BYTES:
                    taken.append(self._queue.popleft())
                    size += len(taken[-1])
            body = b"".join(taken)  # concatenated requests are one request holding all their spans
            while True:
                try:
                    conn.request("POST", self._path, body, {"Content-Type": "application/x-protobuf"})
                    response = conn.getresponse()
                    response.read()
                    if response.status < 300:
                        break
                except (OSError, http.client.HTTPException):
                    conn.close()
            with self._cond:
                self._queued -= size
