"""The exceptions trajgrade raises to its users.

::

    TrajgradeError
     ├── ConfigError         a graders file or config object is invalid (file, line, grader, field)
     ├── TraceDecodeError    an input file or request is not OTLP trace data (file, line, what)
     └── BudgetExceeded      a run broke an enforced grader's limit: its next model or tool call is refused

Loading a config and reading input raise. Nothing raises into an instrumented application, unless it asks for
enforcement (a grader with ``enforce: true``, or ``GradingSpanProcessor(enforce=True)``): then the run that broke
the limit gets ``BudgetExceeded`` where it starts its next model or tool call.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BudgetExceeded", "ConfigError", "TraceDecodeError", "TrajgradeError"]


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


class BudgetExceeded(TrajgradeError):
    """A run broke the limit of an enforced grader while it was running; raised where the run starts its next model
    or tool call, so that the agent framework ends the run as failed.

    Attributes: ``grader`` (the grader's name), ``grader_type``, ``value`` and ``limit`` (as the grader reports
    them), ``explanation``, ``trace_id`` (hex) and ``span_id`` (hex, the span that broke the limit, or None).
    """

    def __init__(
        self,
        grader: str,
        grader_type: str,
        value: Any,
        limit: Any,
        explanation: str,
        trace_id: str,
        span_id: str | None = None,
    ) -> None:
        self.grader = grader
        self.grader_type = grader_type
        self.value = value
        self.limit = limit
        self.explanation = explanation
        self.trace_id = trace_id
        self.span_id = span_id
        super().__init__(f"trajgrade stopped the run (trace {trace_id}): {grader} ({grader_type}): {explanation}")
