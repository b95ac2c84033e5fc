"""Loading a graders file that is wrong: every error names the file, the line and the field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajgrade.core.config_loading import MAX_CONFIG_NODES, load_config, parse_config
from trajgrade.exceptions import ConfigError


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(text, "suite.yaml")
    return str(e.value)


def test_a_missing_file_is_named() -> None:
    path = "/nonexistent/dir/graders.yaml"
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}: cannot read: ")
    assert "No such file or directory" in str(e.value)


def test_a_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    path = tmp_path / "graders.yaml"
    path.write_bytes(b"graders:\n  - type: \xff\xfe\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}: cannot read: ")


def test_a_file_is_named_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "graders.yaml"
    path.write_text("graders:\n  - type: completed\n  - type: completed\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}:3: graders[1] (completed): name: duplicate grader name 'completed'")


def test_invalid_yaml_names_the_file_and_line() -> None:
    message = error_of("graders:\n  - type: completed\n    name: [unclosed\n")
    assert message.startswith("suite.yaml:4: invalid YAML: expected ',' or ']'")
    assert message.endswith("(while parsing a flow sequence from line 3)")
    assert error_of("graders:\n\t- type: completed\n").startswith("suite.yaml:2: invalid YAML: found character '\\t'")
    bad_indent = error_of("graders:\n  - type: completed\n   name: x\n")
    assert bad_indent.startswith("suite.yaml:3: invalid YAML: ")


def test_an_alias_bomb_is_refused_without_expanding_it() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    message = error_of("\n".join([*lines, "graders: [completed]"]) + "\n")
    assert message == (
        f"suite.yaml: its aliases expand to more than {MAX_CONFIG_NODES:,} YAML nodes "
        "(a graders file is never that large)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "suite.yaml: top level: the file is empty: expected `graders:` (a list) or `suites:`"),
        ("just text\n", "suite.yaml:1: top level: expected a mapping with `graders:` or `suites:`"),
        ("graders:\n  - name: x\n", "suite.yaml:2: graders[0].type: missing `type` (see `trajgrade graders` for the"),
        (
            "graders:\n  - type: completed\n  - type: no-such-grader\n",
            "suite.yaml:3: graders[1].type: unknown grader type 'no-such-grader' (see `trajgrade graders`)",
        ),
        ("graders: []\n", "suite.yaml:1: graders: a suite needs at least one grader"),
    ],
)
def test_structure_and_grader_type_errors(text: str, expected: str) -> None:
    assert error_of(text).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # options beside `type`: the field is named as written
        (
            "graders:\n  - type: token-budget\n    max: 5\n    maximum: 3\n",
            "suite.yaml:4: graders[0] (token-budget): maximum: unknown field for token-budget (fields: max)",
        ),
        # options under `config`: the path goes through it
        (
            "graders:\n  - type: token-budget\n    config:\n      max: 5\n      maxx: 3\n",
            "suite.yaml:5: graders[0] (token-budget): config.maxx: unknown field for token-budget (fields: max)",
        ),
        # inside a list of the options
        (
            "graders:\n  - type: tool_trajectory\n    mode: in_order\n    expected:\n      - {tool: a, bogus: 1}\n",
            "suite.yaml:5: graders[0] (tool_trajectory): expected[0].bogus: unknown field for tool_trajectory",
        ),
        # a composite's child: the child's own path
        (
            "graders:\n  - type: composite\n    evaluators:\n      - type: token-budget\n"
            "        config: {max: 5, nope: 1}\n",
            "suite.yaml:5: graders[0].evaluators[0] (token-budget): config.nope: unknown field for token-budget",
        ),
        (
            "graders:\n  - type: token-budget\n    max: lots\n",
            "suite.yaml:3: graders[0] (token-budget): max: Input should be a valid integer",
        ),
        ("graders:\n  - type: tool_trajectory\n", "suite.yaml:2: graders[0] (tool_trajectory): mode: is required"),
        (
            "graders:\n  - type: token-budget\n    config: {max: 5}\n    weight: 2\n    max: 3\n",
            "suite.yaml:5: graders[0] (token-budget): max: options go under `config` in this form, not beside it",
        ),
    ],
)
def test_option_errors_name_the_field_path(text: str, expected: str) -> None:
    assert error_of(text).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "graders:\n  - type: completed\n    weight: -1\n",
            "suite.yaml:3: graders[0] (completed): weight: must be a finite number >= 0",
        ),
        (
            "graders:\n  - type: completed\n    weight: heavy\n",
            "suite.yaml:3: graders[0] (completed): weight: must be a finite number >= 0",
        ),
        (
            "graders:\n  - type: completed\n    weight: .inf\n",
            "suite.yaml:3: graders[0] (completed): weight: must be a finite number >= 0",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  weights: {other: 1}\n",
            "suite.yaml:4: scoring.weights.other: no grader named 'other' in this list",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  weights: {completed: -2}\n",
            "suite.yaml:4: scoring.weights.completed: a weight is a finite number >= 0",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  weights: {completed: .inf}\n",
            "suite.yaml:4: scoring.weights.completed: a weight is a finite number >= 0",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  weights: [completed]\n",
            "suite.yaml:4: scoring.weights: weights maps grader names to numbers",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  threshold: 1.5\n",
            "suite.yaml:4: scoring.threshold: threshold must be a number from 0 to 1",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  threshold: high\n",
            "suite.yaml:4: scoring.threshold: threshold must be a number from 0 to 1",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  timeout: 0\n",
            "suite.yaml:4: scoring.timeout: timeout: seconds per grader, a number > 0 or a duration ('2s')",
        ),
        (
            "graders:\n  - type: completed\nscoring:\n  timeout: soon\n",
            "suite.yaml:4: scoring.timeout: timeout: 'soon' is not a duration",
        ),
        (
            "graders: [completed]\nscoring:\n  treshold: 0.5\n",
            "suite.yaml:3: scoring.treshold: unknown field (scoring has threshold, weights and timeout)",
        ),
    ],
)
def test_weights_threshold_and_timeout_errors(text: str, expected: str) -> None:
    assert error_of(text).startswith(expected)


def test_scoring_is_read_when_valid() -> None:
    config = parse_config(
        "graders:\n  - type: completed\n  - {name: b, type: completed}\n"
        "scoring: {threshold: 0.5, weights: {b: 2}, timeout: 2m}\n"
    )
    (suite,) = config.suites
    assert (suite.scoring.threshold, dict(suite.scoring.weights), suite.scoring.timeout) == (0.5, {"b": 2.0}, 120.0)


def test_duplicate_grader_names_are_refused_in_any_list() -> None:
    assert error_of("graders:\n  - type: completed\n  - {type: completed}\n") == (
        "suite.yaml:3: graders[1] (completed): name: duplicate grader name 'completed' (also graders[0]); "
        "give each grader of a list its own name"
    )
    child = error_of(
        "graders:\n  - type: composite\n    evaluators:\n      - {name: a, type: completed}\n"
        "      - {name: a, type: latency, max_ms: 5}\n"
    )
    assert child.startswith("suite.yaml:5: graders[0].evaluators[1] (latency): name: duplicate grader name 'a'")
    # the same name in two suites is fine
    two = parse_config("suites:\n  - {name: x, graders: [completed]}\n  - {name: y, graders: [completed]}\n")
    assert [g.name for s in two.suites for g in s.graders] == ["completed", "completed"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "suites:\n  - name: a\n    graders: [completed]\n    color: red\n",
            "suite.yaml:4: suites[0].color: unknown field in a suite",
        ),
        (
            "suites:\n  - name: a\n    match: {agent_name: '('}\n    graders: [completed]\n",
            "suite.yaml:3: suites[0].match.agent_name: invalid regex '('",
        ),
        (
            "suites:\n  - name: a\n    match: {agent: x}\n    graders: [completed]\n",
            "suite.yaml:3: suites[0].match.agent: unknown field in match",
        ),
        (
            "graders: [completed]\nprices:\n  gpt: {input: 1}\n",
            "suite.yaml:3: prices.gpt: a price needs input and output (USD per million tokens)",
        ),
        (
            "graders: [completed]\nprices:\n  gpt: {input: 1, output: .inf}\n",
            "suite.yaml:3: prices.gpt.output: a price is a finite number >= 0",
        ),
    ],
)
def test_suite_match_and_price_errors(text: str, expected: str) -> None:
    assert error_of(text).startswith(expected)
