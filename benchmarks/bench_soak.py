"""A bounded soak of ``trajgrade serve``: steady load, the downstream failing part of the time.

The sidecar (a subprocess, as users run it) receives a steady stream of whole agent runs over OTLP/HTTP for
``SOAK_SECONDS`` (default 120) and forwards them to a backend that answers 503 for 5 s out of every 15 s.
The load generator retries what is refused with 429, as a collector's retry queue does. Figures:

- memory: the sidecar's RSS in the last fifth of the run against the second fifth (after warm-up): flat
  means within 1.25x;
- accounting: every span the sidecar acknowledged reached the backend exactly once after the drain
  (acknowledged = forwarded), and refused requests were all retried until taken (refused-with-retry). The
  runs' results the sidecar sends as log events (``/v1/logs``, its default) are counted beside them: the log
  records received, and how many runs they came for.

The backend here is a small recording receiver in this process (the benchmark needs to switch it on and off).
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import Figure, print_table
from bench_sidecar import make_bodies
from bench_sidecar import serve as start_serve

SECONDS = float(os.environ.get("SOAK_SECONDS", "120"))
RATE = 40  # requests per second, each of 2 runs of 32 spans
TRACES_PER_BODY = 2


class Backend:
    def __init__(self) -> None:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.span_ids: dict[bytes, int] = {}
        self.log_records = 0
        self.logged_traces: set[bytes] = set()
        self.failing = False
        self.refusals = 0
        lock = threading.Lock()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if backend.failing:
                    backend.refusals += 1
                    self.send_response(503)
                    self.end_headers()
                    return
                if self.path.endswith("/v1/logs"):
                    logs = ExportLogsServiceRequest()
                    logs.ParseFromString(body)
                    with lock:
                        for rl in logs.resource_logs:
                            for sl in rl.scope_logs:
                                backend.log_records += len(sl.log_records)
                                backend.logged_traces.update(r.trace_id for r in sl.log_records)
                    self.send_response(200)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with lock:
                    for rs in request.resource_spans:
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                backend.span_ids[span.span_id] = backend.span_ids.get(span.span_id, 0) + 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def figures() -> list[Figure]:
    import bench_sidecar

    bench_sidecar.TRACES_PER_REQUEST = TRACES_PER_BODY
    bodies = make_bodies(int(SECONDS * RATE) + 10)  # every run distinct: no span id repeats across the soak
    expected_per_body = TRACES_PER_BODY * bench_sidecar.SPANS_PER_TRACE
    backend = Backend()
    # less buffer than one outage of traffic: the sidecar must refuse, then take the retries
    serve, port = start_serve(backend.url, "200ms", "--max-buffered-spans", "8000")
    url = f"http://127.0.0.1:{port}/v1/traces"
    accepted = refused = 0
    samples: list[tuple[float, int]] = []
    start = time.monotonic()
    done = threading.Event()

    def outages() -> None:  # the backend is down 5 s out of every 15, until the load ends
        while not done.wait(0.05):
            backend.failing = ((time.monotonic() - start) % 15) < 5
        backend.failing = False

    threading.Thread(target=outages, daemon=True).start()
    try:
        for i, body in enumerate(bodies[: int(SECONDS * RATE)]):
            now = time.monotonic() - start
            if i % RATE == 0:
                samples.append((now, rss_kib(serve.pid)))
            while True:
                req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/x-protobuf"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        r.read()
                    accepted += 1
                    break
                except urllib.error.HTTPError as e:
                    if e.code != 429:
                        raise
                    refused += 1
                    time.sleep(float(e.headers.get("Retry-After", "1")) / 10)
            delay = start + (i + 1) / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        done.set()
        sent_spans = accepted * expected_per_body
        deadline = time.monotonic() + 60
        while len(backend.span_ids) < sent_spans and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        done.set()
        serve.send_signal(signal.SIGTERM)
        exit_code = serve.wait(timeout=60)
        backend.server.shutdown()
    fifth = max(1, len(samples) // 5)
    early = statistics.median(kib for _, kib in samples[fifth : 2 * fifth])
    late = statistics.median(kib for _, kib in samples[-fifth:])
    forwarded = len(backend.span_ids)
    duplicates = sum(1 for n in backend.span_ids.values() if n > 1)
    accounted = forwarded == sent_spans and duplicates == 0 and exit_code == 0
    return [
        Figure(
            f"soak {SECONDS:.0f}s at {RATE * expected_per_body} spans/s, backend down 5s in 15s: RSS late / early",
            late / early,
            "x",
            "<= 1.25x",
            late / early <= 1.25,
            1.0,
            f"early {early / 1024:.0f} MiB, late {late / 1024:.0f} MiB",
        ),
        Figure(
            f"  spans acknowledged {sent_spans}, forwarded {forwarded}, duplicates {duplicates}; "
            f"requests refused with 429 and retried {refused}; backend refusals {backend.refusals}; "
            f"log events {backend.log_records}, for {len(backend.logged_traces)} of {accepted * TRACES_PER_BODY} runs",
            forwarded - sent_spans,
            "spans lost",
            "0",
            accounted,
        ),
    ]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
