"""Graded runs as JUnit XML, the test report CI systems read (Jenkins, GitLab, GitHub test reporters).

One ``<testsuite>`` per input file or run set, one ``<testcase>`` per run and grader: ``classname`` is the run
(its agent and trace id), ``name`` the grader. A failed grader is a ``<failure>`` with its explanation and
evidence; a grader that could not judge the run (not evaluable) is ``<skipped>`` with the reason; one that
broke (an internal error, a time-out) is an ``<error>``. A run's time is its duration; its case times share it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime

from trajgrade.core.graders.base import GraderResult
from trajgrade.core.running import RunReport
from trajgrade.reports.labels import run_label

__all__ = ["to_junit"]

_XML_UNSAFE = dict.fromkeys(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))


def _clean(text: str) -> str:
    """Text XML 1.0 can carry: control characters other than tab and newlines removed."""
    return text.translate(_XML_UNSAFE)


def _body(result: GraderResult) -> str:
    lines = [result.explanation]
    for e in result.evidence:
        spans = f" (spans {', '.join(e.span_ids)})" if e.span_ids else ""
        lines.append(f"- {e.description}{spans}")
    if result.value is not None or result.limit is not None:
        lines.append(f"value {result.value!r}, limit {result.limit!r}")
    return _clean("\n".join(lines))


def _case(suite: ET.Element, report: RunReport, result: GraderResult, seconds: float) -> str:
    case = ET.SubElement(
        suite, "testcase", classname=_clean(run_label(report)), name=_clean(result.name), time=f"{seconds:.6f}"
    )
    if result.status == "fail":
        ET.SubElement(case, "failure", message=_clean(result.explanation), type=result.type).text = _body(result)
        return "failures"
    if result.error_type == "not_evaluable":
        ET.SubElement(case, "skipped", message=_clean(result.explanation))
        return "skipped"
    if result.status == "error":
        ET.SubElement(
            case, "error", message=_clean(result.explanation), type=result.error_type or "error"
        ).text = _body(result)
        return "errors"
    return "passed"


def to_junit(groups: Sequence[tuple[str, Sequence[RunReport]]]) -> str:
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    root = ET.Element("testsuites", name="trajgrade")
    total_time = 0.0
    for name, reports in groups:
        counts = {"failures": 0, "errors": 0, "skipped": 0, "passed": 0}
        suite = ET.SubElement(root, "testsuite", name=_clean(name))
        seconds = 0.0
        started = min((r.trajectory.start_unix_nano for r in reports), default=0)
        for report in reports:
            run_s = report.trajectory.summary.duration_ms / 1000
            seconds += run_s
            share = run_s / max(len(report.results), 1)
            for result in report.results:
                counts[_case(suite, report, result, share)] += 1
        tests = sum(counts.values())
        suite.set("tests", str(tests))
        for k in ("failures", "errors", "skipped"):
            suite.set(k, str(counts[k]))
            totals[k] += counts[k]
        suite.set("time", f"{seconds:.6f}")
        if started:
            when = datetime.fromtimestamp(started / 1e9, tz=UTC).replace(tzinfo=None, microsecond=0)
            suite.set("timestamp", when.isoformat())
        totals["tests"] += tests
        total_time += seconds
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.6f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
