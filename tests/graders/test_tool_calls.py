"""The tool-calls grader (seed 003): every matcher rule, every configuration rule, every use case of the seed."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.graders.base import GraderResult
from trajgrade.trajectory import Trajectory


def grade(config: str, t: Trajectory) -> GraderResult:
    return grade_run(parse_config("graders:\n  - type: tool-calls\n    config:\n" + config), t).results[0]


# A coding agent's run: three turns (steps 0, 1, 2).
CODING = run(
    llm(),
    tool("load_skill", {"name": "ts"}, result="ok"),
    tool("view", {"path": "src/app.ts"}, result="export const x = 1"),
    llm(),
    tool("validate", {"target": "src"}, result={"ok": True}),
    tool("bash", {"command": "npm test"}, result="12 passing"),
    tool("create", {"path": "src/new.ts"}, result="created"),
    llm(),
    tool("upload", {"file": "a"}, result="timeout", error=True),
    tool("upload", {"file": "a"}, result="done"),
    tool("bash", {"command": "npm run build"}, result="BUILD SUCCEEDED"),
    tool("report_result", {"summary": "done", "count": 3}, result="reported"),
)


@pytest.mark.parametrize(
    ("config", "status"),
    [
        # the seed's use cases, in its order, on a run where each holds ...
        ("      required:\n        - create\n", "pass"),
        ('      required:\n        - name: bash\n          command: "npm test"\n', "pass"),
        ('      required:\n        - name: "^(bash|powershell)$"\n', "pass"),
        ('      disallowed:\n        - name: view\n          path: "\\\\.env$"\n', "pass"),
        (
            '      required:\n        - name: create\n          path: "src/.*\\\\.ts$"\n'
            '      disallowed:\n        - name: bash\n          command: "rm -rf"\n',
            "pass",
        ),
        ('      sequence:\n        - name: "^validate.*"\n        - name: "^(create|update).*"\n', "pass"),
        ('      required:\n        - name: "^load_skill$"\n          before_step: 3\n', "pass"),
        ('      required:\n        - name: "^load_skill$"\n          at_step: 0\n', "pass"),
        ('      required:\n        - name: "^upload$"\n          min_count: 2\n', "pass"),
        (
            '      required:\n        - name: "^bash$"\n          command: "npm run build"\n'
            '          result: "BUILD SUCCEEDED"\n',
            "pass",
        ),
        ('      required:\n        - name: "^report_result$"\n          final: true\n', "pass"),
        # ... and variants where each does not
        ("      required:\n        - deploy\n", "fail"),
        ('      required:\n        - name: bash\n          command: "npm publish"\n', "fail"),
        ('      disallowed:\n        - name: view\n          path: "app\\\\.ts$"\n', "fail"),
        ("      sequence:\n        - create\n        - validate\n", "fail"),
        ('      required:\n        - name: "^validate$"\n          at_step: 0\n', "fail"),
        ('      required:\n        - name: "^create$"\n          before_step: 1\n', "fail"),
        ('      required:\n        - name: "^upload$"\n          min_count: 3\n', "fail"),
        ('      required:\n        - name: "^bash$"\n          result: "BUILD FAILED"\n', "fail"),
        ('      required:\n        - name: "^upload$"\n          final: true\n', "fail"),
    ],
)
def test_seed_use_cases(config: str, status: str) -> None:
    assert grade(config, CODING).status == status


def test_the_seed_config_example_loads_and_grades() -> None:
    config = parse_config(
        """
graders:
  - type: tool-calls
    config:
      required:
        - create
        - name: bash
          command: "npm test"
      disallowed:
        - name: view
          path: "secret\\\\.env$"
      sequence:
        - name: validate
        - name: create
"""
    )
    r = grade_run(config, CODING).results[0]
    assert (r.status, r.score, r.value, r.limit) == ("pass", 1.0, 4, 4)


def test_args_generic_matching_and_non_string_values_are_absent() -> None:
    t = run(llm(), tool("web_search", {"query": "vally release notes", "limit": 5}, result="[]"))
    assert grade(
        '      required:\n        - name: "^web_search$"\n          args:\n            query: release notes\n', t
    ).passed
    # a number is treated as absent: the args matcher is a non-match, not an error
    r = grade('      required:\n        - name: web_search\n          args: {limit: "5"}\n', t)
    assert r.status == "fail"
    # an argument the call does not have: a non-match
    assert grade("      required:\n        - name: web_search\n          args: {lang: en}\n", t).status == "fail"


def test_command_or_path_missing_from_a_matching_call_is_a_configuration_error() -> None:
    t = run(llm(), tool("bash", {"cmd": "ls"}, result=""))
    r = grade("      required:\n        - name: bash\n          command: ls\n", t)
    assert (r.status, r.error_type) == ("error", "config_error")
    assert "no string 'command' argument" in r.explanation
    t2 = run(llm(), tool("view", {"path": 7}, result=""))
    assert grade("      disallowed:\n        - name: view\n          path: x\n", t2).error_type == "config_error"


def test_sequence_repeated_entries_need_distinct_calls() -> None:
    t = run(llm(), tool("poll", {}, result="wait"), tool("done", {}, result="ok"))
    assert grade("      sequence: [poll, done]\n", t).passed
    assert grade("      sequence: [poll, poll]\n", t).status == "fail"
    t2 = run(llm(), tool("poll", {}, result="wait"), llm(), tool("poll", {}, result="ok"))
    assert grade("      sequence: [poll, poll]\n", t2).passed


def test_a_run_without_turns_is_step_zero_and_an_empty_run_meets_absence_only_configs() -> None:
    t = run(tool("validate", {}, result="ok"))
    assert t.tool_steps[0].turn == 0
    assert grade("      required:\n        - name: validate\n          at_step: 0\n", t).passed
    empty = run(llm())
    assert grade("      disallowed: [delete]\n", empty).passed
    assert grade("      required: [anything]\n", empty).status == "fail"


def test_not_evaluable_when_arguments_or_results_were_not_captured() -> None:
    t = run(llm(), tool("bash"))  # neither arguments nor result captured
    r = grade("      required:\n        - name: bash\n          command: ls\n", t)
    assert (r.status, r.error_type) == ("error", "not_evaluable")
    r = grade(
        "      required:\n        - name: bash\n          result: ok\n", run(llm(), tool("bash", {"command": "ls"}))
    )
    assert r.error_type == "not_evaluable"
    # name-only matchers need neither
    assert grade("      required: [bash]\n", t).passed


def test_evidence_names_the_calls_and_the_score_counts_checks() -> None:
    r = grade("      required: [create, deploy]\n      disallowed: [view]\n", CODING)
    assert r.status == "fail"
    assert r.score == pytest.approx(1 / 3)
    view = next(s for s in CODING.tool_steps if s.tool and s.tool.name == "view")
    assert view.span_id in r.evidence[2].span_ids
    assert "required 'deploy': no matching call" in r.explanation


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("      {}\n", "at least one of required, disallowed or sequence must be provided"),
        ('      required:\n        - name: "("\n', "invalid regex"),
        ('      required:\n        - "["\n', "invalid regex"),
        ("      disallowed:\n        - name: x\n          min_count: 2\n", "allowed on required entries only"),
        ("      sequence:\n        - name: x\n          at_step: 1\n", "allowed on required entries only"),
        ("      sequence:\n        - name: x\n          result: ok\n", "result is not supported on sequence entries"),
        ("      required:\n        - name: x\n          before_step: 0\n", "greater than or equal to 1"),
        ("      required:\n        - name: x\n          at_step: 2\n          before_step: 2\n", "must be less than"),
        ("      required:\n        - name: x\n          min_count: 0\n", "greater than or equal to 1"),
        ("      required:\n        - name: x\n          colour: red\n", "unknown field"),
        ("      required:\n        - command: ls\n", "is required"),
    ],
)
def test_configuration_errors(config: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - type: tool-calls\n    config:\n" + config, "tools.yaml")
    assert message in str(e.value)
    assert str(e.value).startswith("tools.yaml:")
