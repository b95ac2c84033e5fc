"""The grading worker's thread: when it grades the runs held for it (``GradingWorker.run_held``)."""

from __future__ import annotations

import time

from factories import root_record

from trajgrade import parse_config
from trajgrade.core.collector import RunCollector
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import InFlightChecks
from trajgrade.core.worker import Graded, GradingWorker

CONFIG = parse_config("graders:\n  - type: step-count\n    config: {max: 5}\n")


def _worker(checks: bool, gather: bool = True) -> tuple[GradingWorker[int], RunCollector[int], list[int]]:
    """A worker on its own thread, looking every 50 ms while the in-flight checks run (``checks``), gathering runs or
    not, and the number of runs each of its passes graded."""
    collector: RunCollector[int] = RunCollector(checks=InFlightChecks(CONFIG) if checks else None)
    passes: list[int] = []

    def finish(graded: list[Graded[int]]) -> None:
        passes.append(len(graded))

    worker = GradingWorker(collector, Grading(CONFIG), finish, check_interval_s=0.05, gather=gather)
    return worker, collector, passes


def _hold(collector: RunCollector[int], worker: GradingWorker[int], n: int) -> None:
    trace = f"{n:032x}"
    assert collector.root(trace, root_record(trace, n), n)
    worker.run_held()


def _graded_within(passes: list[int], runs: int, seconds: float) -> float:
    """Seconds until the worker has graded ``runs`` runs (without being asked: no flush); fails past ``seconds``."""
    started = time.monotonic()
    while sum(passes) < runs:
        assert time.monotonic() - started < seconds, f"graded {sum(passes)} of {runs} runs in {seconds} s"
        time.sleep(0.002)
    return time.monotonic() - started


def test_runs_held_close_together_are_graded_together_at_the_threads_next_look() -> None:
    worker, collector, passes = _worker(checks=True)
    try:
        for n in range(5):  # 1 ms apart: a thread woken for each would grade each alone, in the pause after it
            _hold(collector, worker, n)
            time.sleep(0.001)
        _graded_within(passes, 5, seconds=2.0)
        assert len(passes) <= 2, passes  # the thread's next look, or the one after if it fell among them
    finally:
        worker.close()


def test_a_run_held_in_a_quiet_spell_wakes_the_thread() -> None:
    worker, collector, passes = _worker(checks=False)  # no in-flight checks: the idle thread looks once a second
    try:
        time.sleep(0.05)  # the thread is waiting out its idle second
        _hold(collector, worker, 1)
        assert _graded_within(passes, 1, seconds=2.0) < 0.5
    finally:
        worker.close()


def test_after_a_pass_that_graded_runs_the_runs_held_meanwhile_wait_for_the_next_look() -> None:
    worker, collector, passes = _worker(checks=False)  # no in-flight checks: only a busy spell brings looks closer
    try:
        time.sleep(0.05)
        for n in range(6):  # 1 ms apart: the first wakes the thread, the others come while it is busy
            _hold(collector, worker, n)
            time.sleep(0.001)
        _graded_within(passes, 6, seconds=2.0)
        assert len(passes) <= 3, passes  # the first run alone (or with the second), then the next look or two
    finally:
        worker.close()


def test_a_worker_that_does_not_gather_is_woken_for_each_run() -> None:
    worker, collector, passes = _worker(checks=True, gather=False)  # as the sidecar's: each request's runs at once
    try:
        for n in range(5):  # 30 ms apart, within one look of a gathering thread: each graded in the pause after it
            _hold(collector, worker, n)
            time.sleep(0.03)
        _graded_within(passes, 5, seconds=2.0)
        assert passes == [1, 1, 1, 1, 1]
    finally:
        worker.close()
