"""The sidecar under abusive clients and a hard kill: other clients unaffected, memory bounded, losses as documented."""

from __future__ import annotations

import gzip
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import requests

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "sidecar"))

from infra import free_port, serve, sink  # noqa: E402
from protobuf_bytes import varint  # noqa: E402
from test_requests import PROTOBUF, run_request  # noqa: E402

CONFIG = TESTS / "sidecar" / "graders.yaml"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_slow_clients_many_connections_and_bombs_do_not_starve_others(tmp_path: Path) -> None:
    with sink() as backend, serve(tmp_path, CONFIG, [backend.url], "--settle", "50ms") as sidecar:
        # 64 connections that send headers, then trickle a body they never finish
        slow = []
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", sidecar.http))
            s.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Content-Length: 1000000\r\n\r\n\x0a"
            )
            slow.append(s)
        bomb = gzip.compress(b"\0" * (200 * 1024 * 1024))
        before = rss_kib(sidecar.proc.pid)

        def bombard() -> None:
            for _ in range(20):
                r = requests.post(
                    f"{sidecar.url}/v1/traces", data=bomb, headers={**PROTOBUF, "Content-Encoding": "gzip"}, timeout=60
                )
                assert r.status_code == 413

        bombers = [threading.Thread(target=bombard) for _ in range(3)]
        for t in bombers:
            t.start()
        started = time.monotonic()
        for trace in range(1, 21):  # a well-behaved client meanwhile
            r = requests.post(
                f"{sidecar.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF, timeout=10
            )
            assert r.status_code == 200
        well_behaved = time.monotonic() - started
        for t in bombers:
            t.join(timeout=120)
        after = rss_kib(sidecar.proc.pid)
        for s in slow:
            s.close()
        assert backend.wait_for(20 * 7)
        assert requests.get(f"{sidecar.url}/healthz", timeout=5).status_code == 200
    assert well_behaved < 20, f"20 small requests took {well_behaved:.1f}s beside the abusive clients"
    assert after - before < 300 * 1024, f"RSS grew by {(after - before) // 1024} MiB under gzip bombs"


def test_a_hard_kill_loses_only_what_was_acknowledged_and_not_yet_forwarded(tmp_path: Path) -> None:
    """With the backend down, acknowledged spans wait in memory; SIGKILL loses them, and only them. Requests
    that were not acknowledged are the sender's to retry, and after a restart they all arrive."""
    with sink() as backend:
        backend.status = 503
        acknowledged = []
        with serve(tmp_path, CONFIG, [backend.url], "--settle", "50ms") as first:
            for trace in range(1, 6):
                r = requests.post(
                    f"{first.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF
                )
                assert r.status_code == 200
                acknowledged.append(trace)
            time.sleep(0.3)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(timeout=10)
        backend.status = 200
        with serve(tmp_path, CONFIG, [backend.url], "--settle", "50ms") as second:
            for trace in range(6, 11):  # what the sender still had, retried against the new process
                r = requests.post(
                    f"{second.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF
                )
                assert r.status_code == 200
            assert backend.wait_for(5 * 7)
            assert second.stop() == 0
    arrived_traces = {s.trace_id for s in backend.spans}
    assert arrived_traces == {t.to_bytes(16, "big") for t in range(6, 11)}
    assert free_port()  # the killed process released its ports


def test_a_slow_backend_does_not_slow_acknowledgements_and_everything_arrives(tmp_path: Path) -> None:
    with sink() as backend:
        backend.delay_s = 0.5
        with serve(tmp_path, CONFIG, [backend.url], "--settle", "50ms") as sidecar:
            started = time.monotonic()
            for trace in range(1, 31):
                r = requests.post(
                    f"{sidecar.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF
                )
                assert r.status_code == 200
            acknowledging = time.monotonic() - started
            assert backend.wait_for(30 * 7, timeout=120)
            assert sidecar.stop() == 0
    assert acknowledging < 10, f"30 requests took {acknowledging:.1f}s to acknowledge beside a 0.5 s/request backend"
    ids = backend.span_ids()
    assert len(ids) == 210 and set(ids.values()) == {1}


def _gzip_of_spans(copies: int, *, with_ids: bool) -> bytes:
    """One ScopeSpans of ``copies`` identical spans, gzipped: a few KiB that inflate to megabytes."""
    span = b"\x0a\x10" + b"\x01" * 16 + b"\x12\x08" + b"\x02" * 8 + b"\x22\x08" + b"\x03" * 8 if with_ids else b""
    spans = (b"\x12" + bytes([len(span)]) + span) * copies
    scope_spans = b"\x12" + varint(len(spans)) + spans
    body = b"\x0a" + varint(len(scope_spans)) + scope_spans
    return gzip.compress(body, 9)


def test_compressed_amplification_is_counted_before_a_span_is_read_and_never_blocks_others(tmp_path: Path) -> None:
    """4.2 MB of empty spans in 4 KiB of gzip (refused: a span needs its ids), 60 MB of 1.4 million spans in 160 KiB
    (refused for good: more spans than the buffer holds, counted before any is read), 150,000 spans
    (admitted). Memory stays bounded and the receiver answers other clients all along."""
    empty = _gzip_of_spans(2_100_000, with_ids=False)
    too_many = _gzip_of_spans(1_400_000, with_ids=True)
    admitted = _gzip_of_spans(150_000, with_ids=True)
    assert len(empty) < 8 * 1024 and len(too_many) < 256 * 1024
    gz = {**PROTOBUF, "Content-Encoding": "gzip"}
    with sink() as backend, serve(tmp_path, CONFIG, [backend.url], "--settle", "50ms") as sidecar:
        before = rss_kib(sidecar.proc.pid)
        slowest_health = 0.0
        answers: list[int] = []

        def bombard() -> None:
            for body in (empty, too_many, admitted, empty, too_many):
                r = requests.post(f"{sidecar.url}/v1/traces", data=body, headers=gz, timeout=60)
                answers.append(r.status_code)

        bomber = threading.Thread(target=bombard)
        bomber.start()
        while bomber.is_alive():
            started = time.monotonic()
            assert requests.get(f"{sidecar.url}/healthz", timeout=10).status_code == 200
            slowest_health = max(slowest_health, time.monotonic() - started)
            time.sleep(0.02)
        peak = rss_kib(sidecar.proc.pid)
        assert backend.wait_for(150_000, timeout=60)
    assert answers == [400, 413, 200, 400, 413]
    assert peak - before < 400 * 1024, f"RSS grew by {(peak - before) // 1024} MiB"
    assert slowest_health < 1.0, f"the health check waited {slowest_health:.2f}s behind the bombs"


def test_connections_that_never_finish_headers_or_body_are_closed(tmp_path: Path) -> None:
    with (
        sink() as backend,
        serve(tmp_path, CONFIG, [backend.url], "--header-timeout", "1s", "--body-timeout", "1s") as sidecar,
    ):
        silent = socket.create_connection(("127.0.0.1", sidecar.http))
        partial_headers = socket.create_connection(("127.0.0.1", sidecar.http))
        partial_headers.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        partial_body = socket.create_connection(("127.0.0.1", sidecar.http))
        partial_body.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 1000\r\n\r\n\x0a"
        )
        for s in (silent, partial_headers, partial_body):
            s.settimeout(10)
        started = time.monotonic()
        assert silent.recv(1024) == b""  # closed
        assert partial_headers.recv(1024) == b""
        answer = partial_body.recv(4096)
        waited = time.monotonic() - started
        for s in (silent, partial_headers, partial_body):
            s.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert waited < 5
        r = requests.post(f"{sidecar.url}/v1/traces", data=run_request(1).SerializeToString(), headers=PROTOBUF)
        assert r.status_code == 200
        metrics = sidecar.metrics_text()
    for reason in ("header_timeout", "body_timeout"):
        assert f'reason="{reason}"' in metrics, metrics
