"""trajgrade's metric instruments (names are a contract) and the recorder that feeds them.

Attributes are bounded: grader name and type, label, agent name, service, and a drop reason. Instrumentations
already emit ``gen_ai.client.*``; trajgrade never re-emits them.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Meter,
    MeterProvider,
    NoOpHistogram,
    Observation,
    get_meter_provider,
)

from trajgrade.core import semconv as sc
from trajgrade.core.inflight import Breach
from trajgrade.core.running import RunReport
from trajgrade.version import __version__

__all__ = ["GradingMetrics"]

_TOKEN_BUCKETS = (100, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000, 5_000_000)
_CALL_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
_SECONDS_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_USD_BUCKETS = (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
_SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0)
_UTILISATION_BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0)
_GRADING_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
#: Counts wait at most this long before they reach their counters (when no reader collects in between).
_FLUSH_S = 1.0
#: Grader types whose value / limit is a budget utilisation.
_BUDGET_TYPES = frozenset({"token-budget", "tool-call-count", "turn-count", "wall-time", "step-count", "budget"})
#: A count's counter and attributes, as its pending count is kept.
_CountKey = tuple[Counter, tuple[tuple[str, Any], ...]]


class GradingMetrics:
    """Creates the instruments on a meter and records runs, results and health."""

    def __init__(self, meter_provider: MeterProvider | None = None, active: Callable[[], int] | None = None) -> None:
        meter: Meter = (meter_provider or get_meter_provider()).get_meter(sc.TRAJGRADE_SCOPE, __version__)
        self.evaluations = meter.create_counter(
            "trajgrade.evaluations", unit="{evaluation}", description="Grader results by label"
        )
        self.score = meter.create_histogram(
            "gen_ai.evaluation.score",
            unit="1",
            description="Grader scores",
            explicit_bucket_boundaries_advisory=_SCORE_BUCKETS,
        )
        self.runs = meter.create_counter("trajgrade.runs", unit="{run}", description="Graded runs by verdict")
        self.tokens = meter.create_histogram(
            "trajgrade.run.tokens",
            unit="{token}",
            description="Tokens (input + output) per run",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.tool_calls = meter.create_histogram(
            "trajgrade.run.tool_calls",
            unit="{call}",
            description="Tool calls per run",
            explicit_bucket_boundaries_advisory=_CALL_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "trajgrade.run.duration",
            unit="s",
            description="Run duration (root span)",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )
        self.cost = meter.create_histogram(
            "trajgrade.run.cost", unit="USD", description="Run cost", explicit_bucket_boundaries_advisory=_USD_BUCKETS
        )
        self.utilization = meter.create_histogram(
            "trajgrade.budget.utilization",
            unit="1",
            description="Budget grader value / limit",
            explicit_bucket_boundaries_advisory=_UTILISATION_BUCKETS,
        )
        self.dropped = meter.create_counter(
            "trajgrade.traces.dropped", unit="{trace}", description="Traces or spans dropped, by reason"
        )
        self.internal_errors = meter.create_counter(
            "trajgrade.internal_errors", unit="{error}", description="Errors inside trajgrade (the agent kept running)"
        )
        self.grading_duration = meter.create_histogram(
            "trajgrade.grading.duration",
            unit="s",
            description="Time to build and grade one run",
            explicit_bucket_boundaries_advisory=_GRADING_BUCKETS,
        )
        self.breaches = meter.create_counter(
            "trajgrade.breaches",
            unit="{breach}",
            description="Graders' limits broken while the run was still open, by grader and agent",
        )
        self._active = active
        # Run and result counts, summed by (counter, attributes) until they are added in one call each: the SDK
        # spends about 20 us on every call, and a run of three results would make four of them.
        self._lock = threading.Lock()
        self._pending: collections.Counter[_CountKey] = collections.Counter()
        self._flushed = time.monotonic()
        meter.create_observable_up_down_counter(
            "trajgrade.traces.active",
            callbacks=[self._observe_active],
            unit="{trace}",
            description="Traces buffered, waiting for their root to end",
        )

    def _observe_active(self, options: CallbackOptions) -> Iterable[Observation]:
        # A reader's collection calls the observable callbacks before it reads the counters: the counts so far are
        # added first, so every collection sees every run graded before it.
        self.flush()
        return [Observation(self._active())] if self._active is not None else []

    def flush(self) -> None:
        """Add the counts summed so far to their counters."""
        with self._lock:
            pending, self._pending = self._pending, collections.Counter()
            self._flushed = time.monotonic()
        for (counter, attributes), n in pending.items():
            counter.add(n, dict(attributes))

    @property
    def recording(self) -> bool:
        """Whether a measurement goes anywhere: not on the API's no-op instruments, nor on the global provider's
        stand-ins until an application sets a provider (they drop what they are given until then)."""
        score = self.score
        return not isinstance(score, NoOpHistogram) and getattr(score, "_real_instrument", score) is not None

    def record_report(self, report: RunReport, grading_seconds: float) -> None:
        if not self.recording:  # a run's thirty measurements, each with its attributes, for nothing
            return
        t = report.trajectory
        s = t.summary
        base: dict[str, Any] = {sc.AGENT_NAME: t.agent_name or "unknown"}
        if t.service_name:
            base[sc.SERVICE_NAME] = t.service_name
        runs = {**base, sc.METRIC_RESULT: "passed" if report.passed else "failed", sc.TRAJGRADE_PARTIAL: t.partial}
        counts: list[_CountKey] = [(self.runs, tuple(runs.items()))]
        if s.total_tokens is not None:
            self.tokens.record(s.total_tokens, base)
        self.tool_calls.record(s.tool_calls, base)
        self.duration.record(s.duration_ms / 1000, base)
        if s.cost_usd is not None:
            self.cost.record(s.cost_usd, base)
        self.grading_duration.record(grading_seconds, base)
        evaluations, score = self.evaluations, self.score
        for r in report.results:
            attrs = {
                **base,
                sc.EVALUATION_NAME: r.name,
                sc.TRAJGRADE_GRADER_TYPE: r.type,
                sc.EVALUATION_SCORE_LABEL: r.status,
            }
            counts.append((evaluations, tuple(attrs.items())))
            score.record(r.score, attrs)
            ratio = _utilisation(r.value, r.limit) if r.type in _BUDGET_TYPES else None
            if ratio is not None:
                self.utilization.record(ratio, {**base, sc.EVALUATION_NAME: r.name, sc.TRAJGRADE_GRADER_TYPE: r.type})
        with self._lock:
            self._pending.update(counts)  # each key hashed once (a dict's get and set would hash it twice)
        if time.monotonic() - self._flushed >= _FLUSH_S:
            self.flush()

    def record_breach(self, breach: Breach) -> None:
        """Added at once (not summed with the run counts): alerts on breaches fire while the run is open."""
        r = breach.result
        attrs = {sc.AGENT_NAME: breach.agent or "unknown", sc.EVALUATION_NAME: r.name, sc.TRAJGRADE_GRADER_TYPE: r.type}
        if breach.service_name:
            attrs[sc.SERVICE_NAME] = breach.service_name
        self.breaches.add(1, attrs)

    def record_drop(self, reason: str, n: int = 1) -> None:
        self.dropped.add(n, {sc.METRIC_REASON: reason})

    def record_internal_error(self, error_type: str) -> None:
        self.internal_errors.add(1, {sc.ERROR_TYPE: error_type})


def _utilisation(value: Any, limit: Any) -> float | None:
    if isinstance(value, dict) and isinstance(limit, dict):
        ratios = [_utilisation(value.get(k), limit.get(k)) for k in limit]
        known = [r for r in ratios if r is not None]
        return max(known) if known else None
    if isinstance(value, int | float) and isinstance(limit, int | float) and not isinstance(value, bool):
        return float(value) / limit if limit else (0.0 if value == 0 else None)
    return None
