"""OTLP receivers: HTTP (a Starlette app served by uvicorn) and gRPC (grpcio with opentelemetry-proto's service).

Both hand a parsed ``ExportTraceServiceRequest`` to :meth:`Pipeline.submit`. Answers follow the OTLP
specification: success with an ``ExportTraceServiceResponse``; a full buffer is HTTP 429 with
``Retry-After`` / gRPC ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` detail, which collectors retry; a request
larger than the buffer could ever hold is HTTP 413 / ``RESOURCE_EXHAUSTED`` without ``RetryInfo``, not retried; a bad
request is HTTP 400/413/415 / gRPC ``INVALID_ARGUMENT`` with a message that names the problem, and is not
retried. Optional bearer-token auth (401 / ``UNAUTHENTICATED``).

Slow clients are bounded in time: a connection whose request headers are not complete ``header_timeout_s`` after
it opened (or after its last response) is closed, and a body not received within ``body_timeout_s`` is answered
408 and its connection closed. The body is checked, admitted and read on a worker thread, never on the event
loop that serves the other connections (two threads for it, whatever the number of connections).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from trajgrade.doors.sidecar.otlp import BadRequest, decode_body, encode_response, parse_protobuf
from trajgrade.doors.sidecar.pipeline import Pipeline, TooLarge

__all__ = ["Limits", "grpc_server", "http_app", "http_protocol"]

RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Limits:
    max_request_bytes: int = 16 * 1024 * 1024
    max_decompressed_bytes: int = 64 * 1024 * 1024
    auth_token: str | None = None
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0


def _authorized(header: str | None, token: str | None) -> bool:
    if token is None:
        return True
    return header is not None and hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


def http_app(pipeline: Pipeline, limits: Limits) -> Starlette:
    # Bodies are decompressed, checked and admitted on two threads of their own: off the event loop, and few
    # (each thread that allocates large buffers keeps a malloc arena of its own).
    parsers = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="trajgrade-http-parse")

    async def export(request: Request) -> Response:
        if not _authorized(request.headers.get("authorization"), limits.auth_token):
            pipeline.metrics.refused.add(1, {"reason": "unauthorized"})
            return PlainTextResponse("missing or wrong bearer token", 401, headers={"WWW-Authenticate": "Bearer"})
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            async with asyncio.timeout(limits.body_timeout_s):
                body = await _read_body(request, limits.max_request_bytes)
        except TimeoutError:
            pipeline.metrics.refused.add(1, {"reason": "body_timeout"})
            message = f"the body did not arrive within {limits.body_timeout_s:g}s"
            return PlainTextResponse(message, 408, headers={"Connection": "close"})
        except BadRequest as e:
            pipeline.metrics.refused.add(1, {"reason": "bad_request"})
            return PlainTextResponse(e.message, e.status)
        try:
            admitted = await asyncio.get_running_loop().run_in_executor(
                parsers, _admit, pipeline, request.headers, body, limits
            )
        except BadRequest as e:
            pipeline.metrics.refused.add(1, {"reason": "bad_request"})
            return PlainTextResponse(e.message, e.status)
        except TooLarge as e:
            return PlainTextResponse(str(e), 413)
        if not admitted:
            return PlainTextResponse(
                "trajgrade is at capacity: retry later", 429, headers={"Retry-After": str(RETRY_AFTER_S)}
            )
        content, content_type = encode_response(media)
        return Response(content, 200, media_type=content_type)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        return PlainTextResponse("ready") if pipeline.accepting else PlainTextResponse("stopping", 503)

    return Starlette(
        routes=[
            Route("/v1/traces", export, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
        ]
    )


def _admit(pipeline: Pipeline, headers: Any, body: bytes, limits: Limits) -> bool:
    trace_request = decode_body(
        body,
        headers.get("content-type", ""),
        headers.get("content-encoding", ""),
        max_decompressed=limits.max_decompressed_bytes,
    )
    return pipeline.submit(trace_request, "http")


def http_protocol(header_timeout_s: float, on_timeout: Callable[[], None]) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools) with a time limit on request headers, which it does not have: a
    connection that opened, or finished a response, and has not sent a request's headers within
    ``header_timeout_s`` is closed (uvicorn's keep-alive timer is cancelled by the first byte of a request)."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _headers_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._headers_timer = self.loop.call_later(header_timeout_s, self._headers_timed_out)

        def _disarm(self) -> None:
            if self._headers_timer is not None:
                self._headers_timer.cancel()
                self._headers_timer = None

        def _headers_timed_out(self) -> None:
            self._headers_timer = None
            idle = self.cycle is None or self.cycle.response_complete
            if idle and not self.transport.is_closing():
                on_timeout()
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"body of {declared} bytes is over the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class _TraceService:
    """OTLP's ``TraceService/Export`` on raw bytes, so that a body that is not protobuf is INVALID_ARGUMENT."""

    def __init__(self, pipeline: Pipeline, limits: Limits) -> None:
        self._pipeline = pipeline
        self._limits = limits

    def export(self, body: bytes, context: Any) -> bytes:
        metadata = dict(context.invocation_metadata())
        if not _authorized(metadata.get("authorization"), self._limits.auth_token):
            self._pipeline.metrics.refused.add(1, {"reason": "unauthorized"})
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            request = parse_protobuf(body)
        except BadRequest as e:
            self._pipeline.metrics.refused.add(1, {"reason": "bad_request"})
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        try:
            admitted = self._pipeline.submit(request, "grpc")
        except TooLarge as e:  # RESOURCE_EXHAUSTED without RetryInfo: OTLP senders do not retry it
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        if not admitted:
            retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=RETRY_AFTER_S))
            status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="trajgrade is at capacity")
            status.details.add().Pack(retry)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "trajgrade is at capacity: retry later")
        return _EMPTY_RESPONSE


_EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()
_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def grpc_server(
    pipeline: Pipeline, limits: Limits, address: str, credentials: grpc.ServerCredentials | None = None
) -> grpc.Server:
    """A gRPC server (not started) with OTLP's trace service."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="trajgrade-grpc"),
        options=[
            ("grpc.max_receive_message_length", limits.max_request_bytes),
            ("grpc.max_send_message_length", 1024 * 1024),
            ("grpc.server_handshake_timeout_ms", int(limits.header_timeout_s * 1000)),
        ],
        maximum_concurrent_rpcs=64,
    )
    service = _TraceService(pipeline, limits)
    handler = grpc.method_handlers_generic_handler(
        _SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(service.export)}
    )
    server.add_generic_rpc_handlers((handler,))
    if credentials is not None:
        server.add_secure_port(address, credentials)
    else:
        server.add_insecure_port(address)
    return server
