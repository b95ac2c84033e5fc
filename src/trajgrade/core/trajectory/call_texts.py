"""A run's tool calls numbered by the text their arguments, or their result, are parsed from.

Two calls of one tool whose arguments are parsed by the same function from equal text (``ToolCall``'s
``arguments_text``) have arguments parsed alike: the graders that compare calls (the loop search, ``max-repeat``
and ``loop-outcome``, the comparison with a baseline) compare or write such calls once per text. They share one
numbering of a run per grading (``grading_fact(t, call_texts)``): each text is read and compared once, not once
per grader.

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as it
runs on every tool call of every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, cast

from trajgrade.core.trajectory.model import Step, Trajectory

__all__ = ["CallTexts", "call_texts"]

#: Distinct texts the numbering keeps while it numbers the calls.
_MAX_KEPT: Final = 4096


class CallTexts:
    """The tool calls of ``steps`` numbered by tool, text and parser: the calls of one tool whose arguments (or
    results) were captured and are parsed by the same function from equal text have the same number, the position
    of the first of them among the calls numbered. Only the texts of one parser are numbered (the first met: a
    run's spans have one); a call without such a text has no number (None).

    Each numbering is made on first use and kept (a reference per call). While it is made, at most ``_MAX_KEPT``
    texts are kept; past that they are dropped and kept anew: a run that never repeats a text keeps none beside
    its own, and two calls of equal text may then have other numbers (a number is never shared by other text).
    """

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = steps if isinstance(steps, tuple) else tuple(steps)
        self._arguments: list[int | None] | None = None
        self._results: list[int | None] | None = None

    def arguments_of(self, calls: Sequence[Step]) -> list[int | None]:
        """The number of each call's argument text, among ``calls`` (read only)."""
        numbers = self._arguments
        if numbers is None:
            numbers = self._arguments = _numbered(self.steps, True)
        return self._of(numbers, calls)

    def results_of(self, calls: Sequence[Step]) -> list[int | None]:
        """The number of each call's result text, among ``calls`` (read only)."""
        numbers = self._results
        if numbers is None:
            numbers = self._results = _numbered(self.steps, False)
        return self._of(numbers, calls)

    def _of(self, numbers: list[int | None], calls: Sequence[Step]) -> list[int | None]:
        """``numbers`` itself when ``calls`` are the steps numbered. Else the calls found in order among them (the
        calls of some tools) numbered by their position among ``calls`` (None from the first call not found on)."""
        steps = self.steps
        n = len(steps)
        if len(calls) == n:
            for i, call in enumerate(calls):
                if call is not steps[i]:
                    break
            else:
                return numbers
        out: list[int | None] = [None] * len(calls)
        first = [-1] * n  # by number: the position of its first call among ``calls``
        k = 0
        for i, call in enumerate(calls):
            while k < n and steps[k] is not call:
                k += 1
            if k == n:
                break
            number = numbers[k]
            if number is not None:
                at = first[number]
                if at < 0:
                    at = first[number] = i
                out[i] = at
            k += 1
        return out


def call_texts(t: Trajectory) -> CallTexts:
    """The numbering of ``t``'s tool calls (the fact the graders of a grading share)."""
    return CallTexts(t.tool_steps)


def _numbered(steps: tuple[Step, ...], arguments: bool) -> list[int | None]:
    """Each step's number (``CallTexts``), by arguments or by result. The steps of a text share one int object (an
    ``object`` here: compiled code would make an int for each step it stores as an int)."""
    numbers: list[int | None] = [None] * len(steps)
    by_text: dict[str, object] = {}  # the number of each text, of the tool that called it first
    by_tool: dict[str, dict[str, object]] = {}  # of the other tools, by tool name
    kept = 0
    parser: Any = None
    for k, step in enumerate(steps):
        tool = step.tool
        if tool is None:
            continue
        if arguments:
            if not tool.arguments_captured:
                continue
            text = tool.arguments_text
            of = tool.arguments_parser
        else:
            if not tool.result_captured:
                continue
            text = tool.result_text
            of = tool.result_parser
        if text is None:
            continue
        if parser is None:
            parser = of
        elif of is not parser:
            continue
        number = by_text.get(text)
        if number is None:
            number = by_text[text] = cast(object, k)  # (made once)
            kept += 1
        elif _tool_name(steps[cast(int, number)]) != tool.name:
            of_tool = by_tool.get(tool.name)
            if of_tool is None:
                of_tool = by_tool[tool.name] = {}
            number = of_tool.get(text)
            if number is None:
                number = of_tool[text] = cast(object, k)
                kept += 1
        numbers[k] = cast("int | None", number)
        if kept >= _MAX_KEPT:
            by_text.clear()
            by_tool.clear()
            kept = 0
    return numbers


def _tool_name(step: Step) -> str | None:
    return step.tool.name if step.tool is not None else None
