"""The exceptions trajgrade raises to its users.

::

    TrajgradeError
     ├── ConfigError         a graders file or config object is invalid (file, line, grader, field)
     └── TraceDecodeError    an input file or request is not OTLP trace data (file, line, what)

Only loading a config and reading input raise; nothing raises into an instrumented application.
"""

from __future__ import annotations

__all__ = ["ConfigError", "TraceDecodeError", "TrajgradeError"]


class TrajgradeError(Exception):
    """Base class of every error trajgrade raises on purpose."""


class ConfigError(TrajgradeError):
    """A grader configuration is invalid; the message names the file, the line, the grader and the field."""


class TraceDecodeError(TrajgradeError):
    """Input that is not OTLP trace data; the message names the source and what is wrong with it."""

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
