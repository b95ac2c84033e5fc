"""The HTML report, opened in headless Chromium (Debian's package): no console errors, the expected verdicts,
the timeline's steps and evidence, and nothing fetched."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import fixture_files

from trajgrade import load_config
from trajgrade.core.runfiles import read_runs
from trajgrade.core.running import RunReport, grade_run
from trajgrade.reports.html import to_html

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import render_pictures  # noqa: E402


@pytest.fixture(scope="module")
def graded() -> list[tuple[str, list[RunReport]]]:
    if shutil.which("chromium") is None:
        pytest.fail(f"`chromium` is not installed; {render_pictures.INSTALL_HINT}", pytrace=False)
    config = load_config(Path(__file__).with_name("graders.yaml"))
    runs, problems = read_runs([str(p) for p in fixture_files()])
    assert not problems
    groups: dict[str, list[RunReport]] = {}
    for run in runs:
        groups.setdefault(run.path, []).append(grade_run(config, run.trajectory))
    return list(groups.items())


def test_the_report_is_self_contained(graded: list[tuple[str, list[RunReport]]]) -> None:
    page = to_html(graded)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "fetch(" not in page


def test_every_framework_fixture_in_chromium_shows_its_verdicts_without_console_errors(
    graded: list[tuple[str, list[RunReport]]], tmp_path: Path
) -> None:
    reports = [r for _, rs in graded for r in rs]
    failed = [r for r in reports if not r.passed]
    path = tmp_path / "report.html"
    path.write_text(to_html(graded), encoding="utf-8")
    with render_pictures.browser_page(tmp_path) as page:
        page.load(path.as_uri())
        assert page.errors == []
        headline = page.evaluate("document.getElementById('headline').textContent")
        assert headline == f"{len(reports)} run(s): {len(reports) - len(failed)} passed, {len(failed)} failed"
        verdicts = page.evaluate("[...document.querySelectorAll('section.run')].map(s => s.dataset.verdict)")
        assert verdicts == ["fail"] * len(failed) + ["pass"] * (len(reports) - len(failed))  # failures first
        bars = page.evaluate("document.querySelectorAll('.bar').length")
        assert bars == sum(len(r.trajectory.steps) for r in reports)
        failed_steps = page.evaluate("document.querySelectorAll('.bar.err').length")
        assert failed_steps == sum(s.status == "error" for r in reports for s in r.trajectory.steps)
        shown = page.evaluate("document.body.innerText")
        for r in failed:
            for x in r.results:
                if x.status == "fail":
                    assert x.explanation in shown
        # the first run: a failed grader's evidence highlighted, a tool call's arguments and result on click
        first = failed[0]
        loop = next(x for x in first.results if x.status == "fail" and x.evidence and x.evidence[0].span_ids)
        index = [x.name for x in first.results].index(loop.name)
        page.evaluate(f"document.querySelectorAll('section.run')[0].querySelectorAll('tr.grader')[{index}].click()")
        highlighted = page.evaluate(
            "[...document.querySelectorAll('section.run')[0].querySelectorAll('.bar.hl')].map(b => b.dataset.span)"
        )
        steps = {s.span_id for s in first.trajectory.steps}
        assert set(highlighted) == {sid for e in loop.evidence for sid in e.span_ids} & steps
        tool = next(s for s in first.trajectory.tool_steps if s.tool and s.tool.arguments)
        page.evaluate(f"document.querySelector('.bar[data-span=\"{tool.span_id}\"]').click()")
        detail = page.evaluate("document.querySelectorAll('section.run')[0].querySelector('.detail').textContent")
        assert f"tool call {tool.tool.name}" in detail and "arguments: " in detail  # type: ignore[union-attr]
        assert page.errors == []
        page.screenshot(tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 50_000
