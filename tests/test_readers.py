"""Reading OTLP trace data: every accepted form, and clear errors for everything else."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES, VIEW_FIELDS, fixture_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from trajgrade.core import readers
from trajgrade.core.readers import read_bytes
from trajgrade.doors.cli import main
from trajgrade.exceptions import TraceDecodeError

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00f067aa0ba902b7"


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def request(
    trace: str = TRACE, *, b64: bool = False, int_as_number: bool = False, enum_names: bool = False
) -> dict[str, Any]:
    def ident(hex_id: str) -> str:
        return base64.b64encode(bytes.fromhex(hex_id)).decode() if b64 else hex_id

    def span(sid: str, parent: str | None, name: str, attrs: dict[str, Any], start: int, end: int, error: bool = False):  # type: ignore[no-untyped-def]
        s: dict[str, Any] = {
            "traceId": ident(trace),
            "spanId": ident(sid),
            "name": name,
            "kind": "SPAN_KIND_INTERNAL" if enum_names else 1,
            "startTimeUnixNano": start if int_as_number else str(start),
            "endTimeUnixNano": str(end),
            "attributes": [attr(k, v) for k, v in attrs.items()],
        }
        if int_as_number:
            for a in s["attributes"]:
                if "intValue" in a["value"]:
                    a["value"]["intValue"] = int(a["value"]["intValue"])
        if parent:
            s["parentSpanId"] = ident(parent)
        if error:
            s["status"] = {"code": "STATUS_CODE_ERROR" if enum_names else 2, "message": "boom"}
        return s

    spans = [
        span(
            ROOT,
            None,
            "invoke_agent helper",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
            1_000_000,
            9_000_000,
        ),
        span(
            "00000000000000a1",
            ROOT,
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 10,
            },
            1_100_000,
            2_000_000,
        ),
        span(
            "00000000000000a2",
            ROOT,
            "execute_tool lookup",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.arguments": '{"q": "x"}',
            },
            2_100_000,
            3_000_000,
            error=True,
        ),
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "demo")]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }


def summary(data: bytes) -> tuple[Any, ...]:
    from trajgrade.core.trajectory import build_trajectories, normalize

    runs = build_trajectories(normalize(s) for s in read_bytes(data, "x"))
    return tuple(
        (
            r.trace_id,
            r.summary.llm_calls,
            r.summary.tool_calls,
            r.summary.tool_errors,
            r.summary.input_tokens,
            r.agent_name,
            r.service_name,
        )
        for r in runs
    )


EXPECTED = ((TRACE, 1, 1, 1, 100, "helper", "demo"),)


@pytest.mark.parametrize(
    "variant",
    [{}, {"b64": True}, {"int_as_number": True}, {"enum_names": True}, {"b64": True, "enum_names": True}],
)
def test_json_forms_read_the_same(variant: dict[str, bool]) -> None:
    assert summary(json.dumps(request(**variant)).encode()) == EXPECTED


def test_json_lines_with_many_traces_give_many_runs() -> None:
    other = "0af7651916cd43dd8448eb211c80319c"
    lines = "\n".join(json.dumps(r) for r in (request(), request(other, b64=True))) + "\n"
    assert sorted(s[0] for s in summary(lines.encode())) == sorted([TRACE, other])


def test_binary_protobuf() -> None:
    req = trace_service_pb2.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=common_pb2.AnyValue(string_value="demo"))
    ss = rs.scope_spans.add()
    for sid, parent, name, attrs, err in (
        (
            ROOT,
            "",
            "invoke_agent helper",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
            False,
        ),
        (
            "00000000000000a1",
            ROOT,
            "chat gpt-4o",
            {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100},
            False,
        ),
        ("00000000000000a2", ROOT, "execute_tool lookup", {"gen_ai.operation.name": "execute_tool"}, True),
    ):
        span = ss.spans.add(
            trace_id=bytes.fromhex(TRACE),
            span_id=bytes.fromhex(sid),
            name=name,
            parent_span_id=bytes.fromhex(parent),
            start_time_unix_nano=1,
            end_time_unix_nano=2,
        )
        for k, v in attrs.items():
            value = common_pb2.AnyValue(int_value=v) if isinstance(v, int) else common_pb2.AnyValue(string_value=v)
            span.attributes.add(key=k, value=value)
        if err:
            span.status.code = trace_pb2.Status.STATUS_CODE_ERROR
    assert summary(req.SerializeToString()) == ((TRACE, 1, 1, 1, 100, "helper", "demo"),)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"", "empty input"),
        (b"{not json", "invalid JSON"),
        (b'{"resourceSpans": 3}', "resourceSpans: expected an array"),
        (b'{"foo": []}', "no resourceSpans"),
        (b"\xff\xfe\x00garbage", "not JSON and not a protobuf"),
        (
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": ROOT}]}]}]}).encode(),
            "resourceSpans[0].scopeSpans[0].spans[0].traceId",
        ),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": TRACE}]}]}]}).encode(), "missing spanId"),
        (
            json.dumps(
                {
                    "resourceSpans": [
                        {"scopeSpans": [{"spans": [{"traceId": TRACE, "spanId": ROOT, "startTimeUnixNano": "soon"}]}]}
                    ]
                }
            ).encode(),
            "startTimeUnixNano: 'soon' is not an integer",
        ),
        (
            json.dumps(
                {
                    "resourceSpans": [
                        {
                            "scopeSpans": [
                                {
                                    "spans": [
                                        {
                                            "traceId": TRACE,
                                            "spanId": ROOT,
                                            "attributes": [{"key": "a", "value": {"intValue": "x1"}}],
                                        }
                                    ]
                                }
                            ]
                        }
                    ]
                }
            ).encode(),
            "attributes[0].value: intValue 'x1'",
        ),
    ],
)
def test_bad_input_names_the_problem(payload: bytes, fragment: str) -> None:
    _names_the_problem(payload, fragment)


def _span_with(**fields: Any) -> bytes:
    span = {"traceId": TRACE, "spanId": ROOT, **fields}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (_span_with(kind="\u00b2"), "spans[0].kind: unknown value '²'"),  # a digit to str.isdigit, not to int()
        (_span_with(startTimeUnixNano="\u0663"), "startTimeUnixNano: '٣' is not an integer"),
        (_span_with(startTimeUnixNano=str(1 << 64)), "startTimeUnixNano: must be a 64-bit unsigned integer"),
        (_span_with(attributes=[{"key": "a", "value": {"intValue": "9" * 30}}]), "is not a 64-bit integer"),
        (b'{"resourceSpans": [{"x": ' + b"9" * 5000 + b"}]}", "a number of more than 4,300 digits"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_numbers_python_would_choke_on_are_named_errors(payload: bytes, fragment: str) -> None:
    _names_the_problem(payload, fragment)


def _names_the_problem(payload: bytes, fragment: str) -> None:
    with pytest.raises(TraceDecodeError) as e:
        read_bytes(payload, "bad.json")
    assert str(e.value).startswith("bad.json")
    assert fragment in str(e.value)


def test_json_lines_error_names_the_line() -> None:
    data = (json.dumps(request()) + "\n{broken\n").encode()
    with pytest.raises(TraceDecodeError, match=r"^f.jsonl:2: invalid JSON"):
        read_bytes(data, "f.jsonl")


def test_cli_reads_good_files_and_reports_bad_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(request()))
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": 5}]}]}]}')
    assert main(["trajectory", str(bad), str(good), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert len(json.loads(out)["runs"]) == 1
    assert f"trajgrade: {bad}: resourceSpans[0].scopeSpans[0].spans[0]" in err


def test_cli_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(request()).encode())))
    assert main(["trajectory", "-", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["summary"]["tool_names"] == ["lookup"]


def test_cli_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command keeps what its start-up and reading made out of the collector's walks while it runs, and lets
    it go after, whether it read or stopped at a bad graders file."""
    import gc

    good = tmp_path / "good.json"
    good.write_text(json.dumps(request()))
    assert gc.isenabled() and not gc.get_freeze_count()
    assert main(["trajectory", str(good), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 1
    assert gc.isenabled() and not gc.get_freeze_count()
    bad_config = tmp_path / "graders.yaml"
    bad_config.write_text("graders: [{type: no-such-grader}]\n")
    assert main(["grade", "--config", str(bad_config), str(good)]) == 2  # start-up ends early: the same
    assert "no-such-grader" in capsys.readouterr().err
    assert gc.isenabled() and not gc.get_freeze_count()
    gc.disable()
    try:
        assert main(["trajectory", str(good), "--format", "json"]) == 0
        assert not gc.isenabled() and not gc.get_freeze_count()
    finally:
        gc.enable()


# --- hypothesis: malformed input of any kind is exit 2 with a message, never a traceback ------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=25,
)
field_names = st.sampled_from(
    [
        "traceId",
        "spanId",
        "parentSpanId",
        "name",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "status",
        "events",
        "flags",
        "resource",
        "scopeSpans",
        "spans",
        "value",
        "intValue",
        "stringValue",
        "code",
    ]
)


@st.composite
def mutated_requests(draw: st.DrawFn, values: st.SearchStrategy[Any] = json_values) -> Any:
    """A valid request with one value somewhere replaced by arbitrary JSON."""
    req = request(b64=draw(st.booleans()), int_as_number=draw(st.booleans()), enum_names=draw(st.booleans()))
    node: Any = req
    path = [("resourceSpans", 0), ("scopeSpans", 0), ("spans", draw(st.integers(0, 2)))]
    for key, idx in path[: draw(st.integers(0, 3))]:
        node = node[key][idx]
    key = draw(field_names)
    if isinstance(node, dict):
        node[key] = draw(values)
    return req


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_requests())
def test_mutated_otlp_json_never_raises(req: Any) -> None:
    _run_cli_on(json.dumps(req).encode())


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.one_of(json_values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200)))
def test_arbitrary_input_never_raises(data: bytes) -> None:
    _run_cli_on(data)


def _run_cli_on(data: bytes) -> None:
    import contextlib
    import io
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(data)
        f.flush()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["trajectory", f.name, "--format", "json"])
    assert rc in (0, 2)
    if rc == 2:
        assert err.getvalue().startswith(f"trajgrade: {f.name}")
        assert "Traceback" not in err.getvalue()
    json.loads(out.getvalue())


# --- orjson and the plain shape read as json and the reference reader do ----------------------------------------
def _reading(data: bytes, reader: Any) -> Any:
    """Every field of every span a reader gives, or the message it raises."""
    try:
        spans = reader(data, "in.json")
    except TraceDecodeError as e:
        return str(e)
    return [
        (
            *(getattr(s, f) for f in VIEW_FIELDS),
            [(e.name, e.time_unix_nano, e.attributes) for e in s.events],
        )
        for s in spans
    ]


def _typed(data: bytes, source: str) -> list[Any]:
    """The spans msgspec's typed shape reads, or none when the request is not in it."""
    return readers._typed_spans(data) or []


def _reads_as_the_reference(data: bytes) -> None:
    reference = _reading(data, readers._read_json_reference)
    reading = _reading(data, readers._read_json)
    assert reading == reference
    assert repr(reading) == repr(reference)  # exactly: 1 == 1.0 in Python, but they are not the same reading
    if readers._typed_spans(data) is not None:  # the typed shape alone, when it takes the request
        assert repr(_reading(data, _typed)) == repr(reference)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_is_read_in_the_plain_and_the_typed_shape(path: Path) -> None:
    data = path.read_bytes()
    # what makes files fast to read
    assert readers._typed_spans(data) is not None
    assert readers._plain_spans(orjson.loads(data)) is not None
    _reads_as_the_reference(data)


def _spans(*changes: dict[str, Any]) -> bytes:
    """A request of spans under the root, each changed as given."""
    spans = [
        {"traceId": TRACE, "spanId": f"{i + 1:016x}", "parentSpanId": ROOT, "startTimeUnixNano": "5", **change}
        for i, change in enumerate(changes)
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def _value_request(value: Any) -> bytes:
    return json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": TRACE, "spanId": ROOT, "attributes": [value]}]}]}]}
    ).encode()


@pytest.mark.parametrize(
    "payload",
    [
        # integers past 64 bits, which orjson decodes as floats and json as integers
        _value_request({"key": "a", "value": {"stringValue": 123456789012345678901234567890}}),
        _value_request({"key": "a", "value": {"bytesValue": -9223372036854775809}}),
        _value_request({"key": "a", "value": {"doubleValue": 18446744073709551616}}),
        _value_request({"key": "a", "value": {"doubleValue": 1e20}}),
        _value_request({"key": "a", "value": {"intValue": 1 << 64}}),
        _value_request({"key": "a", "value": {"arrayValue": {"values": [{"doubleValue": 9 * 10**30}]}}}),
        _span_with(startTimeUnixNano=1 << 64),
        _span_with(kind=1 << 70),
        _span_with(status={"code": 2, "message": 10**25}),
        _span_with(events=[{"name": 10**25, "timeUnixNano": "5"}]),
        b"[123456789012345678901234567890]",
        # what only json decodes
        _span_with(attributes=[{"key": "a", "value": {"doubleValue": float("nan")}}]),
        _value_request({"key": "a", "value": {"stringValue": "\ud800"}}),
        # JSON Lines, good and bad, and one object over several lines
        (json.dumps(request()) + "\n\n" + json.dumps(request(b64=True)) + "\n").encode(),
        (json.dumps(request()) + "\n" + json.dumps(request())[:-1] + "\n").encode(),
        (json.dumps(request()) + "\n" + json.dumps(request(), indent=1)).encode(),
        json.dumps(request(), indent=2).encode(),
        # other shapes the reference reader takes
        json.dumps([request(), request(enum_names=True)]).encode(),
        json.dumps({"resource_spans": request()["resourceSpans"]}).encode(),
        _span_with(attributes=[{"key": "a", "value": {"string_value": "x", "intValue": "3"}}]),
        _span_with(parentSpanId="", parent_span_id=ROOT),
        # ids read once and remembered by their text: a parent id that is a trace id's text is still wrong
        _spans({"parentSpanId": ROOT}, {"parentSpanId": TRACE}),
        _spans(
            {"traceId": TRACE.upper(), "spanId": ROOT.upper(), "parentSpanId": "0" * 16}, {"parentSpanId": "0" * 16}
        ),
        _spans({"spanId": "0" * 16}),
        _spans({"spanId": ROOT, "parentSpanId": ROOT, "flags": 0x300}, {"traceId": "", "trace_id": TRACE}),
        _spans({"startTimeUnixNano": "9" * 19, "endTimeUnixNano": "0"}, {"startTimeUnixNano": "9" * 20}),
        _spans({"kind": 1 << 31, "attributes": [{"key": "n", "value": {"intValue": "9" * 18}}]}),
        _spans({"attributes": [{"key": "n", "value": {"intValue": "9" * 19}}]}),
        # what the typed shape leaves to the others: fields it does not know, an AnyValue of two fields, a
        # scope name that is not a string; and what it reads: fields it keeps unread, values nested and empty
        _spans({"attributes": [{"key": "a", "value": {"intValue": "3", "stringValue": "x"}}]}),
        _spans({"attributes": [{"key": "a", "value": {"stringValue": "x"}, "type": "string"}]}),
        _spans({"startTimeUnixNano": "5", "start_time_unix_nano": "7"}),
        json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": 5}, "spans": []}]}]}).encode(),
        _spans({"traceState": "a=b", "links": [{"traceId": 5}], "droppedAttributesCount": 2}),
        _spans(
            {
                "attributes": [
                    {"key": "e", "value": {}},
                    {"key": "n", "value": None},
                    {"key": "l", "value": {"arrayValue": {"values": [None, {"doubleValue": 5}, {}]}}},
                    {"key": "m", "value": {"kvlistValue": {"values": [{"key": "k"}, {"key": "k", "value": {}}]}}},
                    {"key": "d", "value": {"stringValue": "a"}},
                    {"key": "d", "value": {"boolValue": True}},
                ],
                "events": [
                    {"name": "x", "timeUnixNano": 7, "attributes": [{"key": "b", "value": {"bytesValue": "AA=="}}]}
                ],
                "flags": "768",
                "kind": "SPAN_KIND_CLIENT",
                "status": {"code": "STATUS_CODE_ERROR"},
            }
        ),
    ],
)
def test_orjson_reads_as_json(payload: bytes) -> None:
    _reads_as_the_reference(payload)


big_numbers = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.integers(min_value=10**18, max_value=10**25),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_requests(values=st.one_of(json_values, big_numbers, st.fixed_dictionaries({"intValue": big_numbers}))))
def test_mutated_otlp_json_reads_as_json(req: Any) -> None:
    _reads_as_the_reference(json.dumps(req).encode())


def test_the_program_ends_with_its_output_written_and_its_exit_code(tmp_path: Path) -> None:
    """``trajgrade`` ends the process without Python's teardown (cli.run): what it printed is all there."""
    import subprocess
    import sys

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(request()))
    bad.write_text("{")
    program = "import sys; from trajgrade.doors.cli import run; sys.argv[0] = 'trajgrade'; run()"
    done = subprocess.run(
        [sys.executable, "-c", program, "trajectory", str(good), str(bad), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert len(json.loads(done.stdout)["runs"]) == 1  # standard output to a pipe is written in blocks: flushed
    assert done.stderr.startswith(f"trajgrade: {bad}")
