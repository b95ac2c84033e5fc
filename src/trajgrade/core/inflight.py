"""In-flight checks: a run's budgets, loops and forbidden tools, checked as each of its spans ends.

The graders that can be checked before a run ends (their spec has a ``watch``, see ``graders/watch.py``) are
followed span by span: each open run has a :class:`RunTracker` that counts its LLM and tool calls, tokens, cost,
errors and time once per span, and hands each new call to the graders' checks. The first time a grader's limit
breaks, the tracker returns a :class:`Breach`; the door emits it at once (an in-flight
``gen_ai.evaluation.result`` event, the breach counter, the application's callback) and, for a grader marked
``enforce: true``, stops the run. A tracker's memory does not grow with the run: counters, each check's bounded
window, and the spans that ended and whose parent has not (to count double instrumentation once).

The graders of the config's first suite are checked when it selects every run (no ``match``): which suite
grades a run is known only from its root, which ends last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from trajgrade.core import semconv as sc
from trajgrade.core.config import Config
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.graders.watch import ON_CALLS, ON_SPANS, ON_TOOL_CALLS, Gate, RunSoFar
from trajgrade.core.trajectory.content import Request, requested, tool_call
from trajgrade.core.trajectory.cost import Price, call_cost
from trajgrade.core.trajectory.model import Step
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.exceptions import BudgetExceeded

__all__ = ["Breach", "InFlightChecks", "RunTracker", "Trackers"]

_REQUESTS_KEPT: Final = 64
_LIVES_KEPT: Final = 512
#: A run's entry for a check that keeps no state of it (None marks a check that has broken).
_STATELESS: Final[Any] = object()


@dataclass(frozen=True, slots=True)
class Breach:
    """A grader's limit broken while its run is still open: its failing result, in the grader's words."""

    trace_id: str
    agent: str | None
    result: GraderResult
    #: Whether the run is to be stopped (the grader is marked ``enforce: true``, or the door enforces every one).
    enforce: bool
    service_name: str | None = None
    #: The model response that broke the limit (``gen_ai.response.id``), when a model call did.
    response_id: str | None = None

    @property
    def span_id(self) -> str | None:
        """The span that broke the limit (the call past it, the repeated or forbidden call), when there is one."""
        return next((sid for e in self.result.evidence for sid in e.span_ids), None)

    def exception(self) -> BudgetExceeded:
        """What the run that broke an enforced limit gets when it starts its next model or tool call."""
        r = self.result
        return BudgetExceeded(r.name, r.type, r.value, r.limit, r.explanation, self.trace_id, self.span_id)


class InFlightChecks:
    """The in-flight checks of a config; ``enforce`` stops the run on any breach (else only the graders marked
    ``enforce: true`` do)."""

    def __init__(self, config: Config, *, enforce: bool = False) -> None:
        suite = config.suites[0] if config.suites and config.suites[0].match is None else None
        graders = suite.graders if suite is not None else ()
        gates: list[Gate] = []
        enforced: list[bool] = []
        for g in graders:
            gate = g.spec.watch(g.options, g.name) if g.spec.watch is not None else None
            if gate is not None:
                gates.append(gate)
                enforced.append(enforce or g.enforce)
        self._gates = tuple(gates)
        self._every = tuple(range(len(gates)))  # every gate's index: a new run's live gates (shared)
        self._enforced = tuple(enforced)
        self._prices: Mapping[str, Price] = config.prices
        self.enforcing = any(enforced)
        #: The tuples of live gates the runs have come to, each kept once (runs break the same checks).
        self._lives: dict[tuple[int, ...], tuple[int, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self._gates)

    def start(self, service: str | None = None) -> RunTracker:
        """A tracker for a newly seen run (of ``service``)."""
        return RunTracker(self, service)

    def feed(self, trackers: Trackers, records: list[SpanRecord]) -> tuple[Trackers, list[Breach]]:
        """Feed a trace's newly ended spans, in order, to its runs' trackers (by service: a run is one service's, a
        trace may cross several), starting a tracker for a run seen first; the trace's trackers and the breaches
        they caused. A trace's trackers are None before its first span, then its one run's tracker, or a dict of
        them by service once a second service appears."""
        breaches: list[Breach] = []
        for r in records:
            service = r.service_name
            if trackers is None:
                tracker = trackers = self.start(service)
            elif isinstance(trackers, RunTracker):
                tracker = trackers
                if tracker.service != service:
                    trackers = {tracker.service: tracker}
                    tracker = trackers[service] = self.start(service)
            else:
                found_tracker = trackers.get(service)
                if found_tracker is None:
                    found_tracker = trackers[service] = self.start(service)
                tracker = found_tracker
            found = tracker.add(r)
            if found:
                breaches.extend(found)
        return trackers, breaches

    def live(self, gates: tuple[int, ...]) -> tuple[int, ...]:
        """The one copy of a tuple of live gates (at most a few hundred are kept)."""
        kept = self._lives.get(gates)
        if kept is None:
            if len(self._lives) >= _LIVES_KEPT:
                self._lives.clear()
            kept = self._lives[gates] = gates
        return kept


#: What an ended span tells its parent: (LLM call below: did it report usage, did it fail) and (tool call below:
#: its name and call id), for the spans of double instrumentation to count once when their outer span ends.
_Below = tuple[tuple[bool, bool] | None, tuple[str | None, str | None] | None]


class RunTracker:
    """One open run's counts and checks; fed each of its span records once, as they end (not thread-safe: one
    feeder at a time)."""

    __slots__ = (
        "_below",
        "_below_first",
        "_below_span",
        "_checks",
        "_live",
        "_requests",
        "_states",
        "agent",
        "run",
        "service",
    )

    def __init__(self, checks: InFlightChecks, service: str | None = None) -> None:
        self._checks = checks
        #: What each gate's check keeps of this run, or ``_STATELESS``; None once the check has broken.
        self._states: list[Any] = [g.start() if g.start is not None else _STATELESS for g in checks._gates]
        #: The indices of the gates whose checks have not broken (the others are not looked at again).
        self._live = checks._every
        #: What ended spans told their parents that have not ended, by parent: the first parent in two slots (the
        #: spans of a run mostly have one open parent at a time, its agent or root), the others in a dict.
        self._below_span: str | None = None
        self._below_first: _Below | None = None
        self._below: dict[str, _Below] | None = None
        #: The tool calls the latest model calls asked for and no tool span took yet (a tool span without
        #: arguments takes the requested ones, as in the trajectory); None until a model call asks for one.
        self._requests: list[Request] | None = None
        self.run = RunSoFar()
        self.agent: str | None = None
        self.service = service

    def add(self, r: SpanRecord) -> list[Breach]:
        """Count one ended span; the breaches it causes (each grader's first only)."""
        run = self.run
        if not run.start_unix_nano or r.start_unix_nano < run.start_unix_nano:
            run.start_unix_nano = r.start_unix_nano
        run.end_unix_nano = max(run.end_unix_nano, r.end_unix_nano)
        run.last_span_id = r.span_id
        if self.agent is None and r.agent_name:
            self.agent = r.agent_name  # the run's first call is its own agent's (a sub-agent's come later)
        below = self._take_below(r.span_id)
        call = ON_SPANS  # the call this span made, if any: ON_CALLS (an LLM call) or ON_TOOL_CALLS
        request: Request | None = None
        if r.kind == sc.LLM:
            inner = below[0] if below is not None else None
            call = self._llm_call(r, inner)
            usage, error = r.usage is not None, r.error
            if inner is not None:
                usage, error = usage or inner[0], error or inner[1]
            below = ((usage, error), below[1] if below is not None else None)
        elif r.kind == sc.TOOL:
            call = self._tool_call(r, below[1] if below is not None else None)
            if call == ON_TOOL_CALLS:
                request = self._take_request(r)  # taken in turn, whether or not a check reads this call's step
            below = (below[0] if below is not None else None, (r.tool_name or r.name, r.tool_call_id))
        elif r.kind == sc.AGENT:
            below = None  # an agent's calls are its own: nothing below it folds into a span above
            if r.error:
                run.errors += 1
        if below is not None and r.parent_span_id is not None:
            self._tell_parent(r.parent_span_id, below)
        return self._check(r, call, request)

    def _check(self, r: SpanRecord, call: int, request: Request | None) -> list[Breach]:
        """Call the checks that this span's gates let through; the first breach of each."""
        run = self.run
        breaches: list[Breach] = []
        step: Step | None = None
        broken = False
        gates = self._checks._gates
        for i in self._live:
            gate, state = gates[i], self._states[i]
            if gate.on != ON_SPANS and (call == ON_SPANS or gate.on > call):
                continue  # ON_TOOL_CALLS > ON_CALLS: a gate on tool calls lets no LLM call through
            if gate.over and not run.past(gate.over):
                continue
            if gate.tools is not None and not gate.takes(r.tool_name or r.name):
                continue
            if step is None and call != ON_SPANS:
                step = self._step(r, call, request)
            result = gate.check(run, step, state if state is not _STATELESS else None)
            if result is not None:
                self._states[i] = None
                broken = True
                breach = Breach(r.trace_id, self.agent, result, self._checks._enforced[i], r.service_name)
                if step is not None and step.response_id is not None and breach.span_id == step.span_id:
                    breach = replace(breach, response_id=step.response_id)
                breaches.append(breach)
        if broken:
            self._live = self._checks.live(tuple(i for i in self._live if self._states[i] is not None))
        return breaches

    def _tell_parent(self, parent: str, below: _Below) -> None:
        inline = parent == self._below_span
        known = self._below_first if inline else self._below.get(parent) if self._below is not None else None
        if known is not None:  # keep what an earlier child said
            if (known[0] is not None or below[0] is None) and (known[1] is not None or below[1] is None):
                return  # nothing new: siblings after the first say nothing their parent does not know
            below = (known[0] or below[0], known[1] or below[1])
        if inline or (self._below_span is None and known is None):
            self._below_span, self._below_first = parent, below
        else:
            if self._below is None:
                self._below = {}
            self._below[parent] = below

    def _take_below(self, span_id: str) -> _Below | None:
        """What the span's children told it (forgotten once read)."""
        if span_id == self._below_span:
            below = self._below_first
            self._below_span = self._below_first = None
            return below
        return self._below.pop(span_id, None) if self._below is not None else None

    def _llm_call(self, r: SpanRecord, inner: tuple[bool, bool] | None) -> int:
        """Count an LLM call (``ON_CALLS``); ``ON_SPANS`` (no call) when it wraps one already counted (double
        instrumentation), whose missing usage or status it completes, as the trajectory does."""
        run = self.run
        if inner is not None:
            inner_usage, inner_error = inner
            if r.error and not inner_error:
                run.errors += 1
            if not inner_usage and r.usage is not None:
                if inner_error:
                    run.failed_llm_calls_without_usage -= 1
                else:
                    run.llm_calls_without_usage -= 1
                    run.cost_unknown -= 1
                self._count_usage(r)
            return ON_SPANS
        run.llm_calls += 1
        asked = requested(r)
        if asked:
            if self._requests is None:
                self._requests = []
            self._requests.extend(asked)
            if len(self._requests) > _REQUESTS_KEPT:
                del self._requests[: len(self._requests) - _REQUESTS_KEPT]
        if r.error:
            run.errors += 1
        if r.usage is not None:
            self._count_usage(r)
        elif r.error:
            run.failed_llm_calls_without_usage += 1  # counts zero tokens and costs nothing, as in the trajectory
        else:
            run.llm_calls_without_usage += 1
            run.cost_unknown += 1
        return ON_CALLS

    def _count_usage(self, r: SpanRecord) -> None:
        run, usage = self.run, r.usage
        assert usage is not None
        run.usage_known = True
        run.input_tokens += usage.input_tokens or 0
        run.output_tokens += usage.output_tokens or 0
        run.reasoning_tokens += usage.reasoning_tokens or 0
        cost = r.cost_usd if r.cost_usd is not None else call_cost(r.model, r.provider, usage, self._checks._prices)
        if cost is None:
            run.cost_unknown += 1
        else:
            run.cost_usd += cost

    def _tool_call(self, r: SpanRecord, inner: tuple[str | None, str | None] | None) -> int:
        """Count a tool call (``ON_TOOL_CALLS``); ``ON_SPANS`` (no call) when it wraps the same call (same name or
        call id), counted already."""
        name = r.tool_name or r.name
        if inner is not None and (inner[0] == name or (r.tool_call_id is not None and inner[1] == r.tool_call_id)):
            return ON_SPANS
        self.run.tool_calls += 1
        if r.error:
            self.run.errors += 1
        return ON_TOOL_CALLS

    def _step(self, r: SpanRecord, call: int, request: Request | None) -> Step:
        """The step of the call this span made (built only when a check reads it)."""
        run = self.run
        tool = call == ON_TOOL_CALLS
        return Step(
            index=run.steps - 1,
            kind="tool_call" if tool else "llm_call",
            span_id=r.span_id,
            parent_span_id=r.parent_span_id,
            name=r.name,
            agent=r.agent_name or self.agent,
            turn=max(run.llm_calls - 1, 0),
            start_unix_nano=r.start_unix_nano,
            end_unix_nano=r.end_unix_nano,
            status="error" if r.error else "ok",
            error_type=r.error_type,
            error_message=r.error_message,
            model=r.model,
            provider=r.provider,
            usage=r.usage,
            cost_usd=r.cost_usd,
            response_id=r.response_id,
            tool=tool_call(r, request) if tool else None,
        )

    def _take_request(self, r: SpanRecord) -> Request | None:
        """The model's request for this tool call: by call id, else the first of the same name."""
        if self._requests is None:
            return None
        for i, request in enumerate(self._requests):
            if (r.tool_call_id is not None and request[0] == r.tool_call_id) or (
                r.tool_call_id is None and r.tool_name is not None and request[1] == r.tool_name
            ):
                del self._requests[i]
                return request
        return None


#: A trace's run trackers (see :meth:`InFlightChecks.feed`).
Trackers = RunTracker | dict[str | None, RunTracker] | None
