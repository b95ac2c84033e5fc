"""The alerting rules are valid, and each one fires when it should and not when it should not (promtool)."""

from __future__ import annotations

import subprocess

import yaml
from obs import RULES, RULES_TEST, require


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run([require("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 9 rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = subprocess.run(
        [require("promtool"), "test", "rules", RULES_TEST.name], capture_output=True, text=True, cwd=RULES_TEST.parent
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rule_has_a_unit_test_that_fires_and_one_that_does_not() -> None:
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    fires: set[str] = set()
    silent: set[str] = set()
    for test in yaml.safe_load(RULES_TEST.read_text())["tests"]:
        for case in test["alert_rule_test"]:
            (fires if case["exp_alerts"] else silent).add(case["alertname"])
    assert fires == rules
    assert silent == rules
