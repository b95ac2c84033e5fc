"""In-flight checks: what a grader whose verdict can only get worse as a run goes on reads while the run is open.

A grader type that can be checked in flight gives its :class:`~trajgrade.core.graders.base.GraderSpec` a
``watch``: ``watch(config, name)`` makes one check for one open run, a callable ``(so_far, step)`` called after
each span of the run ends, in the order they end. ``so_far`` holds the run's counts so far; ``step`` is the
LLM or tool call that span made (None for any other span). The check returns the grader's failing result on
the first span that breaks its limit, in the grader's own words, else None. A check keeps a bounded state
(counters, a window of the last calls): its cost and memory do not grow with the run.

The final grading at the root's end agrees: what breaks a limit in flight breaks it in the whole run too (the
counts in flight are never more than the trajectory's: spans of double instrumentation count once, and a
call the trajectory only infers, such as a delegation with no tool span, is not counted until then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trajgrade.core.graders.base import GraderResult
from trajgrade.core.trajectory.model import Step

__all__ = ["Repetitions", "RunSoFar", "Watch", "WatchFactory"]


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

    def lasted_under(self, ms: float) -> bool:
        """Whether the run so far lasted less than ``ms`` by a millisecond or more: no rounding of its duration to
        the millisecond or finer takes it to ``ms`` (a duration check's quick answer, on every span)."""
        return self.end_unix_nano - self.start_unix_nano < (ms - 1) * 1e6


Watch = Callable[[RunSoFar, Step | None], GraderResult | None]
WatchFactory = Callable[[Any, str], Watch]


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
