"""The compiled modules rebuild and grade every fixture's runs exactly as their source does when Python interprets it.

setup.py compiles the span records, normalization and the build with mypyc; the same source runs interpreted
where it is not compiled (a platform without the wheel, ``pip install --no-binary``). mypyc keeps Python's
semantics only where the types say what Python would do anyway: an ``int`` where a ``float`` is declared
becomes a float, a native class refuses what an object would take. So for every fixture under
``tests/fixtures/*/*/*.json`` (made by the real instrumentations) this reads the file and rebuilds its runs
(:func:`trajgrade.core.runfiles.read_runs`, as ``trajgrade trajectory`` does) twice and compares the JSON text
of ``trajgrade trajectory --format json`` for each run, key by key, so that ``1`` and ``1.0`` differ. It grades
them too, with each graders file of ``CONFIGS`` (every grader type, with the benchmarks' limits and with limits the
fixtures cross), and feeds each trace's spans, in the order they ended, to the config's in-flight checks: each
grader's result and the breaches found are compared the same way, as the graders' passes, the loop search and the
in-flight checks are compiled too. Both are done:

- in this process, with the compiled extension modules the tests require (conftest checks they are current);
- in a child process whose import system finds each module setup.py compiles as its ``.py`` file, ahead of the
  extension beside it. A child process, because a module is imported once per process: the two builds cannot
  share one, and the interpreted modules import each other by their real names.

The child checks that every module it imported from that list came from its source, and the test checks it
catches a difference: the same comparison against a copy of the sources with one changed line reports it.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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


def _runs_as_json(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Each file's runs as the JSON text of ``trajgrade trajectory --format json`` (keys sorted)."""
    from trajgrade.core.runfiles import read_runs
    from trajgrade.reports.dicts import trajectory_to_dict

    out: dict[str, list[str]] = {}
    for path in paths:
        runs, problems = read_runs([str(path)])
        assert not problems, problems
        out[str(path.relative_to(FIXTURES))] = [
            json.dumps(trajectory_to_dict(r.trajectory), sort_keys=True) for r in runs
        ]
    return out


def _graded_as_json(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Each file's runs graded with each of ``CONFIGS``: per run, the JSON text of a dict of each grader's result
    (``trajgrade grade``'s shape) and of the breaches its trace's in-flight checks found, keyed by file and grader."""
    from trajgrade.core.config_loading import load_config
    from trajgrade.core.inflight import InFlightChecks
    from trajgrade.core.readers import read_bytes
    from trajgrade.core.runfiles import read_runs
    from trajgrade.core.running import grade_run
    from trajgrade.core.spans import is_root
    from trajgrade.core.trajectory.normalize import SpanRecord, normalize
    from trajgrade.reports.dicts import result_to_dict

    configs = [(c.name, load_config(c)) for c in CONFIGS]
    out: dict[str, list[str]] = {}
    for path in paths:
        runs, problems = read_runs([str(path)])
        assert not problems, problems
        records = [normalize(span) for span in read_bytes(path.read_bytes(), str(path))]
        records.sort(key=lambda r: (r.end_unix_nano, r.start_unix_nano))  # as the spans ended
        by_trace: dict[str, list[SpanRecord]] = {}
        for r in records:
            if not is_root(r.parent_span_id, r.parent_is_remote):
                by_trace.setdefault(r.trace_id, []).append(r)
        graded = []
        for run in runs:
            t = run.trajectory
            fields: dict[str, Any] = {}
            for name, config in configs:
                report = grade_run(config, t)
                fields.update({f"{name}: {r.name}": result_to_dict(r) for r in report.results})
                fields[f"{name}: verdict"] = [report.passed, report.score]
                _, breaches = InFlightChecks(config).feed(None, by_trace.get(t.trace_id, []))
                fields[f"{name}: in flight"] = [
                    [result_to_dict(b.result), b.enforce, b.span_id, b.response_id, b.agent, b.service_name]
                    for b in breaches
                ]
            graded.append(json.dumps(fields, sort_keys=True))
        out[str(path.relative_to(FIXTURES))] = graded
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
    runs = {"built": _runs_as_json(files), "graded": _graded_as_json(files)}
    for name in modules.keys() & sys.modules.keys():
        origin = Path(sys.modules[name].__file__ or "")
        assert origin.suffix == ".py" and origin.is_relative_to(root), f"{name} was imported from {origin}"
    assert not [m for m in sys.modules if m.endswith("__mypyc")], "a compiled module was loaded"
    json.dump(runs, sys.stdout)


def _interpreted(root: Path, paths: Sequence[Path]) -> dict[str, dict[str, list[str]]]:
    """What the child made of ``paths``: their runs built (``built``) and graded (``graded``)."""
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


def test_compiled_modules_are_compiled() -> None:
    for name in _compiled_modules():
        assert Path(importlib.import_module(name).__file__ or "").suffix == ".so", name


def test_every_fixture_builds_and_grades_the_same_compiled_and_interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    files = _fixtures()
    assert len(files) > 100
    interpreted = _interpreted(REPO / "src", files)
    differences = _differences(_runs_as_json(files), interpreted["built"])
    differences += _differences(_graded_as_json(files), interpreted["graded"])
    assert not differences, "\n".join(differences[:20])


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
    differences = _differences(_runs_as_json(files), _interpreted(tmp_path, files)["built"])
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
    assert not _differences(_runs_as_json(files), interpreted["built"])
    differences = _differences(_graded_as_json(files), interpreted["graded"])
    assert len(differences) == len(files)
    assert all("tool-calls" in d and "in flight" in d for d in differences), differences


if __name__ == "__main__":
    _interpreted_main(sys.argv[1], sys.argv[2:])
