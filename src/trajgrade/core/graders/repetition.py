"""Back-to-back repetitions of tool calls, as ``max-repeat`` and ``loop-outcome`` count them: calls compared by
name, arguments or result (JSON values), and the longest run of a repeated block of calls.

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as it
runs on every tool call of every run.
"""

from __future__ import annotations

from typing import Any, Final

from trajgrade.core.graders.steps import call_names
from trajgrade.core.trajectory.call_texts import CallTexts
from trajgrade.core.trajectory.model import Step

__all__ = ["json_equal", "known", "longest_repetition", "longest_repetitions", "same_call", "unknown_count"]


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality of JSON values: key order ignored, ``1`` equals ``1.0``, ``true`` is not ``1``.

    Python's ``==`` already ignores key order and equates 1 and 1.0; it only goes too far in equating booleans
    with numbers, so a structural walk is needed only when ``==`` says equal. Keys stay references to the
    parsed values: nothing is built per call, which keeps long runs cheap for the garbage collector.
    """
    if a != b:
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b)
    if isinstance(a, dict):
        for k, v in a.items():
            if not _equal_item(v, b[k]):
                return False
        return True
    if isinstance(a, (list, tuple)):
        for i in range(len(a)):  # as long as b: they are equal
            if not _equal_item(a[i], b[i]):
                return False
    return True


def _equal_item(v: Any, w: Any) -> bool:
    """``json_equal(v, w)`` for two items of containers found equal: a string equal to another value is equal to it
    as JSON (only a string equals a string), and so are two integers (not booleans) found equal."""
    if type(v) is str or (type(v) is int and type(w) is int):
        return True
    return json_equal(v, w)


def same_call(a: Step, b: Step, match: str) -> bool:
    """Whether two tool calls are the same under ``match``: ``name``, ``name-args`` (the name and the arguments) or
    ``observation`` (the name and the result, or for calls without one, their error). A call whose deciding
    data was not captured is the same as no other."""
    ta, tb = a.tool, b.tool
    if ta is None or tb is None or ta.name != tb.name:
        return False
    if match == "name":
        return True
    if match == "name-args":
        return ta.arguments_captured and tb.arguments_captured and json_equal(ta.arguments, tb.arguments)
    if ta.result_captured or tb.result_captured:
        return ta.result_captured and tb.result_captured and json_equal(ta.result, tb.result)
    return a.failed and b.failed and a.error_type == b.error_type and a.error_message == b.error_message


def known(step: Step, match: str) -> bool:
    """Whether the data ``match`` compares a call by was captured."""
    tool = step.tool
    if tool is None:
        return False
    if match == "name":
        return True
    if match == "name-args":
        return tool.arguments_captured
    return tool.result_captured or step.failed


def unknown_count(calls: list[Step], match: str) -> int:
    """How many of the calls lack the data ``match`` compares them by."""
    return sum(1 for s in calls if not known(s, match))


def longest_repetition(calls: list[Step], match: str, max_period: int) -> tuple[int, int, int]:
    """(occurrences, start index, period) of the longest back-to-back repetition of a block of calls.

    Whole blocks are counted; on a tie the shorter period (then the earlier start) wins. Each call is compared with
    the ``max_period`` calls before it in one pass, so that a long run's calls are read once, not once per period.
    """
    return longest_repetitions(calls, match, max_period)[max_period]


#: Pairs of texts a pass keeps at once.
_MAX_KEPT: Final = 4096


class _Texts:
    """Whether two calls are the same, once per pair of texts (``CallTexts``: of their arguments or their result, as
    ``match`` compares the calls) met: a loop repeats the same few texts. Past ``_MAX_KEPT`` pairs what is kept is
    dropped and kept anew, so that the pairs a long run repeats late are kept too."""

    def __init__(self, calls: list[Step], match: str, texts: CallTexts) -> None:
        self.calls = calls
        self.match = match
        self.numbers = texts.arguments_of(calls) if match == "name-args" else texts.results_of(calls)
        self.pairs: dict[int, bool] = {}

    def same(self, i: int, j: int) -> bool:
        """``same_call(calls[i], calls[j], match)``, for two calls of the same tool."""
        a, b = self.numbers[i], self.numbers[j]
        if a is None or b is None:
            return same_call(self.calls[i], self.calls[j], self.match)
        pair = a << 32 | b
        known = self.pairs.get(pair)
        if known is None:
            known = same_call(self.calls[i], self.calls[j], self.match)
            if len(self.pairs) >= _MAX_KEPT:
                self.pairs.clear()
            self.pairs[pair] = known
        return known


def longest_repetitions(
    calls: list[Step],
    match: str,
    max_period: int,
    texts: CallTexts | None = None,
    names: tuple[str | None, ...] | None = None,
) -> list[tuple[int, int, int]]:
    """``longest_repetition(calls, match, p)`` for every p from 1 to ``max_period``, at index p, from one pass: the
    graders of one grading that compare the same calls the same way share it.

    The pass keeps, for each period, the most occurrences found and the earliest start of a repetition that long;
    the longest repetition up to a period is then the longest of those, the shorter period first on a tie. Two
    calls of one tool whose compared data are parsed from texts met before are compared as those texts were
    (a loop repeats the same few texts; ``texts``: the run's numbering of its calls, by default one of ``calls``).
    ``names``: the calls' tool names (``steps.tool_columns``), by default read from the calls.
    """
    n = len(calls)
    most = [0] * (max_period + 1)  # by period: the most occurrences of a block found
    start_of = [0] * (max_period + 1)  # by period: where the first repetition that long starts
    matched = [0] * (max_period + 1)  # by period: calls so far, each the same as the call a period before it
    same_texts = None if match == "name" else _Texts(calls, match, texts if texts is not None else CallTexts(calls))
    if names is None:
        names = call_names(calls)
    for i in range(1, n):
        name = names[i]
        for period in range(1, min(max_period, i) + 1):
            if name is None or name != names[i - period]:
                same = False  # another tool, or a call without one: the same as no other (``same_call``)
            elif same_texts is None:
                same = True
            else:
                same = same_texts.same(i, i - period)
            if not same:
                matched[period] = 0
                continue
            m = matched[period] = matched[period] + 1
            occurrences = (m + period) // period
            if occurrences > most[period]:
                most[period], start_of[period] = occurrences, i - m - period + 1
    best = [((1 if n else 0), 0, 1)]
    for period in range(1, max_period + 1):
        longest = best[-1]
        best.append((most[period], start_of[period], period) if most[period] > longest[0] else longest)
    return best
