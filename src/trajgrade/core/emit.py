"""Grading results as OpenTelemetry data: span events, log events, and a copy of a span with events added.

Event and attribute names are a contract (dashboards and alerts read them); they come from ``semconv``.
One ``gen_ai.evaluation.result`` event per grader: ``gen_ai.evaluation.name``, ``.score.value`` (double),
``.score.label`` (``pass`` | ``fail``; absent when the grader could not judge, which sets ``error.type``),
``.explanation``, and ``trajgrade.grader.type``, ``trajgrade.value``, ``trajgrade.limit``,
``trajgrade.evidence.span_ids``. The span that carries them also gets ``trajgrade.passed`` and
``trajgrade.score``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.running import RunReport

__all__ = ["log_records", "report_attributes", "result_attributes", "result_events", "with_results"]

_MAX_SPAN_IDS = 64
_MAX_TEXT = 4096


def _attr_value(value: Any) -> AttributeValue | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float | str):
        return value if not isinstance(value, str) else value[:_MAX_TEXT]
    try:
        return json.dumps(value, sort_keys=True, default=str)[:_MAX_TEXT]
    except (TypeError, ValueError):
        return str(value)[:_MAX_TEXT]


def result_attributes(result: GraderResult) -> dict[str, AttributeValue]:
    """The attributes of one ``gen_ai.evaluation.result`` event."""
    attrs: dict[str, AttributeValue] = {
        sc.EVALUATION_NAME: result.name,
        sc.EVALUATION_SCORE_VALUE: float(result.score),
        sc.EVALUATION_EXPLANATION: result.explanation[:_MAX_TEXT],
        sc.TRAJGRADE_GRADER_TYPE: result.type,
    }
    if result.status == "error":
        attrs[sc.ERROR_TYPE] = result.error_type or "not_evaluable"
    else:
        attrs[sc.EVALUATION_SCORE_LABEL] = result.status
    for key, value in ((sc.TRAJGRADE_VALUE, result.value), (sc.TRAJGRADE_LIMIT, result.limit)):
        v = _attr_value(value)
        if v is not None:
            attrs[key] = v
    span_ids = list(dict.fromkeys(sid for e in result.evidence for sid in e.span_ids))  # each once, in order
    if span_ids:
        attrs[sc.TRAJGRADE_EVIDENCE_SPAN_IDS] = tuple(span_ids[:_MAX_SPAN_IDS])
    return attrs


def report_attributes(report: RunReport) -> dict[str, AttributeValue]:
    """Attributes for the span that carries a run's results."""
    attrs: dict[str, AttributeValue] = {sc.TRAJGRADE_PASSED: report.passed, sc.TRAJGRADE_SCORE: float(report.score)}
    if report.trajectory.partial:
        attrs[sc.TRAJGRADE_PARTIAL] = True
    return attrs


def result_events(results: Sequence[GraderResult], timestamp: int) -> tuple[Event, ...]:
    return tuple(Event(sc.EVALUATION_RESULT_EVENT, result_attributes(r), timestamp) for r in results)


def with_results(span: ReadableSpan, report: RunReport) -> ReadableSpan:
    """A copy of an ended span with the run's result events and verdict attributes added.

    An ended span cannot change; the copy is built with the public ``ReadableSpan`` constructor and handed
    downstream in its place.
    """
    timestamp = span.end_time or span.start_time or 0
    attributes: dict[str, Any] = dict(span.attributes or {})
    attributes.update(report_attributes(report))
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=(*span.events, *result_events(report.results, timestamp)),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def log_records(report: RunReport, span_context: Any, logger: Any) -> None:
    """Emit the results as log-based ``gen_ai.evaluation.result`` events in the context of the run's root."""
    from opentelemetry.context import Context
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    ctx: Context = set_span_in_context(NonRecordingSpan(span_context))
    for result in report.results:
        logger.emit(event_name=sc.EVALUATION_RESULT_EVENT, attributes=result_attributes(result), context=ctx)
