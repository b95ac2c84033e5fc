"""The tool-schema grader (deterministic-graders spec, user story 3)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from factories import llm, run, tool
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.json_schemas import canonical_json, schema_problem

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def grade(options: str, t):  # type: ignore[no-untyped-def]
    return grade_run(parse_config(f"graders:\n  - type: tool-schema\n    {options}\n"), t).results[0]


def test_allowlist_reports_unapproved_tools() -> None:
    t = run(llm(), tool("search", {"q": "x"}), tool("delete_db", {}), llm())
    r = grade("allowlist: [search, db_query]", t)
    assert r.status == "fail"
    assert r.details["violations"] == [
        {"span_id": t.tool_steps[1].span_id, "tool": "delete_db", "argument": None, "reason": "not in the allowlist"}
    ]
    assert grade("allowlist: [search, delete_db]", t).status == "pass"
    assert grade("blocklist: [delete_db]", t).status == "fail"


def test_schema_violations_name_call_argument_and_reason() -> None:
    t = run(llm(), tool("get_weather", {"city": 7, "units": "c"}), llm())
    r = grade(f"schemas: {{get_weather: {WEATHER}}}".replace("'", '"'), t)
    assert r.status == "fail"
    reasons = {(v["argument"], v["reason"]) for v in r.details["violations"]}
    assert ("arguments.city", "7 is not of type 'string'") in reasons
    assert any("Additional properties are not allowed ('units'" in reason for _, reason in reasons)


@pytest.mark.parametrize(
    "schema",
    [
        WEATHER,  # the calls of a tool checked together first, then one by one when one of them is not valid
        {"$defs": {"weather": WEATHER}, "$ref": "#/$defs/weather"},  # a reference: checked one by one only
    ],
)
def test_among_many_calls_of_a_tool_the_invalid_ones_are_named(schema: dict[str, object]) -> None:
    calls = [tool("get_weather", {"city": f"town {i}"}) for i in range(30)]
    calls[7] = tool("get_weather", {"city": 7})
    calls[21] = tool("get_weather", {"town": "Paris"})
    t = run(llm(), *calls, llm())
    r = grade(f"schemas: {{get_weather: {schema}}}".replace("'", '"'), t)
    assert r.status == "fail" and r.score == pytest.approx(1 - 2 / 30)
    assert [(v["span_id"], v["argument"]) for v in r.details["violations"]] == [
        (t.tool_steps[7].span_id, "arguments.city"),
        (t.tool_steps[21].span_id, "arguments"),  # an argument not allowed
        (t.tool_steps[21].span_id, "arguments"),  # and one missing
    ]
    assert grade(f"schemas: {{get_weather: {schema}}}".replace("'", '"'), run(llm(), *calls[:7])).status == "pass"


def test_calls_of_equal_argument_text_are_judged_alike() -> None:
    """Calls of one tool whose arguments are parsed from equal text are checked once per text, and every call of a
    text that is not valid is named."""
    from trajgrade.core.trajectory.call_texts import call_texts

    calls = [tool("get_weather", {"city": 7} if i % 3 == 0 else {"city": "Paris"}) for i in range(12)]
    calls[4] = tool("get_weather", {"town": "Paris"})
    t = run(llm(), *calls, llm())
    numbers = call_texts(t).arguments_of(list(t.tool_steps))
    assert numbers[3] == numbers[6] == 0 and numbers[2] == numbers[5] == 1  # judged as the first of their text
    r = grade(f"schemas: {{get_weather: {WEATHER}}}".replace("'", '"'), t)
    assert r.status == "fail" and r.score == pytest.approx(1 - 5 / 12)
    assert [(v["span_id"], v["argument"]) for v in r.details["violations"]] == [
        (t.tool_steps[0].span_id, "arguments.city"),
        (t.tool_steps[3].span_id, "arguments.city"),
        (t.tool_steps[4].span_id, "arguments"),  # an argument not allowed
        (t.tool_steps[4].span_id, "arguments"),  # and one missing
        (t.tool_steps[6].span_id, "arguments.city"),
        (t.tool_steps[9].span_id, "arguments.city"),
    ]


def test_schemas_from_the_trace_definitions_and_nested_calls() -> None:
    defs = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    inner = tool("get_weather", {"town": "Paris"})
    t = run(llm(), tool("plan_trip", {"to": "Paris"}, children=(inner,)), llm(), tool_definitions=defs)
    r = grade("use_trace_definitions: true", t)
    assert r.status == "fail"
    assert "'city' is a required property" in r.explanation
    assert r.details["violations"][0]["span_id"] == t.tool_steps[1].span_id


def test_pass_with_evidence_for_each_call_and_no_tool_calls() -> None:
    t = run(
        llm(),
        tool("get_weather", {"city": "Paris"}),
        llm(),
        tool_definitions=[{"type": "function", "name": "get_weather", "parameters": WEATHER}],
    )
    r = grade("allowlist: [get_weather]", t)
    assert r.status == "pass" and len(r.evidence) == 1
    assert grade("allowlist: [x]", run(llm())).explanation == "no tool calls to check"


def test_not_evaluable_when_arguments_not_captured() -> None:
    t = run(llm(), tool("get_weather"), llm())
    r = grade(f"schemas: {{get_weather: {WEATHER}}}".replace("'", '"'), t)
    assert r.status == "error" and "arguments not captured" in r.explanation


def test_a_call_whose_arguments_were_not_captured_is_reported_beside_valid_calls_of_its_tool() -> None:
    t = run(llm(), tool("get_weather", {"city": "Paris"}), tool("get_weather", {"city": "Rome"}), tool("get_weather"))
    r = grade(f"schemas: {{get_weather: {WEATHER}}}".replace("'", '"'), t)
    assert r.status == "error"
    assert "arguments not captured for 1 call(s) with a schema" in r.explanation
    assert t.tool_steps[2].span_id in r.explanation
    assert r.details == {"checked": 2, "unchecked": 1}


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ("schemas: {x: {type: 12}}", "not a valid JSON Schema"),
        ("use_trace_definitions: false", "needs an allowlist"),
        ("allowlist: [a]\n    blocklist: [a]", "in both allowlist and blocklist"),
        ("allow: [a]", "unknown field"),
        ('schemas: {x: {"$ref": "http://127.0.0.1:9/s.json"}}', "never fetches a schema"),
    ],
)
def test_config_errors(options: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="graders\\[0\\] \\(tool-schema\\)") as e:
        parse_config(f"graders:\n  - type: tool-schema\n    {options}\n", "graders.yaml")
    assert fragment in str(e.value)


@contextmanager
def listener_that_never_answers() -> Iterator[tuple[str, list[socket.socket]]]:
    """A real TCP listener that accepts and then says nothing: a fetch from it would hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/schema.json", accepted
    finally:
        stop.set()
        thread.join()
        for c in accepted:
            c.close()
        server.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("ref_key", ["$ref", "$dynamicRef"])
def test_a_schema_from_the_spans_that_refers_elsewhere_is_never_fetched(ref_key: str) -> None:
    with listener_that_never_answers() as (url, connections):
        schema = {"type": "object", "properties": {"city": {ref_key: url}}}
        defs = [{"type": "function", "name": "get_weather", "parameters": schema}]
        t = run(llm(), tool("get_weather", {"city": "Paris"}), llm(), tool_definitions=defs)
        r = grade("use_trace_definitions: true", t)
        assert (r.status, r.error_type) == ("error", "not_evaluable")
        assert url in r.explanation and "never fetched" in r.explanation
        assert connections == []
        # a violation found elsewhere still fails the run
        t = run(llm(), tool("get_weather", {"city": "Paris"}), tool("delete_db", {}), llm(), tool_definitions=defs)
        assert grade("use_trace_definitions: true\n    blocklist: [delete_db]", t).status == "fail"
        assert connections == []


#: Keywords of draft 2020-12 (each with a shape the meta-schema checks), annotations, and a keyword it does not know.
_KEYWORDS = [
    *("type", "properties", "items", "prefixItems", "required", "enum", "const", "minimum", "exclusiveMinimum"),
    *("minLength", "maxItems", "uniqueItems", "additionalProperties", "allOf", "anyOf", "not", "if", "then"),
    *("dependentRequired", "dependentSchemas", "contains", "minContains", "propertyNames", "unevaluatedProperties"),
    *("title", "default", "examples", "deprecated", "contentMediaType", "format", "$defs", "$comment", "$anchor"),
    *("$dynamicAnchor", "x-vendor"),
]
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2**70, 1.0, 1.5, "", "a", "a", "string", "object", "integer", "nope", "1bad"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=2),
    max_leaves=6,
)
_SCHEMAS = st.recursive(
    st.dictionaries(st.sampled_from(_KEYWORDS), _VALUES, max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from(_KEYWORDS),
        inner | st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2) | _VALUES,
        max_size=3,
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(_SCHEMAS)
def test_a_schema_is_valid_exactly_when_jsonschema_says_so(schema: dict[str, object]) -> None:
    """jsonschema-rs's quick check of a schema against the meta-schema gives jsonschema's verdict, and an invalid
    schema is described in jsonschema's words."""
    try:
        Draft202012Validator.check_schema(schema)
        expected = None
    except SchemaError as e:
        expected = e.message
    assert schema_problem(schema, canonical_json(schema)) == expected


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "(?<=x"},  # not a regular expression to Python
        {"patternProperties": {"[": {}}},  # nor is this
        # valid in draft 4 only, which jsonschema-rs would check it against
        {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": True},
    ],
)
def test_what_jsonschema_rs_would_decide_otherwise_is_left_to_jsonschema(schema: dict[str, object]) -> None:
    import jsonschema_rs

    assert jsonschema_rs.meta.is_valid(schema)  # its answer alone
    with pytest.raises(SchemaError) as e:
        Draft202012Validator.check_schema(schema)
    assert schema_problem(schema, canonical_json(schema)) == e.value.message
