"""The tool-calls grader (seed 003): every matcher rule, every configuration rule, every use case of the seed."""

from __future__ import annotations

import pytest
from factories import llm, run, tool

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.trajectory import Trajectory


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


def test_evidence_names_the_calls_and_the_score_is_binary() -> None:
    r = grade("      required: [create, deploy]\n      disallowed: [view]\n", CODING)
    assert (r.status, r.score, r.value, r.limit) == ("fail", 0.0, 1, 3)
    view = next(s for s in CODING.tool_steps if s.tool and s.tool.name == "view")
    create = next(s for s in CODING.tool_steps if s.tool and s.tool.name == "create")
    assert r.evidence[0].description == "required 'create': 1 matching call(s)"
    assert r.evidence[0].span_ids == (create.span_id,)
    assert "required 'deploy': no matching call" in r.explanation
    assert "disallowed 'view': called 1 time(s)" in r.explanation
    assert r.evidence[2].span_ids == (view.span_id,)
    assert r.explanation.startswith("2 of 3 check(s) not met")
    assert [c["status"] for c in r.details["checks"]] == ["met", "unmet", "unmet"]


def test_every_seed_snippet_loads_and_behaves_as_described() -> None:
    def seed(snippet: str, t: Trajectory) -> str:
        return grade_run(parse_config("graders:\n" + snippet), t).results[0].status

    # "Agent must not view sensitive files"
    snippet = '- type: tool-calls\n  config:\n    disallowed:\n      - name: view\n        path: "\\\\.env$"\n'
    assert seed(snippet, CODING) == "pass"
    assert seed(snippet, run(llm(), tool("view", {"path": "app/.env"}, result="KEY=1"))) == "fail"
    # "Agent must validate before it mutates (ordered subsequence)"
    snippet = (
        '- type: tool-calls\n  config:\n    sequence:\n      - name: "^validate_.*"\n'
        '      - name: "^(create|update)_.*"\n'
    )
    good = run(llm(), tool("validate_schema", {}, result="ok"), tool("read", {}), tool("update_user", {}, result="ok"))
    bad = run(llm(), tool("create_user", {}, result="ok"), tool("validate_schema", {}, result="ok"))
    assert (seed(snippet, good), seed(snippet, bad)) == ("pass", "fail")
    # "Agent must search for a specific query (generic argument matching)"
    snippet = (
        '- type: tool-calls\n  config:\n    required:\n      - name: "^web_search$"\n'
        '        args:\n          query: "release notes"\n'
    )
    assert seed(snippet, run(llm(), tool("web_search", {"query": "vally release notes"}, result="[]"))) == "pass"
    assert seed(snippet, run(llm(), tool("web_search", {"query": "vally docs"}, result="[]"))) == "fail"
    # "Combine required and disallowed"
    snippet = (
        '- type: tool-calls\n  config:\n    required:\n      - name: edit\n        path: "src/.*\\\\.ts$"\n'
        '    disallowed:\n      - name: bash\n        command: "rm -rf"\n'
    )
    edit = tool("edit", {"path": "src/app.ts"}, result="ok")
    assert seed(snippet, run(llm(), edit, tool("bash", {"command": "npm test"}, result="ok"))) == "pass"
    assert seed(snippet, run(llm(), edit, tool("bash", {"command": "rm -rf build"}, result=""))) == "fail"
    assert seed(snippet, run(llm(), tool("edit", {"path": "README.md"}, result="ok"))) == "fail"
    # "Agent must validate in the very first step"
    snippet = '- type: tool-calls\n  config:\n    required:\n      - name: "^validate$"\n        at_step: 0\n'
    assert seed(snippet, run(llm(), tool("validate", {}), llm())) == "pass"
    assert seed(snippet, CODING) == "fail"  # validate is called in step 1


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
    # every listed argument must be present and match; matching is unanchored unless anchored
    assert grade(
        "      required:\n        - name: web_search\n          args: {query: vally, limit: x}\n", t
    ).status == ("fail")
    assert grade('      required:\n        - name: web_search\n          args: {query: "^release"}\n', t).status == (
        "fail"
    )


def test_command_or_path_missing_from_a_matching_call_is_a_configuration_error() -> None:
    t = run(llm(), tool("bash", {"cmd": "ls"}, result=""))
    r = grade("      required:\n        - name: bash\n          command: ls\n", t)
    assert (r.status, r.error_type) == ("error", "config_error")
    assert "no string 'command' argument" in r.explanation
    t2 = run(llm(), tool("view", {"path": 7}, result=""))
    assert grade("      disallowed:\n        - name: view\n          path: x\n", t2).error_type == "config_error"
    # whatever the order: a call that already met the matcher does not hide the error
    t3 = run(llm(), tool("bash", {"command": "ls"}, result=""), tool("bash", {"script": "ls"}, result=""))
    assert grade("      required:\n        - name: bash\n          command: ls\n", t3).error_type == "config_error"
    # a call whose name does not match is never asked for the argument
    t4 = run(llm(), tool("bash", {"command": "ls"}, result=""), tool("view", {"file": "a"}, result=""))
    assert grade("      required:\n        - name: ^bash$\n          command: ls\n", t4).passed


def test_calls_of_equal_argument_text_match_alike_and_their_results_each_on_its_own() -> None:
    """A matcher reads the arguments of one tool's calls of equal text once (the run's numbering by text), and still
    reads each call's result."""
    from trajgrade.core.trajectory.call_texts import call_texts

    calls = [tool("search", {"q": "cats" if i % 2 else "dogs"}, result="found" if i < 4 else "none") for i in range(6)]
    t = run(llm(), *calls)
    assert call_texts(t).arguments_of(list(t.tool_steps))[2:] == [0, 1, 0, 1]  # judged as the first of their text
    required = '      required:\n        - name: search\n          args: {q: "^cats$"}\n          min_count: %d\n'
    assert grade(required % 3, t).passed and grade(required % 4, t).status == "fail"
    r = grade("      disallowed:\n        - name: search\n          args: {q: dogs}\n", t)
    assert r.status == "fail" and r.evidence[0].span_ids == tuple(t.tool_steps[i].span_id for i in (0, 2, 4))
    with_result = "      required:\n        - name: search\n          args: {q: cats}\n          result: found\n"
    assert grade(with_result + "          min_count: 2\n", t).passed
    assert grade(with_result + "          min_count: 3\n", t).status == "fail"  # the third cats call found none


def test_result_matching_stringifies_non_string_results() -> None:
    t = run(llm(), tool("build", {}, result={"ok": True, "warnings": 0}))
    for pattern in ("'\"ok\":true'", "'\"ok\": true'", "'warnings'"):
        assert grade(f"      required:\n        - name: build\n          result: {pattern}\n", t).passed, pattern
    assert grade("      required:\n        - name: build\n          result: 'false'\n", t).status == "fail"
    # disallowed entries honour result filters too
    assert grade("      disallowed:\n        - name: build\n          result: ok\n", t).status == "fail"
    assert grade("      disallowed:\n        - name: build\n          result: error\n", t).passed


def test_min_count_final_and_steps_combined() -> None:
    t = run(
        llm(), tool("upload", {}, result="fail"), llm(), tool("upload", {}, result="ok"), tool("report", {}, result="")
    )
    assert grade(
        "      required:\n        - name: upload\n          min_count: 2\n          before_step: 2\n", t
    ).passed
    r = grade("      required:\n        - name: upload\n          min_count: 2\n          at_step: 1\n", t)
    assert r.status == "fail" and "1 matching call(s) of the 2 needed" in r.explanation
    # final: the run's last tool call must be a matching one (here report, not upload)
    r = grade("      required:\n        - name: upload\n          final: true\n", t)
    assert r.status == "fail" and "but the last tool call is report" in r.explanation
    t2 = run(llm(), tool("upload", {}, result="a"), llm(), tool("upload", {}, result="b"))
    assert grade("      required:\n        - name: upload\n          min_count: 2\n          final: true\n", t2).passed
    assert grade(
        "      required:\n        - name: upload\n          min_count: 3\n          final: true\n", t2
    ).status == ("fail")


def test_sequence_repeated_entries_need_distinct_calls() -> None:
    t = run(llm(), tool("poll", {}, result="wait"), tool("done", {}, result="ok"))
    assert grade("      sequence: [poll, done]\n", t).passed
    assert grade("      sequence: [poll, poll]\n", t).status == "fail"
    t2 = run(llm(), tool("poll", {}, result="wait"), llm(), tool("poll", {}, result="ok"))
    assert grade("      sequence: [poll, poll]\n", t2).passed
    r = grade("      sequence: [poll, done, poll]\n", t)
    assert r.status == "fail" and "'poll' (entry 2) not found after the previous entries (2 of 3" in r.explanation


def test_a_run_without_turns_is_step_zero_and_an_empty_run_meets_absence_only_configs() -> None:
    t = run(tool("validate", {}, result="ok"))
    assert t.tool_steps[0].turn == 0
    assert grade("      required:\n        - name: validate\n          at_step: 0\n", t).passed
    empty = run(llm())
    assert grade("      disallowed: [delete]\n", empty).passed
    assert grade("      required: [anything]\n", empty).status == "fail"
    assert grade("      required:\n        - name: anything\n          final: true\n", empty).status == "fail"


def test_uncaptured_data_is_not_evaluable_only_when_it_could_change_the_verdict() -> None:
    blind = run(llm(), tool("bash"))  # neither arguments nor result captured
    r = grade("      required:\n        - name: bash\n          command: ls\n", blind)
    assert (r.status, r.error_type) == ("error", "not_evaluable")
    assert "did not capture" in r.explanation and "bash (span" in r.explanation
    r = grade(
        "      required:\n        - name: bash\n          result: ok\n", run(llm(), tool("bash", {"command": "ls"}))
    )
    assert r.error_type == "not_evaluable"
    # name-only matchers need neither
    assert grade("      required: [bash]\n", blind).passed
    # a required matcher already met, a disallowed one already violated: decided without the blind call
    mixed = run(llm(), tool("bash", {"command": "ls"}, result="x"), tool("bash"))
    assert grade("      required:\n        - name: bash\n          command: ls\n", mixed).passed
    assert grade("      disallowed:\n        - name: bash\n          command: ls\n", mixed).status == "fail"
    assert grade("      disallowed:\n        - name: bash\n          command: rm\n", mixed).error_type == (
        "not_evaluable"
    )
    # another check failing decides the verdict
    r = grade("      required:\n        - deploy\n        - name: bash\n          command: rm\n", mixed)
    assert r.status == "fail"
    # a sequence impossible even if the blind call matched
    assert grade("      sequence:\n        - name: bash\n          command: rm\n        - deploy\n", mixed).status == (
        "fail"
    )
    assert grade("      sequence:\n        - view\n        - name: bash\n          command: rm\n", mixed).status == (
        "fail"
    )
    seq = run(llm(), tool("view", {"path": "a"}, result=""), tool("bash"))
    assert grade("      sequence:\n        - view\n        - name: bash\n          command: rm\n", seq).error_type == (
        "not_evaluable"
    )


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
        ("      required:\n        - command: ls\n", "required[0].name: is required"),
        ("      required: []\n      disallowed: []\n", "must be provided (and not empty)"),
        ('      required: [""]\n', "an empty regex matches every tool"),
        ("      disallowed:\n        - name: x\n          final: true\n", "final is allowed on required entries only"),
        ("      sequence:\n        - name: x\n          before_step: 2\n", "before_step is allowed on required"),
        ("      disallowed:\n        - name: x\n          at_step: 0\n", "at_step is allowed on required entries only"),
        ('      required:\n        - name: x\n          command: "+"\n', "command: invalid regex"),
        ('      required:\n        - name: x\n          args: {q: "(a"}\n', "args.q: invalid regex"),
        ("      required:\n        - name: x\n          args: {q: 5}\n", "valid string"),
        ('      required:\n        - name: x\n          result: "["\n', "result: invalid regex"),
        ("      required:\n        - name: x\n          at_step: 1.5\n", "valid integer"),
        ("      required: create\n", "required: expected a list of tool names"),
        ("      required:\n        - 7\n", "entry 0: expected a tool name (a regex) or a ToolMatch"),
    ],
)
def test_configuration_errors(config: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config("graders:\n  - type: tool-calls\n    config:\n" + config, "tools.yaml")
    assert message in str(e.value)
    assert str(e.value).startswith("tools.yaml:")
