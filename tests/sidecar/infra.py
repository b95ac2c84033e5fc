"""Real parts for the sidecar tests: rotel from its PyPI package, ``trajgrade serve`` as a subprocess, and a sink.

The sink is the one test double here, standing for the trace backend at the end of the pipeline: a small
OTLP/HTTP receiver that records every span and log record it is sent (gzip or not) and can be told to fail or to
be down.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rotel_binary() -> Path:
    import rotel

    path = Path(rotel.__file__).parent / "rotel-agent"
    if not path.exists():
        raise RuntimeError(f"rotel's collector binary is missing from the rotel package: {path}")
    return path


class Sink:
    """Records every span it receives at /v1/traces, every log record at /v1/logs, and the names of the metrics at
    /v1/metrics; ``status`` is what it answers (200 by default), after ``delay_s``."""

    def __init__(self) -> None:
        self.spans: list[trace_pb2.Span] = []
        self.logs: list[logs_pb2.LogRecord] = []
        self.resource_logs: list[logs_pb2.ResourceLogs] = []  # the same records, with their resources and scopes
        self.metric_names: set[str] = set()
        #: The latest value of every counter point received: (name, attributes) -> value.
        self.counters: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        self.requests = 0
        self.status = 200
        self.delay_s = 0.0  # a slow backend
        self.refuse: Callable[[ExportTraceServiceRequest], bool] = lambda request: False  # answered 400
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(sink.delay_s)
                if sink.status != 200:
                    self.send_response(sink.status)
                    self.end_headers()
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.endswith("/v1/traces"):
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    if sink.refuse(request):
                        self.send_response(400)
                        self.end_headers()
                        return
                    with sink._lock:
                        sink.requests += 1
                        for rs in request.resource_spans:
                            for ss in rs.scope_spans:
                                sink.spans.extend(ss.spans)
                elif self.path.endswith("/v1/logs"):
                    logs = ExportLogsServiceRequest.FromString(body)
                    with sink._lock:
                        sink.logs.extend(r for rl in logs.resource_logs for sl in rl.scope_logs for r in sl.log_records)
                        sink.resource_logs.extend(logs.resource_logs)
                elif self.path.endswith("/v1/metrics"):
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    with sink._lock:
                        sink.metric_names.update(
                            m.name for rm in metrics.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                        )
                        for rm in metrics.resource_metrics:
                            for sm in rm.scope_metrics:
                                for m in sm.metrics:
                                    for p in m.sum.data_points:
                                        attrs = frozenset((a.key, a.value.string_value) for a in p.attributes)
                                        sink.counters[(m.name, attrs)] = p.as_int or p.as_double
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def span_ids(self) -> Counter[bytes]:
        with self._lock:
            return Counter(s.span_id for s in self.spans)

    def wait_for_metrics(self, names: set[str], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if names <= self.metric_names:
                    return True
            time.sleep(0.05)
        return False

    def wait_for(self, n: int, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= n:
                    return True
            time.sleep(0.05)
        return False

    def wait_for_logs(self, n: int, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.logs) >= n:
                    return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def sink() -> Iterator[Sink]:
    s = Sink()
    try:
        yield s
    finally:
        s.close()


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s")


@contextmanager
def rotel(
    workdir: Path,
    export_to: str,
    *,
    protocol: str = "http",
    processor: str | None = None,
    env: dict[str, str] | None = None,
    grpc_port: int | None = None,
    http_port: int | None = None,
) -> Iterator[dict[str, int]]:
    """A rotel collector on loopback: OTLP in on fresh ports (or ``grpc_port``, ``http_port``), OTLP out to
    ``export_to``."""
    grpc_port, http_port = grpc_port or free_port(), http_port or free_port()
    name = f"rotel-{http_port}"
    cmd = [
        str(rotel_binary()),
        "start",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{grpc_port}",
        "--otlp-http-endpoint",
        f"127.0.0.1:{http_port}",
        "--exporter",
        "otlp",
        "--otlp-exporter-protocol",
        protocol,
        "--otlp-exporter-endpoint",
        export_to,
        "--batch-timeout",
        "50ms",
        "--pid-file",
        str(workdir / f"{name}.pid"),
        "--log-file",
        str(workdir / f"{name}.log"),
    ]
    if processor:
        cmd += ["--otlp-with-trace-processor", processor]
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    log = open(workdir / f"{name}.out", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env)
    try:
        _wait_port(http_port, proc, "rotel")
        yield {"grpc": grpc_port, "http": http_port}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Serve:
    def __init__(self, proc: subprocess.Popen[bytes], http: int, grpc: int, metrics: int, out: Path) -> None:
        self.proc = proc
        self.http = http
        self.grpc = grpc
        self.metrics = metrics
        self.out = out

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


@contextmanager
def serve(
    workdir: Path, config: Path, forward: list[str], *extra: str, env: dict[str, str] | None = None
) -> Iterator[Serve]:
    """``trajgrade serve`` as a subprocess, exactly as a user runs it (``env``: variables to set for it)."""
    http, grpc, metrics = free_port(), free_port(), free_port()
    exe = shutil.which("trajgrade", path=str(BIN)) or "trajgrade"
    cmd = [
        exe,
        "serve",
        "--config",
        str(config),
        "--otlp-http",
        f"127.0.0.1:{http}",
        "--otlp-grpc",
        f"127.0.0.1:{grpc}",
        "--metrics-port",
        str(metrics),
        *[arg for target in forward for arg in ("--forward", target)],
        *extra,
    ]
    out = workdir / f"serve-{http}.out"
    log = open(out, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    s = Serve(proc, http, grpc, metrics, out)
    try:
        _wait_port(http, proc, "trajgrade serve")
        _wait_port(grpc, proc, "trajgrade serve (gRPC)")
        yield s
    finally:
        if proc.poll() is not None:  # stopped by the test or on its own: its output is in a failed test's report
            sys.stderr.write(
                f"trajgrade serve exited with {proc.returncode}:\n{out.read_text(errors='replace')[-8000:]}"
            )
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
