"""JUnit XML (validated against a schema) and Markdown, from every framework fixture graded by the command line."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
import xmlschema
from conftest import fixture_files

from trajgrade import load_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.runfiles import read_runs
from trajgrade.core.running import RunReport, grade_run
from trajgrade.reports.junit import to_junit
from trajgrade.reports.markdown import GITHUB_COMMENT_LIMIT, to_markdown

HERE = Path(__file__).parent
CONFIG = HERE / "graders.yaml"
SCHEMA = xmlschema.XMLSchema(HERE / "junit.xsd")
TRAJGRADE = Path(sys.executable).with_name("trajgrade")


@pytest.fixture(scope="module")
def graded() -> list[tuple[str, RunReport]]:
    config = load_config(CONFIG)
    runs, problems = read_runs([str(p) for p in fixture_files()])
    assert not problems
    return [(run.path, grade_run(config, run.trajectory)) for run in runs]


def grouped(graded: list[tuple[str, RunReport]]) -> list[tuple[str, list[RunReport]]]:
    groups: dict[str, list[RunReport]] = {}
    for source, report in graded:
        groups.setdefault(source, []).append(report)
    return list(groups.items())


def test_junit_is_valid_and_counts_every_run_and_grader(graded: list[tuple[str, RunReport]]) -> None:
    text = to_junit(grouped(graded))
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    results = [r for _, report in graded for r in report.results]
    statuses = Counter(
        "skipped"
        if r.error_type == "not_evaluable"
        else {"fail": "failures", "error": "errors"}.get(r.status, "passed")
        for r in results
    )
    assert statuses["failures"] > 0 and statuses["skipped"] > 0 and statuses["passed"] > 0
    assert int(root.get("tests", "")) == len(results) == len(root.findall(".//testcase"))
    assert int(root.get("failures", "")) == statuses["failures"] == len(root.findall(".//failure"))
    assert int(root.get("skipped", "")) == statuses["skipped"] == len(root.findall(".//skipped"))
    assert int(root.get("errors", "")) == statuses["errors"]
    assert len(root.findall("testsuite")) == len({source for source, _ in graded})  # one suite per input file
    suite = next(
        s for s in root.findall("testsuite") if s.get("name", "").endswith("langgraph/openinference/repeat_six.json")
    )
    loop = next(c for c in suite.findall("testcase") if c.get("name") == "no-loops")
    report = next(r for src, r in graded if src.endswith("langgraph/openinference/repeat_six.json"))
    result = next(r for r in report.results if r.name == "no-loops")
    failure = loop.find("failure")
    assert failure is not None and failure.get("message") == result.explanation
    assert all(sid in (failure.text or "") for e in result.evidence for sid in e.span_ids)  # the evidence spans
    assert loop.get("classname") == f"{report.trajectory.agent_name} [{report.trajectory.trace_id[:16]}]"
    run_s = report.trajectory.summary.duration_ms / 1000
    assert float(suite.get("time", "")) == pytest.approx(run_s, abs=1e-5)


def test_a_grader_that_broke_is_an_error_and_control_characters_do_not_break_the_xml(
    graded: list[tuple[str, RunReport]],
) -> None:
    source, report = graded[0]
    broken = GraderResult("slow", "loop", "error", 0.0, "timeout \x00\x1b[31m after 5 s", error_type="timeout")
    text = to_junit([(source, [RunReport(report.trajectory, None, (broken,), False, 0.0)])])
    SCHEMA.validate(text)
    error = ET.fromstring(text).find(".//error")
    assert error is not None and error.get("type") == "timeout" and error.get("message") == "timeout [31m after 5 s"


def test_the_command_line_writes_junit_markdown_and_exits_1_on_a_failed_run(tmp_path: Path) -> None:
    files = [
        str(p) for p in fixture_files() if p.parent.name == "openinference" and p.parent.parent.name == "langgraph"
    ]
    out = tmp_path / "report.xml"
    run = subprocess.run([TRAJGRADE, "grade", "--config", CONFIG, "--format", "junit", "-o", out, *files])
    assert run.returncode == 1  # repeat_six loops
    SCHEMA.validate(str(out))
    md = subprocess.run(
        [TRAJGRADE, "grade", "--config", CONFIG, "--format", "markdown", *files], capture_output=True, text=True
    )
    assert md.returncode == 1 and md.stdout.startswith("## trajgrade")


@pytest.mark.parametrize("command", [["grade", "--config", str(CONFIG)], ["compare", str(fixture_files()[0])]])
def test_a_report_that_cannot_be_written_is_a_problem_named_with_exit_2(tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "missing" / "report.md"
    run = subprocess.run(
        [TRAJGRADE, *command, "--format", "markdown", "-o", out, str(fixture_files()[0])],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2  # not 1: that says a run failed its graders
    assert f"trajgrade: {out}: cannot write the report: No such file or directory" in run.stderr
    assert "Traceback" not in run.stderr


def test_markdown_puts_failures_first_with_their_explanations(graded: list[tuple[str, RunReport]]) -> None:
    text = to_markdown(grouped(graded))
    assert len(text) < GITHUB_COMMENT_LIMIT
    failed = [r for _, r in graded if not r.passed]
    assert f"**{len(graded)} run(s): {len(graded) - len(failed)} passed, {len(failed)} failed.**" in text
    rows = [line for line in text.splitlines() if line.startswith("| ✅") or line.startswith("| ❌")]
    verdicts = [row.startswith("| ❌") for row in rows]
    assert verdicts == sorted(verdicts, reverse=True) and sum(verdicts) == len(failed)  # failures first
    loop = next(r for src, r in graded if src.endswith("langgraph/openinference/repeat_six.json"))
    explanation = next(x.explanation for x in loop.results if x.name == "no-loops")
    assert " ".join(explanation.split())[:100] in text
    assert text.count("<details>") == len(failed)


def test_markdown_summarises_a_large_run_set_under_githubs_limit(graded: list[tuple[str, RunReport]]) -> None:
    many = [(f"batch-{i}.json", [r for _, r in graded]) for i in range(20)]  # 3,480 runs
    text = to_markdown(many)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    runs = 20 * len(graded)
    failed = 20 * sum(not r.passed for _, r in graded)
    assert f"**{runs} run(s): {runs - failed} passed, {failed} failed.**" in text
    assert "more run(s)" in text and "more failed run(s)" in text
