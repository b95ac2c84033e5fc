"""Errors inside trajgrade never reach the application: they are logged once and counted.

With ``TRAJGRADE_RAISE_INTERNAL_ERRORS=1`` (trajgrade's own test suite sets it) they are re-raised, so that
its tests see trajgrade's own bugs; nothing else, a user's test suite included, ever gets one raised into it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from types import TracebackType

logger = logging.getLogger("trajgrade")

_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()


class UnreadableSpan(Exception):
    """Raised (from the error) for a span that no record can be made of: its trace's run is then lost to its
    checks and to grading, as a run is when a span of it cannot be read."""

    def __init__(self, trace: Hashable) -> None:
        super().__init__(f"a span of trace {trace!r} cannot be read")
        self.trace = trace


def _should_raise() -> bool:
    return os.environ.get("TRAJGRADE_RAISE_INTERNAL_ERRORS") == "1"


def report_internal_error(where: str, error: Exception, count: Callable[[str], None] | None = None) -> None:
    """Log once per (where, error type) and count an exception that trajgrade caught in its own code."""
    error_type = type(error).__name__
    if count is not None:
        try:
            count(error_type)
        except Exception:  # counting must not fail either
            pass
    key = (where, error_type)
    with _seen_lock:
        first = key not in _seen
        _seen.add(key)
    if first:
        logger.error("trajgrade: internal error in %s (your application is unaffected)", where, exc_info=error)
    if _should_raise():
        raise error


class _InternalErrors:
    __slots__ = ("_count", "_where")

    def __init__(self, where: str, count: Callable[[str], None] | None) -> None:
        self._where = where
        self._count = count

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> bool:
        if not isinstance(error, Exception):
            return False  # none, or one that is not an error (KeyboardInterrupt, SystemExit): it goes on
        report_internal_error(self._where, error, self._count)
        return True


def internal_errors(where: str, count: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
    """Swallow, log once per (where, error type) and count any exception raised inside the block.

    A class rather than a generator (``contextlib.contextmanager``), which costs twice as much a use, about a
    microsecond; hot paths (``on_start``, ``on_end``) use ``try``/``except`` with :func:`report_internal_error`.
    """
    return _InternalErrors(where, count)
