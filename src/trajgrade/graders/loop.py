"""The ``loop`` grader (deterministic-graders spec, user story 2): thrashing on the same action.

An action is a tool call: its tool name and its argument values. Model calls are judged through the actions
they ask for, since what an agent does is its tool calls. Two calls are *similar* when they call the same tool
and the fraction of their argument values that are equal reaches ``similarity_threshold`` (default 0.9).
Values are compared, not text: arguments are flattened to leaf paths (``filters.page``); numbers, booleans
and nulls must be equal; strings must be equal after trimming, folding case and collapsing white space. So a
page number or a cursor that changes makes two calls different (paging is progress), and so does a retry
with a corrected query. Similarity is ``equal leaves / all leaves`` over the union of paths (two calls with
no arguments are identical).

A loop is a block of 1 to ``max_cycle_period`` (default 3) consecutive calls that repeats back to back,
each call similar to the one a period before it (A A A A, or A B A B A B), more than ``max_repeats`` times
(default 3) in a row. Model calls between the tool calls do not break a repetition. Calls whose results are
captured and change from one repetition to the next are progress (polling that moves on, retries that now
succeed), not a loop: a repetition counts only while the results stay the same or were not captured.

``tools`` (regexes, unanchored) limits the check to matching tools. The score is 1 without loops, else
``max_repeats / longest repetition``. Evidence lists each loop's span ids and the similarity of each call
to the one a period before it. Arguments not captured: not evaluable (nothing to compare).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, field_validator

from trajgrade.graders.base import Evidence, GraderConfig, GraderResult, GraderSpec, not_evaluable
from trajgrade.patterns import compile_pattern, search
from trajgrade.trajectory.model import Step, Trajectory

__all__ = ["SPECS", "similarity"]

_MAX_LEAVES = 256


class LoopConfig(GraderConfig):
    max_repeats: Annotated[int, Field(ge=1, strict=True)] = 3
    similarity_threshold: Annotated[float, Field(gt=0, le=1)] = 0.9
    tools: tuple[str, ...] | None = None
    max_cycle_period: Annotated[int, Field(ge=1, le=10, strict=True)] = 3

    @field_validator("tools")
    @classmethod
    def _regexes(cls, tools: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for pattern in tools or ():
            compile_pattern(pattern)
        return tools


def _leaves(value: Any, path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {} if out is None else out
    if len(out) >= _MAX_LEAVES:
        return out
    if isinstance(value, dict):
        if not value:
            out[path] = "{}"
        for k, v in value.items():
            _leaves(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list | tuple):
        if not value:
            out[path] = "[]"
        for i, v in enumerate(value):
            _leaves(v, f"{path}[{i}]", out)
    elif isinstance(value, str):
        out[path] = " ".join(value.split()).casefold()  # runs of whitespace as one space
    else:
        out[path] = value if not isinstance(value, float) or not value.is_integer() else int(value)
    return out


def _flatten(arguments: Any) -> dict[str, Any]:
    """``_leaves(arguments)``, without recursion for the usual case: a flat object of scalars."""
    if type(arguments) is not dict or not 0 < len(arguments) <= _MAX_LEAVES:
        return _leaves(arguments)
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        t = type(v)
        if t is str:
            out[k if type(k) is str else str(k)] = " ".join(v.split()).casefold()
        elif t is int or t is bool or v is None:
            out[k if type(k) is str else str(k)] = v
        elif t is float:
            out[k if type(k) is str else str(k)] = int(v) if v.is_integer() else v
        else:
            return _leaves(arguments)
    return out


def similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Fraction of equal leaf values over the union of leaf paths of two flattened argument sets."""
    if not a and not b:
        return 1.0
    shared = equal = 0
    for k, v in a.items():
        if k in b:
            shared += 1
            w = b[k]
            if w == v and type(w) is type(v):
                equal += 1
    return equal / (len(a) + len(b) - shared)


def _result_key(step: Step) -> bytes | None:
    """A digest of the whole result (keys sorted), so that results differing anywhere count as progress."""
    if step.tool is None or not step.tool.result_captured:
        return None
    try:
        text = json.dumps(step.tool.result, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = str(step.tool.result)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _loops(
    calls: Sequence[Step], leaves: Sequence[dict[str, Any]], c: LoopConfig
) -> list[tuple[int, int, int, list[float]]]:
    """(start, end, period, similarities) of every repetition longer than max_repeats, longest first."""
    found: list[tuple[int, int, int, list[float]]] = []
    n = len(calls)
    results: list[bytes | None | bool] = [False] * n  # computed on first use: most pairs never get that far

    def result(k: int) -> bytes | None:
        if results[k] is False:
            results[k] = _result_key(calls[k])
        return results[k]  # type: ignore[return-value]

    for period in range(1, c.max_cycle_period + 1):
        i = period
        while i < n:
            start = i - period
            sims: list[float] = []
            j = i
            while j < n:
                a, b = calls[j], calls[j - period]
                if a.tool is None or b.tool is None or a.tool.name != b.tool.name:
                    break
                sim = similarity(leaves[j], leaves[j - period])
                if sim < c.similarity_threshold:
                    break
                ra, rb = result(j), result(j - period)
                if ra is not None and rb is not None and ra != rb:
                    break  # the outcome changed: progress
                sims.append(sim)
                j += 1
            matched = j - i
            repeats = (matched + period) // period  # whole blocks, the first included
            if repeats > c.max_repeats and (period == 1 or not _is_shorter_cycle(calls, leaves, start, period)):
                found.append((start, start + repeats * period, period, sims[: repeats * period - period]))
            i = max(j, i + 1) if matched else i + 1
    found.sort(key=lambda f: (-(f[1] - f[0]), f[0]))
    kept: list[tuple[int, int, int, list[float]]] = []
    for f in found:
        if not any(k[0] <= f[0] and f[1] <= k[1] for k in kept):
            kept.append(f)
    return kept


def _is_shorter_cycle(calls: Sequence[Step], leaves: Sequence[dict[str, Any]], start: int, period: int) -> bool:
    """A block of period p that is itself a repetition of a shorter period is reported at that period."""
    block = [
        (s.tool.name if s.tool else None, a)
        for s, a in zip(calls[start : start + period], leaves[start:], strict=False)
    ]
    return any(period % q == 0 and all(block[k] == block[k % q] for k in range(period)) for q in range(1, period))


def loop(t: Trajectory, c: LoopConfig, name: str) -> GraderResult:
    calls = [s for s in t.tool_steps if s.tool is not None]
    if c.tools:
        calls = [s for s in calls if s.tool is not None and any(search(p, s.tool.name) for p in c.tools)]
    if calls and not any(s.tool is not None and s.tool.arguments_captured for s in calls):
        return not_evaluable(
            name, "loop", "tool arguments were not captured (enable content capture)", limit=c.max_repeats
        )
    leaves = [_flatten(s.tool.arguments if s.tool is not None else None) for s in calls]
    loops = _loops(calls, leaves, c)
    if not loops:
        text = f"no action repeated more than {c.max_repeats} times in a row ({len(calls)} tool calls checked)"
        return GraderResult(
            name=name,
            type="loop",
            status="pass",
            score=1.0,
            explanation=text,
            value=0,
            limit=c.max_repeats,
            evidence=(Evidence(text),),
            details={"loops": []},
        )
    evidence: list[Evidence] = []
    details: list[dict[str, Any]] = []
    longest = 0
    for start, end, period, sims in loops:
        block = calls[start:end]
        repeats = (end - start) // period
        longest = max(longest, repeats)
        names = " -> ".join(s.tool.name for s in block[:period] if s.tool is not None)
        scores = ", ".join(f"{s:.2f}" for s in sims)
        evidence.append(
            Evidence(
                f"{names} repeated {repeats} times in a row (period {period}, max {c.max_repeats}); "
                f"similarity to the call a period before: [{scores}]",
                tuple(s.span_id for s in block),
            )
        )
        details.append(
            {
                "tools": names,
                "period": period,
                "repeats": repeats,
                "span_ids": [s.span_id for s in block],
                "similarities": [round(s, 4) for s in sims],
            }
        )
    return GraderResult(
        name=name,
        type="loop",
        status="fail",
        score=c.max_repeats / longest,
        explanation=f"loop detected: {evidence[0].description}",
        value=longest,
        limit=c.max_repeats,
        evidence=tuple(evidence),
        details={"loops": details},
    )


SPECS = (
    GraderSpec(
        "loop",
        LoopConfig,
        loop,
        "no action (tool + argument values) repeated more than max_repeats times",
        needs=("tool_arguments",),
    ),
)
