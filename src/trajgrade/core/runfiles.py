"""Runs read from files: every span of each path (a directory stands for the trace files in it, JSON that is not
trace data skipped), rebuilt into trajectories, each with the file its root span came from."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trajgrade.core.collector import RunCollector
from trajgrade.core.readers import NOT_TRACE_DATA, read_path
from trajgrade.core.spans import is_own, is_root
from trajgrade.core.trajectory import Trajectory, normalize
from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.exceptions import TraceDecodeError

__all__ = ["FileRun", "expand_paths", "read_runs"]

#: The files of a directory that are read as trace files.
TRACE_SUFFIXES = (".json", ".jsonl", ".pb", ".otlp")


@dataclass(frozen=True, slots=True)
class FileRun:
    """A run and the file its root span was read from."""

    path: str
    trajectory: Trajectory


def expand_paths(paths: Sequence[str]) -> list[tuple[str, bool]]:
    """Each path, a directory replaced by its files with a trace suffix (recursively, in name order); with each,
    whether it was found in a directory."""
    out: list[tuple[str, bool]] = []
    for path in paths:
        p = Path(path)
        if path != "-" and p.is_dir():
            out += sorted((str(f), True) for f in p.rglob("*") if f.is_file() and f.suffix in TRACE_SUFFIXES)
        else:
            out.append((path, False))
    return out


def read_runs(
    paths: Sequence[str], prices: Mapping[str, Price] | None = None, keep: list[object] | None = None
) -> tuple[list[FileRun], list[str]]:
    """The runs in ``paths`` in root start order, and the problems to report: a file that cannot be read, and
    input that held spans but gave no run. Runs are made as every door makes them (:mod:`trajgrade.core.collector`):
    a trace whose root is not among the spans read is a partial run. ``keep``: a list that takes the spans
    read (each file's) rather than letting them go, for a process that ends soon after and need not free them
    object by object."""
    collector: RunCollector[str] = RunCollector(max_traces=2**62, max_spans_per_trace=2**62)
    seen: dict[str, set[str]] = {}  # the span ids read in each trace
    first_file: dict[str, str] = {}  # where each trace was first seen: the file of a run whose root is missing
    spans_read = 0
    problems: list[str] = []
    for path, in_directory in expand_paths(paths):
        try:
            spans = read_path(path)
        except TraceDecodeError as e:
            if not (in_directory and e.problem.endswith(NOT_TRACE_DATA)):  # a directory's other JSON files
                problems.append(str(e))
            continue
        spans_read += len(spans)
        if keep is not None:
            keep.append(spans)
        others: list[tuple[Hashable, SpanRecord, int]] = []  # spans that are not roots, buffered together
        for span in spans:
            # The span's fields read from its record (a native object to compiled code, which reads a view's fields
            # by name); a root's record keeps its attributes.
            record = normalize(span)
            ids = seen.get(record.trace_id)
            if ids is None:
                ids = seen[record.trace_id] = set()
                first_file[record.trace_id] = path
            elif record.span_id in ids:
                continue  # the same span read twice (a file given twice): once is enough
            ids.add(record.span_id)
            if is_own(span.scope_name):
                continue
            if is_root(record.parent_span_id, record.parent_is_remote):
                collector.extend(others)  # the spans before it first, as they came
                others = []
                collector.root(record.trace_id, record, path)
            else:
                others.append((record.trace_id, record, 0))
        collector.extend(others)
    located = [
        FileRun(run.payload or first_file[str(run.trace)], run.trajectory(prices))
        for run in collector.close()
        if run.is_run
    ]
    located.sort(key=lambda r: (r.trajectory.start_unix_nano, r.trajectory.trace_id, r.trajectory.root_span_id))
    if spans_read and not located:
        problems.append(f"{', '.join(paths)}: {spans_read} span(s) read, but no run among them")
    return located, problems
