"""Reading the metrics the tests' ``InMemoryMetricReader`` collected."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """Every data point of the metric ``name`` collected so far."""
    data = reader.get_metrics_data()
    return [
        p
        for rm in (data.resource_metrics if data else [])
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]
