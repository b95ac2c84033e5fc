"""The sidecar's partial wire schemas read the real fixtures exactly as the full readers do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fixture_files
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

from trajgrade import semconv as sc
from trajgrade.config import parse_config
from trajgrade.grading import Grading
from trajgrade.readers import read_path
from trajgrade.sidecar.otlp import decode_body, parse_protobuf, result_fields
from trajgrade.sidecar.wire import SpliceRequest
from trajgrade.spans import ProtoSpan, proto_attributes, proto_read_attributes
from trajgrade.trajectory.normalize import normalize

FILES = fixture_files()


def _read_spans(path: Path) -> Iterator[Any]:
    request = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26)
    for rs in request.message.resource_spans:
        resource = proto_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield ProtoSpan(span, resource, ss.scope.name, all_attributes=False)


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.parent.name}/{p.parent.name}/{p.stem}" for p in FILES])
def test_reading_only_the_needed_attributes_gives_the_same_records(path: Path) -> None:
    full = {v.span_id: normalize(v, False) for v in read_path(str(path))}
    lean = {v.span_id: normalize(v, False) for v in _read_spans(path)}
    assert lean.keys() == full.keys()
    for span_id, record in full.items():
        assert lean[span_id] == record, span_id


_SCALARS = st.one_of(
    st.text(max_size=8),  # the empty string included: it is read as a string, not taken for "no value"
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=8),
)
_VALUES = st.one_of(st.none(), _SCALARS, st.lists(_SCALARS, max_size=3))
_KEYS = st.sampled_from(
    [sc.TOOL_NAME, sc.INPUT_TOKEN_KEYS[0], sc.TOOL_ARGUMENT_KEYS[0], "llm.output_messages.0.x", "server.address"]
)


def _set_value(target: Any, value: Any) -> None:
    if value is None:
        return  # an AnyValue with no value set
    if isinstance(value, list):
        target.array_value.SetInParent()
        for item in value:
            _set_value(target.array_value.values.add(), item)
        return
    field = {bool: "bool_value", int: "int_value", float: "double_value", str: "string_value", bytes: "bytes_value"}
    setattr(target, field[type(value)], value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_KEYS, _VALUES), max_size=8))
def test_the_lean_reader_reads_every_value_type_as_the_full_reader_does(attributes: list[tuple[str, Any]]) -> None:
    span = trace_pb2.Span()
    for key, value in attributes:
        _set_value(span.attributes.add(key=key).value, value)
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(span)
    read = parse_protobuf(request.SerializeToString()).message.resource_spans[0].scope_spans[0].spans[0]
    full = proto_attributes(span.attributes)
    wanted = {k: v for k, v in full.items() if k in sc.READ_KEYS or k.startswith(sc.READ_PREFIXES)}
    lean = proto_read_attributes(read.attributes)
    assert lean == wanted
    assert [type(v) for v in lean.values()] == [type(wanted[k]) for k in lean]


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


def test_a_later_duplicate_key_wins_as_in_the_sdk() -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"t" * 16, span_id=b"s" * 8)
    span.attributes.add(key="gen_ai.tool.name").value.string_value = "first"
    span.attributes.add(key="gen_ai.tool.name").value.string_value = "second"
    read = parse_protobuf(request.SerializeToString()).message.resource_spans[0].scope_spans[0].spans[0]
    assert ProtoSpan(read, {}, "", all_attributes=False).attributes == {"gen_ai.tool.name": "second"}


def test_result_fields_appended_to_a_root_add_its_events_and_verdict() -> None:
    path = next(p for p in FILES if p.stem == "repeat_six")
    views = read_path(str(path))
    records = [normalize(v) for v in views]
    root = next(r for r in records if r.parent_span_id is None)
    config = parse_config(
        "graders:\n  - {type: loop, max_repeats: 2}\n  - {type: tool-call-count, config: {max: 50}}\n"
    )
    report = Grading(config).grade([r for r in records if r is not root], root)
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
