"""A real Prometheus server scrapes a real trajgrade metrics endpoint; the alerts fire; the dashboard's queries work.

The metrics source is ``scripts/render_pictures.py source``: the demo's pydantic-ai agents (a good one, a stuck
one, a paging one) run in a loop with ``GradingSpanProcessor`` and OpenTelemetry's ``PrometheusMetricReader``.
The stuck agent loops, breaks its budget, has spans dropped (its runs are graded partial) and trips a faulty
``on_report`` callback (trajgrade's internal errors). Prometheus (Debian's package) runs the alerting rules of
``examples/alerts``, made fast for the test: ``for: 0s``, 20 s windows, and the p95 lines lowered to the demo's
scale; everything else is the real rules file.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from obs import DASHBOARD, RULES, render_pictures, require

#: The p95 lines, lowered so that the demo's small runs cross them (they do not cross the real ones).
FAST_THRESHOLDS = {"TrajgradeRunTokensP95High": "> 100", "TrajgradeRunCostP95High": "> 0.0001"}
ALERTS = {
    "TrajgradeGraderFailureRateHigh",
    "TrajgradeRunBreachingNow",
    "TrajgradeBudgetExceeded",
    "TrajgradeAgentLooping",
    "TrajgradeRunCostP95High",
    "TrajgradeRunTokensP95High",
    "TrajgradeTracesDropped",
    "TrajgradeRunsGradedPartial",
    "TrajgradeInternalErrors",
}


def fast_rules(path: Path) -> Path:
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
            expr = re.sub(r"\[\d+m\]", "[20s]", rule["expr"])
            if rule["alert"] in FAST_THRESHOLDS:
                expr = re.sub(r">\s*[0-9.]+\s*$", FAST_THRESHOLDS[rule["alert"]], expr.strip())
            rule["expr"] = expr
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[render_pictures.Prometheus]:
    require("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = fast_rules(workdir / "rules.yml")
    with render_pictures.metrics_source(workdir) as port, render_pictures.prometheus(workdir, port, [rules]) as p:
        assert p.wait_for("trajgrade_evaluations_total", timeout=30), "Prometheus scraped nothing in 30 s"
        yield p


def firing(prom: render_pictures.Prometheus) -> list[dict[str, Any]]:
    return [a for a in prom.api("alerts")["alerts"] if a["state"] == "firing"]


def test_every_alert_reaches_firing_on_the_demo_agents(prom: render_pictures.Prometheus) -> None:
    deadline = time.monotonic() + 30
    alerts = firing(prom)
    while {a["labels"]["alertname"] for a in alerts} != ALERTS and time.monotonic() < deadline:
        time.sleep(0.5)
        alerts = firing(prom)
    names = {a["labels"]["alertname"] for a in alerts}
    assert names == ALERTS, f"not firing: {sorted(ALERTS - names)}"

    def where(name: str, key: str) -> set[str]:
        return {a["labels"].get(key, "") for a in alerts if a["labels"]["alertname"] == name}

    # Only the stuck agent loops, breaks a budget, fails graders, and has partial runs.
    assert where("TrajgradeAgentLooping", "gen_ai_evaluation_name") == {"no-loops", "max-repeat"}
    for name in (
        "TrajgradeAgentLooping",
        "TrajgradeBudgetExceeded",
        "TrajgradeGraderFailureRateHigh",
        "TrajgradeRunBreachingNow",
    ):
        assert where(name, "gen_ai_agent_name") == {"stuck-agent"}, name
    assert where("TrajgradeBudgetExceeded", "gen_ai_evaluation_name") == {"spend"}  # token-budget passes
    assert where("TrajgradeRunsGradedPartial", "gen_ai_agent_name") == {"stuck-agent"}
    assert where("TrajgradeTracesDropped", "trajgrade_reason") == {"max_spans_per_trace"}
    assert where("TrajgradeInternalErrors", "error_type") == {"RuntimeError"}
    looping = next(a for a in alerts if a["labels"]["alertname"] == "TrajgradeAgentLooping")
    assert looping["annotations"]["summary"].startswith("stuck-agent is looping")


def test_the_queries_return_the_expected_values(prom: render_pictures.Prometheus) -> None:
    def by(expr: str, *keys: str) -> dict[tuple[str, ...], float]:
        return {tuple(r["metric"].get(k, "") for k in keys): float(r["value"][1]) for r in prom.query(expr)}

    verdicts = by(
        "sum by (gen_ai_agent_name, trajgrade_result) (trajgrade_runs_total)", "gen_ai_agent_name", "trajgrade_result"
    )
    assert {k for k, v in verdicts.items() if v > 0} == {
        ("weather-agent", "passed"),
        ("paging-agent", "passed"),
        ("stuck-agent", "failed"),
    }
    pass_rate = by(
        "(sum by (gen_ai_agent_name, gen_ai_evaluation_name)"
        ' (trajgrade_evaluations_total{gen_ai_evaluation_score_label="pass"})'
        " or 0 * sum by (gen_ai_agent_name, gen_ai_evaluation_name) (trajgrade_evaluations_total))"
        " / sum by (gen_ai_agent_name, gen_ai_evaluation_name) (trajgrade_evaluations_total)",
        "gen_ai_agent_name",
        "gen_ai_evaluation_name",
    )
    assert all(v == 1 for (agent, _), v in pass_rate.items() if agent != "stuck-agent")
    assert pass_rate[("stuck-agent", "no-loops")] == 0
    assert pass_rate[("stuck-agent", "token-budget")] == 1
    tool_calls = by(
        "sum by (gen_ai_agent_name) (trajgrade_run_tool_calls_sum)"
        " / sum by (gen_ai_agent_name) (trajgrade_run_tool_calls_count)",
        "gen_ai_agent_name",
    )
    assert tool_calls == {("weather-agent",): 2, ("stuck-agent",): 6, ("paging-agent",): 4}
    # The agents run once a second, so a scrape can land mid-run; what must hold is that no trace stays buffered.
    assert by("min_over_time(sum(trajgrade_traces_active)[15s:1s])") == {(): 0}


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            queries.append((f"{panel['title']} [{target['refId']}]", target["expr"]))
    return queries


def grafana_to_promql(expr: str) -> str:
    """What Grafana sends for 'All' and a 1 s scrape interval."""
    return (
        expr.replace("$__rate_interval", "20s")
        .replace("$__range", "1m")
        .replace('"$agent"', '".*"')
        .replace('"$service"', '".*"')
    )


def test_every_dashboard_panel_query_parses_and_returns_data(prom: render_pictures.Prometheus) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    empty = []
    for title, expr in queries:
        promql = grafana_to_promql(expr)
        assert "$" not in promql, f"{title}: unsubstituted variable in {promql}"
        if not prom.wait_for(promql, timeout=10):
            empty.append(title)
    assert not empty, f"panels with no data: {empty}"
    for variable in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["definition"])
            assert match, variable["definition"]
            series, label = grafana_to_promql(match.group(1)), match.group(2)
            values = {r["metric"].get(label) for r in prom.query(series)}
            assert values - {None}, f"variable {variable['name']} has no values"
