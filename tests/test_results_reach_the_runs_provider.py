"""Beside other processors, on a provider that is not the global one, a real agent's run carries its results: the
evaluation span is started in the pipeline of the provider that recorded the run, whatever the global one is."""

from __future__ import annotations

import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import GradingSpanProcessor, parse_config
from trajgrade.core import semconv as sc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from demo_agent import run_scenarios  # real pydantic-ai agents on a scripted model

CONFIG = parse_config("graders:\n  - {type: loop, name: loop, max_repeats: 2}\n  - {type: completed}\n")


def test_a_real_agents_run_on_a_provider_that_is_not_global_carries_its_results() -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))  # the application's own exporting processor
    provider.add_span_processor(GradingSpanProcessor(CONFIG))  # beside it, with no downstream
    assert trace.get_tracer_provider() is not provider

    run_scenarios(provider, ["stuck"])
    provider.force_flush()

    spans = exported.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    evaluations = [s for s in spans if s.name.startswith("evaluation ")]
    assert len(evaluations) == 1, "the results did not reach the run's provider"
    evaluation = evaluations[0]
    assert evaluation.parent is not None and root.context is not None
    assert (evaluation.parent.span_id, evaluation.context.trace_id) == (root.context.span_id, root.context.trace_id)
    assert evaluation.instrumentation_scope is not None and evaluation.instrumentation_scope.name == "trajgrade"
    assert evaluation.resource == root.resource
    results = {e.attributes[sc.EVALUATION_NAME]: e.attributes for e in evaluation.events}
    assert set(results) == {"loop", "completed"}
    assert results["loop"][sc.EVALUATION_SCORE_LABEL] == "fail"  # the stuck agent repeats its search six times
    assert evaluation.attributes is not None and evaluation.attributes[sc.TRAJGRADE_PASSED] is False
    provider.shutdown()
