"""The collector's held roots: which runs are due when, followed by a heap of due times rather than by walking every
held trace, must give what the rule says (a trace is due once every root it holds has settled); and its inbox, read
by more than one thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from factories import root_record
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.core.collector import RunCollector, UnreadableSpan
from trajgrade.core.trajectory.records import span_record

SETTLE_S = 2.0

#: A root of one of a few traces arriving after a pause (seconds), or a look at what is due after a pause.
_event = st.one_of(
    st.tuples(st.just("root"), st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from([0.0, 0.5, 1.0, 2.0])),
    st.tuples(st.just("due"), st.none(), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=40))
def test_held_roots_are_due_once_every_root_of_their_trace_has_settled(
    events: list[tuple[str, str | None, float]],
) -> None:
    now = [0.0]
    collector: RunCollector[int] = RunCollector(settle_s=SETTLE_S, clock=lambda: now[0])
    held: dict[str, list[tuple[float, int]]] = {}  # the rule's own account: each held trace's roots, settling when
    for n, (what, trace, pause) in enumerate(events):
        now[0] += pause
        if what == "root":
            assert trace is not None
            assert collector.root(trace, root_record(trace, n), n)
            held.setdefault(trace, []).append((now[0] + SETTLE_S, n))
            continue
        expected_next = min((max(when for when, _ in roots) for roots in held.values()), default=None)
        assert collector.next_due() == expected_next
        due = {t: roots for t, roots in held.items() if max(when for when, _ in roots) <= now[0]}
        runs = collector.due()
        assert sorted((run.trace, run.payload) for run in runs) == sorted(
            (t, root) for t, roots in due.items() for _, root in roots
        )
        for t in due:
            del held[t]
        assert collector.held == sum(len(roots) for roots in held.values())
    assert {run.trace for run in collector.close()} == set(held)
    assert collector.next_due() is None


def test_a_read_of_the_inbox_waits_for_one_under_way_on_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that finds the inbox emptied by a read still under way on another thread waits for that read to end:
    the spans it took are buffered, and the traces of those it could not read are marked, before the thread goes on
    (the worker, to grade a run whose spans that read holds: without the wait, it graded the run without them, or
    graded it though one of its spans could not be read)."""
    monkeypatch.setenv("TRAJGRADE_RAISE_INTERNAL_ERRORS", "0")  # the unreadable span is reported, not raised
    entered, release = threading.Event(), threading.Event()

    def intake(item: tuple[str, int]) -> tuple[str, Any]:
        trace, n = item
        if n == 0:  # the first read stops at its last item, the inbox emptied
            entered.set()
            assert release.wait(10)
        if n == 1:
            raise UnreadableSpan(trace) from ValueError("a span that cannot be read")
        record = span_record(
            trace_id=trace,
            span_id=f"{n:016x}",
            parent_span_id="0" * 16,
            name="chat",
            kind="llm_call",
            start_unix_nano=n,
            end_unix_nano=n,
            error=False,
        )
        return trace, record

    collector: RunCollector[int] = RunCollector(intake=intake, on_error=lambda error_type: None)
    collector.put(("b", 1))
    collector.put(("a", 0))
    first = threading.Thread(target=collector.read_inbox)
    first.start()
    assert entered.wait(10) and collector.inbox == 0
    second = threading.Thread(target=collector.read_inbox)
    second.start()
    second.join(0.3)
    waited = second.is_alive()
    release.set()
    first.join(10)
    second.join(10)
    assert waited  # it returned only once the first read had ended
    traces = collector._assembler._traces
    assert [r.name for r in traces["a"].records] == ["chat"]
    assert traces["b"].unreadable
