"""Grading results as OpenTelemetry data: span events, log events, and a copy of a span with events added.

Event and attribute names are a contract (dashboards and alerts read them); they come from ``semconv``, and each
result's event attributes from ``result_attributes``.

As span events they sit on the run's root (or its evaluation span). As log events each is in the context of the
span it evaluates: a step-level result (its evidence names a step of the run: the repeated tool call, the
forbidden call, the call past a limit) in that step's, with ``gen_ai.response.id`` when the step is a model call
that has one; a run-level result in the root's.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry._logs import Logger, get_logger_provider
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
from opentelemetry.sdk.trace import (
    ConcurrentMultiSpanProcessor,
    Event,
    ReadableSpan,
    SpanLimits,
    SynchronousMultiSpanProcessor,
)
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationInfo, InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    TraceFlags,
    Tracer,
    TracerProvider,
    get_tracer_provider,
    set_span_in_context,
)
from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.graders.base import GraderResult
from trajgrade.core.inflight import Breach
from trajgrade.core.internal_errors import report_internal_error
from trajgrade.core.packed_attributes import PackedAttributes
from trajgrade.core.result_attributes import (
    breach_attributes,
    breach_log_attributes,
    report_attributes,
    result_attributes,
    results_attributes,
)
from trajgrade.core.running import RunReport
from trajgrade.core.trajectory.model import Step
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.version import __version__

__all__ = [
    "EvaluationSpans",
    "add_breach_event",
    "log_breach",
    "evaluation_logger",
    "log_events",
    "log_records",
    "span_ids",
    "span_in_context",
    "span_context_of",
    "result_events",
    "with_results",
]


def result_events(
    results: Sequence[GraderResult], timestamp: int, made: Sequence[Mapping[str, AttributeValue]] | None = None
) -> tuple[Event, ...]:
    """The results' events; ``made``: their attributes when made already (``results_attributes``)."""
    return tuple(
        Event(sc.EVALUATION_RESULT_EVENT, a, timestamp) for a in (results_attributes(results) if made is None else made)
    )


def with_results(
    span: ReadableSpan, report: RunReport, made: Sequence[Mapping[str, AttributeValue]] | None = None
) -> ReadableSpan:
    """A copy of an ended span with the run's result events and verdict attributes added (``made``: the results'
    attributes when made already).

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
        events=(*span.events, *result_events(report.results, timestamp, made)),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def span_ids(trace_id: str, span_id: str) -> tuple[int, int] | None:
    """A span's trace and span ids from their hex, or None when they are not valid ids (zero, too long, not hex)."""
    try:
        trace, span = int(trace_id, 16), int(span_id, 16)
    except (TypeError, ValueError):
        return None
    if not (0 < trace < 1 << 128 and 0 < span < 1 << 64):
        return None
    return trace, span


def _span_context(trace_id: str, span_id: str) -> SpanContext | None:
    ids = span_ids(trace_id, span_id)
    if ids is None:
        return None
    return SpanContext(ids[0], ids[1], is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def span_context_of(record: SpanRecord) -> SpanContext | None:
    """The span context of a span record (its ids are hex), or None when they are not valid ids."""
    return _span_context(record.trace_id, record.span_id)


def evaluation_logger(logger_provider: Any = None) -> Logger | None:
    """The logger of the log-based ``gen_ai.evaluation.result`` events, or None for none; every door's choice.

    ``logger_provider``: a provider to emit through; ``False``: no log events; ``None`` (the default): the global
    provider when it is the SDK's (the application, or ``opentelemetry-instrument``, set logs up), else none.
    """
    if logger_provider is False:
        return None
    if logger_provider is None:
        logger_provider = get_logger_provider()
        if not isinstance(logger_provider, SdkLoggerProvider):
            return None  # the API's proxy or no-op: nobody configured logs
    try:
        logger: Logger = logger_provider.get_logger(sc.TRAJGRADE_SCOPE, __version__)
    except Exception as e:
        report_internal_error("evaluation_logger", e)
        return None
    return logger


def _evaluated_step(result: GraderResult, steps: dict[str, Step]) -> Step | None:
    """The step a result evaluates: the first of its evidence spans that is a step of the run (``steps``, by span
    id), or None for a run-level result."""
    for evidence in result.evidence:
        for span_id in evidence.span_ids:
            step = steps.get(span_id)
            if step is not None:
                return step
    return None


def log_events(
    report: RunReport, root: SpanRecord, made: Sequence[dict[str, AttributeValue]] | None = None
) -> list[tuple[dict[str, AttributeValue], str]]:
    """The results' log-based ``gen_ai.evaluation.result`` events: each one's attributes and the id of the span it
    evaluates, its step's (with the step's ``gen_ai.response.id``) or the run's root's; none when the root's ids are
    not valid. ``made``: the results' attributes when made already (``results_attributes``; not changed: a copy
    takes a step's response id)."""
    if span_ids(root.trace_id, root.span_id) is None:
        return []
    steps: dict[str, Step] | None = None  # by span id, made for the first result with evidence spans
    events: list[tuple[dict[str, AttributeValue], str]] = []
    for i, result in enumerate(report.results):
        event = result_attributes(result) if made is None else made[i]
        span_id = root.span_id
        if any(evidence.span_ids for evidence in result.evidence):
            if steps is None:
                steps = {step.span_id: step for step in report.trajectory.steps}
            step = _evaluated_step(result, steps)
            if step is not None:
                if span_ids(root.trace_id, step.span_id) is not None:
                    span_id = step.span_id
                if step.kind == "llm_call" and step.response_id is not None:
                    event = {**event, sc.RESPONSE_ID: step.response_id}
        events.append((event, span_id))
    return events


def span_in_context(trace_id: str, span_id: str | None) -> Context | None:
    """A context whose current span is the one with these ids (hex), or None when they are not valid ids."""
    span = _span_context(trace_id, span_id) if span_id else None
    return set_span_in_context(NonRecordingSpan(span)) if span is not None else None


def log_records(
    report: RunReport,
    root: SpanRecord,
    logger: Any,
    made: Sequence[dict[str, AttributeValue]] | None = None,
) -> None:
    """Emit the results as log-based ``gen_ai.evaluation.result`` events (``log_events``) through a logger, each
    in the context of the span it evaluates."""
    contexts: dict[str, Context | None] = {}
    for event, span_id in log_events(report, root, made):
        if span_id not in contexts:
            contexts[span_id] = span_in_context(root.trace_id, span_id)
        logger.emit(event_name=sc.EVALUATION_RESULT_EVENT, attributes=event, context=contexts[span_id])


class EvaluationSpans:
    """Starts the span ``evaluation {agent}`` that carries a run's results when its root cannot (it was exported
    already, or never ended): a child of the root, at the root's end.

    It is started in the pipeline of the provider that recorded the run: an SDK root span holds its provider's
    span processors, so the span reaches them whichever provider is global. For a run with no SDK root (its
    root never arrived) it comes from ``tracer_provider``, or the global one.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer_provider = tracer_provider
        self._ids = RandomIdGenerator()
        self._scope = InstrumentationScope(sc.TRAJGRADE_SCOPE, __version__)
        with warnings.catch_warnings():  # the SDK's Tracer still takes the deprecated form too
            warnings.simplefilter("ignore", DeprecationWarning)
            self._info = InstrumentationInfo(sc.TRAJGRADE_SCOPE, __version__)
        # The tracer of the last pipeline and resource a run came from (a process has one provider, mostly): making
        # one reads the SDK's limits and settings from the environment, as a provider does once.
        self._last: tuple[Any, Any, SdkTracer, SpanLimits] | None = None

    def _tracer(self, processor: Any, resource: Any) -> tuple[SdkTracer, SpanLimits]:
        last = self._last
        if last is not None and last[0] is processor and last[1] is resource:
            return last[2], last[3]
        limits = SpanLimits()
        tracer = SdkTracer(ParentBased(ALWAYS_ON), resource, processor, self._ids, self._info, limits, self._scope)
        self._last = (processor, resource, tracer, limits)
        return tracer, limits

    def emit(
        self,
        report: RunReport,
        root: SpanRecord,
        span: ReadableSpan | None = None,
        pipeline: Any = None,
        made: Sequence[Mapping[str, AttributeValue]] | None = None,
    ) -> None:
        """``span``: the root as the SDK handed it over; ``pipeline``: the span processor of the provider that
        recorded it (the live SDK span's), when known; ``made``: the results' attributes when made already."""
        parent = span.context if span is not None and span.context is not None else span_context_of(root)
        if parent is None:
            return
        end = (span.end_time if span is not None else None) or time.time_ns()
        agent = report.trajectory.agent_name or report.trajectory.root_span_name
        name = f"{sc.EVALUATION_SPAN_PREFIX}{agent}"
        processor = pipeline if pipeline is not None else getattr(span, "_span_processor", None)
        tracer: Tracer
        limits: SpanLimits | None = None
        if span is not None and isinstance(processor, SynchronousMultiSpanProcessor | ConcurrentMultiSpanProcessor):
            tracer, limits = self._tracer(processor, span.resource)
        else:
            tracer = (self._tracer_provider or get_tracer_provider()).get_tracer(sc.TRAJGRADE_SCOPE, __version__)
        parent_context = set_span_in_context(NonRecordingSpan(parent))
        evaluation = tracer.start_span(
            name,
            context=parent_context,
            start_time=end,
            attributes={**report_attributes(report), sc.OPERATION_NAME: "evaluation"},
        )
        attributes = results_attributes(report.results) if made is None else made
        if limits is None or not _add_all_events(evaluation, attributes, end, limits):
            _add_events(evaluation, attributes, end, limits)
        evaluation.end(end_time=end)


def _add_all_events(
    span: Any, attributes: Sequence[Mapping[str, AttributeValue]], timestamp: int | None, limits: SpanLimits
) -> bool:
    """The results' events on an SDK span (the evaluation span just started by the tracer made here, a run's open
    root), appended together under the span's lock, as ``_add_events`` would append them one by one (each under
    that lock and its list's); False when they cannot all go as made (limits that cut or drop, a span that is not
    the SDK's or has ended). ``timestamp``: None for now."""
    events = getattr(span, "_events", None)
    most = limits.max_event_attributes
    if (
        limits.max_attribute_length is not None
        or not isinstance(events, BoundedList)
        or (most is not None and any(len(a) > most for a in attributes))
    ):
        return False
    made = [Event(sc.EVALUATION_RESULT_EVENT, a, timestamp) for a in attributes]
    with span._lock:
        if span._end_time is not None:
            return False
        events.extend(made)
    return True


def _add_events(
    span: Any, attributes: Sequence[Mapping[str, AttributeValue]], timestamp: int | None, limits: SpanLimits | None
) -> None:
    """The results' ``gen_ai.evaluation.result`` events on ``span``.

    The SDK's ``add_event`` checks each value of each event, each span id of the evidence one by one: for a run's
    twenty results, about half what grading the run costs. The attributes ``result_attributes`` makes are valid as
    made (strings cut short, numbers, booleans, tuples of strings): on a span of the tracer made here, whose
    ``limits`` can neither cut a value nor drop an attribute, each event is appended as ``add_event`` would leave
    it. Elsewhere they go through ``add_event``. ``timestamp``: None for now.
    """
    add = getattr(span, "_add_event", None) if limits is not None and limits.max_attribute_length is None else None
    most = limits.max_event_attributes if limits is not None else None
    for a in attributes:
        if add is not None and (most is None or len(a) <= most):
            add(Event(sc.EVALUATION_RESULT_EVENT, a, timestamp))
        else:
            span.add_event(sc.EVALUATION_RESULT_EVENT, a, timestamp=timestamp)


def add_breach_event(span: Any, breach: Breach) -> None:
    """A breach's ``gen_ai.evaluation.result`` event on its run's open root span, appended as made (``_add_events``)
    where the span's own limits can neither cut a value nor drop an attribute. The root holds the event until the
    run ends: ``add_event``'s copy of the attributes, with a dict and a lock of its own, would hold twice as much.

    A root that ended while the worker made the event keeps none (the SDK would drop it with a warning in the
    agent's log): the breach still goes out as a log event and in the counter, and the run's grade carries the
    result. Appended as made, the event is checked against the root's end under the root's own lock. The attributes
    are packed (``PackedAttributes``): the root may stay open long, and a process may hold thousands of open runs."""
    attributes = (PackedAttributes(breach_attributes(breach)),)
    limits = getattr(span, "_limits", None)
    if isinstance(limits, SpanLimits) and _add_all_events(span, attributes, None, limits):
        return
    if span.is_recording():  # limits that cut: through ``add_event``, which copies and cuts
        _add_events(span, attributes, None, limits if isinstance(limits, SpanLimits) else None)


def log_breach(breach: Breach, logger: Any, parent: SpanContext | None = None) -> None:
    """Emit an in-flight breach as a log-based ``gen_ai.evaluation.result`` event, in the context of the span that
    broke the limit (else ``parent``, the run's root when the door knows it)."""
    ctx = span_in_context(breach.trace_id, breach.span_id)
    if ctx is None and parent is not None:
        ctx = set_span_in_context(NonRecordingSpan(parent))
    logger.emit(event_name=sc.EVALUATION_RESULT_EVENT, attributes=breach_log_attributes(breach), context=ctx)
