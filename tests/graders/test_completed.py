"""The completed grader: non-empty output, no error events, a completed turn."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.trajectory import Trajectory

SEED = "graders:\n  - type: completed\n"  # the seed's snippet: no configuration needed


def grade(t: Trajectory) -> GraderResult:
    return grade_run(parse_config(SEED), t).results[0]


def test_a_healthy_session_passes() -> None:
    r = grade(run(llm(), tool("x", {}, result="r"), llm(), output="done"))
    assert (r.status, r.score, r.value) == ("pass", 1.0, True)
    assert r.explanation == (
        "Agent session completed successfully: 2 completed turn(s), no error events, output of 4 characters"
    )


def test_the_flat_and_the_bare_forms_load_too() -> None:
    for text in ("graders:\n  - completed\n", "graders:\n  - type: completed\n    config: {}\n"):
        assert grade_run(parse_config(text), run(llm(), output="ok")).results[0].passed


def test_empty_output_fails() -> None:
    r = grade(run(llm(), output="  \n"))
    assert (r.status, r.score) == ("fail", 0.0)
    assert r.explanation == "Agent produced no output"


def test_error_events_fail_and_name_their_spans() -> None:
    t = run(llm(error=True), llm(), output="done", failed=True)
    r = grade(t)
    assert r.status == "fail"
    failed_llm = t.llm_steps[0].span_id
    assert r.evidence[0].description == "2 error event(s) in trajectory"
    assert failed_llm in r.evidence[0].span_ids and t.root_span_id in r.evidence[0].span_ids
    assert r.details["error_events"] == 2


def test_a_failed_tool_call_the_agent_recovered_from_is_not_an_error_event() -> None:
    assert grade(run(llm(), tool("x", {}, error=True), llm(), output="done")).passed


def test_no_completed_turn_fails() -> None:
    r = grade(run(tool("x", {}, result="r"), output="done"))
    assert r.status == "fail"
    assert r.explanation == "No turn_end events found (no model call) — session may have crashed mid-turn"
    r = grade(run(llm(error=True), output="partial"))
    assert "none of the 1 model call(s) ended without error" in r.explanation
    assert len(r.evidence) == 2  # the error event and the missing turn


def test_every_failed_check_is_reported() -> None:
    r = grade(run(tool("x", {}, result="r"), output="", failed=True))
    assert [e.description.split(" ")[0] for e in r.evidence] == ["Agent", "1", "No"]


def test_output_not_captured_leaves_the_other_checks_to_decide() -> None:
    r = grade(run(llm()))
    assert r.status == "pass" and r.details["output_captured"] is False
    assert "final output not captured by the spans (not checked)" in r.explanation
    assert grade(run(llm(error=True))).status == "fail"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("graders:\n  - type: completed\n    config: {strict: true}\n", "unknown field"),
        ("graders:\n  - type: completed\n    min_turns: 1\n", "unknown field"),
    ],
)
def test_configuration_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(text, "c.yaml")
    assert message in str(e.value) and str(e.value).startswith("c.yaml:")
