"""Regular expressions from configs, run on bounded input and under a time limit.

A config's regexes are matched against tool names, arguments and results, which the model and its tools
write: a catastrophic pattern (``(a+)+$``) on a crafted argument must not hang a grader, and through it the
agent's worker thread or the sidecar. Patterns are compiled with the ``regex`` package (the syntax of
``re``), which can stop a match after a timeout; the text is cut to ``MAX_INPUT`` characters first. A match
past its time raises :class:`PatternTimeout`, which the grader's runner reports as an ``error`` result with
``error.type`` ``timeout``. A grader's own budget (:func:`budget`) bounds all its matches together: many slow
matches cannot add up past it.

A pattern that is a plain string, with at most a leading ``^`` and a trailing ``$`` (``^search$``, ``^read_``,
``topic``), cannot be slow: it is matched as the string it is, without the regex engine, whose time limit alone
costs microseconds a match. Such a pattern is also a valid regex as it is (:func:`check_pattern`): the ``regex``
package is imported when the first other pattern is compiled.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_INPUT",
    "TIMEOUT_S",
    "PatternTimeout",
    "budget",
    "check_pattern",
    "compile_pattern",
    "end_budget",
    "matcher",
    "name_filter",
    "search",
    "start_budget",
]

MAX_INPUT = 65_536
TIMEOUT_S = 0.2


class PatternTimeout(Exception):
    """A config regex took longer than ``TIMEOUT_S`` on one input, or past the budget of the grader running it."""


_deadline = threading.local()


@contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Every match in the block, on this thread, ends by ``seconds`` from now (or by an enclosing budget's end)."""
    outer = start_budget(seconds)
    try:
        yield
    finally:
        end_budget(outer)


def start_budget(seconds: float) -> float | None:
    """:func:`budget` without a context manager (a grader's runner sets one per grader): returns the enclosing
    budget's end, which :func:`end_budget` restores."""
    outer: float | None = getattr(_deadline, "at", None)
    at = time.monotonic() + seconds
    _deadline.at = at if outer is None else min(at, outer)
    return outer


def end_budget(outer: float | None) -> None:
    _deadline.at = outer


def check_pattern(pattern: str) -> None:
    """Raises ``ValueError`` naming the pattern when it is not a valid regex (a plain one is, uncompiled)."""
    if _plain(pattern) is None:
        compile_pattern(pattern)


@functools.lru_cache(maxsize=2048)
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern; raises ``ValueError`` naming the pattern when it is not a valid regex."""
    import regex

    try:
        return regex.compile(pattern, flags=regex.VERSION0)
    except regex.error as e:
        raise ValueError(f"invalid regex {pattern!r}: {e}") from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (its first ``MAX_INPUT`` characters)."""
    return matcher(pattern)(text)


@functools.lru_cache(maxsize=2048)
def matcher(pattern: str) -> Callable[[str], bool]:
    """``search`` with ``pattern`` set (for a loop over many texts).

    A plain pattern is matched as the string it is. With the regex engine, short texts (tool names, most argument
    values) repeat across a run's calls, so their answers are kept: a match under a time limit costs microseconds
    more than one without.
    """
    plain = _plain(pattern)
    if plain is None:
        return functools.partial(_search_any, pattern)
    body, at_start, at_end = plain
    if not at_end:
        if at_start:
            return lambda text: text.startswith(body, 0, MAX_INPUT)
        return lambda text: text.find(body, 0, MAX_INPUT) >= 0
    # "$" matches at the end of the text and before a newline that ends it
    with_newline = body + "\n"
    if at_start:
        if len(with_newline) < MAX_INPUT:  # then no text longer than MAX_INPUT can match
            return lambda text: text == body or text == with_newline
        return lambda text: any(e == len(body) and text.startswith(body, 0, e) for e in _ends(text))
    return lambda text: (
        text.endswith(body) or text.endswith(with_newline)
        if len(text) <= MAX_INPUT
        else any(text.endswith(body, 0, e) for e in _ends(text))
    )


#: What makes a pattern more than a plain string.
_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _plain(pattern: str) -> tuple[str, bool, bool] | None:
    """(the string, anchored at the start, anchored at the end) of a pattern that is a plain string with at most a
    leading ``^`` and a trailing ``$``; None for any other pattern."""
    at_start = pattern.startswith("^")
    body = pattern[1:] if at_start else pattern
    at_end = body.endswith("$")
    body = body[:-1] if at_end else body
    if any(c in _SPECIAL for c in body):
        return None
    return body, at_start, at_end


def _ends(text: str) -> tuple[int, ...]:
    """Where a match may end for ``$``: the end of the (cut) text, and before its last character if a newline."""
    end = min(len(text), MAX_INPUT)
    return (end, end - 1) if text.endswith("\n", 0, end) else (end,)


def _search_any(pattern: str, text: str) -> bool:
    if len(text) <= _SHORT:
        return _search_short(pattern, text)
    return _search(pattern, text)


_SHORT = 256


def name_filter(patterns: Sequence[str] | None) -> Callable[[str], bool]:
    """Whether a name matches any of ``patterns`` (every name when there are none), decided once per name: a
    run's calls share a few tool names."""
    if not patterns:
        return lambda name: True
    seen: dict[str, bool] = {}
    tests = [matcher(p) for p in patterns]

    def matches(name: str) -> bool:
        hit = seen.get(name)
        if hit is None:
            hit = seen[name] = any(test(name) for test in tests)
        return hit

    return matches


@functools.lru_cache(maxsize=8192)
def _search_short(pattern: str, text: str) -> bool:
    return _search(pattern, text)


def _search(pattern: str, text: str) -> bool:
    limit = TIMEOUT_S
    at: float | None = getattr(_deadline, "at", None)
    if at is not None:
        left = at - time.monotonic()
        if left <= 0:
            raise PatternTimeout(f"regex {pattern!r} not run: the grader's time budget is spent")
        limit = min(limit, left)
    try:
        return compile_pattern(pattern).search(text[:MAX_INPUT], timeout=limit) is not None
    except TimeoutError:
        if limit < TIMEOUT_S:
            raise PatternTimeout(f"regex {pattern!r}: the grader's time budget ran out during its match") from None
        raise PatternTimeout(
            f"regex {pattern!r} took more than {TIMEOUT_S}s on an input of {min(len(text), MAX_INPUT)} characters"
        ) from None
