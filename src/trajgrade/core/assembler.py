"""Per-trace buffers of span records, bounded, released when a trace's root ends.

The shape follows the SDK's tail-sampling processors: a dict of buffers behind one lock that is held only to
append or pop, never while calling out. Every bound drops with a reason that the caller counts:

- ``max_traces``: a span of a new trace when that many traces are already buffered;
- ``max_spans_per_trace``: a span past that many in one trace (the run is then graded as partial);
- ``max_buffered_bytes``: a span that would take the buffers past ``max_bytes`` (items added with their size;
  the run is then graded as partial);
- ``trace_age``: a trace whose root has not ended after ``max_trace_age_s`` (released by ``expire``);
- ``after_root``: a span that ends after its trace was graded.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Container, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from trajgrade.core.trajectory.normalize import SpanRecord, share_strings

__all__ = ["Assembler", "TraceBuffer"]

_RECENT = 4096
_CHECK_LOCKS = 64


@dataclass(slots=True, init=False)
class TraceBuffer:
    """A trace's span records as they arrive (one a run: its ``__init__`` is written out, which mypyc compiles,
    where the one ``@dataclass`` generates would run interpreted)."""

    records: list[SpanRecord]
    first_seen: float
    dropped_spans: int
    size: int  # bytes of the items added with a size
    #: In-flight checks (``inflight``): how many items they have seen, their trackers, and the lock of its feeder
    #: (one of the assembler's few, shared).
    checked: int
    trackers: Any
    check_lock: Any
    #: A span of the trace could not be read: its run is neither checked nor graded.
    unreadable: bool

    def __init__(self) -> None:
        self.records = []
        self.first_seen = time.monotonic()
        self.dropped_spans = 0
        self.size = 0
        self.checked = 0
        self.trackers = None
        self.check_lock = None
        self.unreadable = False


class Assembler:
    """Buffers span records by trace key (the trace id, as an int or a hex string); a trace's records share the
    strings whose values repeat (``share_strings``)."""

    def __init__(
        self,
        *,
        max_traces: int = 10_000,
        max_spans_per_trace: int = 10_000,
        max_trace_age_s: float = 3600.0,
        max_bytes: int | None = None,
        on_drop: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        self.max_spans_per_trace = max_spans_per_trace
        self.max_trace_age_s = max_trace_age_s
        self._on_drop = on_drop
        # Guards _traces and _done: appends come from every thread that ends a span.
        self._lock = threading.Lock()
        self._traces: dict[Hashable, TraceBuffer] = {}
        self._done: OrderedDict[Hashable, None] = OrderedDict()
        self._size = 0  # bytes of every buffered item added with a size
        # The buffers' check locks, shared (a lock per trace would cost more than the trace's in-flight counts): a
        # feeder holds one buffer's at a time, never while taking another.
        self._check_locks = tuple(threading.Lock() for _ in range(_CHECK_LOCKS))

    def __len__(self) -> int:
        return len(self._traces)

    def add(self, trace: Hashable, record: SpanRecord) -> None:
        with self._lock:  # the common case first: a buffered trace with room
            buffer = self._traces.get(trace)
            if buffer is not None and 0 < len(buffer.records) < self.max_spans_per_trace:
                share_strings(record, buffer.records[-1])
                buffer.records.append(record)
                return
        self.extend(((trace, record, 0),))  # a new trace, a full one, or one already graded

    def extend(self, items: Iterable[tuple[Hashable, SpanRecord, int]]) -> None:
        """``add`` for many items, each with its size in bytes, taking the lock once (the sidecar adds a request's
        spans together)."""
        with self._lock:
            reasons = [
                reason for trace, record, size in items if (reason := self._put(trace, record, size)) is not None
            ]
        for reason in reasons:
            self._on_drop(reason)

    def take(self, inbox: deque[Any], intake: Callable[[Any], tuple[Hashable, SpanRecord] | None]) -> list[Exception]:
        """Buffer the items of an inbox (emptied in the order they were put) as ``intake`` reads them (their trace
        and record, or None to leave one out); the errors of the items it could not read, each lost alone."""
        admitted: list[tuple[Hashable, SpanRecord]] = []
        failed: list[Exception] = []
        for _ in range(len(inbox)):
            item = inbox.popleft()
            try:
                taken = intake(item)
            except Exception as e:
                failed.append(e)
                continue
            if taken is not None:
                admitted.append(taken)
        with self._lock:
            reasons = [reason for trace, record in admitted if (reason := self._put(trace, record, 0)) is not None]
        for reason in reasons:
            self._on_drop(reason)
        return failed

    def _put(self, trace: Hashable, record: SpanRecord, size: int) -> str | None:
        """Buffer an item (the lock is held); the reason it was dropped, if it was."""
        buffer = self._traces.get(trace)
        if buffer is None:
            if trace in self._done:
                return "after_root"
            if len(self._traces) >= self.max_traces:
                return "max_traces"
            buffer = self._traces[trace] = TraceBuffer()
        if len(buffer.records) >= self.max_spans_per_trace:
            buffer.dropped_spans += 1
            return "max_spans_per_trace"
        if size and self.max_bytes is not None and self._size + size > self.max_bytes:
            buffer.dropped_spans += 1  # the trace stays, so that its run is known to be partial
            return "max_buffered_bytes"
        if buffer.records:
            share_strings(record, buffer.records[-1])
        buffer.records.append(record)
        buffer.size += size
        self._size += size
        return None

    def mark_unreadable(self, trace: Hashable) -> None:
        """A span of this trace could not be read: its run is neither checked nor graded (see ``unreadable``)."""
        with self._lock:
            buffer = self._traces.get(trace)
            if buffer is None and trace not in self._done and len(self._traces) < self.max_traces:
                buffer = self._traces[trace] = TraceBuffer()
            if buffer is not None:
                buffer.unreadable = True

    @property
    def size(self) -> int:
        """Bytes of the buffered items added with a size."""
        return self._size

    def pop(self, trace_id: Hashable) -> TraceBuffer:
        """Release a trace (its root ended); later spans of it are dropped as ``after_root``."""
        with self._lock:
            buffer = self._traces.pop(trace_id, None)
            if buffer is not None:
                self._size -= buffer.size
            self._done[trace_id] = None
            if len(self._done) > _RECENT:
                self._done.popitem(last=False)
        return buffer if buffer is not None else TraceBuffer()

    def expire(self, now: float | None = None, keep: Container[Hashable] = ()) -> list[tuple[Hashable, TraceBuffer]]:
        """Release the traces older than ``max_trace_age_s`` (but those in ``keep``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            old = [
                tid for tid, b in self._traces.items() if now - b.first_seen > self.max_trace_age_s and tid not in keep
            ]
            released = [(tid, self._traces.pop(tid)) for tid in old]
            self._size -= sum(b.size for _, b in released)
        return released

    def unchecked(self, trace: Hashable | None = None) -> list[TraceBuffer]:
        """The buffers with items the in-flight checks have not seen (of one trace, or of all), each with a
        ``check_lock`` to take before ``claim``."""
        with self._lock:
            if trace is not None:
                one = self._traces.get(trace)
                buffers = [one] if one is not None else []
            else:
                buffers = list(self._traces.values())
            found = [b for b in buffers if b.checked < len(b.records)]
            for b in found:
                if b.check_lock is None:
                    b.check_lock = self._check_locks[(id(b) >> 4) % _CHECK_LOCKS]
        return found

    def claim(self, buffer: TraceBuffer) -> list[SpanRecord]:
        """The items of a buffer the checks have not seen; they are seen from now on (call with the buffer's
        ``check_lock`` held)."""
        with self._lock:
            items = buffer.records[buffer.checked :]
            buffer.checked = len(buffer.records)
        return items

    def drain(self) -> list[tuple[Hashable, TraceBuffer]]:
        """Release every trace (shutdown)."""
        with self._lock:
            released = list(self._traces.items())
            self._traces.clear()
            self._size = 0
        return released
