"""What every door of trajgrade does once a run's spans are in: build, grade, record, report.

The processor, the exporter wrapper and the sidecar differ only in how spans arrive and where the results go;
they all call :meth:`Grading.grade`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.metrics import MeterProvider

from trajgrade.core.collector import CollectedRun
from trajgrade.core.config import Config
from trajgrade.core.inflight import Breach
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.metrics import GradingMetrics
from trajgrade.core.running import RunReport, grade_run

__all__ = ["Grading"]

logger = logging.getLogger(__name__)


class Grading:
    """Grades runs with one config and records them on one set of instruments."""

    def __init__(
        self,
        config: Config,
        *,
        meter_provider: MeterProvider | None = None,
        on_report: Callable[[RunReport], Any] | None = None,
        on_breach: Callable[[Breach], Any] | None = None,
        active: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.metrics = GradingMetrics(meter_provider, active=active)
        self.on_report = on_report
        self.on_breach = on_breach
        # Guards the tallies a door reports when it stops (``summary``): what it dropped and what failed inside it,
        # by reason, as its metrics count them, and the runs it graded.
        self._lock = threading.Lock()
        self._drops: collections.Counter[str] = collections.Counter()
        self._errors: collections.Counter[str] = collections.Counter()
        self._graded = 0

    def breached(self, breach: Breach) -> None:
        """Record an in-flight breach and hand it to ``on_breach`` (called once per run and grader)."""
        with internal_errors("breach", self.count_internal_error):
            self.metrics.record_breach(breach)
        if self.on_breach is not None:
            with internal_errors("on_breach callback", self.count_internal_error):
                self.on_breach(breach)

    def count_drop(self, reason: str) -> None:
        with self._lock:
            self._drops[reason] += 1
        self.metrics.record_drop(reason)

    def count_internal_error(self, error_type: str) -> None:
        with self._lock:
            self._errors[error_type] += 1
        self.metrics.record_internal_error(error_type)

    def summary(self) -> str:
        """What this grading did so far, in one line: the runs graded, and what was dropped and what failed inside,
        each by reason (as ``trajgrade.traces.dropped`` and ``trajgrade.internal_errors`` count them)."""
        with self._lock:
            graded, drops, errors = self._graded, sorted(self._drops.items()), sorted(self._errors.items())
        return f"{graded} runs graded; traces or spans dropped: {_tally(drops)}; internal errors: {_tally(errors)}"

    def grade(self, run: CollectedRun[Any]) -> RunReport | None:
        """Build and grade a run; record its metrics; hand it to ``on_report``. A root that is not a run (an
        agent's setup alone) gives None."""
        report: RunReport | None = None
        if not run.is_run:
            return None
        with internal_errors("grading", self.count_internal_error):
            started = time.perf_counter()
            trajectory = run.trajectory(self.config.prices)
            report = grade_run(self.config, trajectory)
            self.metrics.record_report(report, time.perf_counter() - started)
            with self._lock:
                self._graded += 1
        if report is not None and self.on_report is not None:
            with internal_errors("on_report callback", self.count_internal_error):
                self.on_report(report)
        return report


def _tally(counts: list[tuple[str, int]]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in counts) if counts else "none"
