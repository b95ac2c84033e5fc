"""The attributes of a grading result's ``gen_ai.evaluation.result`` event, as every door writes them.

One event per grader: ``gen_ai.evaluation.name``, ``.score.value`` (double), ``.score.label`` (``pass`` |
``fail``; absent when the grader could not judge, which sets ``error.type``), ``.explanation``, the evaluator
(``gen_ai.evaluation.evaluator.id``, ``.version``, ``.type``), and ``trajgrade.grader.type``, ``trajgrade.value``,
``trajgrade.limit``, ``trajgrade.evidence.span_ids``. The span that carries them also gets ``trajgrade.passed``
and ``trajgrade.score`` (``report_attributes``). An in-flight breach's event is its grader's failing result,
marked in flight.

Plain data in, plain dicts out: ``emit`` puts them on spans and log records, the sidecar encodes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from trajgrade.core import semconv as sc
from trajgrade.core.graders.base import GraderResult, evidence_span_ids
from trajgrade.core.graders.catalogue import lookup
from trajgrade.core.inflight import Breach
from trajgrade.core.running import RunReport
from trajgrade.version import __version__

__all__ = [
    "breach_attributes",
    "breach_log_attributes",
    "report_attributes",
    "result_attributes",
    "results_attributes",
]

_MAX_SPAN_IDS: Final = 64
_MAX_TEXT: Final = 4096


#: ``json.dumps(value, sort_keys=True, default=str)``, its encoder made once (``dumps`` makes one per call).
_JSON: Final = json.JSONEncoder(sort_keys=True, default=str)


def _attr_value(value: Any) -> AttributeValue | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float | str):
        return value if not isinstance(value, str) else value[:_MAX_TEXT]
    try:
        return _JSON.encode(value)[:_MAX_TEXT]
    except (TypeError, ValueError):
        return str(value)[:_MAX_TEXT]


#: The attributes of a result that its grader's name and type decide (its evaluator), by (name, type), in the
#: order ``result_attributes`` writes them: the score and the explanation are placeholders, overwritten in place.
_EVALUATORS: Final[dict[tuple[str, str], dict[str, AttributeValue]]] = {}


def _evaluator_type(grader_type: str) -> str | None:
    """How a grader type decides (``semconv.EVALUATOR_TYPE_BY_SCORE_KIND``); None for a type not catalogued."""
    spec = lookup(grader_type)
    return sc.EVALUATOR_TYPE_BY_SCORE_KIND.get(spec.taxonomy.score_kind) if spec is not None else None


def _evaluator(name: str, grader_type: str) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        sc.EVALUATION_NAME: name,
        sc.EVALUATION_SCORE_VALUE: 0.0,
        sc.EVALUATION_EXPLANATION: "",
        sc.EVALUATOR_ID: name,
        sc.EVALUATOR_VERSION: __version__,
        sc.TRAJGRADE_GRADER_TYPE: grader_type,
    }
    evaluator_type = _evaluator_type(grader_type)
    if evaluator_type is not None:
        attrs[sc.EVALUATOR_TYPE] = evaluator_type
    if len(_EVALUATORS) < 1024:  # a config's graders, and what results from elsewhere name
        _EVALUATORS[(name, grader_type)] = attrs
    return attrs


def result_attributes(result: GraderResult) -> dict[str, AttributeValue]:
    """The attributes of one ``gen_ai.evaluation.result`` event."""
    name: str = result.name
    grader_type: str = result.type
    evaluator = _EVALUATORS.get((name, grader_type))
    attrs = (evaluator if evaluator is not None else _evaluator(name, grader_type)).copy()
    attrs[sc.EVALUATION_SCORE_VALUE] = float(result.score)
    explanation: str = result.explanation
    attrs[sc.EVALUATION_EXPLANATION] = explanation if len(explanation) <= _MAX_TEXT else explanation[:_MAX_TEXT]
    if result.status == "error":
        attrs[sc.ERROR_TYPE] = result.error_type or "not_evaluable"
    else:
        attrs[sc.EVALUATION_SCORE_LABEL] = result.status
    value = result.value
    if value is not None:
        v = _attr_value(value)
        if v is not None:
            attrs[sc.TRAJGRADE_VALUE] = v
    limit = result.limit
    if limit is not None:
        v = _attr_value(limit)
        if v is not None:
            attrs[sc.TRAJGRADE_LIMIT] = v
    evidence = result.evidence
    span_ids = evidence_span_ids(evidence) if evidence else ()
    if span_ids:  # each once, in order, the first _MAX_SPAN_IDS
        attrs[sc.TRAJGRADE_EVIDENCE_SPAN_IDS] = span_ids if len(span_ids) <= _MAX_SPAN_IDS else span_ids[:_MAX_SPAN_IDS]
    return attrs


def results_attributes(results: Sequence[GraderResult]) -> list[dict[str, AttributeValue]]:
    """``result_attributes`` of each result: made once when a door emits them both as span events and as log events
    (neither changes them)."""
    return [result_attributes(r) for r in results]


def report_attributes(report: RunReport) -> dict[str, AttributeValue]:
    """Attributes for the span that carries a run's results."""
    attrs: dict[str, AttributeValue] = {sc.TRAJGRADE_PASSED: report.passed, sc.TRAJGRADE_SCORE: float(report.score)}
    if report.trajectory.partial:
        attrs[sc.TRAJGRADE_PARTIAL] = True
    return attrs


def breach_attributes(breach: Breach) -> dict[str, AttributeValue]:
    """The attributes of the ``gen_ai.evaluation.result`` event of an in-flight breach: the grader's failing result,
    marked in flight (and enforced, when the run is stopped)."""
    attrs = result_attributes(breach.result)
    attrs[sc.TRAJGRADE_IN_FLIGHT] = True
    if breach.enforce:
        attrs[sc.TRAJGRADE_ENFORCED] = True
    return attrs


def breach_log_attributes(breach: Breach) -> dict[str, AttributeValue]:
    """The attributes of an in-flight breach's log-based event: its span event's, and the response id of the model
    call that broke the limit."""
    attributes = breach_attributes(breach)
    if breach.response_id is not None:
        attributes[sc.RESPONSE_ID] = breach.response_id
    return attributes
