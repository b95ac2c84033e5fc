"""A bounded fuzzing pass (hypothesis) over the OTLP decoders, the sidecar pipeline, the config loader, the graders.

Under pytest trajgrade re-raises its own internal errors, so any bug these inputs reach fails the test
instead of being swallowed.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import yaml
from factories import llm, run, tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from protobuf_bytes import varint

from trajgrade import ConfigError, grade_run, load_config, parse_config
from trajgrade.doors.sidecar.otlp import JSON, PROTOBUF, BadRequest, decode_body, parse_protobuf
from trajgrade.doors.sidecar.pipeline import Pipeline

# Derandomized: the same examples in every CI run (a submission must not fail by chance); widen locally
# with more examples when changing the decoders.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

ids = st.one_of(st.binary(min_size=0, max_size=17), st.sampled_from([b"", bytes(8), b"\x01" * 8, b"\x02" * 16]))
scalars = st.one_of(
    st.text(max_size=40), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(), st.booleans()
)


def any_value(depth: int = 0) -> st.SearchStrategy[common_pb2.AnyValue]:
    leaf = st.builds(
        lambda v: (
            common_pb2.AnyValue(bool_value=v)
            if isinstance(v, bool)
            else common_pb2.AnyValue(int_value=v)
            if isinstance(v, int)
            else common_pb2.AnyValue(double_value=v)
            if isinstance(v, float)
            else common_pb2.AnyValue(string_value=v)
        ),
        scalars,
    )
    if depth >= 2:
        return leaf
    inner = any_value(depth + 1)
    return st.one_of(
        leaf,
        st.lists(inner, max_size=3).map(lambda vs: common_pb2.AnyValue(array_value=common_pb2.ArrayValue(values=vs))),
    )


KEYS = st.sampled_from(
    [
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.output.messages",
        "gen_ai.agent.name",
        "openinference.span.kind",
        "traceloop.entity.input",
        "error.type",
        "x",
    ]
)
OPERATIONS = st.sampled_from(["chat", "execute_tool", "invoke_agent", "AGENT", "TOOL", "LLM", "nonsense"])


@st.composite
def requests(draw: Any, *, valid: bool = False) -> ExportTraceServiceRequest:
    """Requests of one or two resources; ``valid``: ids of the lengths OTLP requires (else of any length)."""
    request = ExportTraceServiceRequest()
    trace_ids = st.binary(min_size=16, max_size=16) if valid else ids
    trace = draw(st.sampled_from([b"\x0a" * 16, b"\x0b" * 16] if valid else [b"\x0a" * 16, b"\x0b" * 16, b""]))
    span_ids = draw(st.lists(st.binary(min_size=8, max_size=8) if valid else ids, min_size=1, max_size=8))
    for _ in range(draw(st.integers(1, 2))):
        rs = request.resource_spans.add()
        ss = rs.scope_spans.add()
        ss.scope.name = draw(st.sampled_from(["agent", "trajgrade", ""]))
        for span_id in span_ids:  # parents among the same ids: cycles, self-parents and forests too
            span = ss.spans.add(
                trace_id=draw(st.sampled_from([trace, draw(trace_ids)])),
                span_id=span_id,
                parent_span_id=draw(st.sampled_from([b"", *span_ids])),
                name=draw(st.sampled_from(["chat m", "execute_tool t", "invoke_agent a", "x", ""])),
                kind=draw(st.integers(0, 5)),
                start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                flags=draw(st.integers(0, 2**32 - 1)),
            )
            span.status.code = draw(st.integers(0, 2))
            span.attributes.add(key="gen_ai.operation.name").value.string_value = draw(OPERATIONS)
            for key, value in draw(st.lists(st.tuples(KEYS, any_value()), max_size=5)):
                span.attributes.add(key=key).value.CopyFrom(value)
    return request


@FUZZ
@given(body=st.binary(max_size=400), media=st.sampled_from([PROTOBUF, JSON, "text/plain", ""]), gz=st.booleans())
def test_any_body_is_a_request_or_a_named_bad_request(body: bytes, media: str, gz: bool) -> None:
    try:
        decode_body(gzip.compress(body) if gz else body, media, "gzip" if gz else "", max_decompressed=10_000)
    except BadRequest as e:
        assert e.status in (400, 413, 415) and e.message


@FUZZ
@given(request=requests(), cut=st.integers(0, 2000), flip=st.integers(0, 255))
def test_mutated_protobuf_bodies(request: ExportTraceServiceRequest, cut: int, flip: int) -> None:
    body = bytearray(request.SerializeToString())
    if body:
        body[cut % len(body)] ^= flip
    try:
        decode_body(bytes(body[: max(1, cut)]), PROTOBUF, "", max_decompressed=10_000)
    except BadRequest:
        pass


def _resource_twice(request: ExportTraceServiceRequest) -> bytes:
    """The request with its first resource given a second time, after its scope spans (valid protobuf: the
    two parts merge)."""
    extra = common_pb2.KeyValue(key="deployment.environment", value=common_pb2.AnyValue(string_value="prod"))
    part = Resource(attributes=[extra]).SerializeToString()
    rs = request.resource_spans[0].SerializeToString() + b"\x0a" + varint(len(part)) + part
    rest = b"".join(b"\x0a" + varint(len(r)) + r for r in (x.SerializeToString() for x in request.resource_spans[1:]))
    return b"\x0a" + varint(len(rs)) + rs + rest


@FUZZ
@given(request=requests(), cut=st.integers(0, 2000), flip=st.integers(0, 255), twice=st.booleans())
def test_what_the_checker_accepts_every_hop_parses_with_ids_of_the_right_length(
    request: ExportTraceServiceRequest, cut: int, flip: int, twice: bool
) -> None:
    """Ids of any length, invalid UTF-8 and broken wire types (from the mutation), resources given twice: a body
    is refused naming a field, or protobuf parses it and every id has the length OTLP requires."""
    body = bytearray(_resource_twice(request) if twice else request.SerializeToString())
    if body and flip:
        body[cut % len(body)] ^= flip
    try:
        accepted = parse_protobuf(bytes(body))
    except BadRequest as e:
        assert e.status == 400 and ("at byte" in e.message or "missing" in e.message), e.message
        return
    parsed = ExportTraceServiceRequest.FromString(bytes(body))
    spans = [s for rs in parsed.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert accepted.span_count == len(spans) == len(accepted.spans)
    for span in spans:
        assert (len(span.trace_id), len(span.span_id), len(span.parent_span_id) in (0, 8)) == (16, 8, True)
        assert all((len(link.trace_id), len(link.span_id)) == (16, 8) for link in span.links)


@FUZZ
@given(copies=st.integers(1, 200_000), spans=st.integers(1, 3))
def test_a_compressed_body_is_counted_before_its_spans_are_read(copies: int, spans: int) -> None:
    """Amplification: a few KiB of gzip that inflate to many spans. Decoding counts them without reading them;
    reading waits until the pipeline admits the count."""
    one = ExportTraceServiceRequest()
    ss = one.resource_spans.add().scope_spans.add()
    for i in range(spans):
        ss.spans.add(trace_id=b"\x01" * 16, span_id=bytes([i + 1]) * 8)
    body = one.SerializeToString() * copies
    limit = 1 << 20
    try:
        request = decode_body(gzip.compress(body), PROTOBUF, "gzip", max_decompressed=limit)
    except BadRequest as e:
        assert len(body) > limit and e.status == 413
        return
    assert request.span_count == copies * spans and request._spans is None


@FUZZ
@given(batch=st.lists(requests(valid=True), min_size=1, max_size=4), twice=st.booleans())
def test_the_sidecar_pipeline_takes_any_valid_request(batch: list[ExportTraceServiceRequest], twice: bool) -> None:
    reports: list[Any] = []
    pipeline = Pipeline(parse_config("graders:\n  - {type: loop}\n  - {type: completed}\n"), [], settle_s=0.0)
    pipeline._grading.on_report = reports.append
    try:
        for request in batch:
            body = _resource_twice(request) if twice else request.SerializeToString()
            assert pipeline.submit(parse_protobuf(body))
        deadline = time.monotonic() + 10
        while pipeline.held_roots and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pipeline.held_roots == 0
    finally:
        pipeline.close(5.0)


config_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
GRADER_TYPES = st.sampled_from(
    ["token-budget", "tool-calls", "loop", "budget", "composite", "execution_metrics", "tool_trajectory", "nope"]
)


@FUZZ
@given(
    entries=st.lists(
        st.tuples(
            GRADER_TYPES,
            st.dictionaries(
                st.sampled_from(
                    ["max", "config", "evaluators", "mode", "required", "max_repeats", "expected", "tools"]
                ),
                config_values,
                max_size=3,
            ),
        ),
        max_size=3,
    )
)
def test_any_config_loads_or_names_its_problem(entries: list[tuple[str, dict[str, Any]]]) -> None:
    text = yaml.safe_dump({"graders": [{"type": t, **options} for t, options in entries]})
    try:
        config = parse_config(text, "fuzz.yaml")
    except ConfigError as e:
        assert str(e).startswith("fuzz.yaml")
        return
    report = grade_run(config, run(llm(), tool("search", {"q": "x"}, result="r")))
    assert all(r.status in ("pass", "fail", "error") and 0.0 <= r.score <= 1.0 for r in report.results)


step = st.one_of(
    st.builds(
        lambda i, o, e: llm(i, o, error=e),
        st.none() | st.integers(0, 10**6),
        st.none() | st.integers(0, 10**6),
        st.booleans(),
    ),
    st.builds(
        lambda n, a, r, e: tool(n, a, r, error=e),
        st.sampled_from(["search", "read", "list_items"]),
        st.one_of(st.dictionaries(st.text(max_size=5), scalars, max_size=3), scalars),
        st.one_of(scalars, st.just("same")),
        st.booleans(),
    ),
)
EVERY = load_config(Path(__file__).resolve().parents[2] / "benchmarks" / "every_grader.yaml")


@FUZZ
@given(steps=st.lists(step, max_size=30))
def test_every_grader_on_any_run_gives_a_verdict_in_range(steps: list[dict[str, Any]]) -> None:
    report = grade_run(EVERY, run(*steps))
    for r in report.results:
        assert r.status in ("pass", "fail", "error"), r
        assert 0.0 <= r.score <= 1.0, r
        assert r.error_type != "internal", r.explanation
