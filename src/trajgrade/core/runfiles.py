"""Runs read from files: every span of each path (a directory stands for the trace files in it, JSON that is not
trace data skipped), rebuilt into trajectories, each with the file its root span came from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trajgrade.core.readers import NOT_TRACE_DATA, read_path
from trajgrade.core.trajectory import SpanRecord, Trajectory, build_trajectories, normalize
from trajgrade.core.trajectory.cost import Price
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


def read_runs(paths: Sequence[str], prices: Mapping[str, Price] | None = None) -> tuple[list[FileRun], list[str]]:
    """The runs in ``paths`` in root start order, and the problems to report: a file that cannot be read, and
    input that held spans but gave no run."""
    records: list[SpanRecord] = []
    origin: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    files = expand_paths(paths)
    for path, in_directory in files:
        try:
            spans = read_path(path)
        except TraceDecodeError as e:
            if not (in_directory and e.problem.endswith(NOT_TRACE_DATA)):  # a directory's other JSON files
                problems.append(str(e))
            continue
        for span in spans:
            records.append(normalize(span, keep_attributes=span.parent_span_id is None))
            origin.setdefault((span.trace_id, span.span_id), path)
    runs = build_trajectories(records, prices=prices)
    if records and not runs:
        problems.append(f"{', '.join(paths)}: {len(records)} span(s) read, but no run among them")
    first = files[0][0] if files else "-"
    located = [FileRun(origin.get((t.trace_id, t.root_span_id), first), t) for t in runs]
    return located, problems
