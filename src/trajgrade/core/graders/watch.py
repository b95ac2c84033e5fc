"""In-flight checks: what a grader whose verdict can only get worse as a run goes on reads while the run is open.

A grader type that can be checked in flight gives its :class:`~trajgrade.core.graders.base.GraderSpec` a
``watch``: ``watch(config, name)``, called once per config, says how the grader is checked, as a :class:`Gate`
(or None when nothing can break before the end). Its check is a callable ``(so_far, step, state)`` called after
a span of the run ends, in the order they end. ``so_far`` holds the run's counts so far; ``step`` is the LLM or
tool call that span made (None for any other span); ``state`` is what the check keeps of the run, if anything.
The check returns the grader's failing result on the first span that breaks its limit, in the grader's own
words, else None. A check's state is bounded (a counter, a window of the last calls): its cost and memory do not
grow with the run.

The gate says when the check is worth calling: on each tool call (of some names), on each call, or only once one
of the run's counts has passed a bound below which the check cannot fail. The tracker decides that itself, so a
check whose limit is far off costs a comparison per span, and a run holds nothing for a check without state.

The final grading at the root's end agrees: what breaks a limit in flight breaks it in the whole run too (the
counts in flight are never more than the trajectory's: spans of double instrumentation count once, and a
call the trajectory only infers, such as a delegation with no tool span, is not counted until then).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from trajgrade.core.graders.base import GraderResult
from trajgrade.core.patterns import matcher
from trajgrade.core.trajectory.model import Step

__all__ = [
    "COST_USD",
    "DURATION_MS",
    "ERRORS",
    "INPUT_TOKENS",
    "LLM_CALLS",
    "ON_CALLS",
    "ON_SPANS",
    "ON_TOOL_CALLS",
    "OUTPUT_TOKENS",
    "REASONING_TOKENS",
    "STEPS",
    "TOOL_CALLS",
    "TOTAL_TOKENS",
    "Gate",
    "Repetitions",
    "RunSoFar",
    "Watch",
    "WatchFactory",
]

#: The run's counts a gate compares (:meth:`RunSoFar.count`).
TOTAL_TOKENS: Final = 0
INPUT_TOKENS: Final = 1
OUTPUT_TOKENS: Final = 2
REASONING_TOKENS: Final = 3
LLM_CALLS: Final = 4
TOOL_CALLS: Final = 5
STEPS: Final = 6
ERRORS: Final = 7
DURATION_MS: Final = 8
COST_USD: Final = 9
#: Which spans a gate lets through to its check: every span, the LLM and tool calls, the tool calls.
ON_SPANS: Final = 0
ON_CALLS: Final = 1
ON_TOOL_CALLS: Final = 2


class RunSoFar:
    """The counts of an open run's spans that have ended (a plain slotted class: updated on every span)."""

    __slots__ = (
        "cost_unknown",
        "cost_usd",
        "end_unix_nano",
        "errors",
        "failed_llm_calls_without_usage",
        "input_tokens",
        "last_span_id",
        "llm_calls",
        "llm_calls_without_usage",
        "output_tokens",
        "reasoning_tokens",
        "start_unix_nano",
        "tool_calls",
        "usage_known",
    )

    def __init__(self) -> None:
        self.llm_calls = 0
        self.tool_calls = 0
        self.errors = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.reasoning_tokens = 0
        #: Some LLM call reported usage (without it, the token counts are unknown, not zero).
        self.usage_known = False
        self.llm_calls_without_usage = 0
        self.failed_llm_calls_without_usage = 0
        self.cost_usd = 0.0
        #: LLM calls whose cost is not known (no price, no usage).
        self.cost_unknown = 0
        self.start_unix_nano = 0
        self.end_unix_nano = 0
        #: The span that ended last: the evidence of a limit it broke.
        self.last_span_id = ""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def steps(self) -> int:
        return self.llm_calls + self.tool_calls

    @property
    def duration_ms(self) -> float:
        """From the earliest start to the latest end seen: at most the root span's duration."""
        return max(0, self.end_unix_nano - self.start_unix_nano) / 1e6

    def count(self, which: int) -> float:
        """One of the counts a gate compares (``TOTAL_TOKENS`` ... ``COST_USD``)."""
        if which == TOTAL_TOKENS:
            return self.input_tokens + self.output_tokens
        if which == INPUT_TOKENS:
            return self.input_tokens
        if which == OUTPUT_TOKENS:
            return self.output_tokens
        if which == REASONING_TOKENS:
            return self.reasoning_tokens
        if which == LLM_CALLS:
            return self.llm_calls
        if which == TOOL_CALLS:
            return self.tool_calls
        if which == STEPS:
            return self.llm_calls + self.tool_calls
        if which == ERRORS:
            return self.errors
        if which == DURATION_MS:
            return max(0, self.end_unix_nano - self.start_unix_nano) / 1e6
        if which == COST_USD:
            return self.cost_usd
        raise ValueError(f"no count {which}")

    def past(self, bounds: tuple[tuple[int, float], ...]) -> bool:
        """Whether any of the counts is past its bound."""
        for which, bound in bounds:
            if self.count(which) > bound:
                return True
        return False


Watch = Callable[[RunSoFar, Step | None, Any], GraderResult | None]
_NAMES_KEPT: Final = 4096


class Gate:
    """How a grader is checked in flight: its ``check(so_far, step, state)``, called only for the spans ``on``
    lets through (``ON_SPANS``, ``ON_CALLS``, ``ON_TOOL_CALLS``); with ``tools``, only for the tool calls whose name
    one of those patterns matches; with ``over``, only once one of the run's counts named there is past its bound
    (a bound below which the check cannot fail: it may be lower than the limit, never higher). A check that keeps
    state of its run gets it from ``start()``, called once per run (``state`` is None otherwise); a run drops it
    once the check has broken."""

    __slots__ = ("_names", "check", "on", "over", "start", "tools")

    def __init__(
        self,
        check: Watch,
        *,
        start: Callable[[], Any] | None = None,
        on: int = ON_SPANS,
        tools: Sequence[str] | None = None,
        over: tuple[tuple[int, float], ...] = (),
    ) -> None:
        self.check = check
        self.start = start
        self.on = ON_TOOL_CALLS if tools else on
        self.tools = tuple(tools) if tools else None
        self.over = over
        #: Whether ``tools`` matches a name, decided once per name (runs share a few tool names; past
        #: ``_NAMES_KEPT`` names, the answers are forgotten at once).
        self._names: dict[str, bool] = {}

    def takes(self, tool: str) -> bool:
        """Whether the check is to be called for a tool call of this name."""
        if self.tools is None:
            return True
        hit = self._names.get(tool)
        if hit is None:
            if len(self._names) >= _NAMES_KEPT:
                self._names.clear()
            hit = self._names[tool] = any(matcher(pattern)(tool) for pattern in self.tools)
        return hit


WatchFactory = Callable[[Any, str], Gate | None]


class Repetitions:
    """Back-to-back repetitions of a block of 1 to ``max_period`` calls, followed call by call: for each period,
    how many calls in a row so far are the same as the call a period before. Each call costs ``max_period``
    comparisons and only the last ``max_period`` calls are kept (with the steps of the last ``keep``, for evidence).

    ``add`` returns the longest repetition ending at the newest call: (occurrences of the block, period), whole
    blocks counted, a shorter period first on a tie, as ``repetition.longest_repetition`` counts them.
    """

    __slots__ = ("_keep", "_matched", "_recent", "_same", "steps")

    def __init__(self, max_period: int, same: Callable[[Any, Any], bool], keep: int = 64) -> None:
        self._same = same
        # Lists, not deques: an open run holds one of these for each repetition check, and a deque's first
        # block alone is over 500 bytes.
        self._recent: list[Any] = []
        self._matched = [0] * (max_period + 1)
        self._keep = keep
        #: The last ``keep`` calls' steps (the evidence of a repetition, its latest calls).
        self.steps: list[Step] = []

    def add(self, item: Any, step: Step) -> tuple[int, int]:
        best = (1, 1)
        recent, matched = self._recent, self._matched
        for period in range(1, len(matched)):
            if len(recent) >= period and self._same(item, recent[-period]):
                matched[period] += 1
            else:
                matched[period] = 0
            occurrences = (matched[period] + period) // period
            if occurrences > best[0]:
                best = (occurrences, period)
        recent.append(item)
        if len(recent) >= len(matched):
            del recent[0]
        self.steps.append(step)
        if len(self.steps) > self._keep:
            del self.steps[0]
        return best

    def last(self, n: int) -> list[Step]:
        """The steps of the last ``n`` calls (fewer when fewer are kept)."""
        return self.steps[-n:] if n > 0 else []
