"""The loop grader on a labelled set: stuck calls, cycles, polling, paging, retries after errors.

Run with ``-s`` to see the figures: precision, recall, and the false-positive rate on legitimate retries
(the deterministic-graders spec, SC-005, asks for under 5%). The set is hand-built variants plus every real
fixture whose spans captured tool arguments: ``repeat_six`` is a loop; ``paging``, ``tool_error_retry``
(a retry with corrected arguments), ``long_200`` (200 distinct pages) and the rest are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conftest import FIXTURES, fixture_files
from factories import llm, run, tool

from trajgrade import parse_config
from trajgrade.core.readers import read_path
from trajgrade.core.running import grade_run
from trajgrade.core.trajectory import build_trajectories, normalize
from trajgrade.core.trajectory.model import Trajectory

FIXTURE_CATEGORY = {"repeat_six": "stuck", "paging": "paging", "long_200": "paging", "tool_error_retry": "retry"}

CONFIG = parse_config("graders:\n  - type: loop\n    max_repeats: 3\n    similarity_threshold: 0.9\n")


@dataclass
class Case:
    name: str
    category: str
    loop: bool
    trajectory: Trajectory


def turns(*calls: dict[str, Any]) -> Trajectory:
    """One model call before each tool call, then a final answer: how agents really interleave."""
    steps: list[dict[str, Any]] = []
    for call in calls:
        steps += [llm(), call]
    return run(*steps, llm())


def same(name: str, args: dict[str, Any], n: int, result: Any = "same", **kw: Any) -> list[dict[str, Any]]:
    return [tool(name, args, result, **kw) for _ in range(n)]


def cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    # --- loops ---------------------------------------------------------------------------------------
    for n in (4, 5, 6, 8, 10, 20):
        add(Case(f"stuck x{n}", "stuck", True, turns(*same("search", {"query": "weather paris"}, n))))
    for n in (4, 5, 6):
        add(
            Case(
                f"A-B cycle x{n}",
                "cycle",
                True,
                turns(
                    *[
                        x
                        for _ in range(n)
                        for x in (tool("open", {"path": "a.py"}, "x"), tool("close", {"path": "a.py"}, "ok"))
                    ]
                ),
            )
        )
    add(
        Case(
            "A-B-C cycle x4",
            "cycle",
            True,
            turns(
                *[
                    x
                    for _ in range(4)
                    for x in (tool("plan", {}, "p"), tool("act", {"step": 1}, "e"), tool("check", {}, "bad"))
                ]
            ),
        )
    )
    for n in (5, 7):
        add(
            Case(
                f"same failing call x{n}",
                "retry-stuck",
                True,
                turns(*same("fetch", {"url": "http://x/a"}, n, "HTTP 500", error=True)),
            )
        )
    for n in (6, 12):
        add(
            Case(
                f"polling no progress x{n}",
                "polling-stuck",
                True,
                turns(*same("job_status", {"job_id": "j1"}, n, {"state": "pending"})),
            )
        )
    add(
        Case(
            "stuck, case and space differ",
            "stuck",
            True,
            turns(*[tool("search", {"query": q}, "r") for q in ("Paris", " paris", "PARIS ", "paris", "Paris")]),
        )
    )
    add(Case("stuck, results not captured", "stuck", True, turns(*same("search", {"query": "x"}, 5, result=None))))
    add(Case("stuck with no model call between", "stuck", True, run(llm(), *same("ls", {"path": "/"}, 6), llm())))
    add(
        Case(
            "stuck then moves on",
            "stuck",
            True,
            turns(*same("read_file", {"path": "a"}, 4), tool("write_file", {"path": "a", "text": "x"}, "ok")),
        )
    )
    add(
        Case(
            "stuck, one of ten args changes",
            "stuck",
            True,
            turns(*[tool("query", {**{f"k{i}": i for i in range(9)}, "request_id": n}, "rows") for n in range(6)]),
        )
    )
    add(
        Case(
            "stuck nested arguments",
            "stuck",
            True,
            turns(*same("db", {"sql": "select 1", "opts": {"limit": 10, "tags": ["a", "b"]}}, 5)),
        )
    )
    add(
        Case(
            "A-B cycle identical results x5",
            "cycle",
            True,
            turns(*[x for _ in range(5) for x in (tool("undo", {}, "ok"), tool("redo", {}, "ok"))]),
        )
    )
    # --- legitimate ----------------------------------------------------------------------------------
    for n in (4, 6, 10, 20):
        add(
            Case(
                f"paging x{n}",
                "paging",
                False,
                turns(*[tool("list_items", {"page": p}, f"items {p}") for p in range(1, n + 1)]),
            )
        )
    add(
        Case(
            "cursor paging",
            "paging",
            False,
            turns(*[tool("list", {"cursor": f"eyJvZmZzZXQiOj{i}"}, f"page {i}") for i in range(8)]),
        )
    )
    add(
        Case(
            "offset paging, same results",
            "paging",
            False,
            turns(*[tool("list", {"offset": 50 * i, "limit": 50}, "[]") for i in range(6)]),
        )
    )
    for n in (2, 3, 5):
        add(
            Case(
                f"retry with corrected query x{n}",
                "retry",
                False,
                turns(
                    *[
                        tool("search", {"query": f"weather in paris attempt {i}"}, "none", error=i < n - 1)
                        for i in range(n)
                    ]
                ),
            )
        )
    add(
        Case(
            "retry same call once after error",
            "retry",
            False,
            turns(tool("fetch", {"url": "u"}, "HTTP 503", error=True), tool("fetch", {"url": "u"}, "<html>")),
        )
    )
    add(
        Case(
            "retry same call twice after errors",
            "retry",
            False,
            turns(
                tool("fetch", {"url": "u"}, "HTTP 503", error=True),
                tool("fetch", {"url": "u"}, "HTTP 503", error=True),
                tool("fetch", {"url": "u"}, "<html>"),
            ),
        )
    )
    add(
        Case(
            "retry with backoff parameter",
            "retry",
            False,
            turns(*[tool("fetch", {"url": "u", "timeout": t}, "timeout", error=True) for t in (5, 10, 20, 40)]),
        )
    )
    add(
        Case(
            "retry after error, other tool",
            "retry",
            False,
            turns(
                tool("read_file", {"path": "a"}, "ENOENT", error=True),
                tool("list_dir", {"path": "."}, "b"),
                tool("read_file", {"path": "b"}, "text"),
            ),
        )
    )
    add(
        Case(
            "retry with fixed argument type",
            "retry",
            False,
            turns(tool("set", {"n": "5"}, "type error", error=True), tool("set", {"n": 5}, "ok")),
        )
    )
    for n in (6, 10):
        add(
            Case(
                f"polling with progress x{n}",
                "polling",
                False,
                turns(*[tool("job_status", {"job_id": "j1"}, {"progress": 10 * i}) for i in range(n)]),
            )
        )
    add(
        Case(
            "polling, progress then done",
            "polling",
            False,
            turns(*[tool("status", {"id": 1}, s) for s in ("queued", "running 10%", "running 60%", "done")]),
        )
    )
    add(
        Case(
            "read-edit over files",
            "workflow",
            False,
            turns(*[x for f in "abcdef" for x in (tool("read_file", {"path": f}, f), tool("edit", {"path": f}, "ok"))]),
        )
    )
    add(
        Case(
            "different searches",
            "workflow",
            False,
            turns(*[tool("search", {"query": q}, q) for q in ("paris", "london", "rome", "oslo", "lima")]),
        )
    )
    add(Case("exactly max repeats", "retry", False, turns(*same("search", {"query": "x"}, 3))))
    add(
        Case(
            "A-B cycle exactly max",
            "workflow",
            False,
            turns(*[x for _ in range(3) for x in (tool("a", {}, "1"), tool("b", {}, "2"))]),
        )
    )
    add(Case("batch over items", "workflow", False, turns(*[tool("process", {"item_id": i}, "ok") for i in range(30)])))
    add(
        Case(
            "three tools",
            "workflow",
            False,
            turns(
                tool("get_weather", {"city": "Paris"}, "sun"),
                tool("search", {"query": "x"}, "y"),
                tool("read_file", {"path": "p"}, "t"),
            ),
        )
    )
    add(Case("no tools", "workflow", False, run(llm())))
    c.extend(fixture_cases())
    return c


def fixture_cases() -> list[Case]:
    out = []
    for path in fixture_files():
        (t,) = build_trajectories(normalize(s) for s in read_path(str(path)))
        if not all(s.tool is not None and s.tool.arguments_captured for s in t.tool_steps):
            continue  # not evaluable without arguments: covered by test_on_fixtures
        name = str(path.relative_to(FIXTURES).with_suffix(""))
        out.append(Case(name, FIXTURE_CATEGORY.get(path.stem, "workflow"), path.stem == "repeat_six", t))
    return out


def classify(t: Trajectory) -> bool:
    (result,) = grade_run(CONFIG, t).results
    assert result.status in ("pass", "fail")
    return result.status == "fail"


def test_labelled_set_precision_recall_and_false_positives_on_retries() -> None:
    labelled = cases()
    assert len(labelled) >= 40
    assert len(fixture_cases()) >= 40, "the real fixtures with captured arguments joined the set"
    tp = fp = fn = tn = 0
    wrong: list[str] = []
    for case in labelled:
        predicted = classify(case.trajectory)
        tp += predicted and case.loop
        fp += predicted and not case.loop
        fn += (not predicted) and case.loop
        tn += (not predicted) and not case.loop
        if predicted != case.loop:
            wrong.append(case.name)
    legit_retries = [c for c in labelled if not c.loop and c.category in ("retry", "paging", "polling")]
    retry_fp = sum(classify(c.trajectory) for c in legit_retries)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    fpr_retries = retry_fp / len(legit_retries)
    print(
        f"\nloop grader, labelled set of {len(labelled)} runs ({tp + fn} loops, {tn + fp} legitimate): "
        f"precision {precision:.3f}, recall {recall:.3f}, false positives on {len(legit_retries)} legitimate "
        f"retries/paging/polling runs {fpr_retries:.1%}; misclassified: {wrong or 'none'}"
    )
    assert fpr_retries < 0.05
    assert precision >= 0.95
    assert recall >= 0.9
