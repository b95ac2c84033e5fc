"""The numbering of a run's tool calls by text (``CallTexts``), and the graders of one grading sharing it: the loop
search, max-repeat / loop-outcome and the comparison with a baseline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from factories import repeating_calls, tool_steps
from hypothesis import given, settings
from hypothesis import strategies as st

from trajgrade import grade_run, parse_config
from trajgrade.core.compare import _call_texts, tool_call_text
from trajgrade.core.config import Grader
from trajgrade.core.graders.base import GraderConfig, GraderResult, GraderSpec
from trajgrade.core.graders.loop_search import find_loops
from trajgrade.core.graders.repetition import longest_repetitions
from trajgrade.core.runfiles import read_runs
from trajgrade.core.running import grading_fact, grading_facts, run_grader
from trajgrade.core.trajectory import Trajectory
from trajgrade.core.trajectory.call_texts import CallTexts, call_texts
from trajgrade.core.trajectory.content import _arguments

OI = Path(__file__).resolve().parents[1] / "fixtures" / "langgraph" / "openinference"


def test_calls_of_one_tool_and_equal_text_share_a_number_the_position_of_the_first() -> None:
    calls = [
        ("search", '{"q": "a"}', "r"),
        ("read", '{"q": "a"}', "r"),  # the same text, another tool
        ("search", '{"q": "a"}', "s"),
        ("search", '{"q":"a"}', "r"),  # other text, the same value
        ("read", '{"q": "a"}', "s"),
    ]
    steps = tool_steps(calls)
    texts = CallTexts(steps)
    assert texts.arguments_of(steps) == [0, 1, 0, 3, 1]
    assert texts.results_of(steps) == [0, 1, 2, 0, 4]
    assert texts.arguments_of(steps) is texts.arguments_of(steps)  # made once, kept
    # the calls of one tool among them: numbered by their position among those
    reads = [steps[1], steps[4]]
    assert texts.arguments_of(reads) == [0, 0] and texts.results_of(reads) == [0, 1]
    # calls not among the steps numbered: no number from the first of them on
    assert texts.arguments_of([steps[2], tool_steps(calls)[3], steps[4]]) == [0, None, None]
    # not parsed from text, or not captured: no number
    assert CallTexts(tool_steps(calls, parsed=True)).arguments_of(tool_steps(calls, parsed=True)) == [None] * 5
    uncaptured = tool_steps(calls)
    for s in uncaptured:
        assert s.tool is not None
        s.tool.arguments_captured = False
    assert CallTexts(uncaptured).arguments_of(uncaptured) == [None] * 5


def test_past_the_texts_kept_a_number_still_stands_for_one_tool_and_text() -> None:
    """A run of more distinct texts than the numbering keeps at once, then its first texts again: every call's
    number is the position of a call of the same tool and text, and the call texts are those written alone."""
    calls = [("search", f'{{"q": {i}}}', "r") for i in range(5000)] + [("search", '{"q": 0}', "r")] * 3
    steps = tool_steps(calls)
    numbers = CallTexts(steps).arguments_of(steps)
    assert all(n is not None and n <= i and calls[n][:2] == calls[i][:2] for i, n in enumerate(numbers))
    assert numbers[-3] == numbers[-2] == numbers[-1] == 5000  # kept anew: the first text was dropped
    assert _call_texts(steps)[-4:] == [tool_call_text(name, _arguments(text)) for name, text, _ in calls[-4:]]


_TEXTS = ('{"q": "a", "n": 1}', '{"n": 1, "q": "a"}', '{"q": "a", "n": NaN}', '{"q": "A"}', "not json")
_RESULTS = ('{"r": 1}', '{"r": 1.0}', '{"r": NaN}')
_RUNS = repeating_calls(_TEXTS, _RESULTS)


@settings(max_examples=200, derandomize=True)
@given(_RUNS, st.integers(1, 3))
def test_the_calls_of_one_tool_read_with_the_runs_numbering_are_judged_as_each_alone(
    calls: list[tuple[str, str, str]], max_period: int
) -> None:
    """A grader that watches some tools reads the numbering of all the run's calls: what it finds among the calls
    of those tools is what it finds when every call's values are given parsed, each compared on its own."""
    steps, alone = tool_steps(calls), tool_steps(calls, parsed=True)
    texts = CallTexts(steps)
    watched = [s for s in steps if s.tool is not None and s.tool.name == "a"]
    watched_alone = [s for s in alone if s.tool is not None and s.tool.name == "a"]
    for threshold in (0.5, 1.0):
        assert find_loops(watched, 1, threshold, max_period, texts) == find_loops(
            watched_alone, 1, threshold, max_period
        )
    for match in ("observation", "name-args"):
        assert longest_repetitions(watched, match, max_period, texts) == longest_repetitions(
            watched_alone, match, max_period
        )
    assert _call_texts(watched, texts) == _call_texts(watched_alone)


def _run(path: Path) -> Trajectory:
    runs, problems = read_runs([str(path)])
    assert not problems and len(runs) == 1
    return runs[0].trajectory


def test_the_graders_of_one_grading_a_composites_children_too_share_one_numbering() -> None:
    """Within a grading, every grader that compares calls reads the one numbering kept for the run; each gives the
    result it gives when run alone, outside a grading, where it numbers the calls itself."""
    t = _run(OI / "repeat_six.json")
    config = parse_config(
        "graders:\n"
        "  - {name: loop, type: loop, max_repeats: 2}\n"
        "  - {name: max-repeat, type: max-repeat, max: 2, match: name-args}\n"
        "  - {name: loop-outcome, type: loop-outcome, max_acceptable_retries: 1, match: observation}\n"
        f"  - {{name: golden, type: baseline, path: {OI / 'three_tools.json'}, max_tool_edits: 1}}\n"
        "  - name: gate\n    type: composite\n    evaluators:\n"
        "      - {name: inner-loop, type: loop, max_repeats: 4}\n"
        "      - {name: inner-repeat, type: max-repeat, max: 4, match: observation}\n"
    )
    kept: list[object] = []

    def peek(run: Trajectory, _c: object, name: str) -> GraderResult:
        facts = grading_facts(run)
        assert facts is not None
        kept.extend(fact for fact in facts.values() if isinstance(fact, CallTexts))
        kept.append(grading_fact(run, call_texts))
        return GraderResult(name=name, type="peek", status="pass", score=1.0, explanation="")

    peeker = Grader(
        name="peek", type="peek", weight=1.0, spec=GraderSpec("peek", GraderConfig, peek, ""), options=GraderConfig()
    )
    suite = replace(config.suites[0], graders=(*config.suites[0].graders, peeker))
    together = grade_run(replace(config, suites=(suite,)), t).results[:-1]
    assert len(kept) == 2 and kept[0] is kept[1]  # one numbering, made by the first grader that needed it
    numbering = kept[0]
    assert isinstance(numbering, CallTexts) and numbering.steps is t.tool_steps
    assert together == tuple(run_grader(g, t) for g in config.suites[0].graders)  # each alone, outside a grading
    assert [r.status for r in together] == ["fail", "fail", "fail", "fail", "fail"]
    assert grading_facts(t) is None and grading_fact(t, call_texts) is not grading_fact(t, call_texts)
