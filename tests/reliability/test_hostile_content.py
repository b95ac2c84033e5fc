"""Hostile trace content: tool arguments and results are written by the model and its tools.

Grading finishes in bounded time whatever the content, nothing raises into the agent, and the damage of a
bad span stays with that span.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import llm, run, tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanProcessor, RunReport, grade_run, parse_config
from trajgrade.core.runfiles import read_runs
from trajgrade.core.trajectory import SpanRecord, build_trajectories
from trajgrade.core.trajectory.records import span_record
from trajgrade.doors.cli import main

CATASTROPHIC = "(a|aa)+$"  # exponential backtracking on "aaa...a!"


@pytest.fixture
def no_reraise() -> Iterator[None]:
    """trajgrade re-raises its own errors under pytest; these tests check what an agent sees instead."""
    old = os.environ.get("TRAJGRADE_RAISE_INTERNAL_ERRORS")
    os.environ["TRAJGRADE_RAISE_INTERNAL_ERRORS"] = "0"
    yield
    if old is None:
        del os.environ["TRAJGRADE_RAISE_INTERNAL_ERRORS"]
    else:
        os.environ["TRAJGRADE_RAISE_INTERNAL_ERRORS"] = old


def test_a_catastrophic_regex_on_a_crafted_argument_is_stopped_and_reported() -> None:
    t = run(llm(), tool("search", {"query": "a" * 40 + "!"}, result="a" * 40 + "!"))
    config = parse_config(
        "graders:\n"
        f"  - {{name: redos, type: tool-calls, required: [{{name: search, args: {{query: '{CATASTROPHIC}'}}}}]}}\n"
        f"  - {{name: redos-result, type: tool-calls, disallowed: [{{name: search, result: '{CATASTROPHIC}'}}]}}\n"
        "  - {name: fine, type: tool-call-count, max: 5}\n"
    )
    started = time.monotonic()
    report = grade_run(config, t)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"grading took {elapsed:.1f}s"
    redos, redos_result, fine = report.results
    assert (redos.status, redos.error_type) == ("error", "timeout")
    assert "took more than" in redos.explanation and CATASTROPHIC in redos.explanation
    assert redos_result.error_type == "timeout"
    assert fine.status == "pass"  # the other graders of the run are unaffected


@pytest.mark.timeout(60)
def test_a_graders_budget_bounds_all_its_regex_matches_together() -> None:
    # each match takes about 0.05 s here, under the 0.2 s limit of one match: 150 of them add up to seconds, past
    # the grader's budget of 1 s, which stops them
    calls = [tool("search", {"query": "a" * 24 + "!" + str(i)}) for i in range(150)]
    t = run(llm(), *calls, llm())
    config = parse_config(
        "scoring: {timeout: 1}\n"
        "graders:\n"
        f"  - {{name: redos, type: tool-calls, required: [{{name: search, args: {{query: '{CATASTROPHIC}'}}}}]}}\n"
        "  - {name: fine, type: tool-call-count, max: 500}\n"
    )
    redos, fine = grade_run(config, t).results
    assert (redos.status, redos.error_type) == ("error", "timeout"), redos.explanation
    # stopped by the budget while matching, not found over it once every match had run
    assert "the grader's time budget" in redos.explanation, redos.explanation
    assert fine.status == "pass"


def test_huge_values_deep_json_and_odd_types_are_graded_in_bounded_time() -> None:
    huge = "x" * 20_000_000
    deep = "[" * 200_000 + "]" * 200_000
    t = run(
        llm(),
        tool("write_file", {"path": "a", "content": huge}, result=huge),
        tool("parse", deep, result=deep),
        tool("blob", {"data": "\udcff\ud800 lone surrogates"}, result="\udcff not utf-8"),
        llm(),
    )
    config = parse_config(
        "graders:\n  - {type: loop, max_repeats: 2}\n  - {type: max-repeat, max: 1, match: name-args}\n"
        "  - {type: tool-calls, required: [{name: write_file, args: {content: 'x+y'}}]}\n"
        "  - {type: tool-schema, schemas: {write_file: {type: object, properties: {content: {maxLength: 10}}}}}\n"
    )
    started = time.monotonic()
    report = grade_run(config, t)
    assert time.monotonic() - started < 10
    statuses = [r.status for r in report.results]
    assert statuses == ["pass", "pass", "fail", "fail"], [r.explanation for r in report.results]


def test_spans_whose_parent_links_form_a_cycle_with_no_root_are_a_partial_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def span(sid: str, parent: str, name: str, start: int, attributes: dict[str, Any]) -> dict[str, Any]:
        attrs = [
            {"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
            for k, v in attributes.items()
        ]
        return {
            "traceId": "ab" * 16,
            "spanId": sid,
            "parentSpanId": parent,
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 1000),
            "attributes": attrs,
        }

    spans = [
        span("0000000000000001", "0000000000000002", "invoke_agent a", 1, {"gen_ai.operation.name": "invoke_agent"}),
        span(
            "0000000000000002",
            "0000000000000001",
            "chat m",
            2,
            {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5},
        ),
    ]
    path = tmp_path / "cycle.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    assert main(["trajectory", str(path), "--format", "json"]) == 0
    (run_,) = json.loads(capsys.readouterr().out)["runs"]
    assert run_["partial"] and run_["summary"]["llm_calls"] == 1
    assert any("cycle" in n for n in run_["notes"])
    (file_run,), _ = read_runs([str(path)])  # a run without its root is filed under the file it was read from
    assert file_run.path == str(path)


def test_input_with_spans_but_no_run_never_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup = {"key": "gen_ai.operation.name", "value": {"stringValue": "create_agent"}}
    only = {
        "traceId": "ab" * 16,
        "spanId": "00000000000000a1",
        "name": "create_agent a",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [setup],
    }
    path = tmp_path / "setup.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [only]}]}]}))
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - type: completed\n")
    assert main(["grade", str(path), "--config", str(config)]) == 2
    assert "1 span(s) read, but no run among them" in capsys.readouterr().err


def test_cycles_duplicates_and_clocks_going_backwards_still_build() -> None:
    trace = "ab" * 16
    t0 = 1_700_000_000_000_000_000

    def rec(span: str, parent: str | None, start: int, end: int, kind: str = "tool_call") -> SpanRecord:
        return span_record(
            trace_id=trace,
            span_id=span,
            parent_span_id=parent,
            name=f"execute_tool {span}",
            kind=kind,
            start_unix_nano=start,
            end_unix_nano=end,
            error=False,
            tool_name="t",
        )

    records = [
        rec("0000000000000001", None, t0, t0 + 10, kind="agent"),
        rec("00000000000000a1", "00000000000000a2", t0 + 1, t0 + 2),  # a cycle, detached from the root
        rec("00000000000000a2", "00000000000000a1", t0 + 1, t0 + 2),
        rec("0000000000000002", "0000000000000001", t0 + 5, t0 + 1),  # ends before it starts
        rec("0000000000000002", "0000000000000001", t0 + 5, t0 + 6),  # the same span id twice
        rec("0000000000000003", "0000000000000003", t0 + 7, t0 + 8),  # its own parent
    ]
    runs = build_trajectories(records)
    root_run = next(r for r in runs if r.root_span_id == "0000000000000001")
    assert all(s.duration_ms >= 0 for s in root_run.steps)
    assert root_run.summary.tool_calls == 1


def test_a_trace_of_many_spans_is_bounded_and_the_drops_counted(no_reraise: None) -> None:
    reports: list[RunReport] = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = GradingSpanProcessor(
        parse_config("graders:\n  - {type: tool-call-count, max: 100000}\n"),
        downstream=SimpleSpanProcessor(exporter),
        on_report=reports.append,
        max_spans_per_trace=2_000,
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    tracemalloc.start()
    with tracer.start_as_current_span("invoke_agent flood", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(30_000):
            attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "i": i}
            with tracer.start_as_current_span("execute_tool t", attributes=attrs):
                pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    provider.force_flush()
    provider.shutdown()
    assert len(exporter.get_finished_spans()) == 30_001  # every span still went downstream
    (report,) = reports
    assert report.trajectory.partial and report.trajectory.summary.tool_calls == 2_000
    assert any("28000 span(s) dropped" in n for n in report.trajectory.notes)
    assert peak < 200 * 1024 * 1024


def test_a_grader_that_raises_reports_error_and_the_agent_runs_on(no_reraise: None) -> None:
    from trajgrade.core.graders.catalogue import CATALOGUE

    spec = next(s for s in CATALOGUE if s.type == "completed")
    config = parse_config("graders:\n  - {type: completed}\n  - {type: turn-count, max: 5}\n")
    broken = config.suites[0].graders[0]
    object.__setattr__(broken, "spec", type(spec)(spec.type, spec.config, _explode, spec.summary))
    report = grade_run(config, run(llm()))
    assert (report.results[0].status, report.results[0].error_type) == ("error", "internal")
    assert report.results[1].status == "pass"


def _explode(*args: Any) -> Any:
    raise RecursionError(json.dumps({"deliberately": "broken grader"}))


def test_a_grader_over_its_time_budget_reports_error() -> None:
    from trajgrade import ConfigError
    from trajgrade.core.graders.catalogue import CATALOGUE

    spec = next(s for s in CATALOGUE if s.type == "completed")
    config = parse_config("scoring: {timeout: 50ms}\ngraders:\n  - {type: completed}\n  - {type: turn-count, max: 5}\n")
    slow = config.suites[0].graders[0]
    object.__setattr__(slow, "spec", type(spec)(spec.type, spec.config, _slow, spec.summary))
    report = grade_run(config, run(llm()))
    assert (report.results[0].status, report.results[0].error_type) == ("error", "timeout")
    assert "over its time budget of 0.05s" in report.results[0].explanation
    assert report.results[1].status == "pass" and not report.passed
    for bad in ("0", "-1", "soon", "true"):
        with pytest.raises(ConfigError, match="timeout"):
            parse_config(f"scoring: {{timeout: {bad}}}\ngraders:\n  - {{type: completed}}\n")


def _slow(*args: Any) -> Any:
    time.sleep(0.2)
    return _explode  # never used: the budget is over first


def test_infinite_and_nan_token_counts_are_no_counts() -> None:
    from trajgrade.core.trajectory.normalize import _int

    assert _int(float("inf")) is None and _int(float("nan")) is None and _int("1e999") is None
    assert _int("12") == 12 and _int(12.0) == 12


@pytest.mark.timeout(30)
def test_a_yaml_alias_bomb_is_refused_and_ordinary_aliases_still_work() -> None:
    from trajgrade import ConfigError

    levels = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, name in zip("abcdef", "bcdefg", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    bomb = "\n".join([*levels, "graders: [*g]"]) + "\n"  # 9**7 nodes once expanded, 300 bytes written
    with pytest.raises(ConfigError, match="aliases expand to more than 100,000 YAML nodes"):
        parse_config(bomb, "bomb.yaml")  # expanding it would take minutes and gigabytes: the timeout fails it
    shared = "limits: &limits {max: 10}\ngraders:\n  - type: turn-count\n    config: *limits\n"
    assert parse_config(shared).suites[0].graders[0].options is not None
