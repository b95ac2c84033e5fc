"""A user's own pytest suite, running an agent that trajgrade grades in-process, never gets an exception from
trajgrade, whatever fails inside it.

The user's suite is a real pytest run in a subprocess: a test file in a temporary directory with its own
``pytest.ini`` (``filterwarnings = error``, as many projects set it, so that an exception escaping trajgrade's
grading thread, which pytest reports as a ``PytestUnhandledThreadExceptionWarning``, fails the user's test too),
none of this project's conftest, and an environment without ``TRAJGRADE_RAISE_INTERNAL_ERRORS``. Each of the
user's tests builds its own ``TracerProvider`` (not the global one), adds ``trajgrade.GradingSpanProcessor`` and
runs a real pydantic-ai agent (its ``TestModel``: no network) instrumented on that provider, with one failure
injected inside trajgrade:

- ``on_report``: the user's ``on_report`` callback raises;
- ``grader``: the ``loop`` grader's spec has its grade function replaced by one that raises;
- ``normalize``: a span whose attributes (``app.poison``, set by the agent's tool on its own span) make
  normalization fail (the processor's intake, ``sdk_intake``, is patched where the processor looks it up, to fail
  as it does when normalizing a span fails: with ``UnreadableSpan`` from the error).

Each is run with ``worker=True`` and ``worker=False``. The positive control runs the same suite with
``TRAJGRADE_RAISE_INTERNAL_ERRORS=1``: the user's tests then fail with the injected errors, which shows that the
injections reach trajgrade's own error handling (a grader's exception is the exception: trajgrade turns it into
an ``error`` result whatever the switch says, and the user's test checks that result).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

USERS_TEST = '''\
"""The user's tests of their support agent, graded by trajgrade in-process."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

import trajgrade
import trajgrade.doors.processor
from trajgrade.core.collector import UnreadableSpan
from trajgrade.core.graders.catalogue import lookup

WORKER = __WORKER__
CONFIG = "graders:\\n  - name: no-loops\\n    type: loop\\n    max_repeats: 3\\n"
ANSWER = '{"search":"no results"}'  # TestModel calls each tool once, then answers with their results


def run_agent(provider: TracerProvider, *, poison: bool = False) -> str:
    instrumentation = Instrumentation(InstrumentationSettings(tracer_provider=provider))
    agent = Agent(TestModel(), name="support-agent", capabilities=[instrumentation])

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the knowledge base."""
        if poison:
            trace.get_current_span().set_attribute("app.poison", True)
        return "no results"

    return agent.run_sync("Where is my parcel?").output


def graded_provider(exporter: InMemorySpanExporter, **kwargs) -> TracerProvider:
    provider = TracerProvider()
    config = trajgrade.parse_config(CONFIG)
    provider.add_span_processor(
        trajgrade.GradingSpanProcessor(config, worker=WORKER, tracer_provider=provider, **kwargs)
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def app_spans(exporter: InMemorySpanExporter) -> list[str]:
    return [s.name for s in exporter.get_finished_spans() if not s.name.startswith("evaluation ")]


def test_on_report_callback_that_raises() -> None:
    seen = []

    def on_report(report) -> None:
        seen.append(report)
        raise RuntimeError("the user's callback failed")

    exporter = InMemorySpanExporter()
    provider = graded_provider(exporter, on_report=on_report)
    assert run_agent(provider) == ANSWER
    assert run_agent(provider) == ANSWER
    assert provider.force_flush(5_000)
    assert len(seen) == 2  # graded twice: the first callback's error stopped nothing
    assert app_spans(exporter).count("invoke_agent support-agent") == 2
    provider.shutdown()


@pytest.fixture
def exploding_loop_grader():
    spec = lookup("loop")
    real = spec.grade

    def explode(trajectory, options, name):
        raise RuntimeError("grader exploded")

    object.__setattr__(spec, "grade", explode)  # a frozen dataclass: monkeypatch.setattr cannot
    yield
    object.__setattr__(spec, "grade", real)


def test_grader_that_raises(exploding_loop_grader) -> None:
    reports = []
    exporter = InMemorySpanExporter()
    provider = graded_provider(exporter, on_report=reports.append)
    assert run_agent(provider) == ANSWER
    assert provider.force_flush(5_000)
    (report,) = reports
    (result,) = report.results
    assert (result.name, result.status, result.error_type) == ("no-loops", "error", "internal")
    assert "grader exploded" in result.explanation
    events = [e for s in exporter.get_finished_spans() for e in s.events if e.name == "gen_ai.evaluation.result"]
    assert [e.attributes["error.type"] for e in events] == ["internal"]
    provider.shutdown()


def test_span_attributes_that_break_normalization(monkeypatch: pytest.MonkeyPatch) -> None:
    real = trajgrade.doors.processor.sdk_intake

    def sdk_intake(held):
        # what the processor kept of the span: its fields (sdk_fields: trace id first, attribute dict eleventh)
        if held[10].get("app.poison"):
            try:
                raise ValueError("poisoned attributes")
            except ValueError as e:
                raise UnreadableSpan(format(held[0], "032x")) from e
        return real(held)

    monkeypatch.setattr(trajgrade.doors.processor, "sdk_intake", sdk_intake)
    reports = []
    exporter = InMemorySpanExporter()
    provider = graded_provider(exporter, on_report=reports.append)
    assert run_agent(provider, poison=True) == ANSWER
    assert run_agent(provider) == ANSWER
    assert provider.force_flush(5_000)
    provider.shutdown()
    assert len(reports) == 1  # the poisoned run is lost to grading; the next one is graded
    assert app_spans(exporter).count("invoke_agent support-agent") == 2
'''

INJECTIONS = {
    "on_report": "test_on_report_callback_that_raises",
    "grader": "test_grader_that_raises",
    "normalize": "test_span_attributes_that_break_normalization",
}
#: What each injection raises: found in trajgrade's log of it (its traceback), and in the user's failure when
#: trajgrade re-raises.
MESSAGES = {
    "on_report": "RuntimeError: the user's callback failed",
    "grader": "RuntimeError: grader exploded",
    "normalize": "ValueError: poisoned attributes",
}


@dataclass(frozen=True)
class Case:
    """One test of the user's suite: passed or not, its failure text, and what it captured (logs, output)."""

    passed: bool
    failure: str
    captured: str


@dataclass(frozen=True)
class UsersRun:
    returncode: int
    output: str
    cases: dict[str, Case]

    def case(self, injection: str) -> Case:
        assert INJECTIONS[injection] in self.cases, self.output
        return self.cases[INJECTIONS[injection]]


def _run_users_suite(directory: Path, *, worker: bool, raise_internal_errors: bool) -> UsersRun:
    directory.mkdir()
    (directory / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (directory / "test_support_agent.py").write_text(USERS_TEST.replace("__WORKER__", repr(worker)))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRAJGRADE_", "PYTEST_")) and k not in ("PYTHONPATH", "COV_CORE_SOURCE")
    }
    if raise_internal_errors:
        env["TRAJGRADE_RAISE_INTERNAL_ERRORS"] = "1"
    junit = directory / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_logging=all",
            f"--junitxml={junit}",
            "test_support_agent.py",
        ],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = proc.stdout + proc.stderr
    assert junit.exists(), output
    cases = {}
    for testcase in ET.parse(junit).getroot().iter("testcase"):
        problems = [el for el in testcase if el.tag in ("failure", "error")]
        failure = "\n".join(f"{el.get('message', '')}\n{el.text or ''}" for el in problems)
        captured = "\n".join(el.text or "" for el in testcase if el.tag in ("system-out", "system-err"))
        cases[testcase.get("name", "")] = Case(not problems and testcase.find("skipped") is None, failure, captured)
    return UsersRun(proc.returncode, output, cases)


SuiteRunner = Callable[..., UsersRun]


@pytest.fixture(scope="module")
def users_suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteRunner:
    """The user's suite run once per (worker, TRAJGRADE_RAISE_INTERNAL_ERRORS), shared by the checks below."""
    runs: dict[tuple[bool, bool], UsersRun] = {}

    def run(worker: bool, raise_internal_errors: bool = False) -> UsersRun:
        key = (worker, raise_internal_errors)
        if key not in runs:
            where = tmp_path_factory.mktemp("users") / f"worker_{worker}_raise_{raise_internal_errors}"
            runs[key] = _run_users_suite(where, worker=worker, raise_internal_errors=raise_internal_errors)
        return runs[key]

    return run


@pytest.mark.parametrize(
    "worker",
    [pytest.param(False, id="inline"), pytest.param(True, id="worker")],
)
def test_the_users_suite_passes(users_suite: SuiteRunner, worker: bool) -> None:
    run = users_suite(worker)
    assert run.returncode == 0, run.output
    assert "3 passed" in run.output, run.output


@pytest.mark.parametrize(
    ("worker", "injection"),
    [
        pytest.param(
            worker,
            injection,
            id=f"{'worker' if worker else 'inline'}-{injection}",
        )
        for worker in (False, True)
        for injection in INJECTIONS
    ],
)
def test_each_failure_inside_trajgrade_is_logged_not_raised(
    users_suite: SuiteRunner, worker: bool, injection: str
) -> None:
    case = users_suite(worker).case(injection)
    assert case.passed, case.failure
    assert MESSAGES[injection] in case.captured  # trajgrade logged it, with its traceback
    if injection == "grader":  # a grader's exception becomes that grader's `error` result (and is logged)
        assert "grader no-loops (loop) failed" in case.captured or "trajgrade: internal error" in case.captured
    else:
        assert "trajgrade: internal error" in case.captured, case.captured


@pytest.mark.parametrize("worker", [False, True], ids=["inline", "worker"])
@pytest.mark.parametrize("injection", ["on_report", "normalize"])
def test_positive_control_with_trajgrade_raising_the_users_test_fails(
    users_suite: SuiteRunner, worker: bool, injection: str
) -> None:
    run = users_suite(worker, raise_internal_errors=True)
    case = run.case(injection)
    assert not case.passed, run.output
    assert run.returncode == 1
    if worker:  # raised on the grading thread: pytest reports the unhandled thread exception (or a flush raises)
        assert "PytestUnhandledThreadExceptionWarning" in case.failure or MESSAGES[injection] in case.failure
        assert MESSAGES[injection] in case.failure + case.captured
    else:  # raised into the agent's own call
        assert MESSAGES[injection] in case.failure, case.failure


@pytest.mark.parametrize("worker", [False, True], ids=["inline", "worker"])
def test_positive_control_a_graders_exception_is_a_result_whatever_the_switch(
    users_suite: SuiteRunner, worker: bool
) -> None:
    case = users_suite(worker, raise_internal_errors=True).case("grader")
    assert case.passed, case.failure
