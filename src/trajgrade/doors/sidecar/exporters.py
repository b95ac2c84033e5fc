"""OTLP exporters of the sidecar's own signals, by target URL: the metrics it pushes (``--push-metrics``) and the
log events it sends to each ``--forward`` target beside the spans.

A target is a base URL as in ``OTEL_EXPORTER_OTLP_ENDPOINT``: ``http(s)://host:port[/prefix]`` for OTLP/HTTP
protobuf (the signal's path, ``/v1/metrics`` or ``/v1/logs``, is added; a URL that names the traces path has it
replaced), or ``grpc://host:port`` for OTLP/gRPC, as the forwarder reads it. Log events to a plain-HTTP target go
through :class:`HttpLogExporter` (``log_wire`` encodes them, one keep-alive connection sends them, as the forwarder
sends spans); to HTTPS and gRPC targets, through the SDK's OTLP exporters.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter

from trajgrade.doors.sidecar.forward import RETRY_HTTP, HttpPost
from trajgrade.doors.sidecar.log_wire import encode_logs

__all__ = ["HttpLogExporter", "log_exporter", "metric_exporter"]

logger = logging.getLogger(__name__)

_TRACES = "/v1/traces"


class HttpLogExporter(LogRecordExporter):
    """OTLP/HTTP protobuf log export to a plain-HTTP endpoint: a batch is sent until the endpoint takes it or refuses
    it for good, retried with back-off (connection errors, HTTP 429/502/503/504) within ``timeout_s``."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0, max_backoff_s: float = 5.0) -> None:
        self._endpoint = endpoint
        self._post = HttpPost(endpoint, timeout_s)
        self._timeout_s = timeout_s
        self._max_backoff_s = max_backoff_s
        self._stopped = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if self._stopped.is_set():
            return LogRecordExportResult.FAILURE
        body = encode_logs(batch)
        if body is None:
            from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as sdk_encode_logs

            body = sdk_encode_logs(batch).SerializeToString()
        deadline = time.monotonic() + self._timeout_s
        backoff = 0.05
        while True:
            try:
                status = self._post(body)
                why = f"HTTP {status}"
            except (OSError, http.client.HTTPException) as e:
                status, why = 0, type(e).__name__
            if 200 <= status < 300:
                return LogRecordExportResult.SUCCESS
            if (status and status not in RETRY_HTTP) or time.monotonic() + backoff > deadline:
                logger.warning("trajgrade: %d log event(s) not taken by %s: %s", len(batch), self._endpoint, why)
                return LogRecordExportResult.FAILURE
            if self._stopped.wait(backoff):
                return LogRecordExportResult.FAILURE
            backoff = min(backoff * 2, self._max_backoff_s)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self._stopped.set()


def _endpoint(target: str, path: str, option: str) -> tuple[bool, str]:
    """Whether ``target`` is gRPC, and the endpoint its exporter takes for the signal at ``path``."""
    parts = urlsplit(target)
    if parts.scheme in ("http", "https"):
        base = target.rstrip("/").removesuffix(_TRACES)
        return False, base if base.endswith(path) else f"{base}{path}"
    if parts.scheme == "grpc":
        return True, parts.netloc
    raise ValueError(f"{option} {target!r}: use http://host:port, https://host:port or grpc://host:port")


def metric_exporter(target: str) -> MetricExporter:
    """The exporter of ``--push-metrics``."""
    grpc, endpoint = _endpoint(target, "/v1/metrics", "--push-metrics")
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

    return HttpExporter(endpoint=endpoint)


def log_exporter(target: str) -> LogRecordExporter:
    """The exporter of the log events sent to a ``--forward`` target."""
    grpc, endpoint = _endpoint(target, "/v1/logs", "--forward")
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure=True)
    if urlsplit(endpoint).scheme == "http":
        return HttpLogExporter(endpoint)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

    return HttpExporter(endpoint=endpoint)
