"""Run and result counts are summed in trajgrade and added to their counters in one call per attribute set; no
collection may miss a run graded before it, and counts never wait long when nothing collects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import llm, run, tool
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from readings import metric_points

import trajgrade.core.metrics as metrics_module
from trajgrade import grade_run, parse_config
from trajgrade.core.metrics import GradingMetrics
from trajgrade.core.running import RunReport

CONFIG = parse_config("graders:\n  - type: token-budget\n    config: {max: 150}\n  - type: loop\n    max_repeats: 3\n")


def _reports() -> tuple[RunReport, RunReport]:
    small = grade_run(CONFIG, run(llm(), tool("search", {"q": "a"}, "r")))
    big = grade_run(CONFIG, run(llm(), llm(), tool("search", {"q": "b"}, "r")))
    return small, big


def _sums(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], int]:
    return {tuple(sorted(p.attributes.items())): p.value for p in metric_points(reader, name)}


def test_every_collection_sees_every_run_graded_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "_FLUSH_S", 3600.0)  # only collections add the counts
    reader = InMemoryMetricReader()
    metrics = GradingMetrics(MeterProvider(metric_readers=[reader]))
    small, big = _reports()
    assert small.passed and not big.passed
    for _ in range(5):
        metrics.record_report(small, 0.001)
    metrics.record_report(big, 0.001)
    runs = _sums(reader, "trajgrade.runs")
    assert sorted(runs.values()) == [1, 5]
    assert sum(_sums(reader, "trajgrade.evaluations").values()) == 12  # two graders, six runs
    for _ in range(3):
        metrics.record_report(big, 0.001)
    assert sorted(_sums(reader, "trajgrade.runs").values()) == [4, 5]  # cumulative, nothing counted twice
    assert sum(_sums(reader, "trajgrade.evaluations").values()) == 18


class _Calls:
    """Records the calls to a counter (a spy around the real one)."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter
        self.calls: list[int] = []

    def add(self, amount: int, attributes: Any = None) -> None:
        self.calls.append(amount)
        self.counter.add(amount, attributes)


def test_counts_are_added_once_per_attribute_set_and_without_a_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = InMemoryMetricReader()
    metrics = GradingMetrics(MeterProvider(metric_readers=[reader]))
    spy = metrics.runs = _Calls(metrics.runs)  # type: ignore[assignment]
    small, big = _reports()
    monkeypatch.setattr(metrics_module, "_FLUSH_S", 3600.0)
    for report in (small, small, big, small):
        metrics.record_report(report, 0.001)
    assert spy.calls == []  # summed, not yet added
    metrics.flush()
    assert sorted(spy.calls) == [1, 3]  # one call for the passed runs, one for the failed one
    monkeypatch.setattr(metrics_module, "_FLUSH_S", 0.0)  # nothing collects: the counts still go out
    metrics.record_report(small, 0.001)
    assert sorted(spy.calls) == [1, 1, 3]
    assert sorted(_sums(reader, "trajgrade.runs").values()) == [1, 4]


_BEFORE_AND_AFTER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from factories import run, tool
from opentelemetry.metrics import set_meter_provider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from readings import metric_points
from trajgrade import grade_run, parse_config
from trajgrade.core.metrics import GradingMetrics

report = grade_run(parse_config("graders:\\n  - type: step-count\\n    config: {max: 5}\\n"), run(tool("search")))
metrics = GradingMetrics()  # on the global provider, before the application sets one
before = metrics.recording
metrics.record_report(report, 0.001)
reader = InMemoryMetricReader()
set_meter_provider(MeterProvider(metric_readers=[reader]))
after = metrics.recording
metrics.record_report(report, 0.001)
runs = [p.value for p in metric_points(reader, "trajgrade.runs")]
print(json.dumps({"before": before, "after": after, "runs": runs}))
"""


def test_runs_graded_before_the_application_sets_a_meter_provider_are_not_measured_and_later_ones_are() -> None:
    # The global provider's stand-in instruments drop what they are given until a provider is set: trajgrade skips
    # making those measurements, and measures from then on. A fresh interpreter: the global provider is set once.
    tests = str(Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", _BEFORE_AND_AFTER, tests], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"before": False, "after": True, "runs": [1]}


def test_no_measurement_is_made_on_the_apis_no_op_provider() -> None:
    metrics = GradingMetrics(NoOpMeterProvider())
    assert not metrics.recording
    assert GradingMetrics(MeterProvider()).recording
