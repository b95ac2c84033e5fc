"""Grading results as OpenTelemetry data (trajgrade.core.emit): the ``gen_ai.evaluation.result`` attributes per
the GenAI evaluation conventions (the evaluator's identity as semantic-conventions-genai PR #359 proposes it), the
verdict attributes, span events, a span's copy with the events added, log-based events in the context of the span
each result evaluates (the real SDK's LoggerProvider, exported in memory), and which logger the doors use."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from factories import ROOT_ID, TRACE_ID, llm, run, tool
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from trajgrade import Evidence, GraderResult, RunReport, grade_run, parse_config
from trajgrade.core import semconv as sc
from trajgrade.core.emit import (
    add_breach_event,
    evaluation_logger,
    log_records,
    result_events,
    with_results,
)
from trajgrade.core.graders.catalogue import CATALOGUE
from trajgrade.core.inflight import Breach
from trajgrade.core.result_attributes import breach_attributes, report_attributes, result_attributes
from trajgrade.version import __version__

EVENT = "gen_ai.evaluation.result"


def result(**fields: Any) -> GraderResult:
    base: dict[str, Any] = {"name": "no-loops", "type": "loop", "status": "pass", "score": 1.0, "explanation": "ok"}
    return GraderResult(**{**base, **fields})


def report(*results: GraderResult, passed: bool = True, score: float = 1.0, partial: bool = False) -> RunReport:
    trajectory = run(tool("search", {"q": "x"}, result="ok"))
    if partial:
        trajectory = dataclasses.replace(trajectory, partial=True)
    return RunReport(trajectory, "default", results, passed, score)


# --- result_attributes --------------------------------------------------------------------------------------
def test_a_passing_result_has_the_conventions_names_and_types() -> None:
    attrs = result_attributes(result(score=1, value=3, limit=5.5))  # an int score becomes a double
    assert attrs == {
        "gen_ai.evaluation.name": "no-loops",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "ok",
        "gen_ai.evaluation.evaluator.id": "no-loops",
        "gen_ai.evaluation.evaluator.version": __version__,
        "gen_ai.evaluation.evaluator.type": "deterministic",
        "trajgrade.grader.type": "loop",
        "trajgrade.value": 3,
        "trajgrade.limit": 5.5,
    }
    assert type(attrs["gen_ai.evaluation.score.value"]) is float
    assert type(attrs["trajgrade.value"]) is int
    assert "error.type" not in attrs


def test_the_evaluator_is_the_grader_at_trajgrades_version_typed_by_how_it_decides() -> None:
    judge = result(name="helpful", type="llm_judge", status="error", score=0.0, error_type="skipped")
    attrs = result_attributes(judge)
    assert attrs["gen_ai.evaluation.evaluator.id"] == "helpful"
    assert attrs["gen_ai.evaluation.evaluator.version"] == __version__
    assert attrs["gen_ai.evaluation.evaluator.type"] == "llm_judge"
    assert attrs["trajgrade.grader.type"] == "llm_judge"
    assert result_attributes(result(type="tool-call-count"))["gen_ai.evaluation.evaluator.type"] == "deterministic"
    unknown = result_attributes(result(name="mine", type="not-a-grader-type"))
    assert "gen_ai.evaluation.evaluator.type" not in unknown  # no guess for a type the catalogue does not hold
    assert unknown["gen_ai.evaluation.evaluator.id"] == "mine"
    # every catalogued grader has one of the proposal's values
    kinds = {
        spec.type: result_attributes(result(type=spec.type))["gen_ai.evaluation.evaluator.type"] for spec in CATALOGUE
    }
    assert set(kinds.values()) == {"deterministic", "llm_judge"}
    assert [t for t, k in kinds.items() if k == "llm_judge"] == ["llm_judge"]


def test_a_failing_result_is_labelled_fail() -> None:
    attrs = result_attributes(result(status="fail", score=0.25, explanation="loop detected"))
    assert attrs["gen_ai.evaluation.score.label"] == "fail"
    assert attrs["gen_ai.evaluation.score.value"] == 0.25
    assert "error.type" not in attrs


@pytest.mark.parametrize(("error_type", "expected"), [("timeout", "timeout"), (None, "not_evaluable")])
def test_a_result_in_error_has_error_type_and_no_label(error_type: str | None, expected: str) -> None:
    attrs = result_attributes(result(status="error", score=0, explanation="not evaluable: x", error_type=error_type))
    assert "gen_ai.evaluation.score.label" not in attrs
    assert attrs["error.type"] == expected
    assert attrs["gen_ai.evaluation.score.value"] == 0.0
    assert type(attrs["gen_ai.evaluation.score.value"]) is float


def test_the_explanation_is_cut_at_4096_characters() -> None:
    long = "".join(chr(ord("a") + i % 26) for i in range(5000))
    assert result_attributes(result(explanation=long))["gen_ai.evaluation.explanation"] == long[:4096]
    exact = "x" * 4096
    assert result_attributes(result(explanation=exact))["gen_ai.evaluation.explanation"] == exact


def test_scalar_values_stay_scalars_and_none_is_left_out() -> None:
    attrs = result_attributes(result(value=True, limit=None))
    assert attrs["trajgrade.value"] is True
    assert "trajgrade.limit" not in attrs
    attrs = result_attributes(result(value="7 calls", limit=0.5))
    assert (attrs["trajgrade.value"], attrs["trajgrade.limit"]) == ("7 calls", 0.5)
    assert result_attributes(result(value="v" * 5000))["trajgrade.value"] == "v" * 4096


def test_other_values_are_json_encoded() -> None:
    attrs = result_attributes(result(value={"tokens": 120, "calls": [1, 2]}, limit=[3, "a", None]))
    assert attrs["trajgrade.value"] == '{"calls": [1, 2], "tokens": 120}'  # keys sorted
    assert attrs["trajgrade.limit"] == '[3, "a", null]'
    when = datetime(2024, 1, 2, tzinfo=timezone.utc)
    assert json.loads(str(result_attributes(result(value={"at": when}))["trajgrade.value"])) == {"at": str(when)}
    big = list(range(3000))
    encoded = result_attributes(result(value=big))["trajgrade.value"]
    assert isinstance(encoded, str) and len(encoded) == 4096 and encoded == json.dumps(big)[:4096]


def test_a_value_json_cannot_encode_falls_back_to_its_text() -> None:
    circular: list[Any] = [1]
    circular.append(circular)
    assert result_attributes(result(value=circular))["trajgrade.value"] == str(circular)


def test_evidence_span_ids_each_once_in_order() -> None:
    evidence = (
        Evidence("first loop", ("00000000000000a1", "00000000000000a2", "00000000000000a1")),
        Evidence("no spans"),
        Evidence("second loop", ("00000000000000a3", "00000000000000a2", "00000000000000a4")),
    )
    ids = result_attributes(result(status="fail", score=0.0, evidence=evidence))["trajgrade.evidence.span_ids"]
    assert ids == ("00000000000000a1", "00000000000000a2", "00000000000000a3", "00000000000000a4")
    assert isinstance(ids, tuple) and all(isinstance(i, str) for i in ids)


def test_the_span_ids_of_a_single_evidence_each_once_in_order() -> None:
    evidence = (Evidence("a loop", ("00000000000000a2", "00000000000000a1", "00000000000000a2")),)
    ids = result_attributes(result(status="fail", score=0.0, evidence=evidence))["trajgrade.evidence.span_ids"]
    assert ids == ("00000000000000a2", "00000000000000a1")


def test_evidence_span_ids_are_capped_at_64() -> None:
    many = tuple(f"{n:016x}" for n in range(100))
    evidence = (Evidence("a", many[:50]), Evidence("b", many[40:]))  # 10 shared ids do not count twice
    ids = result_attributes(result(evidence=evidence))["trajgrade.evidence.span_ids"]
    assert ids == many[:64]


def test_the_span_ids_of_a_single_evidence_are_capped_at_64_too() -> None:
    many = tuple(f"{n:016x}" for n in range(100))
    assert result_attributes(result(evidence=(Evidence("a", many),)))["trajgrade.evidence.span_ids"] == many[:64]


def test_results_of_one_grader_share_nothing_but_its_identity() -> None:
    """The attributes a grader's name and type decide are made once for it: each result gets its own copy, with its
    own score, label or error type, in the order the conventions' attributes were always written."""
    failed = result_attributes(result(status="error", score=0, explanation="x", error_type="timeout", value=3))
    passed = result_attributes(result(score=1, explanation="y" * 5000))
    failed["extra"] = True  # a door adding to one result's attributes changes no other
    assert "extra" not in result_attributes(result())
    assert list(passed) == [
        "gen_ai.evaluation.name",
        "gen_ai.evaluation.score.value",
        "gen_ai.evaluation.explanation",
        "gen_ai.evaluation.evaluator.id",
        "gen_ai.evaluation.evaluator.version",
        "trajgrade.grader.type",
        "gen_ai.evaluation.evaluator.type",
        "gen_ai.evaluation.score.label",
    ]
    assert (passed["gen_ai.evaluation.score.value"], passed["gen_ai.evaluation.explanation"]) == (1.0, "y" * 4096)
    assert type(passed["gen_ai.evaluation.score.value"]) is float and "error.type" not in passed
    assert (failed["error.type"], failed["trajgrade.value"], failed["gen_ai.evaluation.explanation"]) == (
        "timeout",
        3,
        "x",
    )
    assert "gen_ai.evaluation.score.label" not in failed


def test_no_span_ids_no_attribute() -> None:
    assert "trajgrade.evidence.span_ids" not in result_attributes(result(evidence=(Evidence("only words"),)))
    assert "trajgrade.evidence.span_ids" not in result_attributes(result())


def test_a_real_graders_result_has_valid_attribute_types() -> None:
    """A loop the real grader finds: every value is an OpenTelemetry attribute value, the evidence spans its own."""
    trajectory = run(*[tool("search", {"q": "same"}, result="none")] * 5)
    (loop,) = grade_run(parse_config("graders:\n  - type: loop\n    max_repeats: 3\n"), trajectory).results
    attrs = result_attributes(loop)
    assert attrs["gen_ai.evaluation.score.label"] == "fail"
    tool_ids = {s.span_id for s in trajectory.tool_steps}
    span_ids = attrs["trajgrade.evidence.span_ids"]
    assert isinstance(span_ids, tuple) and len(span_ids) == 5 and set(span_ids) == tool_ids
    for value in attrs.values():
        assert isinstance(value, bool | int | float | str | tuple), value


# --- report_attributes and result_events --------------------------------------------------------------------
def test_report_attributes_are_the_verdict() -> None:
    attrs = report_attributes(report(passed=False, score=0))
    assert attrs == {"trajgrade.passed": False, "trajgrade.score": 0.0}
    assert type(attrs["trajgrade.score"]) is float
    assert report_attributes(report(passed=True, score=0.75)) == {"trajgrade.passed": True, "trajgrade.score": 0.75}


def test_a_partial_run_says_so() -> None:
    assert report_attributes(report(partial=True))["trajgrade.partial"] is True


def test_result_events_one_per_result_at_the_timestamp() -> None:
    results = (result(name="a"), result(name="b", status="fail", score=0.0))
    events = result_events(results, 1_700_000_000_123_456_789)
    assert [e.name for e in events] == [EVENT, EVENT]
    assert [e.timestamp for e in events] == [1_700_000_000_123_456_789] * 2
    assert [dict(e.attributes or {}) for e in events] == [result_attributes(r) for r in results]
    assert result_events((), 1) == ()


# --- with_results -------------------------------------------------------------------------------------------
def ended_span() -> ReadableSpan:
    """A root span with every field set, ended, as the SDK hands it to a processor."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("my.agent", "1.2.3")
    remote_parent = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x1111, is_remote=True, trace_flags=TraceFlags(1))
    linked = SpanContext(0x5BF92F3577B34DA6A3CE929D0E0E4736, 0x2222, is_remote=True, trace_flags=TraceFlags(1))
    span = tracer.start_span(
        "invoke_agent support",
        context=set_span_in_context(NonRecordingSpan(remote_parent)),
        kind=SpanKind.SERVER,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        links=[Link(linked, {"why": "retry of"})],
        start_time=1_700_000_000_000_000_000,
    )
    span.add_event("user.message", {"chars": 12}, timestamp=1_700_000_000_500_000_000)
    span.set_status(Status(StatusCode.ERROR, "tool failed"))
    span.end(end_time=1_700_000_002_000_000_000)
    (ended,) = exporter.get_finished_spans()
    provider.shutdown()
    return ended


def test_with_results_keeps_every_field_of_the_span() -> None:
    span = ended_span()
    results = (result(name="a"), result(name="b", status="error", score=0.0, error_type="not_evaluable"))
    copy = with_results(span, report(*results, passed=False, score=0.5))
    assert copy is not span
    assert copy.name == span.name
    assert copy.context == span.context
    assert copy.parent == span.parent and copy.parent is not None and copy.parent.span_id == 0x1111
    assert copy.resource == span.resource and copy.resource.attributes["service.name"] == "support"
    assert list(copy.links) == list(span.links) and len(copy.links) == 1
    assert copy.links[0].context.span_id == 0x2222 and dict(copy.links[0].attributes or {}) == {"why": "retry of"}
    assert copy.kind is SpanKind.SERVER
    assert (copy.status.status_code, copy.status.description) == (StatusCode.ERROR, "tool failed")
    assert (copy.start_time, copy.end_time) == (span.start_time, span.end_time)
    assert copy.instrumentation_scope == span.instrumentation_scope
    assert copy.instrumentation_scope is not None
    assert (copy.instrumentation_scope.name, copy.instrumentation_scope.version) == ("my.agent", "1.2.3")
    assert dict(copy.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "trajgrade.passed": False,
        "trajgrade.score": 0.5,
    }


def test_with_results_adds_the_events_at_the_spans_end() -> None:
    span = ended_span()
    results = (result(name="a"), result(name="b", status="fail", score=0.0))
    copy = with_results(span, report(*results, passed=False, score=0.5))
    original, *added = copy.events
    assert (original.name, original.timestamp, dict(original.attributes or {})) == (
        "user.message",
        1_700_000_000_500_000_000,
        {"chars": 12},
    )
    assert [e.name for e in added] == [EVENT, EVENT]
    assert all(e.timestamp == span.end_time == 1_700_000_002_000_000_000 for e in added)
    assert [dict(e.attributes or {}) for e in added] == [result_attributes(r) for r in results]
    # the span the SDK ended is left as it was
    assert len(span.events) == 1 and "trajgrade.passed" not in (span.attributes or {})


def test_with_results_of_a_run_without_results_adds_the_verdict_only() -> None:
    span = ended_span()
    copy = with_results(span, report())
    assert [e.name for e in copy.events] == ["user.message"]
    assert (copy.attributes or {})["trajgrade.passed"] is True


# --- log_records --------------------------------------------------------------------------------------------
def test_log_records_one_per_result_in_the_roots_context() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    root = SpanContext(
        0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=False, trace_flags=TraceFlags(1)
    )
    results = (
        result(name="a"),
        result(name="b", status="fail", score=0.0, evidence=(Evidence("x", ("00000000000000a1",)),)),
        result(name="c", status="error", score=0.0, error_type="timeout"),
    )
    root_record = SimpleNamespace(trace_id=f"{root.trace_id:032x}", span_id=f"{root.span_id:016x}")  # its ids
    log_records(report(*results, passed=False, score=1 / 3), root_record, provider.get_logger("trajgrade"))
    records = exporter.get_finished_logs()
    assert len(records) == 3
    for record, expected in zip(records, results, strict=True):
        log = record.log_record
        assert log.event_name == EVENT
        assert (log.trace_id, log.span_id) == (root.trace_id, root.span_id)
        assert log.trace_flags == TraceFlags(1)
        assert dict(log.attributes or {}) == result_attributes(expected)
        assert record.instrumentation_scope is not None and record.instrumentation_scope.name == "trajgrade"
    assert [dict(r.log_record.attributes or {})["gen_ai.evaluation.name"] for r in records] == ["a", "b", "c"]
    provider.shutdown()


def test_log_records_of_a_run_without_results_emit_nothing() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    root = SimpleNamespace(trace_id=f"{1:032x}", span_id=f"{2:016x}")
    log_records(report(), root, provider.get_logger("trajgrade"))
    assert exporter.get_finished_logs() == ()
    provider.shutdown()


def _logged(trajectory_report: RunReport) -> list[Any]:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    root = SimpleNamespace(trace_id=TRACE_ID, span_id=ROOT_ID)
    log_records(trajectory_report, root, provider.get_logger("trajgrade"))
    provider.shutdown()
    return [r.log_record for r in exporter.get_finished_logs()]


def test_a_step_level_result_is_logged_in_the_context_of_the_step_it_evaluates() -> None:
    """The repeated tool call, the model call past a limit: each result sits on its span; run-level ones on the
    root. A model call's result carries its response id, for a backend that joins on it rather than the span."""
    trajectory = run(
        llm(response_id="chatcmpl-0"),
        *[tool("search", {"q": "same"}, result="none")] * 4,
        llm(response_id="chatcmpl-1"),
        llm(response_id="chatcmpl-2"),
        llm(),  # a call whose span recorded no response id
    )
    config = parse_config(
        "graders:\n"
        "  - {name: no-loops, type: loop, max_repeats: 3}\n"
        "  - {name: two-calls, type: budget, max_llm_calls: 2}\n"
        "  - {name: three-calls, type: budget, max_llm_calls: 3}\n"
        "  - {name: tokens, type: token-budget, max: 100000}\n"
    )
    graded = grade_run(config, trajectory)
    logs = {str((log.attributes or {})["gen_ai.evaluation.name"]): log for log in _logged(graded)}
    steps = trajectory.steps
    assert [s.kind for s in steps] == ["llm_call", *["tool_call"] * 4, "llm_call", "llm_call", "llm_call"]
    expected = {
        "no-loops": (steps[1].span_id, None),  # the first repeated call
        "two-calls": (steps[6].span_id, "chatcmpl-2"),  # the first call past the limit
        "three-calls": (steps[7].span_id, None),  # a model call, but its span had no response id
        "tokens": (ROOT_ID, None),  # run-level: the root
    }
    assert set(logs) == set(expected)
    by_name = {r.name: r for r in graded.results}
    for name, (span_id, response_id) in expected.items():
        log = logs[name]
        attrs = dict(log.attributes or {})
        assert (log.trace_id, log.span_id) == (int(TRACE_ID, 16), int(span_id, 16)), name
        assert log.event_name == EVENT
        assert attrs.get("gen_ai.response.id") == response_id, name
        assert {k: v for k, v in attrs.items() if k != "gen_ai.response.id"} == result_attributes(by_name[name])
    # span events keep the attributes they had: no response id there
    assert all("gen_ai.response.id" not in dict(e.attributes or {}) for e in result_events(graded.results, 1))


def test_evidence_naming_the_root_or_spans_that_are_no_step_is_run_level() -> None:
    trajectory = run(tool("search", {"q": "x"}, result="ok"))
    results = (
        result(name="root", status="fail", score=0.0, evidence=(Evidence("no output", (ROOT_ID,)),)),
        result(name="elsewhere", status="fail", score=0.0, evidence=(Evidence("?", ("00000000000000a1",)),)),
        result(
            name="second", status="fail", score=0.0, evidence=(Evidence("?", ("00000000000000a1", "0000000000000001")),)
        ),
    )
    logs = _logged(RunReport(trajectory, "default", results, False, 0.0))
    assert [log.span_id for log in logs] == [int(ROOT_ID, 16), int(ROOT_ID, 16), 1]  # the first that is a step


# --- evaluation_logger --------------------------------------------------------------------------------------
def test_a_given_logger_provider_is_used_and_false_turns_log_events_off() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = evaluation_logger(provider)
    assert logger is not None
    log_records(report(result()), SimpleNamespace(trace_id=TRACE_ID, span_id=ROOT_ID), logger)
    (record,) = exporter.get_finished_logs()
    scope = record.instrumentation_scope
    assert scope is not None and (scope.name, scope.version) == ("trajgrade", __version__)
    assert evaluation_logger(False) is None
    provider.shutdown()


def test_by_default_log_events_go_to_the_global_provider_only_when_it_is_the_sdks() -> None:
    """In a process of its own: the global provider can be set once. Before it is set the API's proxy answers (no
    events); once an SDK provider is set, a processor built without ``logger_provider`` emits through it, and one
    built with ``False`` does not."""
    script = textwrap.dedent(
        """
        import json
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
        from opentelemetry.sdk.trace import TracerProvider
        from trajgrade import GradingSpanProcessor, parse_config
        from trajgrade.core.emit import evaluation_logger

        before = evaluation_logger(None)
        exporter = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        set_logger_provider(logger_provider)
        config = parse_config("graders:\\n  - {name: calls, type: tool-call-count, max: 5}\\n")
        counts = []
        for option in ({}, {"logger_provider": False}):
            tracer_provider = TracerProvider()
            tracer_provider.add_span_processor(GradingSpanProcessor(config, worker=False, **option))
            tracer = tracer_provider.get_tracer("app")
            with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
                pass
            tracer_provider.shutdown()
            counts.append(len(exporter.get_finished_logs()))
        print(json.dumps({"before": before is None, "after": evaluation_logger(None) is not None, "counts": counts}))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == {"before": True, "after": True, "counts": [1, 1]}


@pytest.mark.parametrize(
    ("limits", "cut"),
    [(SpanLimits(), False), (SpanLimits(max_attribute_length=20), True), (SpanLimits(max_event_attributes=5), True)],
)
def test_a_breach_event_on_the_open_root_is_what_add_event_would_make_of_it(limits: SpanLimits, cut: bool) -> None:
    """Appended as made where the root's limits cut nothing, through ``add_event`` where they do: the exported
    events are the same either way."""
    evidence = (Evidence("the 4th call", ("00000000000000a1", "00000000000000a2")),)
    failed = result(
        name="calls",
        type="tool-call-count",
        status="fail",
        score=0.0,
        value=4,
        limit=3,
        evidence=evidence,
        explanation="4 tool calls, more than the 3 allowed",
    )
    breach = Breach(TRACE_ID, "bench", failed, enforce=True)
    exported: list[tuple[str, dict[str, Any]]] = []
    for add in (add_breach_event, lambda span, b: span.add_event(sc.EVALUATION_RESULT_EVENT, breach_attributes(b))):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(span_limits=limits)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        root = provider.get_tracer("t").start_span("invoke_agent bench")
        add(root, breach)
        root.end()
        ((event,),) = [s.events for s in exporter.get_finished_spans()]
        exported.append((event.name, dict(event.attributes or {})))
    assert exported[0] == exported[1]
    assert exported[0][1][sc.TRAJGRADE_ENFORCED] is True
    assert exported[0][1] != breach_attributes(breach) if cut else exported[0][1] == breach_attributes(breach)


def test_a_breach_on_a_root_that_has_ended_adds_nothing_and_warns_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """The worker can make a breach's event just as its run's root ends: the SDK would drop the event and log a
    warning into the agent's log; the event is left off quietly instead."""
    failed = result(name="calls", type="tool-call-count", status="fail", score=0.0, value=4, limit=3)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    root = provider.get_tracer("t").start_span("invoke_agent bench")
    root.end()
    with caplog.at_level(logging.WARNING):
        add_breach_event(root, Breach(TRACE_ID, "bench", failed, enforce=False))
    assert caplog.records == []
    assert list(root.events) == []
