"""The compiled modules read, rebuild and grade every fixture's runs exactly as their source does interpreted.

setup.py compiles the span records, normalization, the build, the graders' passes, the loop search, the in-flight
checks and the results' event attributes with mypyc; the same source runs interpreted where it is not compiled (a
platform without the wheel, ``pip install --no-binary``). mypyc keeps Python's semantics only where the types say
what Python would do anyway: an ``int`` where a ``float`` is declared becomes a float, a native class refuses what
an object would take. So every fixture under ``tests/fixtures/*/*/*.json`` (made by the real instrumentations), and
a copy of each whose attribute values are partly of other types (``_odd_values``), is read as each door reads it
(``DOORS``: the trace file, as the command line does; the same spans as an OTLP protobuf request, through the
sidecar's C reader; the SDK's spans they were written from, through the span processor's hook and worker), and its
runs are graded with each graders file of ``CONFIGS`` (every grader type, with the benchmarks' limits and with
limits the runs cross) and fed, span by span as they ended, to the in-flight checks. The JSON text of each run
(``trajgrade trajectory --format json``), of each grader's result and its event's attributes, and of the breaches
found is compared key by key, so that ``1`` and ``1.0`` differ, between:

- this process, with the compiled extension modules the tests require (conftest checks they are current);
- a child process whose import system finds each module setup.py compiles as its ``.py`` file, ahead of the
  extension beside it. A child process, because a module is imported once per process: the two builds cannot
  share one, and the interpreted modules import each other by their real names.

The child checks that every module it imported from that list came from its source, and the tests check that
a difference is caught: the same comparison against a copy of the sources with a changed line reports it. The
doors' readings are also compared with each other.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

if TYPE_CHECKING:  # the child imports trajgrade only once its sources come first (``_SourceFinder``)
    from trajgrade.core.collector import RunCollector
    from trajgrade.core.trajectory.model import Trajectory

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
#: The graders files the runs are graded with (their relative paths are the repository's).
CONFIGS = (REPO / "benchmarks" / "every_grader.yaml", Path(__file__).parent / "tight_graders.yaml")


def _compiled_modules() -> dict[str, str]:
    """The modules setup.py compiles: module name -> source path under ``src``."""
    tree = ast.parse((REPO / "setup.py").read_text())
    paths = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED"
    )
    return {p.removeprefix("src/").removesuffix(".py").replace("/", "."): p.removeprefix("src/") for p in paths}


def _fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*/*.json") if not p.name.endswith(".truth.json"))


def _label(path: Path) -> str:
    return str(path.relative_to(FIXTURES)) if path.is_relative_to(FIXTURES) else path.name


def _odd_values(path: Path, to: Path, seed: int, rate: float = 0.3) -> Path:
    """A copy of a fixture with about ``rate`` of its spans' attribute values given another type of OTLP value (a
    count as a double or a string, a string as a number, an array as its first item, ...) or left out."""
    rng = random.Random(seed)

    def other(value: dict[str, Any]) -> dict[str, Any] | None:
        kind, v = next(iter(value.items()))
        if kind == "intValue":
            n = int(v)
            return rng.choice([{"doubleValue": n + 0.5}, {"stringValue": str(n)}, {"intValue": str(-n)}, None])
        if kind == "doubleValue":
            return rng.choice([{"intValue": str(round(v))}, {"stringValue": repr(v)}, {"boolValue": True}, None])
        if kind == "stringValue":
            return rng.choice(
                [{"intValue": str(len(v))}, {"doubleValue": len(v) / 3}, {"stringValue": ""}, {"boolValue": False}]
                + [{"arrayValue": {"values": [value]}}, {"stringValue": v[: len(v) // 2]}, None]
            )
        if kind == "arrayValue":
            items = v.get("values") or []
            return rng.choice([items[0] if items else {"stringValue": "[]"}, {"arrayValue": {}}, None])
        return rng.choice([{"intValue": "1"}, {"stringValue": "true"}, None])

    data = json.loads(path.read_text())
    for resource in data["resourceSpans"]:
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                kept = []
                for attribute in span.get("attributes", ()):
                    if rng.random() < rate:
                        attribute = {"key": attribute["key"], "value": other(attribute["value"])}
                        if attribute["value"] is None:
                            continue
                    kept.append(attribute)
                span["attributes"] = kept
    out = to / f"{_label(path).replace('/', '.').removesuffix('.json')}.{seed}.json"
    out.write_text(json.dumps(data))
    return out


def _runs_as_json(paths: Sequence[Path], door: str = "file") -> dict[str, list[str]]:
    """Each file's runs, as ``door`` reads them (``DOORS``), as the JSON text of ``trajgrade trajectory --format
    json`` (keys sorted)."""
    from trajgrade.reports.dicts import trajectory_to_dict

    read = DOORS[door]
    return {_label(path): [json.dumps(trajectory_to_dict(t), sort_keys=True) for t in read(path)] for path in paths}


def _through_file(path: Path) -> list[Trajectory]:
    """The runs of a trace file, as the command line reads them."""
    from trajgrade.core.runfiles import read_runs

    runs, problems = read_runs([str(path)])
    assert not problems, problems
    return [r.trajectory for r in runs]


def _collected(collector: RunCollector[None]) -> list[Trajectory]:
    """The runs a collector holds, in the command line's order."""
    runs = [run.trajectory() for run in collector.close() if run.is_run]
    return sorted(runs, key=lambda t: (t.start_unix_nano, t.trace_id, t.root_span_id))


def _through_sidecar(path: Path) -> list[Trajectory]:
    """The runs of a trace file sent to the sidecar as one OTLP protobuf request: its spans read by the C reader,
    those that are not roots buffered as its pipeline buffers them, the roots read with their attributes."""
    from trajgrade.core.collector import RunCollector
    from trajgrade.core.trajectory.normalize import normalize
    from trajgrade.doors.sidecar._protowire import read_request
    from trajgrade.doors.sidecar.otlp import decode_body
    from trajgrade.doors.sidecar.records import split_roots

    body = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 28).body
    records, roots, _ = split_roots(read_request(body), 0)
    collector: RunCollector[None] = RunCollector(max_traces=2**62, max_spans_per_trace=2**62)
    collector.extend(records)
    for root in roots:
        collector.root(root.trace_id, normalize(root, True), None)
    return _collected(collector)


def _through_processor(path: Path) -> list[Trajectory]:
    """The runs of a trace file's spans as the span processor reads them when the SDK ends them: each span made
    an SDK ``ReadableSpan`` again (as the instrumentation's SDK held it before the fixture was written), kept by
    the hook (``sdk_held``) and read by the worker (``sdk_intake``); the roots read with their attributes."""
    from trajgrade.core.collector import RunCollector
    from trajgrade.core.readers import read_bytes
    from trajgrade.core.trajectory.normalize import normalize_sdk, sdk_held, sdk_intake

    collector: RunCollector[None] = RunCollector(max_traces=2**62, max_spans_per_trace=2**62, intake=sdk_intake)
    for span in sorted(map(_readable, read_bytes(path.read_bytes(), str(path))), key=lambda s: s.end_time or 0):
        held = sdk_held(span)
        if held is not None:
            assert type(held) is tuple, "the hook kept the span whole: it could not read its fields"
            collector.put(held)
        else:
            root = normalize_sdk(span, keep_attributes=True)
            collector.root(root.trace_id, root, None)
    return _collected(collector)


def _readable(view: Any) -> ReadableSpan:
    """An OTLP/JSON span as the SDK's span it was written from: in the SDK's own containers (which the hook reads
    its fields from), arrays as tuples."""
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event
    from opentelemetry.sdk.util import BoundedList
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def context(span_id: str, remote: bool) -> SpanContext:
        return SpanContext(int(view.trace_id, 16), int(span_id, 16), remote, TraceFlags(TraceFlags.SAMPLED))

    def sdk(attributes: Any) -> BoundedAttributes:
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in attributes.items()}
        return BoundedAttributes(attributes=values, immutable=False)

    status = (StatusCode.UNSET, StatusCode.OK, StatusCode.ERROR)[view.status_code]
    return ReadableSpan(
        name=view.name,
        context=context(view.span_id, False),
        parent=context(view.parent_span_id, bool(view.parent_is_remote)) if view.parent_span_id else None,
        resource=Resource(dict(sdk(view.resource_attributes))),
        attributes=sdk(view.attributes),
        events=BoundedList.from_seq(None, [Event(e.name, sdk(e.attributes), e.time_unix_nano) for e in view.events]),
        kind=SpanKind(max(view.kind - 1, 0)),
        status=Status(status, view.status_message or None) if status is StatusCode.ERROR else Status(status),
        start_time=view.start_unix_nano,
        end_time=view.end_unix_nano,
        instrumentation_scope=InstrumentationScope(view.scope_name),
    )


#: How each door reads a trace file's spans into runs.
DOORS: dict[str, Callable[[Path], list[Trajectory]]] = {
    "file": _through_file,
    "sidecar": _through_sidecar,
    "processor": _through_processor,
}


def _graded_as_json(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Each file's runs graded with each of ``CONFIGS``: per run, the JSON text of a dict of each grader's result
    (``trajgrade grade``'s shape, and the attributes of its ``gen_ai.evaluation.result`` event) and of the breaches
    its trace's in-flight checks found (with their log events' attributes), keyed by file and grader."""
    from trajgrade.core.config_loading import load_config
    from trajgrade.core.inflight import InFlightChecks
    from trajgrade.core.readers import read_bytes
    from trajgrade.core.result_attributes import breach_log_attributes, report_attributes, result_attributes
    from trajgrade.core.running import grade_run
    from trajgrade.core.spans import is_root
    from trajgrade.core.trajectory.build import build_trajectories
    from trajgrade.core.trajectory.normalize import SpanRecord, normalize
    from trajgrade.reports.dicts import result_to_dict

    configs = [(c.name, load_config(c)) for c in CONFIGS]
    out: dict[str, list[str]] = {}
    for path in paths:
        records = [normalize(span) for span in read_bytes(path.read_bytes(), str(path))]
        records.sort(key=lambda r: (r.end_unix_nano, r.start_unix_nano))  # as the spans ended
        by_trace: dict[str, list[SpanRecord]] = {}
        for r in records:
            if not is_root(r.parent_span_id, r.parent_is_remote):
                by_trace.setdefault(r.trace_id, []).append(r)
        graded = []
        for t in build_trajectories(records):
            fields: dict[str, Any] = {}
            for name, config in configs:
                report = grade_run(config, t)
                fields.update({f"{name}: {r.name}": [result_to_dict(r), result_attributes(r)] for r in report.results})
                fields[f"{name}: verdict"] = [report.passed, report.score, report_attributes(report)]
                _, breaches = InFlightChecks(config).feed(None, by_trace.get(t.trace_id, []))
                fields[f"{name}: in flight"] = [
                    [
                        result_to_dict(b.result),
                        b.enforce,
                        b.span_id,
                        b.response_id,
                        b.agent,
                        b.service_name,
                        breach_log_attributes(b),
                    ]
                    for b in breaches
                ]
            graded.append(json.dumps(fields, sort_keys=True))
        out[_label(path)] = graded
    return out


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources under ``root``, before the path finder finds their extensions."""

    def __init__(self, root: Path, modules: dict[str, str]) -> None:
        self.root = root
        self.modules = modules

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.modules.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, self.root / source)


def _interpreted_main(root: str, paths: list[str]) -> None:
    """The child: every file's runs, built and graded by the compiled modules' sources under ``root``, as JSON on
    stdout."""
    modules = _compiled_modules()
    sys.meta_path.insert(0, _SourceFinder(Path(root), modules))
    files = [Path(p) for p in paths]
    runs = {**{door: _runs_as_json(files, door) for door in DOORS}, "graded": _graded_as_json(files)}
    for name in modules.keys() & sys.modules.keys():
        origin = Path(sys.modules[name].__file__ or "")
        assert origin.suffix == ".py" and origin.is_relative_to(root), f"{name} was imported from {origin}"
    assert not [m for m in sys.modules if m.endswith("__mypyc")], "a compiled module was loaded"
    json.dump(runs, sys.stdout)


def _interpreted(root: Path, paths: Sequence[Path]) -> dict[str, dict[str, list[str]]]:
    """What the child made of ``paths``: their runs as each door reads them (by door) and graded (``graded``)."""
    done = subprocess.run(
        [sys.executable, __file__, str(root), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # no .pyc of a changed copy lingers
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, dict[str, list[str]]] = json.loads(done.stdout)
    return result


def _differences(compiled: dict[str, list[str]], interpreted: dict[str, list[str]]) -> list[str]:
    """Where the two builds differ: the fixture, the run, the first key whose value differs, and the other keys
    that differ."""
    out = []
    assert compiled.keys() == interpreted.keys()
    for name, runs in compiled.items():
        if len(runs) != len(interpreted[name]):
            out.append(f"{name}: {len(runs)} runs compiled, {len(interpreted[name])} interpreted")
            continue
        for i, (mine, theirs) in enumerate(zip(runs, interpreted[name], strict=True)):
            if mine != theirs:
                a, b = json.loads(mine), json.loads(theirs)
                keys = [k for k in a.keys() | b.keys() if json.dumps(a.get(k)) != json.dumps(b.get(k))] or ["(order)"]
                key, *others = sorted(keys)
                line = f"{name} run {i}: {key}: compiled {a.get(key)!r}, interpreted {b.get(key)!r}"
                out.append(line + (f" (and {', '.join(others)})" if others else ""))
    return out


def _compiled_against_interpreted(files: Sequence[Path]) -> list[str]:
    """Where the compiled modules and their interpreted sources differ on ``files``: through each door, and graded."""
    interpreted = _interpreted(REPO / "src", files)
    differences = [
        f"{door}: {d}" for door in DOORS for d in _differences(_runs_as_json(files, door), interpreted[door])
    ]
    return differences + _differences(_graded_as_json(files), interpreted["graded"])


def test_compiled_modules_are_compiled() -> None:
    for name in _compiled_modules():
        assert Path(importlib.import_module(name).__file__ or "").suffix == ".so", name


def test_every_fixture_builds_and_grades_the_same_compiled_and_interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    files = _fixtures()
    assert len(files) > 100
    differences = _compiled_against_interpreted(files)
    assert not differences, "\n".join(differences[:20])


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A copy of every fixture with odd values (``_odd_values``), each with its own seed."""
    to = tmp_path_factory.mktemp("odd")
    return [_odd_values(path, to, seed) for seed, path in enumerate(_fixtures())]


def test_spans_with_odd_values_are_read_and_graded_the_same_compiled_and_interpreted(
    odd_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where mypyc's types could part from Python's: the fixtures with their attributes' values of other types."""
    monkeypatch.chdir(REPO)
    differences = _compiled_against_interpreted(odd_files)
    assert not differences, "\n".join(differences[:20])


def test_every_door_reads_every_fixture_into_the_same_runs(odd_files: list[Path]) -> None:
    """The sidecar's reading (C reader, protobuf) and the span processor's (SDK spans, read from their fields) give
    the runs the command line gives, of the fixtures and of their copies with odd values."""
    files = _fixtures() + odd_files
    by_file = _runs_as_json(files)
    for door in ("sidecar", "processor"):
        differences = _differences(_runs_as_json(files, door), by_file)
        assert not differences, f"{door}: " + "\n".join(differences[:20])


def _copy_sources(to: Path) -> None:
    for source in _compiled_modules().values():
        (to / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "src" / source, to / source)


def _change(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_a_difference_is_found(tmp_path: Path) -> None:
    """The same comparison against sources with one change: each run counts one model call more."""
    _copy_sources(tmp_path)
    summary = tmp_path / "trajgrade/core/trajectory/summary.py"
    text = summary.read_text()
    assert "\ndef run_summary(" in text
    summary.write_text(
        text
        + "\n\n_run_summary = run_summary\n\n\n"
        + "def run_summary(*args: Any, **kwargs: Any) -> Summary:\n"
        + "    import dataclasses\n\n"
        + "    found = _run_summary(*args, **kwargs)\n"
        + "    return dataclasses.replace(found, llm_calls=found.llm_calls + 1)\n"
    )
    files = [p for p in _fixtures() if p.name == "three_tools.json"][:3]
    differences = _differences(_runs_as_json(files), _interpreted(tmp_path, files)["file"])
    assert len(differences) == len(files)
    assert all("summary: compiled" in d for d in differences), differences


def test_a_grading_difference_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same comparison against sources whose graders see every run's tool calls but the last, and whose
    in-flight checks count each tool call twice: the runs build the same, their results and breaches differ."""
    monkeypatch.chdir(REPO)
    _copy_sources(tmp_path)
    _change(tmp_path / "trajgrade/core/graders/steps.py", "    return list(steps)\n", "    return list(steps)[:-1]\n")
    _change(tmp_path / "trajgrade/core/inflight.py", "self.run.tool_calls += 1", "self.run.tool_calls += 2")
    files = [p for p in _fixtures() if p.name == "three_tools.json"][:3]
    interpreted = _interpreted(tmp_path, files)
    assert not _differences(_runs_as_json(files), interpreted["file"])
    differences = _differences(_graded_as_json(files), interpreted["graded"])
    assert len(differences) == len(files)
    assert all("tool-calls" in d and "in flight" in d for d in differences), differences


if __name__ == "__main__":
    _interpreted_main(sys.argv[1], sys.argv[2:])
