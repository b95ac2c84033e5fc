"""The loop grader: pass, fail with evidence, not evaluable, config errors."""

from __future__ import annotations

from typing import Any

import pytest
from factories import llm, run, tool, tool_steps
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade import ConfigError, grade_run, parse_config
from trajgrade.core.graders.loop_search import Seen, _Leaves, _leaves, find_loops, flatten, similarity

_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(alphabet=" \tAaBb\u00df\u0130x", max_size=6)
)
_arguments = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=10,
)


def grade(options: str, t):  # type: ignore[no-untyped-def]
    return grade_run(parse_config(f"graders:\n  - type: loop\n    {options}\n"), t).results[0]


def test_similarity_compares_values_not_text() -> None:
    assert similarity({"page": 1}, {"page": 2}) == 0.0
    assert similarity({"q": "a", "page": 1}, {"q": "a", "page": 2}) == 0.5
    assert similarity({}, {}) == 1.0
    assert similarity({"n": 1}, {"n": "1"}) == 0.0


def test_calls_with_the_same_paths_compare_value_by_value_as_by_path() -> None:
    nan = float("nan")
    text = "same text"
    pairs = [
        ({"q": "a", "page": 1}, {"q": "a", "page": 2}),
        ({"flag": True}, {"flag": 1}),  # equal in Python, not as JSON values
        ({"x": nan}, {"x": nan}),  # the same NaN object is not equal to itself
        ({"q": text}, {"q": text}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # the same paths in another order
        ({"a": 1}, {"a": 1, "b": 2}),
        ({}, {}),
    ]
    for a, b in pairs:
        assert _Leaves(a).similarity(_Leaves(b)) == similarity(a, b), (a, b)


@settings(max_examples=300, derandomize=True)
@given(_arguments, _arguments)
def test_leaves_compare_as_similarity(a: Any, b: Any) -> None:
    seen = Seen()
    first, second = flatten(a, seen), flatten(b, seen)
    assert _Leaves(first).similarity(_Leaves(second)) == similarity(first, second)
    assert _Leaves(first).similarity(_Leaves(flatten(a, seen))) == similarity(first, first)


@settings(max_examples=300, derandomize=True)
@given(_arguments)
def test_the_flat_path_flattens_as_the_general_one(arguments: Any) -> None:
    flat, general = flatten(arguments), _leaves(arguments)
    assert list(flat.items()) == list(general.items())
    assert [type(v) for v in flat.values()] == [type(v) for v in general.values()]


@settings(max_examples=100, derandomize=True)
@given(st.lists(_arguments, max_size=6))
def test_a_search_flattens_each_call_as_alone(calls: list[Any]) -> None:
    """The strings and paths a search keeps across calls (``Seen``) change no call's leaves."""
    seen = Seen()
    for arguments in calls * 2:
        shared, alone = flatten(arguments, seen), _leaves(arguments)
        assert list(shared.items()) == list(alone.items())
        assert [type(v) for v in shared.values()] == [type(v) for v in alone.values()]


def test_a_search_shares_the_leaf_paths_of_its_calls() -> None:
    seen = Seen()
    first = flatten({"q": "x", "filters": {"page": 1, "tags": ["a", "b"]}}, seen)
    second = flatten({"q": "y", "filters": {"page": 2, "tags": ["c", "d"]}}, seen)
    assert list(first) == list(second) == ["q", "filters.page", "filters.tags[0]", "filters.tags[1]"]
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_a_search_keeps_a_bounded_number_of_paths() -> None:
    seen = Seen()
    for i in range(100):
        flatten({"call": {f"k{i}_{j}": j for j in range(200)}}, seen)
    assert seen.path_count <= 4096
    assert flatten({"call": {"k99_3": 3}}, seen) == {"call.k99_3": 3}


@pytest.mark.parametrize("size", [255, 256, 257])
def test_the_flat_path_keeps_the_leaf_limit(size: int) -> None:
    arguments = {f"k{i}": f" V {i} " for i in range(size)}
    assert flatten(arguments) == _leaves(arguments)
    assert len(flatten(arguments)) == min(size, 256)


def test_fail_lists_span_ids_and_similarity_scores() -> None:
    t = run(*[x for _ in range(5) for x in (llm(), tool("search", {"query": "x"}, "same"))], llm())
    r = grade("max_repeats: 3", t)
    assert r.status == "fail" and r.value == 5 and r.score == pytest.approx(0.6)
    assert r.evidence[0].span_ids == tuple(s.span_id for s in t.tool_steps)
    assert "similarity to the call a period before: [1.00, 1.00, 1.00, 1.00]" in r.evidence[0].description


def test_pass_on_paging_and_scope_by_tools() -> None:
    paging = run(*[x for p in range(8) for x in (llm(), tool("list_items", {"page": p}, "r"))])
    assert grade("max_repeats: 3", paging).status == "pass"
    stuck = run(*[tool("ping", {}, "pong") for _ in range(6)])
    assert grade("tools: ['^search$']", stuck).status == "pass"
    assert grade("tools: ['^ping$']", stuck).status == "fail"


def test_a_loop_names_its_tools_and_spans_among_every_call_or_the_calls_of_the_tools_checked() -> None:
    t = run(*[x for _ in range(5) for x in (tool("ping", {}, "pong"), tool("search", {"query": "x"}, "same"))])
    every = grade("max_repeats: 3", t)
    assert every.value == 5 and every.details["loops"][0]["tools"] == "ping -> search"
    assert every.evidence[0].span_ids == tuple(s.span_id for s in t.tool_steps)
    searches = grade("tools: ['^search$']", t)
    assert searches.value == 5 and searches.details["loops"][0]["tools"] == "search"
    assert searches.evidence[0].span_ids == tuple(s.span_id for s in t.tool_steps if s.tool.name == "search")


def test_results_that_change_anywhere_are_progress() -> None:
    """Polling a long job log: the same call, a result that grows at its end, far past any prefix."""
    log = "x" * 10_000
    polling = run(*[tool("job_log", {"id": 7}, {"log": log + "step " * k}) for k in range(6)])
    assert grade("max_repeats: 3", polling).status == "pass"
    stuck = run(*[tool("job_log", {"id": 7}, {"log": log}) for _ in range(6)])
    assert grade("max_repeats: 3", stuck).status == "fail"


def test_not_evaluable_without_arguments() -> None:
    t = run(llm(), tool("search"), tool("search"))
    r = grade("max_repeats: 3", t)
    assert r.status == "error" and "not captured" in r.explanation


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ("max_repeats: 0", "greater than or equal to 1"),
        ("similarity_threshold: 1.5", "less than or equal to 1"),
        ("tools: ['[']", "invalid regex"),
        ("max_cycle_period: 11", "less than or equal to 10"),
        ("window: 3", "unknown field"),
    ],
)
def test_config_errors(options: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="graders\\[0\\] \\(loop\\)") as e:
        parse_config(f"graders:\n  - type: loop\n    {options}\n", "graders.yaml")
    assert fragment in str(e.value)


def test_results_of_equal_text_are_the_same_outcome_as_their_digests_say() -> None:
    """Results parsed from equal text are the same outcome without a digest of each; results of other text are
    still compared by their digests (keys in another order: the same outcome; another value: progress)."""
    from trajgrade.core.graders.loop_search import result_key
    from trajgrade.core.trajectory.content import _result
    from trajgrade.core.trajectory.model import Step, ToolCall

    def call(text: str | None, parser: Any = _result) -> ToolCall:
        return ToolCall(name="search", result=text, result_captured=True, parse_result=parser)

    same = call('{"a": 1, "b": [2]}'), call('{"a": 1, "b": [2]}')
    assert same[0].same_result_text(same[1])
    reordered = call('{"b": [2], "a": 1}')
    assert not same[0].same_result_text(reordered)
    assert not same[0].same_result_text(call('{"a": 1, "b": [2]}', parser=lambda raw: raw))
    assert not call(None, parser=None).same_result_text(call(None, parser=None))

    def step(t: ToolCall) -> Step:
        return Step(
            index=0, kind="tool_call", span_id="00000000000000a1", parent_span_id=None, name="search", agent=None,
            turn=0, start_unix_nano=0, end_unix_nano=0, status="ok", tool=t,
        )  # fmt: skip

    assert result_key(step(same[0])) == result_key(step(same[1])) == result_key(step(reordered))  # as the digests
    assert result_key(step(same[0])) != result_key(step(call('{"a": 1, "b": [3]}')))


#: Argument texts that differ but parse to the same leaves, that are equal but hold a NaN, and others.
_TEXTS = (
    '{"q": "a", "n": 1}',
    '{"n": 1, "q": "a"}',  # keys in another order
    '{"q": "a", "n": 1.0}',  # 1.0: the same leaf as 1
    '{"q":"a",   "n":1}',  # other white space
    '{"q": " A ", "n": 1}',  # the same leaf once trimmed and folded
    '{"q": "a", "n": NaN}',  # equal to nothing, not even a NaN parsed from the same text
    '{"q": "STRASSE", "n": 1}',
    '{"q": "stra\\u00dfe", "n": 1}',  # folds as STRASSE does
    '{"q": "a", "n": true}',
    '{"q": "a", "n": 2}',
    "not json",
)
_RESULTS = ('{"r": 1}', '{"r": 1.0}', '{"r": NaN}', "not json")
#: Runs drawn from a few calls each, so that calls of equal text repeat, back to back or a period apart.
_RUNS = st.lists(
    st.tuples(st.sampled_from("ab"), st.sampled_from(_TEXTS), st.sampled_from(_RESULTS)), min_size=1, max_size=4
).flatmap(lambda calls: st.lists(st.sampled_from(calls), max_size=20))


@settings(max_examples=300, derandomize=True)
@given(_RUNS, st.integers(1, 3), st.sampled_from([0.5, 0.9, 1.0]))
def test_calls_of_equal_text_are_found_in_loops_as_when_each_is_compared_alone(
    calls: list[tuple[str, str, str]], max_period: int, threshold: float
) -> None:
    """The search flattens and compares each distinct argument text once: what it finds is what it finds when
    every call's arguments are given parsed (no text kept), each flattened and compared on its own."""
    by_text, alone = tool_steps(calls), tool_steps(calls, parsed=True)
    assert find_loops(by_text, 1, threshold, max_period) == find_loops(alone, 1, threshold, max_period)


def _loops_as_the_rules_read(
    calls: list[Any], max_repeats: int, threshold: float, max_period: int
) -> list[tuple[int, int, int, tuple[float, ...]]]:
    """The loops of ``calls`` found by the rules of ``loop.py`` read literally, every pair compared afresh: for each
    period, each longest run of calls that are the same action as the call a period before (one tool, similar
    arguments, results not changed), its whole blocks when they repeat more than ``max_repeats`` times and the block
    is not itself a repetition of a shorter period; longest first, then earliest, then shortest period; none held
    in one kept before it."""
    from trajgrade.core.graders.loop_search import result_key

    def same(j: int, period: int) -> float | None:
        a, b = calls[j].tool, calls[j - period].tool
        if a.name != b.name:
            return None
        s = similarity(flatten(a.arguments), flatten(b.arguments))
        ra, rb = result_key(calls[j]), result_key(calls[j - period])
        return s if s >= threshold and (ra is None or rb is None or ra == rb) else None

    def action(k: int) -> tuple[str, dict[str, Any]]:
        return calls[k].tool.name, flatten(calls[k].tool.arguments)

    found = []
    for period in range(1, max_period + 1):
        j = period
        while j < len(calls):
            sims = []
            while j + len(sims) < len(calls) and (s := same(j + len(sims), period)) is not None:
                sims.append(s)
            repeats = (len(sims) + period) // period
            start = j - period
            shorter = any(
                period % q == 0 and all(action(start + k) == action(start + k % q) for k in range(period))
                for q in range(1, period)
            )
            if repeats > max_repeats and not shorter:
                found.append((start, start + repeats * period, period, tuple(sims[: repeats * period - period])))
            j += max(len(sims), 1)
    found.sort(key=lambda f: (-(f[1] - f[0]), f[0], f[2]))
    kept: list[tuple[int, int, int, tuple[float, ...]]] = []
    for f in found:
        if not any(k[0] <= f[0] and f[1] <= k[1] for k in kept):
            kept.append(f)
    return kept


@settings(max_examples=300, derandomize=True)
@given(_RUNS, st.integers(1, 3), st.integers(1, 4), st.sampled_from([0.5, 0.9, 1.0]))
def test_the_search_finds_the_loops_the_rules_describe(
    calls: list[tuple[str, str, str]], max_repeats: int, max_period: int, threshold: float
) -> None:
    """What the search finds (one pass recording each call's similarity to the calls a period before, each text
    flattened once, then the runs read from what it recorded) is what the rules find comparing every pair of calls
    a period apart afresh."""
    steps = tool_steps(calls)
    expected = _loops_as_the_rules_read(steps, max_repeats, threshold, max_period)
    assert find_loops(steps, max_repeats, threshold, max_period) == expected


def test_a_search_past_the_similarities_it_keeps_finds_what_it_finds_comparing_each_call_alone() -> None:
    """More pairs of distinct texts than the search keeps similarities for (``_MAX_SEEN``): those kept are dropped
    and kept anew, each text met again later compared afresh, and the loops found are the same."""
    texts = [f'{{"q": "a", "n": {i % 2000}}}' for i in range(6000)]  # 6,000 pairs, each met three times
    calls = [("search", text, "same") for text in texts]
    by_text, alone = tool_steps(calls), tool_steps(calls, parsed=True)
    found = find_loops(by_text, 3, 0.3, 3)
    assert found == find_loops(alone, 3, 0.3, 3)
    assert [f[:3] for f in found] == [(0, 6000, 1)]


def test_a_nan_parsed_from_equal_text_is_still_no_equal_leaf() -> None:
    nan = tool_steps([("search", '{"q": "a", "n": NaN}', "same")] * 3)
    assert find_loops(nan, 1, 1.0, 1) == []
    assert find_loops(nan, 1, 0.5, 1) == [(0, 3, 1, (0.5, 0.5))]
    reordered = tool_steps([("search", t, "same") for t in ('{"q": "a", "n": 1}', '{"n": 1.0, "q": " A"}') * 2])
    assert find_loops(reordered, 1, 1.0, 1) == [(0, 4, 1, (1.0, 1.0, 1.0))]
