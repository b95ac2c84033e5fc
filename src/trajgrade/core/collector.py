"""From spans to runs: the one place that decides which spans make a run and when the run is complete.

Every door (the span processor, the exporter wrapper, the sidecar, the rotel processor, the command line) hands
its spans here, adapted to span records, and gets runs back, ready to grade. The rules, the same for all:

- A span is a run's **root** when it has no parent or its parent is remote (:func:`is_root`); the other spans
  are buffered by trace (:class:`~trajgrade.core.assembler.Assembler`, bounded; every drop is counted by reason).
- trajgrade's **own spans** (its instrumentation scope, :func:`is_own`) are never part of a run.
- A root is **held** for ``settle_s`` after it ends, so that spans of its run ending after it (or arriving in a
  later batch) are still in; then its run is **due**. Roots past ``max_pending`` are not held: counted
  ``queue_full`` and passed on ungraded.
- A door whose spans end on the application's threads **puts** them in an inbox (:meth:`RunCollector.put`: an
  append, no lock) and gives an ``intake`` that reads one (its trace and its span record, or None to leave it
  out); the inbox is read into the buffers, in order, by whoever uses the collector next (the worker's pass, a
  root, a check), so the application's thread pays for the append only, and a span is buffered as its record,
  never as the span.
- With **in-flight checks** (``checks``), :meth:`RunCollector.check_open` reads the spans that ended since the last
  call, once each, and feeds their records to their open run's checks (``inflight``).
- A run is **partial** when a span of it was dropped, when its root never ended (graded at shutdown from what
  arrived), or when its root never arrived: a trace with no root for ``max_trace_age_s`` is counted
  ``trace_age`` and graded from what arrived, as is every trace still open when the door closes (counted
  ``open_at_shutdown``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from trajgrade.core.assembler import Assembler, TraceBuffer
from trajgrade.core.internal_errors import UnreadableSpan, report_internal_error
from trajgrade.core.spans import is_own, is_root
from trajgrade.core.trajectory.build import build_trajectory, is_run, root_of
from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.model import Trajectory
from trajgrade.core.trajectory.normalize import SpanRecord

if TYPE_CHECKING:  # a door that checks runs in flight brings its checks; reading files needs none (nor the graders)
    from trajgrade.core.inflight import Breach, InFlightChecks

__all__ = ["CollectedRun", "RunCollector", "UnreadableSpan", "is_own", "is_root"]

P = TypeVar("P")  # what the door keeps with a root to emit the results on (a span, its bytes, ...)
X = TypeVar("X")

ROOT_NEVER_ARRIVED = "the root span never arrived: graded from the spans that did"
ROOT_NEVER_ENDED = "the root span had not ended when the run was graded"
SETTLE_CUT_SHORT = "graded at shutdown before its settle time was over"


@dataclass(frozen=True, slots=True)
class CollectedRun(Generic[P]):
    """A run ready to grade: its root, the other spans of its trace, and what the door kept with the root (None
    when the root never arrived)."""

    trace: Hashable
    root: SpanRecord
    records: list[SpanRecord]
    partial: bool
    notes: tuple[str, ...]
    payload: P | None

    def trajectory(self, prices: Mapping[str, Price] | None = None) -> Trajectory:
        """The run's trajectory, its notes included."""
        t = build_trajectory([self.root, *self.records], self.root, prices=prices, partial=self.partial)
        return replace(t, notes=(*t.notes, *self.notes)) if self.notes else t

    @property
    def is_run(self) -> bool:
        """Whether there is a run to grade (not an agent's setup alone)."""
        return is_run(self.root, bool(self.records))


@dataclass(slots=True)
class _Held(Generic[P]):
    root: Callable[[], SpanRecord]  # normalized when the run is due, off the door's hot path
    payload: P
    ready_at: float
    partial: bool


class RunCollector(Generic[P]):
    """Buffers spans by trace and returns runs when they are due.

    Args:
        intake: reads an item of the inbox (:meth:`put`): its trace and its span record, or None to leave it out.
        settle_s: how long a root is held after it ends before its run is due.
        max_pending: roots held at once; past it a root is passed on ungraded (``queue_full``).
        max_traces, max_spans_per_trace, max_trace_age_s, max_bytes: the buffers' bounds.
        on_drop: counts a drop by reason.
        checks: the in-flight checks of the open runs (see :meth:`check_open`).
    """

    def __init__(
        self,
        *,
        settle_s: float = 0.0,
        max_pending: int = 10_000,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 3600.0,
        max_bytes: int | None = None,
        on_drop: Callable[[str], None] = lambda reason: None,
        on_error: Callable[[str], None] = lambda error_type: None,
        checks: InFlightChecks | None = None,
        clock: Callable[[], float] = time.monotonic,
        intake: Callable[[Any], tuple[Hashable, SpanRecord] | None] | None = None,
    ) -> None:
        self._intake = intake
        self._inbox: deque[Any] = deque()
        self._inbox_lock = threading.Lock()  # one reader at a time, so that a trace's items keep their order
        self.put = self._inbox.append  # the hot path of a door with an intake: appending is all it costs
        self.checks = checks if checks else None
        self._on_error = on_error
        self.settle_s = settle_s
        self._max_pending = max_pending
        self._on_drop = on_drop
        self._clock = clock
        self._assembler = Assembler(
            max_traces=max_traces,
            max_spans_per_trace=max_spans_per_trace,
            max_trace_age_s=max_trace_age_s,
            max_bytes=max_bytes,
            on_drop=on_drop,
        )
        self.add = self._assembler.add  # a span that is not a root: the hot path, bound once
        self.extend = self._assembler.extend
        # Guards _held (roots waiting for their settle time, by trace) and the due times; held only to read or
        # change them.
        self._lock = threading.Lock()
        self._held: dict[Hashable, list[_Held[P]]] = {}
        self._held_count = 0  # roots in _held: checked for every root, so counted rather than summed
        # When the held traces are due (a trace's latest settle time among its roots), as a heap of (time, order,
        # trace), so that finding what is due does not walk every held trace: an entry whose time is no longer its
        # trace's (the trace was taken, or a later root came) is dropped when it comes up.
        self._due_heap: list[tuple[float, int, Hashable]] = []
        self._order = itertools.count()  # breaks ties in time without comparing traces
        self._last_expire = clock()

    def __len__(self) -> int:
        """Traces with spans buffered."""
        return len(self._assembler)

    @property
    def inbox(self) -> int:
        """Items put and not read yet."""
        return len(self._inbox)

    def read_inbox(self) -> None:
        """Buffer the items put so far (in the order they were put); an item that cannot be read is lost alone,
        logged and counted."""
        if self._intake is None:
            return
        # Taken with the inbox empty too: a read under way on another thread ends first, its spans buffered and its
        # unreadable traces marked, before this caller goes on to take a run whose spans that read holds.
        with self._inbox_lock:
            if not self._inbox:
                return
            failed = self._assembler.take(self._inbox, self._intake)
            for e in failed:
                if isinstance(e, UnreadableSpan):
                    self._assembler.mark_unreadable(e.trace)
        for e in failed:
            if isinstance(e, UnreadableSpan):
                cause = e.__cause__
                report_internal_error("collecting a run", cause if isinstance(cause, Exception) else e, self._on_error)
            else:
                report_internal_error("collecting a run", e, self._on_error)

    @property
    def held(self) -> int:
        with self._lock:
            return self._held_count

    def root(
        self, trace: Hashable, root: SpanRecord | Callable[[], SpanRecord], payload: P, *, partial: bool = False
    ) -> bool:
        """A root ended (or arrived): hold it until its run is due. False when too many are held: the root is
        counted ``queue_full`` and its trace released; the door passes the root on ungraded."""
        make = root if callable(root) else (lambda: root)
        with self._lock:
            full = self._held_count >= self._max_pending
            if not full:
                self._held_count += 1
                ready_at = self._clock() + self.settle_s
                held = self._held.setdefault(trace, [])
                if not held or ready_at > _due_at(held):
                    heapq.heappush(self._due_heap, (ready_at, next(self._order), trace))
                held.append(_Held(make, payload, ready_at, partial))
        if full:
            self._on_drop("queue_full")
            self.read_inbox()  # the trace's spans put so far are released with it
            self._assembler.pop(trace)
        return not full

    def check_open(self, trace: Hashable | None = None) -> list[Breach]:
        """Feed the spans that ended since the last call (of one trace, or of every open one) to their runs'
        in-flight checks; the breaches they found. A span that cannot be read loses its trace's checks only."""
        if self.checks is None:
            return []
        self.read_inbox()
        breaches: list[Breach] = []
        for buffer in self._assembler.unchecked(trace):
            with buffer.check_lock:
                breaches += self._guarded(self._check, buffer)
        return breaches

    def _check(self, buffer: TraceBuffer) -> list[Breach]:
        assert self.checks is not None
        records = self._assembler.claim(buffer)
        if not records or buffer.unreadable:
            return []
        buffer.trackers, breaches = self.checks.feed(buffer.trackers, records)
        return breaches

    def next_due(self) -> float | None:
        """When the next held run is due (the clock's time), if one is held."""
        with self._lock:
            heap = self._due_heap
            while heap and not self._is_due_entry(heap[0]):
                heapq.heappop(heap)
            return heap[0][0] if heap else None

    def due(self, now: float | None = None) -> list[CollectedRun[P]]:
        """The runs whose roots' settle time has passed, then the runs of traces whose root never arrived within
        ``max_trace_age_s`` (checked at most once a second)."""
        now = self._clock() if now is None else now
        self.read_inbox()
        taken: list[tuple[Hashable, list[_Held[P]]]] = []
        with self._lock:
            heap = self._due_heap
            while heap and heap[0][0] <= now:
                entry = heapq.heappop(heap)
                if self._is_due_entry(entry):
                    taken.append((entry[2], self._held.pop(entry[2])))
            self._held_count -= sum(len(held) for _, held in taken)
        runs = [run for trace, held in taken for run in self._guarded(self._held_runs, trace, held)]
        if now - self._last_expire >= 1.0:
            self._last_expire = now
            runs += self._expired(now)
        return runs

    def close(self) -> list[CollectedRun[P]]:
        """Every run still held, then every trace still buffered (its root never arrived; ``open_at_shutdown``)."""
        self.read_inbox()
        with self._lock:
            taken = list(self._held.items())
            self._held.clear()
            self._held_count = 0
            self._due_heap.clear()
        now = self._clock()
        runs = [run for trace, held in taken for run in self._guarded(self._held_runs, trace, held, now)]
        for trace, buffer in self._assembler.drain():
            self._on_drop("open_at_shutdown")
            runs += self._guarded(self._orphan, trace, buffer)
        return runs

    # --- internals --------------------------------------------------------------------------------------------
    def _is_due_entry(self, entry: tuple[float, int, Hashable]) -> bool:
        """Whether a heap entry (time, order, trace) is its trace's due time (the trace is held, and no later root
        came); under the lock."""
        held = self._held.get(entry[2])
        return held is not None and _due_at(held) == entry[0]

    def _guarded(self, make: Callable[..., list[X]], *args: Any) -> list[X]:
        """What ``make`` gives for one trace; when it fails (a span that cannot be read), that trace's runs (or
        checks) only are lost, logged and counted."""
        try:
            return make(*args)
        except Exception as e:
            report_internal_error("collecting a run", e, self._on_error)
            return []

    def _held_runs(self, trace: Hashable, held: list[_Held[P]], cut_at: float | None = None) -> list[CollectedRun[P]]:
        """The runs of a trace's held roots; ``cut_at``: the time of a shutdown that did not wait for them."""
        buffer = self._assembler.pop(trace)
        if buffer.unreadable:
            return []
        records, dropped = buffer.records, buffer.dropped_spans
        runs = []
        for h in held:
            notes = _dropped_note(dropped)
            if h.partial:
                notes += (ROOT_NEVER_ENDED,)
            elif cut_at is not None and h.ready_at > cut_at:
                notes += (SETTLE_CUT_SHORT,)
            partial = dropped > 0 or len(notes) > 0
            runs.append(CollectedRun(trace, h.root(), records, partial, notes, h.payload))
        return runs

    def _expired(self, now: float) -> list[CollectedRun[P]]:
        with self._lock:
            holding = set(self._held)
        runs: list[CollectedRun[P]] = []
        for trace, buffer in self._assembler.expire(now, keep=holding):
            self._on_drop("trace_age")
            runs += self._guarded(self._orphan, trace, buffer)
        return runs

    def _orphan(self, trace: Hashable, buffer: TraceBuffer) -> list[CollectedRun[P]]:
        records, dropped = buffer.records, buffer.dropped_spans
        if not records or buffer.unreadable:
            return []
        root = root_of(records)
        rest = [r for r in records if r is not root]
        ids = {r.span_id for r in records}
        if all(r.parent_span_id in ids for r in records):  # every span's parent is among them
            why = f"the spans' parent links form a cycle: span {root.span_id} ({root.name}) taken as the root"
        else:
            why = ROOT_NEVER_ARRIVED
        return [CollectedRun(trace, root, rest, True, (*_dropped_note(dropped), why), None)]


def _due_at(held: list[_Held[Any]]) -> float:
    """When a trace's held roots are all settled."""
    return max(h.ready_at for h in held)


def _dropped_note(dropped: int) -> tuple[str, ...]:
    return (f"{dropped} span(s) dropped: over the buffers' bounds",) if dropped else ()
