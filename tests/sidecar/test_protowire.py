"""The sidecar's OTLP reader (``_protowire.c``) reads what protobuf's own parser reads, and refuses clearly; its
encoders write what protobuf's own serializer writes."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import VIEW_FIELDS, fixture_files
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from protobuf_bytes import field as pb_field
from protobuf_bytes import varint

from trajgrade.core import semconv as sc
from trajgrade.core.readers import read_path
from trajgrade.core.spans import ProtoSpan, proto_attributes
from trajgrade.core.trajectory.normalize import normalize
from trajgrade.doors.sidecar._protowire import (
    check_request,
    encode_log_record,
    encode_result_fields,
    read_request,
    read_span,
    splice_spans,
)
from trajgrade.doors.sidecar.otlp import BadRequest, decode_body, parse_protobuf

FILES = fixture_files()


def _expected(body: bytes) -> list[tuple[Any, ...]]:
    """Every span as protobuf's parser and trajgrade's protobuf view read it (``repr`` keeps NaN comparable)."""
    request = ExportTraceServiceRequest.FromString(body)
    out = []
    for rs in request.resource_spans:
        resource = proto_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                view = ProtoSpan(span, resource, ss.scope.name)
                events = [(e.name, e.time_unix_nano, e.attributes) for e in view.events]
                out.append(repr((*(getattr(view, f) for f in VIEW_FIELDS), events)))
    return out


def _read(body: bytes) -> list[tuple[Any, ...]]:
    return [
        repr((*(getattr(s, f) for f in VIEW_FIELDS), [(e.name, e.time_unix_nano, e.attributes) for e in s.events]))
        for s in read_request(body)
    ]


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.parent.name}/{p.parent.name}/{p.stem}" for p in FILES])
def test_the_fixtures_read_as_protobuf_reads_them_and_give_the_same_records(path: Path) -> None:
    request = decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26)
    assert _read(request.body) == _expected(request.body)
    # The sidecar's lean read (only the keys normalization reads) gives the records of the full file reader.
    full = {v.span_id: normalize(v, False) for v in read_path(str(path))}
    lean = {s.span_id: normalize(s, False) for s in request.spans}
    assert lean == full
    assert any(s.attributes for s in request.spans)


# --- generated requests --------------------------------------------------------------------------------------
_TEXT = st.text(max_size=6)
_SCALAR = st.one_of(
    st.builds(lambda v: common_pb2.AnyValue(string_value=v), _TEXT),
    st.builds(lambda v: common_pb2.AnyValue(bool_value=v), st.booleans()),
    st.builds(lambda v: common_pb2.AnyValue(int_value=v), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: common_pb2.AnyValue(double_value=v), st.floats()),
    st.builds(lambda v: common_pb2.AnyValue(bytes_value=v), st.binary(max_size=4)),
    st.just(common_pb2.AnyValue()),  # no value set: read as None
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: common_pb2.AnyValue(array_value=common_pb2.ArrayValue(values=vs))),
        st.lists(st.tuples(_TEXT, inner), max_size=3).map(
            lambda kvs: common_pb2.AnyValue(
                kvlist_value=common_pb2.KeyValueList(values=[common_pb2.KeyValue(key=k, value=v) for k, v in kvs])
            )
        ),
    ),
    max_leaves=6,
)
# Keys normalization reads, a prefix it reads, and keys it does not; duplicates come up often.
_KEY = st.sampled_from([sc.TOOL_NAME, sc.INPUT_TOKEN_KEYS[0], "llm.output_messages.0.message.role", "x", ""])
_ATTRIBUTES = st.lists(st.builds(lambda k, v: common_pb2.KeyValue(key=k, value=v), _KEY, _VALUE), max_size=4)


@st.composite
def _requests(draw: Any) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = request.resource_spans.add()
        rs.resource.attributes.extend(draw(_ATTRIBUTES))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(_TEXT)
            for _ in range(draw(st.integers(0, 3))):
                span = ss.spans.add(
                    trace_id=draw(st.binary(max_size=16)),
                    span_id=draw(st.binary(max_size=8)),
                    parent_span_id=draw(st.binary(max_size=8)),
                    name=draw(_TEXT),
                    kind=draw(st.integers(-(2**31), 2**31 - 1)),
                    start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    flags=draw(st.integers(0, 2**32 - 1)),
                    trace_state=draw(_TEXT),
                )
                span.status.code = draw(st.integers(0, 2))
                span.status.message = draw(_TEXT)
                span.attributes.extend(draw(_ATTRIBUTES))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add(name=draw(_TEXT), time_unix_nano=draw(st.integers(0, 2**64 - 1)))
                    event.attributes.extend(draw(_ATTRIBUTES))
                if draw(st.booleans()):
                    span.links.add(trace_id=b"l" * 16, span_id=b"l" * 8)
    return request


READER = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@READER
@given(_requests())
def test_every_field_reads_as_protobuf_reads_it(request: ExportTraceServiceRequest) -> None:
    body = request.SerializeToString()
    assert _read(body) == _expected(body)


@READER
@given(_requests())
def test_a_lean_read_keeps_the_keys_normalization_reads_and_nothing_else(request: ExportTraceServiceRequest) -> None:
    body = request.SerializeToString()
    for full, lean in zip(read_request(body), read_request(body, sc.READ_KEYS, sc.READ_PREFIXES), strict=True):
        wanted = {k: v for k, v in full.attributes.items() if k in sc.READ_KEYS or k.startswith(sc.READ_PREFIXES)}
        assert repr(lean.attributes) == repr(wanted)
        assert repr(lean.resource_attributes) == repr(full.resource_attributes)  # all kept (repr: NaN)
        assert repr(lean.events) == repr(full.events)


@READER
@given(_requests(), st.integers(0, 10_000), st.integers(1, 255), st.integers(0, 10_000))
def test_a_damaged_request_protobuf_takes_is_read_as_it_reads_it(
    request: ExportTraceServiceRequest, at: int, flip: int, cut: int
) -> None:
    """Bytes flipped and the body cut short: whatever protobuf's parser takes, the reader takes and reads the
    same; what it refuses is a ValueError naming the byte. (The reader may take what protobuf refuses in the
    fields it does not read, such as a link's or a trace state's text: those are forwarded as they came.)"""
    body = bytearray(request.SerializeToString())
    if not body:
        return
    body[at % len(body)] ^= flip
    damaged = bytes(body[: max(1, len(body) - cut % len(body))])
    try:
        expected = _expected(damaged)
    except DecodeError:
        expected = None
    try:
        read = _read(damaged)
    except ValueError as e:
        assert expected is None, f"protobuf takes what the reader refuses: {e}"
        assert " at byte " in str(e)
        return
    if expected is not None:
        assert read == expected


def test_fields_in_any_order_repeated_messages_merge_and_the_last_scalar_wins() -> None:
    span = trace_pb2.Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="first")
    span.attributes.add(key="gen_ai.tool.name").value.string_value = "first"
    later = trace_pb2.Span(name="second")
    later.attributes.add(key="gen_ai.tool.name").value.string_value = "second"
    later.status.message = "failed"
    later_still = trace_pb2.Span()
    later_still.status.code = 2
    # Concatenated messages merge: scalars take the last value, repeated fields append, messages merge.
    body = _request_bytes(span.SerializeToString() + later.SerializeToString() + later_still.SerializeToString())
    assert _read(body) == _expected(body)
    (read,) = read_request(body)
    assert read.name == "second" and read.attributes == {"gen_ai.tool.name": "second"}
    assert (read.status_code, read.status_message) == (2, "failed")


def _request_bytes(span: bytes) -> bytes:
    """A request of one span given as bytes, with the scope after the span (the reader must not care)."""
    scope = trace_pb2.ScopeSpans(scope=common_pb2.InstrumentationScope(name="late")).SerializeToString()
    ss = pb_field(2, span) + scope
    rs = pb_field(2, ss) + trace_pb2.ResourceSpans(resource={"attributes": [{"key": "a"}]}).SerializeToString()
    return pb_field(1, rs)


def test_unknown_fields_and_groups_are_skipped() -> None:
    span = trace_pb2.Span(span_id=b"s" * 8, name="n").SerializeToString()
    group = varint(99 << 3 | 3) + b"\x08\x01" + varint(99 << 3 | 4)
    unknown = b"\xa8\x06\x05" + b"\x5d\x01\x02\x03\x04" + group  # field 101 varint, field 11 as fixed32, a group
    body = _request_bytes(span + unknown)
    assert _read(body) == _expected(body)
    assert read_request(body)[0].scope_name == "late"


def _nested(depth: int) -> bytes:
    """A request whose one attribute is an int inside ``depth`` arrays."""
    value = b"\x18\x07"
    for _ in range(depth):
        value = pb_field(5, pb_field(1, value))  # AnyValue{array_value: ArrayValue{values: [value]}}
    return pb_field(1, pb_field(2, pb_field(2, pb_field(9, pb_field(1, b"deep") + pb_field(2, value)))))


def test_arrays_nested_as_deep_as_protobuf_takes_them_and_no_deeper_than_the_reader_can() -> None:
    deepest = max(d for d in range(1, 80) if _parses(_nested(d)))
    assert deepest > 40
    assert _read(_nested(deepest)) == _expected(_nested(deepest))
    with pytest.raises(ValueError, match="nested too deep at byte"):
        read_request(_nested(10_000))


def _parses(body: bytes) -> bool:
    try:
        ExportTraceServiceRequest.FromString(body)
    except DecodeError:
        return False
    return True


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"\x0a\x05\x12\x03", "length past the end of its message at byte 1"),
        (b"\x0a", "truncated varint at byte 1"),
        (b"\x0a\x01\x12", "truncated varint at byte 3"),
        (b"\x00", "invalid field number at byte 0"),
        (b"\x0f", "invalid wire type"),
        (_request_bytes(b"\x2a\x02\xff\xfe"), "resource_spans[0].scope_spans[0].spans[0].name: not valid UTF-8"),
        (
            _request_bytes(b"\x4a\x04\x0a\x02\xc3\x28"),
            "resource_spans[0].scope_spans[0].spans[0].attributes[0].key: not valid UTF-8",
        ),
        (b"\x10" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes at byte 1"),
    ],
)
def test_a_malformed_body_is_a_bad_request_that_names_the_problem(body: bytes, problem: str) -> None:
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(body)
    with pytest.raises(BadRequest) as e:
        parse_protobuf(body)
    assert e.value.status == 400 and problem in e.value.message


def test_a_root_read_again_has_all_its_attributes_and_its_resource() -> None:
    span = trace_pb2.Span(trace_id=b"t" * 16, span_id=b"r" * 8, name="invoke_agent a", start_time_unix_nano=5)
    span.attributes.add(key="app.custom").value.string_value = "kept"
    span.attributes.add(key=sc.TOOL_NAME).value.string_value = "t"
    read = read_span(span.SerializeToString(), {"service.name": "svc"}, "scope")
    assert read.attributes == {"app.custom": "kept", sc.TOOL_NAME: "t"}
    assert (read.resource_attributes, read.scope_name, read.end_unix_nano) == ({"service.name": "svc"}, "scope", 5)
    lean = read_request(_request_bytes(span.SerializeToString()), sc.READ_KEYS, sc.READ_PREFIXES)[0]
    assert lean.attributes == {sc.TOOL_NAME: "t"}


def _span_of(trace: bytes, span: bytes, parent: bytes, key: str, value: str) -> trace_pb2.Span:
    out = trace_pb2.Span(trace_id=trace, span_id=span, parent_span_id=parent, name="execute_tool search")
    out.attributes.add(key=key).value.string_value = value
    return out


def test_the_strings_spans_repeat_are_read_as_one_object_each() -> None:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    spans.extend(_span_of(b"t" * 16, bytes([i]) * 8, b"p" * 8, sc.TOOL_NAME, "search") for i in range(1, 3))
    first, second = read_request(request.SerializeToString(), sc.READ_KEYS, sc.READ_PREFIXES)
    assert first.attributes == second.attributes == {sc.TOOL_NAME: "search"}
    [(key_1, value_1)], [(key_2, value_2)] = first.attributes.items(), second.attributes.items()
    assert key_1 is key_2 and value_1 is value_2 and first.name is second.name
    assert first.trace_id is second.trace_id and first.parent_span_id is second.parent_span_id
    assert first.span_id is not second.span_id


def test_strings_that_take_each_others_places_are_each_read_right() -> None:
    # Far more distinct keys, values and ids than the reader keeps: each read replaces others, and reads right.
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(5_000):
        spans.append(
            _span_of(i.to_bytes(16, "big"), (i + 1).to_bytes(8, "big"), i.to_bytes(8, "big"), f"k{i}", f"v{i % 1500}")
        )
    body = request.SerializeToString()
    for _ in range(2):
        assert _read(body) == _expected(body)


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError):
        read_request(b"", ["not", "a", "set"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        read_request("text")  # type: ignore[arg-type]


# --- encoding: result fields and log records ----------------------------------------------------------------
def _put(kvs: Any, values: dict[str, Any]) -> None:
    """``values`` as KeyValues with protobuf's Python API: the oracle of the encoders."""
    for key, value in values.items():
        _set_value(kvs.add(key=key).value, value)


def _set_value(target: common_pb2.AnyValue, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, list | tuple):
        target.array_value.SetInParent()
        for item in value:
            _set_value(target.array_value.values.add(), item)
    else:
        target.string_value = str(value)


def _protobuf_fields(events: list[dict[str, Any]], attributes: dict[str, Any], when: int, name: str) -> bytes:
    """The same fields built with protobuf's Python API: the oracle of the encoder."""
    fields = trace_pb2.Span()
    for attrs in events:
        _put(fields.events.add(time_unix_nano=when, name=name).attributes, attrs)
    _put(fields.attributes, attributes)
    return fields.SerializeToString()


_RESULT_SCALAR = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=6), st.none(), st.just(b"x")
)
_RESULT_VALUE = st.recursive(
    _RESULT_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner)), max_leaves=5
)
_RESULT_ATTRIBUTES = st.dictionaries(st.text(max_size=6), _RESULT_VALUE, max_size=5)


@READER
@given(
    st.lists(_RESULT_ATTRIBUTES, max_size=3), _RESULT_ATTRIBUTES, st.integers(0, 2**64 - 1), st.sampled_from(["", "e"])
)
def test_result_fields_encode_as_protobuf_encodes_them(
    events: list[dict[str, Any]], attributes: dict[str, Any], when: int, name: str
) -> None:
    encoded = encode_result_fields(events, attributes, when, name)
    # Canonical form: protobuf writes fields in number order, the encoder events first; the messages are equal.
    assert trace_pb2.Span.FromString(encoded).SerializeToString() == _protobuf_fields(events, attributes, when, name)


def test_result_fields_refuse_what_protobuf_refuses() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_result_fields([], {"n": 2**63}, 1, "e")
    with pytest.raises(ValueError):
        _protobuf_fields([], {"n": 2**63}, 1, "e")
    with pytest.raises(TypeError):
        encode_result_fields([{1: "not a str key"}], {}, 1, "e")  # type: ignore[dict-item]


@READER
@given(
    _RESULT_ATTRIBUTES,
    st.sampled_from([b"", b"\x01" * 16]),
    st.sampled_from([b"", b"\x02" * 8]),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**64 - 1),
    st.sampled_from(["", "gen_ai.evaluation.result"]),
)
def test_a_log_record_encodes_as_protobuf_encodes_it(
    attributes: dict[str, Any], trace_id: bytes, span_id: bytes, flags: int, observed: int, name: str
) -> None:
    encoded = encode_log_record(attributes, trace_id, span_id, flags, observed, name)
    record = logs_pb2.LogRecord(
        flags=flags, trace_id=trace_id, span_id=span_id, observed_time_unix_nano=observed, event_name=name
    )
    record.body.SetInParent()  # an empty body, as the SDK's encoder writes a record without one
    _put(record.attributes, attributes)
    assert encoded == logs_pb2.ScopeLogs(log_records=[record]).SerializeToString()


def test_a_log_record_refuses_what_protobuf_refuses() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_log_record({"n": 2**63}, b"", b"", 0, 1, "e")
    with pytest.raises(ValueError):
        _put(logs_pb2.LogRecord().attributes, {"n": 2**63})
    with pytest.raises(TypeError):
        encode_log_record({1: "not a str key"}, b"", b"", 0, 1, "e")  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        _put(logs_pb2.LogRecord().attributes, {1: "not a str key"})


def _one_span(**fields: Any) -> trace_pb2.Span:
    return trace_pb2.Span(**{"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "name": "s", **fields})


def _request_of(span: trace_pb2.Span) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=[span])])]
    ).SerializeToString()


_SPAN = "resource_spans[0].scope_spans[0].spans[0]"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_request_of(_one_span(trace_id=b"")), f"{_SPAN}.trace_id: missing (an id has 16 bytes)"),
        (_request_of(_one_span(trace_id=b"\x01" * 3)), f"{_SPAN}.trace_id: 3 bytes where an id has 16"),
        (_request_of(_one_span(trace_id=b"\x01" * 17)), f"{_SPAN}.trace_id: 17 bytes where an id has 16"),
        (_request_of(_one_span(span_id=b"")), f"{_SPAN}.span_id: missing (an id has 8 bytes)"),
        (_request_of(_one_span(span_id=b"\x02" * 1_000_000)), f"{_SPAN}.span_id: 1000000 bytes where an id has 8"),
        (_request_of(_one_span(parent_span_id=b"\x03" * 7)), f"{_SPAN}.parent_span_id: 7 bytes where an id has 8"),
        (
            _request_of(_one_span(links=[trace_pb2.Span.Link(trace_id=b"\x01" * 16, span_id=b"\x01" * 4)])),
            f"{_SPAN}.links[0].span_id: 4 bytes where an id has 8",
        ),
        (
            _request_of(_one_span(links=[trace_pb2.Span.Link(span_id=b"\x01" * 8)])),
            f"{_SPAN}.links[0].trace_id: missing",
        ),
        # strings in the fields grading never reads are checked all the same
        (
            _request_of(
                _one_span(links=[trace_pb2.Span.Link(trace_id=b"\x01" * 16, span_id=b"\x01" * 8, trace_state="BAD")])
            ).replace(b"BAD", b"\xff\xfe\xfd"),
            f"{_SPAN}.links[0].trace_state: not valid UTF-8",
        ),
        (
            _request_of(_one_span(trace_state="BAD")).replace(b"BAD", b"\xc0\xaf!"),
            f"{_SPAN}.trace_state: not valid UTF-8",
        ),
        (
            _request_of(_one_span(events=[trace_pb2.Span.Event(name="e", attributes=[{"key": "BAD"}])])).replace(
                b"BAD",
                b"\xed\xa0\x80",  # a surrogate
            ),
            f"{_SPAN}.events[0].attributes[0].key: not valid UTF-8",
        ),
        # fields whose number is not their place in the message (Status numbers its fields 2 and 3)
        (
            _request_of(_one_span(status=trace_pb2.Status(message="BAD", code=2))).replace(b"BAD", b"\xff\xfe\xfd"),
            f"{_SPAN}.status.message: not valid UTF-8",
        ),
        (
            _request_of(_one_span(status=trace_pb2.Status(code=2))).replace(b"\x18\x02", b"\x1d\x02\x00\x00\x00"),
            f"{_SPAN}.status.code: wrong wire type",
        ),
        # a length of more than one byte on the wire
        (
            _request_of(_one_span(name="x" * 200 + "BAD")).replace(b"BAD", b"\xc0\xaf!"),
            f"{_SPAN}.name: not valid UTF-8",
        ),
        # a known field with another wire type: protobuf's Python parser keeps it as unknown, the Collector refuses
        (_request_of(_one_span()) + b"\x0d\x00\x00\x00\x00", "resource_spans[1]: wrong wire type"),
        (
            _request_of(_one_span(kind=2)).replace(b"\x30\x02", b"\x35\x02\x00\x00\x00"),
            f"{_SPAN}.kind: wrong wire type",
        ),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else "",
)
def test_every_field_is_checked_against_the_otlp_schema_and_named_when_wrong(body: bytes, problem: str) -> None:
    with pytest.raises(BadRequest) as e:
        parse_protobuf(body)
    assert e.value.status == 400 and problem in e.value.message, e.value.message


def test_a_request_checked_whole_counts_its_spans_before_reading_any() -> None:
    body = _request_of(_one_span()) * 3  # concatenated requests are one request of three resource spans
    request = parse_protobuf(body)
    assert request.span_count == 3 and request._spans is None
    assert [s.size for s in request.spans] == [len(_one_span().SerializeToString())] * 3


def test_a_request_is_checked_while_the_other_threads_run() -> None:
    """The check reads the bytes without the interpreter's lock: a thread waiting for it counts meanwhile. With the lock
    held, it could take it only once the switch interval, set to a minute here, had passed. The counting thread sleeps
    between counts, so the test's own thread gets the lock back at once; the check is tried again should the machine
    not run the counting thread within one check."""
    body = _request_of(_one_span(attributes=[{"key": f"k{i}", "value": {"int_value": i}} for i in range(20)])) * 10_000
    count, done = [0], threading.Event()

    def counter() -> None:
        while not done.is_set():
            count[0] += 1
            time.sleep(0.0002)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(60)
    thread = threading.Thread(target=counter)
    counted: list[int] = []
    try:
        thread.start()
        while count[0] == 0:
            time.sleep(0.001)
        while len(counted) < 20 and not any(counted):
            before = count[0]
            assert check_request(body) == 10_000
            counted.append(count[0] - before)
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert any(counted), counted
    # and a body that is not bytes (it could change meanwhile) is checked holding the lock, its errors named alike
    with pytest.raises(ValueError, match=r"spans\[0\]\.trace_id: missing"):
        check_request(bytearray(_request_of(_one_span(trace_id=b""))))


# --- taking spans out of a request ------------------------------------------------------------------------
def _one_span_request(scope_fields: bytes, resource_fields: bytes, span: bytes) -> bytes:
    return pb_field(1, resource_fields + pb_field(2, scope_fields + pb_field(2, span)))


def _without(request: ExportTraceServiceRequest, places: list[tuple[int, int, int]]) -> ExportTraceServiceRequest:
    out = ExportTraceServiceRequest()
    out.CopyFrom(request)
    for ri, si, index in sorted(places, reverse=True):  # from the end, so that each index is still right
        del out.resource_spans[ri].scope_spans[si].spans[index]
    return out


def _alone(request: ExportTraceServiceRequest, ri: int, si: int, index: int) -> ExportTraceServiceRequest:
    rs, ss = request.resource_spans[ri], request.resource_spans[ri].scope_spans[si]
    out = ExportTraceServiceRequest()  # the resource and the scope as they came: present, or not
    out_rs = out.resource_spans.add(schema_url=rs.schema_url)
    out_ss = out_rs.scope_spans.add(schema_url=ss.schema_url, spans=[ss.spans[index]])
    if rs.HasField("resource"):
        out_rs.resource.CopyFrom(rs.resource)
    if ss.HasField("scope"):
        out_ss.scope.CopyFrom(ss.scope)
    return out


def _check_splice(request: ExportTraceServiceRequest, places: list[tuple[int, int, int]]) -> None:
    rest, taken = splice_spans(request.SerializeToString(), places)
    assert ExportTraceServiceRequest.FromString(rest) == _without(request, places)
    for (ri, si, index), (span, resource_fields, scope_fields) in zip(places, taken, strict=True):
        assert span == request.resource_spans[ri].scope_spans[si].spans[index].SerializeToString()
        alone = ExportTraceServiceRequest.FromString(_one_span_request(scope_fields, resource_fields, span))
        assert alone == _alone(request, ri, si, index)


@READER
@given(_requests(), st.data())
def test_spans_taken_out_leave_the_request_protobuf_would_and_each_makes_a_request_of_its_own(
    request: ExportTraceServiceRequest, data: st.DataObject
) -> None:
    spans = read_request(request.SerializeToString())
    places = [(s.resource_index, s.scope_index, s.index) for s in spans]
    _check_splice(request, data.draw(st.lists(st.sampled_from(places), unique=True)) if places else [])


@pytest.mark.parametrize("size", [100, 110, 16_300, 16_370])
def test_a_message_whose_length_prefix_gets_shorter_is_written_right(size: int) -> None:
    # A ResourceSpans and a ScopeSpans just over 127 (or 16,383) bytes, under it once a span is taken out.
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    spans.add(trace_id=b"t" * 16, span_id=b"a" * 8, name="x" * size)
    spans.add(trace_id=b"t" * 16, span_id=b"b" * 8, name="y")
    _check_splice(request, [(0, 0, 1)])
    _check_splice(request, [(0, 0, 0)])
    _check_splice(request, [(0, 0, 0), (0, 0, 1)])


def test_a_place_with_no_span_is_a_value_error() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"t" * 16, span_id=b"a" * 8)
    with pytest.raises(ValueError, match=r"no span at resource_spans\[0\].scope_spans\[0\].spans\[1\]"):
        splice_spans(request.SerializeToString(), [(0, 0, 1)])
