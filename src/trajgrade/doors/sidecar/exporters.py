"""The OTLP exporter of the metrics the sidecar pushes (``--push-metrics``), by target URL.

A target is a base URL as in ``OTEL_EXPORTER_OTLP_ENDPOINT``: ``http(s)://host:port[/prefix]`` for OTLP/HTTP
protobuf (``/v1/metrics`` is added; a URL that names the traces path has it replaced), or ``grpc://host:port`` for
OTLP/gRPC, as the forwarder reads it. (The log events go with the spans: ``log_wire``.)
"""

from __future__ import annotations

from urllib.parse import urlsplit

from opentelemetry.sdk.metrics.export import MetricExporter

__all__ = ["metric_exporter"]

_TRACES = "/v1/traces"


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
