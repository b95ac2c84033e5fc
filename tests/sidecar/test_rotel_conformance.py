"""The rotel processor finishes runs as the other doors do: the conformance streams (``tests/test_doors_conformance``)
sent through a real rotel running trajgrade give the results the span processor gives, on the roots rotel passes
on, the same in-flight breaches and the same drop counters (exported by the rotel processor over OTLP to the sink)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from infra import ROOT, rotel, sink

sys.path.insert(0, str(ROOT / "tests"))
from test_doors_conformance import AGE_S, STREAMS, Graded, _request, through_processor

from trajgrade.core import semconv as sc
from trajgrade.core.inflight import Breach

CONFIG_YAML = """
graders:
  - {type: tool-call-count, name: calls, config: {max: 2}}
  - {type: loop, name: loop, max_repeats: 2}
  - {type: token-budget, name: tokens, config: {max: 100}}
"""
WITH_ROOT = ["normal run", "split, children first", "remote parent", "own spans"]


def _label(attributes: dict[str, object]) -> str:
    return str(attributes.get(sc.EVALUATION_SCORE_LABEL, "error"))


def _drops(counters: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> dict[str, float]:
    return {
        dict(attrs)["trajgrade.reason"]: v
        for (name, attrs), v in counters.items()
        if name == "trajgrade.traces.dropped"
    }


def _breaches(counters: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> Counter[str]:
    """``trajgrade.breaches`` by grader."""
    found: Counter[str] = Counter()
    for (name, attrs), v in list(counters.items()):
        if name == "trajgrade.breaches":
            found[dict(attrs)[sc.EVALUATION_NAME]] += int(v)
    return found


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "graders.yaml").write_text(CONFIG_YAML)
    return tmp_path


def test_rotel_grades_the_conformance_streams_as_the_processor_does(workdir: Path) -> None:
    import trajgrade.doors.rotel as processor

    env = {
        "TRAJGRADE_CONFIG": str(workdir / "graders.yaml"),
        "TRAJGRADE_MAX_TRACE_AGE_S": str(AGE_S),
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "",  # set below, once the sink has its port
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }
    with sink() as backend:
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = f"{backend.url}/v1/metrics"
        with rotel(workdir, backend.url, processor=processor.__file__, env=env) as collector:
            url = f"http://127.0.0.1:{collector['http']}/v1/traces"
            expected: dict[bytes, Graded] = {}
            breaches: list[Breach] = []
            sent = 0
            # the expired trace is graded when a batch passes after its age: one more run comes then
            for i, name in enumerate([*WITH_ROOT, "expires", "normal run"]):
                if i == len(WITH_ROOT) + 1:
                    time.sleep(AGE_S + 1.2)
                stream = STREAMS[name]()
                (run,), _ = through_processor(stream, breaches)
                expected[bytes.fromhex(run.root_span_id)] = run
                for batch in stream.batches:
                    r = requests.post(url, data=_request(batch), headers={"content-type": "application/x-protobuf"})
                    assert r.status_code == 200
                    sent += len(batch)
                    time.sleep(0.2)  # one request at a time through rotel, in order
            assert backend.wait_for(sent)
            deadline = time.monotonic() + 20
            while _drops(backend.counters) != {"trace_age": 1} and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _drops(backend.counters) == {"trace_age": 1}
            in_processor = Counter(b.result.name for b in breaches)
            assert in_processor == {"calls": 4, "loop": 4, "tokens": 3}
            deadline = time.monotonic() + 20
            while _breaches(backend.counters) != in_processor and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _breaches(backend.counters) == in_processor  # each found once, as the processor finds them
    graded_roots = {s.span_id: s for s in backend.spans if any(e.name == sc.EVALUATION_RESULT_EVENT for e in s.events)}
    with_root = {sid: run for sid, run in expected.items() if not run.partial}
    assert set(graded_roots) == set(with_root)  # every run with a root graded once, on its root
    for span_id, run in with_root.items():
        events = [e for e in graded_roots[span_id].events if e.name == sc.EVALUATION_RESULT_EVENT]
        got = []
        for e in events:
            attrs = {kv.key: kv.value.string_value or kv.value.double_value for kv in e.attributes}
            got.append((str(attrs[sc.EVALUATION_NAME]), _label(attrs)))
        assert tuple(sorted(got)) == run.results
    runs = {k: v for k, v in backend.counters.items() if k[0] == "trajgrade.runs"}
    assert sum(runs.values()) == len(expected)  # the expired run was graded too (partial, metrics only)
