"""The collector's held roots: which runs are due when, followed by a heap of due times rather than by walking every
held trace, must give what the rule says (a trace is due once every root it holds has settled)."""

from __future__ import annotations

from factories import root_record
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade.core.collector import RunCollector

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
