"""Render the README's pictures with headless Chromium into ``docs/images/``.

    .venv/bin/python scripts/render_pictures.py [--only prometheus|phoenix|report] [--out docs/images]

* ``prometheus-grader-results.png``: Prometheus's graph of trajgrade's grader results. A real Prometheus server
  (Debian's ``prometheus``) scrapes a real trajgrade metrics endpoint: the demo's pydantic-ai agents, graded
  live by ``GradingSpanProcessor``, exposed with OpenTelemetry's ``PrometheusMetricReader``.
* ``phoenix-trace.png``: a trace with its ``gen_ai.evaluation.result`` events in Arize Phoenix. Phoenix is
  installed into its own venv ``.phoenix-venv`` when missing (about a minute), started on loopback ports, and
  sent the demo agents' spans over OTLP/HTTP with the grading processor in the export path.

* ``html-report.png``: ``trajgrade grade --format html`` of three framework fixtures, open in Chromium.

The helpers here (the metrics source, Prometheus, Chromium, a page driven over the DevTools protocol) are also
what ``tests/observability`` and ``tests/reports`` use.
Needs ``prometheus`` and ``chromium`` on PATH: ``make system-deps`` installs them.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "alerts" / "trajgrade-rules.yml"
DASHBOARD = ROOT / "examples" / "dashboards" / "trajgrade.json"
INSTALL_HINT = "run `make system-deps` (as root on Debian: apt-get install --no-install-recommends prometheus chromium)"

#: The graders of the metrics source: the demo's, plus a token budget the stuck agent breaks.
SOURCE_CONFIG = """
graders:
  - type: token-budget
    config: {max: 4000}
  - name: spend
    type: budget
    max_tokens: 1500
    max_tool_calls: 5
  - name: no-loops
    type: loop
    max_repeats: 3
  - type: max-repeat
    config: {max: 3, match: name-args}
  - name: perf
    type: execution_metrics
    max_tool_calls: 8
    max_llm_calls: 8
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise RuntimeError(f"`{binary}` is not installed: {INSTALL_HINT}")
    return path


def wait_http(url: str, proc: subprocess.Popen[bytes] | None, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except Exception as e:  # not up yet
            # Keep its text, not the exception: an HTTP error holds its connection, and the exception held here
            # (with its traceback, which holds this frame) would leave the socket to a later garbage collection.
            if isinstance(e, urllib.error.HTTPError):
                e.close()
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url} within {timeout}s: {last}")


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_browser(cmd: list[str]) -> subprocess.Popen[bytes]:
    """Chromium in a process group of its own (:func:`stop_browser` ends every process of it)."""
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_browser(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop Chromium and the processes it started (renderers, crash handler), which may still write to its profile
    directory after the browser process has exited: once this returns, none of them is left."""
    stop(proc, timeout)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------------------------
# The metrics source: the demo agents graded live, exposed for Prometheus.


def run_source(port: int, interval: float) -> None:
    """Run the demo agents every ``interval`` seconds with the grading processor; expose metrics on ``port``.

    The stuck agent loops and breaks the budgets; a span limit makes its runs partial (spans dropped, counted);
    an ``on_report`` callback that raises for it feeds ``trajgrade.internal_errors`` (the agent is unaffected).
    """
    sys.path.insert(0, str(ROOT / "examples"))
    from demo_agent import run_scenarios
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from prometheus_client import start_http_server

    from trajgrade import GradingSpanProcessor, parse_config
    from trajgrade.core.running import RunReport

    def faulty_callback(report: RunReport) -> None:
        if report.trajectory.agent_name == "stuck-agent":
            raise RuntimeError("a deliberately faulty on_report callback")

    start_http_server(port=port, addr="127.0.0.1")
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    provider = TracerProvider(resource=Resource.create({"service.name": "demo-agents"}))
    provider.add_span_processor(
        GradingSpanProcessor(
            parse_config(SOURCE_CONFIG, "render_pictures.SOURCE_CONFIG"),
            meter_provider=meter_provider,
            tracer_provider=provider,
            on_report=faulty_callback,
            max_spans_per_trace=12,
        )
    )
    stopping = False

    def on_term(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    while not stopping:
        run_scenarios(provider)
        provider.force_flush()
        time.sleep(interval)
    provider.shutdown()
    meter_provider.shutdown()


@contextmanager
def metrics_source(workdir: Path, interval: float = 1.0) -> Iterator[int]:
    """The metrics source as a subprocess; yields its metrics port once /metrics has trajgrade's series."""
    port = free_port()
    log = open(workdir / "source.out", "wb")
    cmd = [sys.executable, str(Path(__file__).resolve()), "source", "--port", str(port), "--interval", str(interval)]
    # The faulty callback checks that trajgrade swallows and counts its errors: keep them swallowed under pytest.
    env = {**os.environ, "TRAJGRADE_RAISE_INTERNAL_ERRORS": "0"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the metrics source exited with {proc.returncode}: see {workdir / 'source.out'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    if b"trajgrade_evaluations_total{" in r.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the metrics source exposed no trajgrade metrics within 60 s")
            time.sleep(0.2)
        yield port
    finally:
        stop(proc)
        log.close()


# ---------------------------------------------------------------------------------------------------------------
# Prometheus


class Prometheus:
    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.proc = proc
        self.url = f"http://127.0.0.1:{port}"

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{url}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        return list(data["result"]) if isinstance(data["result"], list) else [data["result"]]

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)


@contextmanager
def prometheus(workdir: Path, target_port: int, rule_files: list[Path] | None = None) -> Iterator[Prometheus]:
    """A real Prometheus server on a loopback port scraping ``127.0.0.1:target_port`` every second."""
    binary = need("prometheus")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files or []],
        "scrape_configs": [{"job_name": "trajgrade", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    log = open(workdir / "prometheus.out", "wb")
    cmd = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/-/ready", proc, "prometheus")
        yield Prometheus(port, proc)
    finally:
        stop(proc)
        log.close()


# ---------------------------------------------------------------------------------------------------------------
# Chromium


def screenshot(url: str, out: Path, workdir: Path, size: str = "1400,900", budget_ms: int = 5000) -> None:
    binary = need("chromium")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={workdir / 'chrome-profile'}",
        f"--window-size={size}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={out}",
        url,
    ]
    result = subprocess.run(cmd, capture_output=True, timeout=120)
    if result.returncode != 0 or not out.exists():
        raise RuntimeError(f"chromium failed ({result.returncode}): {result.stderr.decode()[-2000:]}")


#: Drives Chromium over the DevTools protocol: opens a page, clicks a tab, screenshots. Runs with the Phoenix
#: venv's Python, which has ``websockets``; argv: debugging port, url, out, tab label, width, height.
CDP_SHOT = r"""
import base64, json, sys, time, urllib.request
from websockets.sync.client import connect

port, url, out, label, width, height = sys.argv[1:7]
new_tab = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
tab = json.load(urllib.request.urlopen(new_tab))
ws = connect(tab["webSocketDebuggerUrl"], max_size=None).__enter__()
ids = iter(range(1, 10**6))

def call(method, **params):
    n = next(ids)
    ws.send(json.dumps({"id": n, "method": method, "params": params}))
    while True:
        msg = json.loads(ws.recv())
        if msg.get("id") == n:
            return msg.get("result", {})

def evaluate(js):
    return call("Runtime.evaluate", expression=js, returnByValue=True).get("result", {}).get("value")

call("Emulation.setDeviceMetricsOverride", width=int(width), height=int(height), deviceScaleFactor=1, mobile=False)
call("Page.enable")
call("Page.navigate", url=url)
find = "Array.from(document.querySelectorAll('[role=tab]'))"
find += ".find(e => e.textContent.trim().startsWith(%s))" % json.dumps(label)
deadline = time.time() + 60
while not evaluate(f"!!({find})"):
    if time.time() > deadline:
        sys.exit(f"no tab {label!r} on {url}")
    time.sleep(0.5)
evaluate(f"({find}).click()")
time.sleep(2)
# Open the first grader events, so their attributes show.
evaluate(
    "Array.from(document.querySelectorAll('[aria-expanded=false]'))"
    ".filter(e => e.textContent.includes('gen_ai.evaluation.result')).slice(0, 3).forEach(e => e.click())"
)
time.sleep(2)
open(out, "wb").write(base64.b64decode(call("Page.captureScreenshot", format="png")["data"]))
"""


def _chromium_with_devtools(profile: Path, size: tuple[int, int], port: int) -> list[str]:
    """Headless Chromium on about:blank, its DevTools protocol on a loopback port."""
    return [
        need("chromium"),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
        "--remote-debugging-address=127.0.0.1",
        f"--remote-debugging-port={port}",
        "about:blank",
    ]


def screenshot_tab(python: Path, url: str, tab: str, out: Path, workdir: Path, size: tuple[int, int]) -> None:
    """Open ``url`` in headless Chromium, click the tab labelled ``tab``, screenshot (DevTools protocol)."""
    port = free_port()
    cmd = _chromium_with_devtools(workdir / "chrome-cdp-profile", size, port)
    proc = start_browser(cmd)
    try:
        wait_http(f"http://127.0.0.1:{port}/json/version", proc, "chromium")
        out.parent.mkdir(parents=True, exist_ok=True)
        args = [str(port), url, str(out), tab, str(size[0]), str(size[1])]
        subprocess.run([str(python), "-c", CDP_SHOT, *args], check=True, timeout=120)
    finally:
        stop_browser(proc)


class Page:
    """A page in headless Chromium, driven over the DevTools protocol: load time, console errors and uncaught
    exceptions, script evaluation, screenshots."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = iter(range(1, 10**9))
        self.errors: list[str] = []  # console.error calls, uncaught exceptions, error log entries

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self._ids)
        self._ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._event(msg)

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(str(params.get("exceptionDetails", {}).get("exception", {}).get("description")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")))

    def evaluate(self, js: str) -> Any:
        result = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{js[:60]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def load(self, url: str, timeout: float = 30.0) -> float:
        """Navigate and wait for the load event; the milliseconds from navigation start to the end of load."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while self.evaluate("document.readyState") != "complete" or not self.evaluate(
            "performance.getEntriesByType('navigation')[0]?.loadEventEnd > 0"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not load within {timeout}s")
            time.sleep(0.05)
        return float(self.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))

    def screenshot(self, out: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))


@contextmanager
def browser_page(workdir: Path, size: tuple[int, int] = (1400, 900)) -> Iterator[Page]:
    """A fresh headless Chromium with one page, console and errors recorded from the start."""
    from websockets.sync.client import connect

    port = free_port()
    cmd = [*_chromium_with_devtools(workdir / "chrome-page-profile", size, port), "--allow-file-access-from-files"]
    proc = start_browser(cmd)
    try:
        wait_http(f"http://127.0.0.1:{port}/json/version", proc, "chromium")
        new_tab = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(new_tab, timeout=10) as r:
            tab = json.load(r)
        with connect(tab["webSocketDebuggerUrl"], max_size=None) as ws:
            page = Page(ws)
            width, height = size
            page.call(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
            for domain in ("Page", "Runtime", "Log"):
                page.call(f"{domain}.enable")
            yield page
    finally:
        stop_browser(proc)


def render_report(out_dir: Path, workdir: Path) -> Path:
    """The HTML report of the framework fixtures graded with the tests' graders file, a failed run at the top
    with its looping tool calls marked, one of them clicked open."""
    sys.path.insert(0, str(ROOT / "src"))
    from trajgrade import load_config
    from trajgrade.core.runfiles import read_runs
    from trajgrade.core.running import grade_run
    from trajgrade.reports.html import to_html

    fixtures = ROOT / "tests" / "fixtures"
    files = [
        fixtures / "langgraph" / "openinference" / f"{s}.json" for s in ("repeat_six", "delegation", "parallel_tools")
    ]
    config = load_config(ROOT / "tests" / "reports" / "graders.yaml")
    runs, _ = read_runs([str(f) for f in files])
    groups: dict[str, list[Any]] = {}
    for run in runs:
        groups.setdefault(str(Path(run.path).relative_to(ROOT)), []).append(grade_run(config, run.trajectory))
    page_file = workdir / "report.html"
    page_file.write_text(to_html(list(groups.items())), encoding="utf-8")
    out = out_dir / "html-report.png"
    with browser_page(workdir, (1400, 900)) as page:
        page.load(page_file.as_uri())
        page.evaluate("document.querySelector('tr.grader td').parentElement.click()")
        page.evaluate("document.querySelectorAll('.bar.evidence')[2].click()")
        page.screenshot(out)
    return out


def render_prometheus(out_dir: Path, workdir: Path, settle: float = 20.0) -> Path:
    """Prometheus's graph of grader results: results by agent and label (pass / fail), stacked."""
    with metrics_source(workdir) as source, prometheus(workdir, source, [RULES]) as prom:
        expr = "sum by (gen_ai_agent_name, gen_ai_evaluation_score_label) (trajgrade_evaluations_total)"
        if not prom.wait_for(expr):
            raise RuntimeError("Prometheus has no trajgrade samples after 30 s")
        time.sleep(settle)  # a line, not a dot
        params = {
            "g0.expr": expr,
            "g0.tab": "0",
            "g0.range_input": "30s",
            "g0.stacked": "1",
        }
        out = out_dir / "prometheus-grader-results.png"
        screenshot(f"{prom.url}/classic/graph?{urllib.parse.urlencode(params)}", out, workdir, size="1400,1000")
        return out


# ---------------------------------------------------------------------------------------------------------------
# Arize Phoenix

PHOENIX_VENV = ROOT / ".phoenix-venv"
PHOENIX_PROJECT = "trajgrade-demo"


def phoenix_binary() -> Path:
    exe = PHOENIX_VENV / "bin" / "phoenix"
    if not exe.exists():
        print(f"installing arize-phoenix into {PHOENIX_VENV} (about a minute)", file=sys.stderr)
        if not (PHOENIX_VENV / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(PHOENIX_VENV)], check=True)
        subprocess.run(
            [str(PHOENIX_VENV / "bin" / "python"), "-m", "pip", "install", "-q", "arize-phoenix"], check=True
        )
    return exe


@contextmanager
def phoenix(workdir: Path) -> Iterator[str]:
    exe = phoenix_binary()
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(workdir / "phoenix-data"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = open(workdir / "phoenix.out", "wb")
    proc = subprocess.Popen([str(exe), "serve"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc, "phoenix serve", timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


def send_demo_spans(endpoint: str) -> None:
    """The demo agents, graded by the processor in the export path, exported over OTLP/HTTP."""
    sys.path.insert(0, str(ROOT / "examples"))
    from demo_agent import run_scenarios
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from trajgrade import GradingSpanProcessor, parse_config

    resource = Resource.create({"service.name": "demo-agents", "openinference.project.name": PHOENIX_PROJECT})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(
        GradingSpanProcessor(
            parse_config(SOURCE_CONFIG, "render_pictures.SOURCE_CONFIG"),
            downstream=BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")),
            meter_provider=MeterProvider(),
        )
    )
    run_scenarios(provider, ["stuck"])
    provider.force_flush()
    provider.shutdown()


def _phoenix_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def render_phoenix(out_dir: Path, workdir: Path) -> Path:
    """The stuck agent's trace in Phoenix, its root span selected, showing the grader events."""
    with phoenix(workdir) as url:
        send_demo_spans(url)
        spans: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                spans = _phoenix_json(f"{url}/v1/projects/{PHOENIX_PROJECT}/spans?limit=100")["data"]
            except OSError:
                spans = []
            if any(not s.get("parent_id") for s in spans):
                break
            time.sleep(0.5)
        root = next((s for s in spans if not s.get("parent_id")), None)
        if root is None:
            raise RuntimeError("Phoenix did not receive the demo's root span within 30 s")
        trace_id = root["context"]["trace_id"]
        project_id = _phoenix_project_id(url)
        page = f"{url}/projects/{project_id}/traces/{trace_id}?selectedSpanNodeId={urllib.parse.quote(root['id'])}"
        out = out_dir / "phoenix-trace.png"
        screenshot_tab(PHOENIX_VENV / "bin" / "python", page, "Events", out, workdir, (1600, 1000))
        return out


def _phoenix_project_id(url: str) -> str:
    for project in _phoenix_json(f"{url}/v1/projects")["data"]:
        if project["name"] == PHOENIX_PROJECT:
            return str(project["id"])
    raise RuntimeError(f"Phoenix has no project {PHOENIX_PROJECT}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    src = sub.add_parser("source", help="run the metrics source (used by the picture and the tests)")
    src.add_argument("--port", type=int, required=True)
    src.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--only", choices=["prometheus", "phoenix", "report"])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of samples before the Prometheus shot")
    args = parser.parse_args(argv)
    if args.command == "source":
        run_source(args.port, args.interval)
        return 0
    with tempfile.TemporaryDirectory(prefix="trajgrade-pictures-") as tmp:
        workdir = Path(tmp)
        if args.only in (None, "prometheus"):
            print(render_prometheus(args.out, workdir, args.settle))
        if args.only in (None, "phoenix"):
            print(render_phoenix(args.out, workdir))
        if args.only in (None, "report"):
            print(render_report(args.out, workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
