"""A run compared with a baseline run: how its tool sequence and its counts moved.

The tool sequence is compared as an edit script over the tool calls, each written ``name(arguments)`` with its
arguments as canonical JSON (sorted keys), so a call with other arguments is a change; the counts compared are
LLM calls, tool calls, total tokens, cost and duration. Runs of two sets are matched by a key: the agent's
name, a root span attribute, or the file each came from.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from trajgrade.core.memo import ByObject
from trajgrade.core.runfiles import FileRun
from trajgrade.core.trajectory.call_texts import CallTexts, call_texts
from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["METRICS", "Comparison", "Edit", "compare", "match_runs", "run_key", "tool_call_text"]

#: The counts compared, as ``Summary`` names them.
METRICS: Final = ("llm_calls", "tool_calls", "total_tokens", "cost_usd", "duration_ms")


Op = Literal["equal", "insert", "delete", "replace"]


@dataclass(frozen=True, slots=True)
class Edit:
    """One step of the edit script from the baseline's tool calls to the candidate's."""

    op: Op
    baseline: tuple[str, ...]
    candidate: tuple[str, ...]
    #: The span ids of the candidate's calls in ``candidate``.
    candidate_spans: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Comparison:
    edits: tuple[Edit, ...]
    #: Tool calls inserted, deleted or replaced (a replacement of two by three counts three).
    edit_count: int
    #: Each metric's (baseline, candidate) value; None where a run does not know it (cost without prices).
    metrics: dict[str, tuple[float | None, float | None]]

    def increase(self, metric: str) -> float | None:
        """The candidate's relative change on ``metric`` (0.1 = 10% more), None when it cannot be computed."""
        before, after = self.metrics[metric]
        if before is None or after is None:
            return None
        if before == 0:
            return 0.0 if after == 0 else float("inf")
        return (after - before) / before

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_edits": self.edit_count,
            "edits": [
                {"op": e.op, "baseline": list(e.baseline), "candidate": list(e.candidate)}
                for e in self.edits
                if e.op != "equal"
            ],
            "metrics": {m: {"baseline": b, "candidate": c} for m, (b, c) in self.metrics.items()},
        }


def tool_call_text(name: str, arguments: Any) -> str:
    if arguments is None:
        return f"{name}()"
    try:
        text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson does not write (an integer past 64 bits, a key not a string)
        try:
            text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(arguments)
    return f"{name}({text})"


def _calls(t: Trajectory, texts: CallTexts | None = None) -> list[str]:
    return _call_texts(t.tool_steps, texts if texts is not None else call_texts(t))


def _call_texts(steps: Sequence[Step], texts: CallTexts | None = None) -> list[str]:
    """Each tool call's text; written once per tool and argument text (``texts``: the run's numbering of its calls,
    by default one of ``steps``), as a run that repeats itself repeats its calls' text."""
    numbers = (texts if texts is not None else CallTexts(steps)).arguments_of(steps)
    out: list[str] = []
    for i, s in enumerate(steps):
        tool = s.tool
        number = numbers[i]
        if number is not None and number < i:
            out.append(out[number])  # the text of the first call of the same text
        elif tool is None:
            out.append(tool_call_text(s.name, None))
        else:
            out.append(tool_call_text(tool.name, tool.arguments))
    return out


#: The call texts of the baselines compared lately, by run: a grader compares every run with the same baseline.
_baseline_calls: Final = ByObject(_calls, 64)


def compare(baseline: Trajectory, candidate: Trajectory, texts: CallTexts | None = None) -> Comparison:
    """How ``candidate`` moved from ``baseline`` (``texts``: the candidate's numbering of its calls, when made)."""
    before, after = _baseline_calls(baseline), _calls(candidate, texts)
    spans = [s.span_id for s in candidate.tool_steps]
    edits: list[Edit] = []
    count = 0
    for op, i1, i2, j1, j2 in _opcodes(before, after):
        edits.append(Edit(op, tuple(before[i1:i2]), tuple(after[j1:j2]), tuple(spans[j1:j2])))
        if op != "equal":
            count += max(i2 - i1, j2 - j1)
    metrics = {m: (getattr(baseline.summary, m), getattr(candidate.summary, m)) for m in METRICS}
    return Comparison(tuple(edits), count, metrics)


def _opcodes(before: list[str], after: list[str]) -> list[tuple[Op, int, int, int, int]]:
    """``difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()``, with only the items of
    ``after`` that ``before`` also has indexed (its ``b2j``): the others can never be part of a match, and most of
    a long run's calls have no counterpart in its baseline."""
    matcher = difflib.SequenceMatcher(None, before, [], autojunk=False)
    wanted = set(before)
    b2j: dict[str, list[int]] = {}
    for j, item in enumerate(after):
        if item in wanted:
            at = b2j.get(item)
            if at is None:
                at = b2j[item] = []
            at.append(j)
    # What set_seq2 sets, with the index made above (difflib's own attributes, which typeshed does not list).
    matcher.b = after  # type: ignore[attr-defined]
    matcher.b2j = b2j  # type: ignore[attr-defined]
    return matcher.get_opcodes()


def run_key(run: Trajectory, key: str, path: str | None = None) -> str | None:
    """What matches a run with its baseline: ``agent`` (the agent's name, else the root span's), ``root`` (the
    root span's name), ``file`` (the file's name), or ``attribute:NAME`` (a root span attribute)."""
    if key == "agent":
        return run.agent_name or run.root_span_name
    if key == "root":
        return run.root_span_name
    if key == "file":
        return Path(path).name if path else None
    if key.startswith("attribute:"):
        value = run.root_attributes.get(key.removeprefix("attribute:"))
        return None if value is None else str(value)
    raise ValueError(f"key {key!r}: use agent, root, file or attribute:NAME")


def match_runs(
    baseline: Sequence[FileRun], candidate: Sequence[FileRun], key: str
) -> tuple[list[tuple[str, FileRun, FileRun]], list[str], list[str]]:
    """Pairs of (key, baseline run, candidate run); then the candidate runs without a baseline, and the baseline
    runs no candidate was paired with. Runs that share a key pair in order; candidates past the baseline runs of
    their key are compared with the last of them (one golden run for every run of an agent)."""
    golden: dict[str, list[FileRun]] = {}
    for run in baseline:
        k = run_key(run.trajectory, key, run.path)
        if k is not None:
            golden.setdefault(k, []).append(run)
    used: dict[str, int] = {}
    pairs: list[tuple[str, FileRun, FileRun]] = []
    unmatched: list[str] = []
    for run in candidate:
        k = run_key(run.trajectory, key, run.path)
        if k is None or k not in golden:
            unmatched.append(k or f"{run.trajectory.root_span_name} ({run.trajectory.trace_id})")
            continue
        n = used.get(k, 0)
        pairs.append((k, golden[k][min(n, len(golden[k]) - 1)], run))
        used[k] = n + 1
    missing = [k for k, runs in golden.items() for _ in range(len(runs) - min(used.get(k, 0), len(runs)))]
    return pairs, unmatched, missing
