"""Zero-code set-up: ``TRAJGRADE_CONFIG=graders.yaml opentelemetry-instrument python app.py``.

An ``opentelemetry_instrumentor`` entry point: after the OpenTelemetry auto-configuration has set up the
tracer, meter and logger providers, it adds a :class:`~trajgrade.doors.processor.GradingSpanProcessor` beside the
exporting processor (results go on an ``evaluation {agent}`` child span of each run's root) with the global meter
provider, and the global logger provider for the log-based ``gen_ai.evaluation.result`` events (exported when
``OTEL_LOGS_EXPORTER`` names an exporter). Nothing happens when ``TRAJGRADE_CONFIG`` is unset. A bad config is
logged and leaves the application running without grading.

Environment: ``TRAJGRADE_CONFIG`` (path), ``TRAJGRADE_SETTLE`` (seconds, default 0),
``TRAJGRADE_MAX_TRACES`` (default 10000), ``TRAJGRADE_LOG_EVENTS`` (``false`` or ``0``: no log events).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

logger = logging.getLogger(__name__)

__all__ = ["TrajgradeInstrumentor"]


class TrajgradeInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Installs the grading processor on the global tracer provider."""

    _processor: Any = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        path = os.environ.get("TRAJGRADE_CONFIG")
        if not path:
            return
        from opentelemetry import metrics, trace

        from trajgrade.core.config_loading import load_config
        from trajgrade.doors.processor import GradingSpanProcessor
        from trajgrade.exceptions import ConfigError

        try:
            config = load_config(path)
            settle_s = float(os.environ.get("TRAJGRADE_SETTLE", "0"))
            max_traces = int(os.environ.get("TRAJGRADE_MAX_TRACES", "10000"))
            log_events = os.environ.get("TRAJGRADE_LOG_EVENTS", "true").strip().lower() not in ("false", "0")
        except (ConfigError, ValueError) as e:
            logger.error("trajgrade: not grading: %s", e)
            return
        provider = kwargs.get("tracer_provider") or trace.get_tracer_provider()
        if not hasattr(provider, "add_span_processor"):
            logger.error("trajgrade: not grading: the tracer provider is not the SDK's (%r)", provider)
            return
        processor = GradingSpanProcessor(
            config,
            meter_provider=kwargs.get("meter_provider") or metrics.get_meter_provider(),
            logger_provider=kwargs.get("logger_provider") if log_events else False,
            tracer_provider=provider,
            settle_s=settle_s,
            max_traces=max_traces,
        )
        provider.add_span_processor(processor)
        TrajgradeInstrumentor._processor = processor
        logger.info("trajgrade: grading runs with %s", path)

    def _uninstrument(self, **kwargs: Any) -> None:
        processor = TrajgradeInstrumentor._processor
        if processor is not None:
            processor.shutdown()
            TrajgradeInstrumentor._processor = None
