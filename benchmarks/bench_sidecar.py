"""Sustained throughput of ``trajgrade serve``: receive + assemble + grade + forward, beside its load generator.

Three receivers take the same load in one run, one after the other, each a single process on loopback:

- ``trajgrade serve`` forwarding every span to a rotel collector that drops them (``--exporter blackhole``);
- a bare Python OTLP/HTTP receiver (uvicorn + Starlette, as the sidecar) that parses each request, reads every
  attribute of every span and forwards the request's bytes to the same rotel, as the sidecar forwards (a queue
  and a sender thread, ``_bare.Forward``), then answers: the baseline for Python, parse, walk and forward;
- rotel itself, receiving and exporting to its blackhole: the collector's own pass-through.

And for reference, on the synthetic load: the sidecar once more with its Prometheus metrics endpoint on (what
recording its metrics in the OpenTelemetry SDK costs), and the same grading inside rotel, as its trace
processor (``trajgrade.doors.rotel``): the other way to run trajgrade beside a collector.

The load generator (another process, so the two cores are shared as in production beside a collector)
posts pre-encoded ``ExportTraceServiceRequest`` bodies over ``CONNECTIONS`` keep-alive connections for
``SECONDS`` seconds, in two shapes (``SHAPES``), each taken by trajgrade and by the bare receiver:

- synthetic runs: requests of ``SPANS_PER_REQUEST`` spans, 16 whole runs of a root, model calls with token
  counts and tool calls with arguments, five to eight small attributes a span;
- the test fixtures, traces the real instrumentation libraries recorded (message content, tool definitions,
  OpenInference's flattened attributes: up to 4 KB and 5 to 19 attributes a span), packed into requests of
  ``SPANS_PER_REQUEST`` spans or more.

Every request carries new trace ids (patched into a template's bytes), so every run is graded: a root the
sidecar has already seen is forwarded without grading.

Then ``PROCESSES`` sidecars take the synthetic load together, and as many bare receivers, the connections
spread over them. Every request holds whole traces, so this is the routing of the collector's load-balancing
exporter (``routing_key: traceID``) in front of a fleet on one machine.

Figures: acknowledged spans per second, p99 request latency, and the receiver's CPU time per span (from
``/proc``: steadier than throughput on a shared machine, and what the sidecar costs beside a collector), the
load generator's own CPU time per span, which should stay a small part of the receivers' (it shares their cores),
and the machine's cores left idle while the receiver took its full rate: a receiver that is one Python process runs
its threads under one interpreter lock, so it uses about one core, and at its full rate what the load generator and
rotel leave of the others is idle.

Each connection sends its next request as soon as the last is answered, so these p99s are taken at each receiver's
own full rate: with a fixed number of requests in flight, latency is that number over the rate (Little's law), and a
receiver at half the other's rate shows about twice its latency. For reference, the sidecar and the bare receiver
then take the same load at a set rate both carry, ``EQUAL_LOAD`` times the sidecar's rate just measured (requests
due at fixed times over the same connections, each timed from when it was due): their p99s there compare what a
collector sending the same traffic to either would wait.

Each sidecar says, as it stops, what it dropped from grading (``dropped``): nothing may be dropped at its buffers'
bounds, since a sidecar whose grading fell behind its receiving would drop runs there rather than slow down, and show
a rate it did not grade at.

For reference, beside each load's figure: the sidecar with the in-flight checks and the log events off
(``--no-in-flight --no-log-events``), grading each run at its root's end only: what those two cost in rate.

Targets, each with the sidecar's defaults (in-flight checks and log events on): trajgrade at least 0.8 times the
bare receiver's rate on both loads (``MIN_RATIO``); at least 80,000 spans/s from the sidecars this machine runs
(``PROCESSES``, one a core, ``MIN_FLEET_SPANS_PER_S``), as a fleet is sized, and 0.8 times the bare receivers'
rate there too; and a p99 request latency no worse than 1.5 times the bare receiver's (``MAX_P99_RATIO``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from _common import Figure, print_table

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SECONDS = float(os.environ.get("BENCH_SIDECAR_SECONDS", "10"))
CONNECTIONS = 4
TRACES_PER_REQUEST = 16
SPANS_PER_TRACE = 32  # a root, then 31 model and tool calls
SPANS_PER_REQUEST = TRACES_PER_REQUEST * SPANS_PER_TRACE
#: The synthetic load is also taken by this many sidecars, and by as many bare receivers.
PROCESSES = 2
#: The sidecar's rate, at least this times the bare receiver's; its p99 latency, at most this times the bare one's.
MIN_RATIO = 0.8
MAX_P99_RATIO = 1.5
#: The load both receivers take for the reference latency at an equal load, as a part of the sidecar's rate.
EQUAL_LOAD = 0.5
#: The rate of ``PROCESSES`` sidecars together, at least.
MIN_FLEET_SPANS_PER_S = 80_000

LOADGEN = textwrap.dedent(
    """
    import json, os, sys, threading, time, http.client
    sys.path.insert(0, sys.argv[4])
    from bench_sidecar import fixture_templates, machine_cpu, make_templates, with_new_trace_ids
    ports, seconds, connections = [int(p) for p in sys.argv[1].split(",")], float(sys.argv[2]), int(sys.argv[3])
    templates = make_templates(64) if sys.argv[5] == "synthetic" else fixture_templates()
    rate = float(sys.argv[6])  # requests a second, all connections together; 0: each sends as soon as answered
    ok, spans, refused, latencies, lock = [0], [0], [0], [], threading.Lock()
    start = time.perf_counter(); stop_at = start + seconds
    def worker(k):
        conn = http.client.HTTPConnection("127.0.0.1", ports[k % len(ports)], timeout=30)
        mine, i = [], k
        due = start + k / rate if rate else 0.0  # when the next request is due, at a set rate
        while time.perf_counter() < stop_at:
            template = templates[i % len(templates)]
            body = with_new_trace_ids(template, k, i); i += connections
            t0 = time.perf_counter()
            if rate:  # timed from when it was due, so that a late answer delays no request's timing
                if t0 < due: time.sleep(due - t0)
                t0, due = due, due + connections / rate
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            r = conn.getresponse(); r.read()
            mine.append(time.perf_counter() - t0)
            with lock:
                if r.status == 200: ok[0] += 1; spans[0] += template[2]
                else: refused[0] += 1
        with lock: latencies.extend(mine)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(connections)]
    t0, cpu0, machine0 = time.perf_counter(), time.process_time(), machine_cpu()
    for t in threads: t.start()
    for t in threads: t.join()
    elapsed, cpu, machine = time.perf_counter() - t0, time.process_time() - cpu0, machine_cpu()
    idle_cores = (machine[1] - machine0[1]) / (machine[0] - machine0[0]) * (os.cpu_count() or 1)
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else 0.0
    out = {"ok": ok[0], "spans": spans[0], "refused": refused[0], "elapsed": elapsed, "p99": p99, "cpu": cpu,
           "idle_cores": idle_cores}
    print(json.dumps(out))
    """
)

BARE = textwrap.dedent(
    """
    import sys, uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
    sys.path.insert(0, sys.argv[2])
    from _bare import Forward, read_every_attribute
    OK = ExportTraceServiceResponse().SerializeToString()
    forward = Forward(sys.argv[3]) if len(sys.argv) > 3 else None
    async def export(request):
        body = await request.body()
        read_every_attribute(body)
        if forward is not None and not forward.put(body):
            return Response(b"", 429, headers={"Retry-After": "1"})
        return Response(OK, media_type="application/x-protobuf")
    app = Starlette(routes=[Route("/v1/traces", export, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
    """
)


CONFIG = ROOT / "tests" / "sidecar" / "graders.yaml"
FIXTURES = ROOT / "tests" / "fixtures"
#: The two loads: the synthetic runs, and the fixtures (as their instrumentations recorded them: message
#: content, tool definitions, flattened OpenInference attributes) packed into requests of 512 spans or more.
SHAPES = {
    "synthetic": f"synthetic runs, {SPANS_PER_REQUEST}-span requests",
    "fixtures": f"real instrumentation traces (fixtures), {SPANS_PER_REQUEST}+ spans a request",
}


#: A request body, the trace ids in it, its number of spans, and where each trace id is in it: (offset, which).
Template = tuple[bytes, list[bytes], int, list[tuple[int, int]]]
Receiver = tuple[subprocess.Popen[bytes], int]  # a receiver's process and its port


def make_templates(n: int) -> list[Template]:
    """``n`` synthetic request bodies (TRACES_PER_REQUEST runs of SPANS_PER_TRACE spans each)."""
    return [_template(body) for body in make_bodies(n)]


def fixture_templates() -> list[Template]:
    """Every test fixture (traces the real instrumentation libraries made), packed into requests of at least
    SPANS_PER_REQUEST spans (the last one takes what is left)."""
    from trajgrade.doors.sidecar.otlp import decode_body

    files = sorted(p for p in FIXTURES.glob("*/*/*.json") if not p.name.endswith(".truth.json"))
    templates, pending, spans = [], b"", 0
    for path in files:
        request = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26)
        pending += request.body  # concatenated requests are one request holding both (protobuf merges them)
        spans += len(request.spans)
        if spans >= SPANS_PER_REQUEST:
            templates.append(_template(pending))
            pending, spans = b"", 0
    if pending:
        templates.append(_template(pending))
    return templates


def _template(body: bytes) -> Template:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    trace_ids = sorted({s.trace_id for s in spans})
    places = []  # in the body's order
    for t, trace_id in enumerate(trace_ids):
        at = body.find(trace_id)
        while at >= 0:
            places.append((at, t))
            at = body.find(trace_id, at + len(trace_id))
    return body, trace_ids, len(spans), sorted(places)


def with_new_trace_ids(template: Template, worker: int, sequence: int) -> bytes:
    """The template's body with each trace id replaced by one no other request uses.

    One copy of the body, the new ids joined in: the load generator shares the cores with the receiver it
    measures, so what it spends on a request is kept to a small part of what the receiver spends.
    """
    body, trace_ids, _, places = template
    new = [(worker + 1).to_bytes(8, "big") + (sequence * 1024 + t).to_bytes(8, "big") for t in range(len(trace_ids))]
    view, parts, end = memoryview(body), [], 0
    for at, t in places:
        parts += (view[end:at], new[t])
        end = at + 16
    parts.append(view[end:])
    return b"".join(parts)


def make_bodies(n: int) -> list[bytes]:
    """``n`` distinct request bodies, each of TRACES_PER_REQUEST whole runs."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    bodies = []
    t0 = 1_700_000_000_000_000_000
    for b in range(n):
        request = ExportTraceServiceRequest()
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "agent"
        ss = rs.scope_spans.add()
        ss.scope.name = "opentelemetry.instrumentation.openai_v2"
        for t in range(TRACES_PER_REQUEST):
            trace_id = os.urandom(16)
            root_id = os.urandom(8)
            for i in range(SPANS_PER_TRACE - 1):
                span = ss.spans.add(
                    trace_id=trace_id,
                    span_id=os.urandom(8),
                    parent_span_id=root_id,
                    start_time_unix_nano=t0 + i * 1_000_000,
                    end_time_unix_nano=t0 + i * 1_000_000 + 900_000,
                    kind=3,
                )
                a = span.attributes
                if i % 2 == 0:
                    span.name = "chat gpt-4o-mini"
                    a.add(key="gen_ai.operation.name").value.string_value = "chat"
                    a.add(key="gen_ai.provider.name").value.string_value = "openai"
                    a.add(key="gen_ai.request.model").value.string_value = "gpt-4o-mini"
                    a.add(key="gen_ai.response.model").value.string_value = "gpt-4o-mini-2024-07-18"
                    a.add(key="gen_ai.usage.input_tokens").value.int_value = 100 + i
                    a.add(key="gen_ai.usage.output_tokens").value.int_value = 20
                    a.add(
                        key="gen_ai.response.finish_reasons"
                    ).value.array_value.values.add().string_value = "tool_calls"
                    a.add(key="server.address").value.string_value = "api.openai.com"
                else:
                    span.name = "execute_tool search"
                    a.add(key="gen_ai.operation.name").value.string_value = "execute_tool"
                    a.add(key="gen_ai.tool.name").value.string_value = "search"
                    a.add(key="gen_ai.tool.call.id").value.string_value = f"call_{b}_{t}_{i}"
                    a.add(key="gen_ai.tool.call.arguments").value.string_value = json.dumps(
                        {"query": f"topic {i // 4}", "page": i % 5}
                    )
                    a.add(key="gen_ai.tool.call.result").value.string_value = json.dumps({"items": [i, i + 1]})
            root = ss.spans.add(
                trace_id=trace_id,
                span_id=root_id,
                name="invoke_agent researcher",
                start_time_unix_nano=t0,
                end_time_unix_nano=t0 + SPANS_PER_TRACE * 1_000_000,
            )
            root.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
            root.attributes.add(key="gen_ai.agent.name").value.string_value = "researcher"
        bodies.append(request.SerializeToString())
    return bodies


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def rotel(workdir: Path, http_port: int, *, grading: bool = False) -> subprocess.Popen[bytes]:
    """rotel exporting to its blackhole; with ``grading``, trajgrade runs inside it as its trace processor."""
    import rotel as rotel_package

    binary = Path(rotel_package.__file__).parent / "rotel-agent"
    cmd = [
        str(binary),
        "start",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{free_port()}",
        "--otlp-http-endpoint",
        f"127.0.0.1:{http_port}",
        "--exporter",
        "blackhole",
        "--pid-file",
        str(workdir / f"rotel-{http_port}.pid"),
        "--log-file",
        str(workdir / f"rotel-{http_port}.log"),
    ]
    env = dict(os.environ)
    if grading:
        import trajgrade.doors.rotel as processor

        cmd += ["--otlp-with-trace-processor", processor.__file__]
        env.update(TRAJGRADE_CONFIG=str(CONFIG), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_port(http_port, proc)
    return proc


def load(ports: Sequence[int], shape: str = "synthetic", rate: float = 0.0) -> dict[str, float]:
    """The load generator's figures; its connections are spread over ``ports``. ``rate``: requests a second, all
    connections together (0: as many as the receiver answers). ``idle_cores``: the machine's cores left idle while
    the load ran (0 when the receivers, the load generator and the collector they forward to kept every core busy)."""
    ports_arg = ",".join(map(str, ports))
    here = str(Path(__file__).parent)
    out = subprocess.run(
        [sys.executable, "-c", LOADGEN, ports_arg, str(SECONDS), str(CONNECTIONS), here, shape, str(rate)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    result["spans_per_s"] = result["spans"] / result["elapsed"]
    result["load_cpu_us_per_span"] = result["cpu"] / max(1, result["spans"]) * 1e6
    return result


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[int, int]:
    """Clock ticks of every core so far, and of those spent idle (Linux: ``/proc/stat``'s first line; its guest
    times are already in its user times, so only the eight before them count)."""
    ticks = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(ticks), ticks[3] + ticks[4]  # idle and waiting on I/O


def load_process(
    procs: Sequence[subprocess.Popen[bytes]], ports: Sequence[int], shape: str, rate: float = 0.0
) -> dict[str, float]:
    """``load`` against receiver processes, with their CPU microseconds (all of them) per acknowledged span."""
    before = sum(cpu_seconds(p.pid) for p in procs)
    result = load(ports, shape, rate)
    result["cpu_us_per_span"] = (sum(cpu_seconds(p.pid) for p in procs) - before) / max(1, result["spans"]) * 1e6
    return result


def serve(forward: str, settle: str = "100ms", *options: str) -> Receiver:
    """``trajgrade serve`` with this benchmark's config on a free port, forwarding to ``forward``."""
    port = free_port()
    cmd = [str(BIN / "trajgrade"), "serve", "--config", str(CONFIG), "--otlp-http", f"127.0.0.1:{port}"]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [*cmd, "--forward", forward, "--settle", settle, *options], stdout=subprocess.DEVNULL, stderr=log
    )
    _LOGS[proc.pid] = log
    wait_port(port, proc)
    return proc, port


#: What each ``trajgrade serve`` started here logs, by process id, read when it has stopped (``dropped``).
_LOGS: dict[int, IO[bytes]] = {}
#: The reasons a sidecar drops a trace or a span at its buffers' bounds (others: a trace whose root never came, graded
#: as partial when it stops, as some fixtures' are).
_BOUNDS = {"max_traces", "max_spans_per_trace", "max_buffered_bytes", "queue_full"}


def dropped(proc: subprocess.Popen[bytes]) -> int:
    """The traces and spans a stopped ``trajgrade serve`` dropped at its buffers' bounds, by the line it logs as it
    stops (0 for another receiver): a sidecar whose grading fell behind its receiving would drop runs there, rather
    than slow down."""
    log = _LOGS.pop(proc.pid, None)
    if log is None:
        return 0
    log.seek(0)
    text = log.read().decode(errors="replace")
    log.close()
    found = re.search(r"stopped: .*; traces or spans dropped: ([^;]*);", text)
    if found is None:
        raise RuntimeError(f"trajgrade serve did not say what it dropped as it stopped:\n{text[-2000:]}")
    return sum(int(n) for reason, n in re.findall(r"(\w+) (\d+)", found.group(1)) if reason in _BOUNDS)


#: ``serve``'s metrics on a Prometheus endpoint (nothing scrapes it: recording them is the cost).
_METRICS = ("--metrics-port", "0")
#: The sidecar grading at the roots' ends only: no in-flight checks, no log events.
_GRADING_ONLY = ("--no-in-flight", "--no-log-events")


def bare(forward: str | None = None) -> Receiver:
    """The bare receiver on a free port, forwarding every request to ``forward`` (an OTLP/HTTP base URL)."""
    port = free_port()
    args = [str(port), str(Path(__file__).parent), *([forward] if forward else [])]
    proc = subprocess.Popen([sys.executable, "-c", BARE, *args])
    wait_port(port, proc)
    return proc, port


def _start(receiver: Callable[[], Receiver], n: int) -> list[Receiver]:
    """``n`` receivers, or none (those started are stopped when one fails to start)."""
    started: list[Receiver] = []
    try:
        for _ in range(n):
            started.append(receiver())
    except BaseException:
        for proc, _port in started:
            stop(proc)
        raise
    return started


def figures() -> list[Figure]:
    from trajgrade.doors.sidecar.server import protobuf_backend_warning

    slow = protobuf_backend_warning()
    if slow:
        raise SystemExit(slow)
    results: dict[tuple[str, str, int], dict[str, float]] = {}
    runs = [(shape, 1) for shape in SHAPES] + [("synthetic", PROCESSES)]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sink_port = free_port()
        sink = rotel(workdir, sink_port)
        try:
            sink_url = f"http://127.0.0.1:{sink_port}"
            for shape, n in runs:
                receivers = [("trajgrade", lambda: serve(sink_url)), ("bare", lambda: bare(sink_url))]
                if n == 1:  # and grading at the roots' ends only
                    receivers.append(("grading only", lambda: serve(sink_url, "100ms", *_GRADING_ONLY)))
                if (shape, n) == ("synthetic", 1):  # and once with the metrics a deployment scrapes
                    receivers.append(("trajgrade+metrics", lambda: serve(sink_url, "100ms", *_METRICS)))
                for name, receiver in receivers:
                    results[(name, shape, n)] = _measure(receiver, n, shape)
                if n == 1:  # then both at a rate both carry: half the sidecar's, as it was just measured
                    sidecar = results[("trajgrade", shape, n)]
                    rate = EQUAL_LOAD * sidecar["ok"] / sidecar["elapsed"]
                    for name, receiver in receivers[:2]:
                        results[(f"{name} at an equal load", shape, n)] = _measure(receiver, n, shape, rate)
        finally:
            stop(sink)
        for name, grading in (("rotel", False), ("rotel+trajgrade", True)):
            port = free_port()
            collector = rotel(workdir, port, grading=grading)
            try:
                results[(name, "synthetic", 1)] = load_process([collector], [port], "synthetic")
            finally:
                stop(collector)
    figs = []
    for shape, n in runs:
        t, b = results[("trajgrade", shape, n)], results[("bare", shape, n)]
        label = SHAPES[shape] if n == 1 else f"{SHAPES[shape]}, {n} processes of each"
        fast = t["spans_per_s"] >= MIN_RATIO * b["spans_per_s"]
        if n == 1:
            rate_target = f">= {MIN_RATIO}x bare"
        else:
            rate_target = f">= {MIN_FLEET_SPANS_PER_S} and >= {MIN_RATIO}x bare"
            fast = fast and t["spans_per_s"] >= MIN_FLEET_SPANS_PER_S
        figs += [
            Figure(
                f"sidecar: receive+assemble+grade+forward, {label}",
                t["spans_per_s"],
                "spans/s",
                rate_target,
                fast,
                b["spans_per_s"],
                "bare Python receiver",
            ),
            Figure(
                "  sidecar p99 request latency",
                t["p99"] * 1000,
                "ms",
                f"<= {MAX_P99_RATIO}x bare",
                t["p99"] <= MAX_P99_RATIO * b["p99"],
                b["p99"] * 1000,
                "bare receiver",
            ),
            Figure(
                "  sidecar CPU per span",
                t["cpu_us_per_span"],
                "us",
                "-",
                True,
                b["cpu_us_per_span"],
                "bare receiver",
            ),
            Figure(
                "  cores left idle on the machine meanwhile",
                t["idle_cores"],
                "cores",
                "-",
                True,
                b["idle_cores"],
                "beside the bare receiver",
            ),
            Figure("  sidecar requests refused (429)", t["refused"], "", "-", True),
            Figure(
                "  sidecar traces or spans dropped at its buffers' bounds", t["dropped"], "", "= 0", t["dropped"] == 0
            ),
            Figure(
                "  the load generator's own CPU per span, beside the sidecar",
                t["load_cpu_us_per_span"],
                "us",
                "-",
                True,
                b["load_cpu_us_per_span"],
                "beside the bare receiver",
            ),
        ]
        if n == 1:
            te, be = results[("trajgrade at an equal load", shape, n)], results[("bare at an equal load", shape, n)]
            figs.append(
                Figure(
                    f"  reference: p99 at an equal load both carry ({te['spans_per_s']:,.0f} spans/s, half the"
                    " sidecar's rate)",
                    te["p99"] * 1000,
                    "ms",
                    "-",
                    True,
                    be["p99"] * 1000,
                    "bare receiver",
                )
            )
            figs += _reference(
                f"the sidecar with the in-flight checks and the log events off, {label}",
                results[("grading only", shape, n)],
                b,
            )
    b = results[("bare", "synthetic", 1)]
    figs += _reference(
        f"the sidecar with its Prometheus endpoint on, {SHAPES['synthetic']}",
        results[("trajgrade+metrics", "synthetic", 1)],
        b,
    )
    r = results[("rotel", "synthetic", 1)]
    figs += [
        Figure(f"reference: rotel pass-through, {SHAPES['synthetic']}", r["spans_per_s"], "spans/s", "-", True),
        Figure("  reference: rotel p99 request latency", r["p99"] * 1000, "ms", "-", True),
        Figure("  reference: rotel CPU per span", r["cpu_us_per_span"], "us", "-", True),
    ]
    figs += _reference(
        f"trajgrade inside rotel (its trace processor), {SHAPES['synthetic']}",
        results[("rotel+trajgrade", "synthetic", 1)],
        b,
    )
    return figs


def _measure(receiver: Callable[[], Receiver], n: int, shape: str, rate: float = 0.0) -> dict[str, float]:
    """``load_process`` against ``n`` receivers started for it (and stopped after)."""
    started = _start(receiver, n)
    try:
        result = load_process([p for p, _ in started], [port for _, port in started], shape, rate)
    finally:
        for proc, _port in started:
            stop(proc)
    result["dropped"] = sum(dropped(proc) for proc, _port in started)
    return result


def _reference(label: str, r: dict[str, float], bare_result: dict[str, float]) -> list[Figure]:
    """A reference load's rate, p99 latency and CPU per span beside the bare receiver's, without a target."""
    return [
        Figure(
            f"reference: {label}",
            r["spans_per_s"],
            "spans/s",
            "-",
            True,
            bare_result["spans_per_s"],
            "bare Python receiver",
        ),
        Figure("  p99 request latency", r["p99"] * 1000, "ms", "-", True, bare_result["p99"] * 1000, "bare receiver"),
        Figure(
            "  CPU per span", r["cpu_us_per_span"], "us", "-", True, bare_result["cpu_us_per_span"], "bare receiver"
        ),
    ]


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
