"""Faults around trajgrade: bad configs at start, a config that changes while running, SIGTERM under load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "sidecar"))

from infra import BIN, free_port, serve, sink  # noqa: E402
from test_requests import PROTOBUF, run_request  # noqa: E402

ROOT = TESTS.parent
BAD = "graders:\n  - type: token-budget\n    config:\n      max: lots\n"


def test_serve_with_a_bad_config_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(BAD)
    out = subprocess.run(
        [str(BIN / "trajgrade"), "serve", "--config", str(config), "--otlp-http", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert f"{config}:4: graders[0] (token-budget): config.max:" in out.stderr
    assert "Traceback" not in out.stderr
    missing = subprocess.run(
        [str(BIN / "trajgrade"), "serve", "--config", str(tmp_path / "nope.yaml"), "--otlp-http", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "nope.yaml: cannot read" in missing.stderr


def test_serve_on_protobufs_pure_python_backend_says_so_and_still_serves(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - type: token-budget\n    config: {max: 100}\n")
    with serve(tmp_path, config, [], env={"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}) as s:
        body = run_request(1).SerializeToString()
        assert requests.post(f"{s.url}/v1/traces", body, headers=PROTOBUF, timeout=30).ok
        assert s.stop() == 0
    log = s.out.read_text()
    assert "protobuf runs on its 'python' backend (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python is set)" in log


def test_a_bad_config_in_the_agent_leaves_it_running_ungraded(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(BAD)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    env.update(
        TRAJGRADE_CONFIG=str(config),
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
    )
    out = subprocess.run(
        [str(BIN / "opentelemetry-instrument"), sys.executable, str(ROOT / "tests/apps/zero_code_app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "trajgrade: not grading:" in out.stderr and "graders[0] (token-budget)" in out.stderr
    assert '"name": "invoke_agent stuck-agent"' in out.stdout  # the app ran and exported its spans
    assert "evaluation stuck-agent" not in out.stdout


def test_a_config_changed_while_serving_is_not_half_applied(tmp_path: Path) -> None:
    """The sidecar grades with the config it started with, whole; a restart applies a new one."""
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - {name: before, type: token-budget, max: 100000}\n")
    with sink() as backend, serve(tmp_path, config, [backend.url], "--settle", "50ms") as sidecar:
        post = lambda trace: requests.post(  # noqa: E731
            f"{sidecar.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF, timeout=10
        )
        assert post(1).status_code == 200
        config.write_text(BAD)  # half-written, then broken: neither may leak into grading
        assert post(2).status_code == 200
        assert backend.wait_for(14)
    names = {
        kv.value.string_value
        for s in backend.spans
        for e in s.events
        for kv in e.attributes
        if kv.key == "gen_ai.evaluation.name"
    }
    assert names == {"before"}


def test_sigterm_under_load_delivers_every_acknowledged_span(tmp_path: Path) -> None:
    acknowledged: list[int] = []
    stop = threading.Event()
    config = ROOT / "tests" / "sidecar" / "graders.yaml"
    with sink() as backend, serve(tmp_path, config, [backend.url], "--settle", "100ms") as sidecar:

        def load() -> None:
            session = requests.Session()
            trace = 1000
            while not stop.is_set():
                trace += 1
                try:
                    r = session.post(
                        f"{sidecar.url}/v1/traces", data=run_request(trace).SerializeToString(), headers=PROTOBUF
                    )
                except requests.ConnectionError:
                    return  # the server stopped listening
                if r.status_code == 200:
                    acknowledged.append(trace)

        sender = threading.Thread(target=load)
        sender.start()
        time.sleep(1.5)
        sidecar.proc.send_signal(signal.SIGTERM)
        code = sidecar.proc.wait(timeout=60)
        stop.set()
        sender.join(timeout=30)
    assert code == 0
    assert len(acknowledged) > 10
    received = backend.span_ids()
    assert set(received.values()) == {1}
    assert len(received) == 7 * len(acknowledged)
    # and it says so as it stops: every acknowledged run graded (those held then, as partial), nothing dropped
    summary = f"stopped: {len(acknowledged)} runs graded; traces or spans dropped: none; internal errors: none; "
    assert summary + "every span delivered" in sidecar.out.read_text(), sidecar.out.read_text()[-2000:]


def test_serve_says_as_it_stops_what_it_dropped_by_reason(tmp_path: Path) -> None:
    """Three runs of six spans whose roots never come, into buffers for two traces: the third run's spans are dropped
    (each counted, as the metric counts them), the two others are graded as partial when the sidecar stops (their
    roots never came), and the line it logs says both."""
    config = ROOT / "tests" / "sidecar" / "graders.yaml"
    with sink() as backend, serve(tmp_path, config, [backend.url], "--max-traces", "2") as sidecar:
        for trace in (1, 2, 3):
            body = run_request(trace, with_root=False).SerializeToString()
            assert requests.post(f"{sidecar.url}/v1/traces", data=body, headers=PROTOBUF).status_code == 200
        assert backend.wait_for(18)  # forwarded whole, dropped from grading or not
        assert sidecar.stop() == 0
    out = sidecar.out.read_text()
    dropped = "traces or spans dropped: max_traces 6, open_at_shutdown 2"
    assert f"stopped: 2 runs graded; {dropped}; internal errors: none;" in out, out[-2000:]


def test_a_failure_in_trajgrade_itself_exits_3_with_its_traceback_not_1() -> None:
    # A bug cannot be made of real parts: here a command is replaced by one that raises, in the program's process.
    program = (
        "from trajgrade.doors import cli\n"
        "def broken(args):\n"
        "    raise RuntimeError('a bug')\n"
        "cli.cmd_graders = broken\n"
        "cli.run()\n"
    )
    out = subprocess.run([sys.executable, "-c", program, "graders"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3  # 1 says a run failed its graders
    assert "RuntimeError: a bug" in out.stderr
    assert out.stderr.rstrip().endswith("trajgrade: internal error (the traceback above): please report it")
