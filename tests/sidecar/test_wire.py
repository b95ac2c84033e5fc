"""The sidecar's splice schema, the keys normalization reads, and the result fields added to a root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import fixture_files
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

from trajgrade.core import semconv as sc
from trajgrade.core.collector import CollectedRun
from trajgrade.core.config_loading import parse_config
from trajgrade.core.grading import Grading
from trajgrade.core.readers import read_path
from trajgrade.core.trajectory.normalize import normalize
from trajgrade.doors.sidecar.otlp import decode_body, result_fields
from trajgrade.doors.sidecar.wire import SpliceRequest, split_request

FILES = fixture_files()


class _Recording(dict[str, Any]):
    """A dict that notes every key normalization asks for."""

    def __init__(self, data: dict[str, Any], asked: set[str]) -> None:
        super().__init__(data)
        self.asked = asked

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)


class _View:
    def __init__(self, view: Any, asked: set[str]) -> None:
        self._view = view
        self.attributes = _Recording(dict(view.attributes), asked)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


def test_every_key_normalization_reads_is_declared() -> None:
    """``READ_KEYS`` / ``READ_PREFIXES`` must name every key normalization looks up, or the sidecar misses it."""
    asked: set[str] = set()
    for path in FILES:
        for view in read_path(str(path)):
            normalize(_View(view, asked), False)
    undeclared = {k for k in asked if k not in sc.READ_KEYS and not k.startswith(sc.READ_PREFIXES)}
    assert not undeclared
    assert len(asked) > 40  # the recording saw the lookups


def test_splicing_keeps_every_span_byte_for_byte() -> None:
    request = decode_body(FILES[0].read_bytes(), "application/json", "", max_decompressed=1 << 26)
    splice = SpliceRequest.FromString(request.body)
    assert splice.SerializeToString() == request.body
    original = ExportTraceServiceRequest.FromString(request.body)
    spans = [s.SerializeToString() for rs in original.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [s for rs in splice.resource_spans for ss in rs.scope_spans for s in ss.spans] == spans


def test_a_resource_given_twice_is_forwarded_merged_as_protobuf_merges_it() -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    def resource(key: str, value: str) -> bytes:
        r = Resource(attributes=[KeyValue(key=key, value=AnyValue(string_value=value))]).SerializeToString()
        return b"\x0a" + bytes([len(r)]) + r  # ResourceSpans.resource, field 1

    span = trace_pb2.Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="invoke_agent a")
    scope_spans = trace_pb2.ScopeSpans(spans=[span]).SerializeToString()
    rs = resource("service.name", "shop") + resource("deployment.environment", "prod")
    rs += b"\x12" + bytes([len(scope_spans)]) + scope_spans
    body = b"\x0a" + bytes([len(rs)]) + rs
    want = ExportTraceServiceRequest.FromString(body)
    assert len(want.resource_spans[0].resource.attributes) == 2  # protobuf merges the two parts
    splice = SpliceRequest.FromString(body)
    envelope = SpliceRequest()
    envelope.resource_spans.add(resource=splice.resource_spans[0].resource)  # as a held root's envelope is made
    got = ExportTraceServiceRequest.FromString(envelope.SerializeToString()).resource_spans[0].resource
    assert got == want.resource_spans[0].resource
    assert ExportTraceServiceRequest.FromString(splice.SerializeToString()) == want


@pytest.mark.parametrize("path", FILES[:6], ids=lambda p: p.stem)
def test_a_request_cut_in_halves_down_to_single_spans_keeps_every_span_with_its_resource_and_scope(path: Path) -> None:
    body = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26).body

    def pieces(body: bytes) -> list[ExportTraceServiceRequest]:
        halves = split_request(body)
        if not halves:
            return [ExportTraceServiceRequest.FromString(body)]
        for half, spans in halves:
            assert spans == sum(
                len(ss.spans) for rs in SpliceRequest.FromString(half).resource_spans for ss in rs.scope_spans
            )
        return [piece for half, _ in halves for piece in pieces(half)]

    def spans_in_context(request: ExportTraceServiceRequest) -> list[tuple[bytes, bytes, bytes]]:
        return [
            (rs.resource.SerializeToString(), ss.scope.SerializeToString(), s.SerializeToString())
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]

    original = spans_in_context(ExportTraceServiceRequest.FromString(body))
    cut = [spans_in_context(piece) for piece in pieces(body)]
    assert all(len(piece) == 1 for piece in cut)  # down to one span each
    assert [span for piece in cut for span in piece] == original


def test_result_fields_appended_to_a_root_add_its_events_and_verdict() -> None:
    path = next(p for p in FILES if p.stem == "repeat_six")
    views = read_path(str(path))
    records = [normalize(v) for v in views]
    root = next(r for r in records if r.parent_span_id is None)
    config = parse_config(
        "graders:\n  - {type: loop, max_repeats: 2}\n  - {type: tool-call-count, config: {max: 50}}\n"
    )
    rest = [r for r in records if r is not root]
    report = Grading(config).grade(CollectedRun(root.trace_id, root, rest, False, (), None))
    assert report is not None
    original = trace_pb2.Span(name="root", end_time_unix_nano=5)
    original.attributes.add(key="a").value.int_value = 1
    merged = trace_pb2.Span.FromString(original.SerializeToString() + result_fields(report, 5))
    assert merged.name == "root" and merged.attributes[0].key == "a"
    events = [e for e in merged.events if e.name == sc.EVALUATION_RESULT_EVENT]
    assert len(events) == len(report.results) == 2
    attrs = {kv.key: kv.value for kv in events[0].attributes}
    assert attrs[sc.EVALUATION_SCORE_LABEL].string_value == "fail"  # repeat_six loops past 2
    assert attrs[sc.EVALUATION_SCORE_VALUE].WhichOneof("value") == "double_value"
    assert len(attrs[sc.TRAJGRADE_EVIDENCE_SPAN_IDS].array_value.values) > 2
    verdict = {kv.key: kv.value for kv in merged.attributes}
    assert verdict[sc.TRAJGRADE_PASSED].bool_value is False
    assert all(e.time_unix_nano == 5 for e in events)
