"""A request's spans as the sidecar buffers them: each span that is not a root reduced to its record, the roots
kept as they are (held until their runs are graded).

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as it
runs on every span the sidecar receives.
"""

from __future__ import annotations

from typing import Any

from trajgrade.core.spans import is_own, is_root
from trajgrade.core.trajectory.normalize import SpanRecord, normalize, share_strings
from trajgrade.doors.sidecar._protowire import Span

__all__ = ["split_roots"]


def split_roots(
    spans: list[Span], overhead: int
) -> tuple[list[tuple[str, SpanRecord, int]], list[Span], dict[str, Any]]:
    """The records of the spans that are not roots, each with its trace and its size in the buffers (its size on the
    wire plus ``overhead``); the roots; and the traces of the records, with their resource's attributes.
    trajgrade's own spans are in none (they are forwarded, not graded)."""
    records: list[tuple[str, SpanRecord, int]] = []
    roots: list[Span] = []
    traces: dict[str, Any] = {}
    last: SpanRecord | None = None
    for span in spans:
        if is_own(span.scope_name):
            continue
        if is_root(span.parent_span_id, span.parent_is_remote):
            roots.append(span)
            continue
        record = normalize(span, False)
        if last is not None:  # the names of a request's runs repeat from one trace to the next too
            share_strings(record, last)
        trace = span.trace_id
        records.append((trace, record, span.size + overhead))
        last = record
        traces[trace] = span.resource_attributes
    return records, roots, traces
