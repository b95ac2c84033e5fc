"""Grading off the door's own thread: a worker that grades a collector's runs as they fall due.

The span processor and the sidecar grade on a worker; the exporter wrapper, the rotel processor and the
command line grade in the thread that hands them spans (:meth:`GradingWorker.run_due` without a thread).
Either way a pass takes the due runs, grades each, and hands the pass to the door's ``finish`` (which emits).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic

from trajgrade.core.collector import CollectedRun, P, RunCollector
from trajgrade.core.grading import Grading
from trajgrade.core.inflight import Breach
from trajgrade.core.internal_errors import internal_errors
from trajgrade.core.running import RunReport

__all__ = ["Graded", "GradingWorker"]

#: A run and its report (None when it was not a run: an agent's setup alone, or grading failed).
Graded = tuple[CollectedRun[P], RunReport | None]

#: How often an idle worker looks for traces past their age.
_IDLE_S = 1.0
#: A run held for grading waits at most this long for the thread's next look, rather than waking it (``run_held``).
_GATHER_S = 0.05


class GradingWorker(Generic[P]):
    """Grades due runs, on a thread of its own (``thread=True``) or when asked (``run_due``).

    Args:
        collector: where the runs come from.
        grading: grades them.
        finish: called with each pass's graded runs, on the grading thread; its errors are counted, not raised.
        thread: start a daemon thread (restarted in a forked child).
        on_breach: called with the in-flight breaches the collector's checks find (:meth:`check_open`), on the
            grading thread; its errors are counted, not raised.
        check_interval_s: how often the thread runs the in-flight checks while runs are open.
        gather: the runs held while the thread is busy wait for its next look, soon, rather than each waking it
            (:meth:`run_held`).
    """

    def __init__(
        self,
        collector: RunCollector[P],
        grading: Grading,
        finish: Callable[[list[Graded[P]]], None],
        *,
        thread: bool = True,
        name: str = "trajgrade-grader",
        on_breach: Callable[[list[Breach]], None] | None = None,
        check_interval_s: float = 0.05,
        gather: bool = False,
    ) -> None:
        self._collector = collector
        self._grading = grading
        self._finish = finish
        self._on_breach = on_breach
        self._check_interval_s = check_interval_s
        self._gather = gather
        self._found: deque[Breach] = deque()  # breaches found off the thread, for it to emit
        self._name = name
        self._wake = threading.Condition()
        self._busy = False
        self._next_look = 0.0  # when the waiting thread looks next (monotonic): past while it is in a pass
        self._stopping = False
        self._thread: threading.Thread | None = None
        if thread:
            self._start()
            if hasattr(os, "register_at_fork"):  # held weakly: the hook must not keep a dropped door alive
                ref = weakref.WeakMethod(self._after_fork)
                os.register_at_fork(after_in_child=lambda: (m := ref()) is not None and m())

    @property
    def threaded(self) -> bool:
        return self._thread is not None

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def run_held(self) -> None:
        """A run was held for grading: the thread is woken, unless it gathers runs (``gather``) and looks next
        within ``_GATHER_S``; then it grades the run at that look, with the runs held meanwhile. It looks that often
        while the in-flight checks run (every ``check_interval_s``), and, gathering, after a pass that graded runs:
        the first run after a quiet spell wakes it, the runs of a busy spell are graded a few at a time.

        Waking the thread at each run's end costs an agent's thread a hand-over of the interpreter's lock for every
        run, and interleaves grading with the agent's work run by run: in an agent that makes runs back to back,
        grading them a few at a time costs it less (``bench_in_agent.py``). A receiver is the other way round: it
        answers sooner when each request's runs are graded as they come, a pass at a time."""
        with self._wake:
            if not self._gather or self._next_look - time.monotonic() > _GATHER_S:
                self._wake.notify_all()

    def check_open(self, trace: Hashable | None = None, *, emit: bool = True) -> list[Breach]:
        """Run the in-flight checks on the spans that ended since the last call (of one trace, or of all); the
        breaches found. With ``emit=False`` (a caller on the application's thread) they are handed to the thread
        to emit; else they are emitted here."""
        breaches = self._collector.check_open(trace)
        if breaches:
            if emit or self._thread is None:
                self._emit(breaches)
            else:
                self._found.extend(breaches)
                self.wake()
        return breaches

    def run_due(self, now: float | None = None) -> int:
        """Grade the runs due now in the calling thread; how many there were."""
        return self._grade(self._collector.due(now))

    def close(self, timeout_s: float = 30.0) -> bool:
        """Stop the thread (after the pass it is in), then grade every run still held or buffered; False when
        the thread did not stop within ``timeout_s`` (a grader stuck: it is a daemon, it is left)."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        stopped = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            stopped = not self._thread.is_alive()
        if stopped:
            if self._collector.checks is not None:  # what the checks have not seen yet, before it is graded
                with internal_errors("grading worker", self._grading.count_internal_error):
                    self._check_and_emit()
            self._grade(self._collector.close())
        return stopped

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Take in the spans put so far, then wait until no held run is due and no pass is running, grading in this
        thread when there is no worker."""
        deadline = time.monotonic() + timeout_s
        self._collector.read_inbox()
        if self._thread is None or not self._thread.is_alive():
            self._grade(self._collector.due(float("inf")))
            return True
        with self._wake:
            while self._collector.held or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wake.notify_all()
                self._wake.wait(min(remaining, 0.05))
        return True

    # --- internals --------------------------------------------------------------------------------------------
    def _due(self, now: float) -> bool:
        due = self._collector.next_due()
        return due is not None and due <= now

    def _check_and_emit(self) -> None:
        """Emit the breaches found off the thread, then those of the open runs' newly ended spans."""
        found = [self._found.popleft() for _ in range(len(self._found))]
        self._emit(found + self._collector.check_open())

    def _emit(self, breaches: list[Breach]) -> None:
        if breaches and self._on_breach is not None:
            with internal_errors("emit breach", self._grading.count_internal_error):
                self._on_breach(breaches)

    def _grade(self, runs: list[CollectedRun[P]]) -> int:
        if not runs:
            return 0
        graded: list[Graded[P]] = [(run, self._grading.grade(run)) for run in runs]
        with internal_errors("emit", self._grading.count_internal_error):
            self._finish(graded)
        return len(graded)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        self._wake = threading.Condition()
        self._busy = False
        self._next_look = 0.0
        if not self._stopping:
            self._start()

    def _work(self) -> None:
        checking = self._collector.checks is not None
        checked_at = 0.0
        graded = 0
        while True:
            with self._wake:
                if self._stopping:
                    return
                due = self._collector.next_due()
                wait = _IDLE_S if due is None else due - time.monotonic()
                if checking:  # spans of a new run are read within the interval (the hot path never wakes us)
                    wait = min(wait, self._check_interval_s)
                if graded and self._gather:  # a busy spell: the runs held meanwhile wait for the next look
                    wait = min(wait, _GATHER_S)
                if wait > 0 and not self._found:
                    wait = min(wait, _IDLE_S)
                    self._next_look = time.monotonic() + wait
                    self._wake.wait(wait)
                    self._next_look = 0.0
                if self._stopping:
                    return
                self._busy = True
            graded = 0
            try:
                with internal_errors("grading worker", self._grading.count_internal_error):
                    now = time.monotonic()
                    # Every interval, and before a pass grades: not on each wake (a door that checks the spans it
                    # receives itself wakes the thread for each root it holds).
                    if checking and (self._found or now - checked_at >= self._check_interval_s or self._due(now)):
                        checked_at = now
                        self._check_and_emit()
                    graded = self.run_due()
            finally:
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()
