"""Runs read from files: every span of each path (a directory stands for the trace files in it, JSON that is not
trace data skipped), rebuilt into trajectories, each with the file its root span came from."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from trajgrade.core.collector import RunCollector
from trajgrade.core.readers import NOT_TRACE_DATA, file_bytes, read_bytes, source_name
from trajgrade.core.spans import is_own, is_root
from trajgrade.core.trajectory import Trajectory, normalize
from trajgrade.core.trajectory.cost import Price
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.exceptions import TraceDecodeError

__all__ = ["FileRun", "TraceFiles", "expand_paths", "read_runs"]

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


class TraceFiles:
    """The trace files of ``paths`` (:func:`expand_paths`), each read on a thread one file ahead of its reader: the
    first from when this is made, each next one while the file before it is decoded and rebuilt. Reading a file
    waits on the disk and on the copy of its bytes without holding the interpreter's lock, so it goes on beside
    what the process does meanwhile (the command line's imports and graders file, the file before). At most two
    files' bytes are held at once; stdin is read when its turn comes. Iterated once."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self._files = expand_paths(paths)
        self._ahead = self._read(0)

    def _read(self, i: int) -> _Reading | None:
        if i >= len(self._files) or self._files[i][0] == "-":
            return None
        return _Reading(self._files[i][0])

    def __iter__(self) -> Iterator[tuple[str, bool, Callable[[], bytes]]]:
        """Each file, whether it was found in a directory, and what gives its bytes (raising
        :class:`~trajgrade.exceptions.TraceDecodeError` when it cannot be read)."""
        for i, (path, in_directory) in enumerate(self._files):
            ahead, self._ahead = self._ahead, self._read(i + 1)
            yield path, in_directory, ahead.take if ahead is not None else partial(file_bytes, path)


class _Reading:
    """One file's bytes (:func:`~trajgrade.core.readers.file_bytes`), read on a daemon thread of its own: a process
    that ends before it takes them (a bad graders file, an interrupt) ends at once, without waiting for the disk or
    for the writer of a named pipe that may never come."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._data: bytes | None = None
        self._error: BaseException | None = None
        self._reader = threading.Thread(target=self._run, name="trajgrade-read", daemon=True)
        self._reader.start()

    def _run(self) -> None:
        try:
            self._data = file_bytes(self._path)
        except BaseException as e:  # raised where the bytes are taken
            self._error = e

    def take(self) -> bytes:
        """The bytes, once read; they go as soon as their reader lets them go."""
        self._reader.join()
        error, data = self._error, self._data
        self._error = self._data = None
        if error is not None:
            raise error
        assert data is not None
        return data


def read_runs(
    paths: Sequence[str] | TraceFiles, prices: Mapping[str, Price] | None = None, keep: list[object] | None = None
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
    files = paths if isinstance(paths, TraceFiles) else TraceFiles(paths)
    for path, in_directory, data in files:
        try:
            spans = read_bytes(data(), source_name(path))
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
        problems.append(f"{', '.join(files.paths)}: {spans_read} span(s) read, but no run among them")
    return located, problems
