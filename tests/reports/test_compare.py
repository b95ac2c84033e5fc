"""Comparison with a baseline: the edit script, the ``baseline`` grader, and ``trajgrade compare``, on fixtures."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import xmlschema
from factories import llm, tool, tool_steps
from factories import run as run_of
from hypothesis import given
from hypothesis import strategies as st

from trajgrade import ConfigError, parse_config
from trajgrade.core.compare import _call_texts, _opcodes, compare, tool_call_text
from trajgrade.core.graders.baseline import against
from trajgrade.core.graders.options import BaselineConfig
from trajgrade.core.runfiles import FileRun, read_runs
from trajgrade.core.running import grade_run
from trajgrade.core.trajectory.content import _arguments

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "langgraph"
OI, LLMETRY = FIXTURES / "openinference", FIXTURES / "openllmetry"
TRAJGRADE = Path(sys.executable).with_name("trajgrade")
SCHEMA = xmlschema.XMLSchema(Path(__file__).with_name("junit.xsd"))


def run(path: Path):  # type: ignore[no-untyped-def]
    runs, problems = read_runs([str(path)])
    assert not problems and len(runs) == 1
    return runs[0].trajectory


@given(st.lists(st.sampled_from("abcd"), max_size=30), st.lists(st.sampled_from("abcdefgh"), max_size=80))
def test_the_edit_script_is_difflibs_own(before: list[str], after: list[str]) -> None:
    # only the candidate's calls the baseline also has are indexed: the script must not change
    assert _opcodes(before, after) == difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()


def test_the_edit_script_turns_the_baseline_tool_calls_into_the_candidates() -> None:
    golden, looping = run(OI / "three_tools.json"), run(OI / "repeat_six.json")
    c = compare(golden, looping)
    before = [tool_call_text(s.tool.name, s.tool.arguments) for s in golden.tool_steps if s.tool]
    after = [tool_call_text(s.tool.name, s.tool.arguments) for s in looping.tool_steps if s.tool]
    rebuilt: list[str] = []
    for e in c.edits:
        if e.op == "equal":
            assert list(e.baseline) == list(e.candidate)
        rebuilt += e.candidate
    assert rebuilt == after and [b for e in c.edits for b in e.baseline] == before
    assert c.edit_count == 6  # three calls replaced by six searches
    assert c.metrics["llm_calls"] == (golden.summary.llm_calls, looping.summary.llm_calls) == (4, 7)
    assert c.increase("total_tokens") == pytest.approx((217 - 88) / 88)
    same = compare(golden, golden)
    assert same.edit_count == 0 and all(same.increase(m) in (0.0, None) for m in same.metrics)


def test_calls_of_equal_argument_text_are_written_once_and_as_each_alone() -> None:
    texts = ('{"q": "a", "n": 1}', '{"n": 1, "q": "a"}', '{"q": "a", "n": 1.0}', '{"q": "a", "n": NaN}', "not json")
    calls = [(name, text, "r") for _ in range(3) for name in ("search", "read") for text in texts]
    written = _call_texts(tool_steps(calls))
    assert written == _call_texts(tool_steps(calls, parsed=True))
    assert written == [tool_call_text(name, _arguments(text)) for name, text, _ in calls]
    assert written[0] is written[2 * len(texts)] and written[0] != written[len(texts)]  # per tool and text


def test_the_baseline_grader_writes_each_edit_shown_as_removed_and_added_calls() -> None:
    """The first three edits, each ``-removed +added`` (a call a word, ten a side, then how many more), then the
    counts that grew, all joined by "; "; whatever the kinds of edit."""

    def side(sign: str, names: tuple[str, ...]) -> str:
        more = f" (and {len(names) - 10:,} more)" if len(names) > 10 else ""
        return sign + f" {sign}".join(names[:10]) + more if names else ""

    def written(removed: tuple[str, ...], added: tuple[str, ...]) -> str:
        return " ".join(w for w in (side("-", removed), side("+", added)) if w)

    def calls(*names: str) -> list[dict[str, object]]:
        return [x for name in names for x in (llm(), tool(name, {"q": name}, "r"))]

    golden = FileRun("golden.json", run_of(*calls("a", "b", "c", "d", "e", "f", "g")))
    config = BaselineConfig(path=str(OI / "three_tools.json"), max_tool_edits=0, max_increase={"llm_calls": 0.0})
    for candidate in (
        calls("a", "x", "c", "d", "y", "y", "f", "z", "g", "w"),  # replaced, replaced by two, inserted, inserted
        calls("b", "c", "e", "g"),  # deleted only
        calls("a", "b", "c", "d", "e", "f", "g", "h", "i"),  # inserted only, more model calls
        calls("x", "y", "z"),
        calls("a", "b", "c", "d", "e", "f", "g", *(f"n{i}" for i in range(25))),  # inserted: more than ten calls
    ):
        t = run_of(*candidate)
        result = against(golden, t, config)
        c = compare(golden.trajectory, t)
        changed = [e for e in c.edits if e.op != "equal"][:3]
        shown = "; ".join(written(e.baseline, e.candidate) for e in changed)
        problems = [f"{c.edit_count} tool call edit(s) from the baseline (max 0): {shown}"]
        grew = c.increase("llm_calls")
        if grew is not None and grew > 0:
            before, after = c.metrics["llm_calls"]
            problems.append(f"llm_calls {before:g} -> {after:g} (+{grew:.0%}, max +0%)")
        assert result.explanation == "; ".join(problems)
        assert result.score == (2 - len(problems)) / 2
        if len(candidate) > 40:
            assert '+n9({"q":"n9"}) (and 15 more)' in result.explanation, result.explanation
            assert len(result.evidence[0].span_ids) == 25  # every span, though ten are named
        assert [e.description for e in result.evidence[1:]] == problems[1:]


def test_one_scenario_through_two_instrumentations_is_the_same_run() -> None:
    """The same LangGraph scenario recorded by OpenInference and by OpenLLMetry: no edits, the same counts."""
    for scenario in ("three_tools", "repeat_six", "parallel_tools", "delegation"):
        c = compare(run(OI / f"{scenario}.json"), run(LLMETRY / f"{scenario}.json"))
        assert c.edit_count == 0, scenario
        for metric in ("llm_calls", "tool_calls", "total_tokens"):
            assert c.increase(metric) == 0, (scenario, metric)


def test_the_baseline_grader_fails_a_drifting_run_and_names_what_moved() -> None:
    config = parse_config(
        f"graders:\n  - type: baseline\n    path: {OI / 'three_tools.json'}\n"
        "    max_tool_edits: 1\n    max_increase: {total_tokens: 0.5}\n"
    )
    (same,) = grade_run(config, run(OI / "three_tools.json")).results
    assert same.status == "pass" and same.score == 1.0
    (drift,) = grade_run(config, run(OI / "repeat_six.json")).results
    assert drift.status == "fail" and drift.score == 0.0
    assert "6 tool call edit(s) from the baseline (max 1)" in drift.explanation
    assert "total_tokens 88 -> 217 (+147%, max +50%)" in drift.explanation
    looping = run(OI / "repeat_six.json")
    assert set(drift.evidence[0].span_ids) == {s.span_id for s in looping.tool_steps}
    assert drift.details["tool_edits"] == 6 and drift.details["baseline_file"].endswith("three_tools.json")


def test_a_run_without_a_baseline_of_its_key_is_not_evaluable_and_a_bad_baseline_is_a_config_error() -> None:
    config = parse_config(
        f"graders:\n  - type: baseline\n    path: {OI / 'three_tools.json'}\n    key: 'attribute:session.id'\n"
    )
    (result,) = grade_run(config, run(OI / "three_tools.json")).results
    assert result.error_type == "not_evaluable" and "no baseline run with attribute:session.id" in result.explanation
    with pytest.raises(ConfigError, match="path: .*nowhere.json: cannot read"):
        parse_config("graders:\n  - type: baseline\n    path: nowhere.json\n")
    with pytest.raises(ConfigError, match="key"):
        parse_config(f"graders:\n  - type: baseline\n    path: {OI / 'three_tools.json'}\n    key: colour\n")


def test_compare_matches_by_file_across_directories_and_exits_for_ci(tmp_path: Path) -> None:
    same = subprocess.run(
        [TRAJGRADE, "compare", OI, LLMETRY, "--key", "file", "--max-increase", "llm_calls=0", "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0, same.stderr
    runs = json.loads(same.stdout)["runs"]
    assert len(runs) == 7 and all(r["passed"] for r in runs)
    drift = subprocess.run(
        [
            TRAJGRADE,
            "compare",
            OI / "three_tools.json",
            OI / "repeat_six.json",
            "--format",
            "junit",
            "-o",
            tmp_path / "c.xml",
        ],
        capture_output=True,
        text=True,
    )
    assert drift.returncode == 1
    SCHEMA.validate(str(tmp_path / "c.xml"))
    loose = subprocess.run(
        [TRAJGRADE, "compare", OI / "three_tools.json", OI / "repeat_six.json", "--max-tool-edits", "-1"],
        capture_output=True,
        text=True,
    )
    assert loose.returncode == 0
    nothing = subprocess.run(
        [TRAJGRADE, "compare", OI / "three_tools.json", OI / "repeat_six.json", "--key", "attribute:nope"],
        capture_output=True,
        text=True,
    )
    assert nothing.returncode == 2 and "no run of the candidate matched a baseline run" in nothing.stderr


def test_compare_with_a_config_reports_the_verdicts_of_both_runs() -> None:
    config = Path(__file__).with_name("graders.yaml")
    out = subprocess.run(
        [
            TRAJGRADE,
            "compare",
            OI / "three_tools.json",
            OI / "repeat_six.json",
            "--config",
            config,
            "--max-tool-edits",
            "-1",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1  # the candidate loops
    (report,) = json.loads(out.stdout)["runs"]
    baseline = next(r for r in report["results"] if r["type"] == "baseline")
    assert baseline["details"]["verdict"] == {"baseline_passed": True, "candidate_passed": False}
    assert {r["name"] for r in report["results"]} >= {"baseline", "no-loops", "spend", "completed"}
