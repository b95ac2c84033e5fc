"""How the ``tool-calls`` grader matches a call's data: its string arguments and its result against a matcher's
regexes (the rules are in ``tool_calls.py``'s docstring).

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as a
matcher runs on every call whose tool name it matches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from trajgrade.core.trajectory.model import Step

__all__ = ["ConfigProblem", "DataMatcher", "each_matched"]

#: A text test: a config regex set (``patterns.matcher``).
Test = Callable[[str], bool]


class ConfigProblem(Exception):
    """A command/path matcher met a call whose name matches but that lacks that argument."""


def _string_arg(arguments: Any, key: str) -> str | None:
    value = arguments.get(key) if isinstance(arguments, dict) else None
    return value if isinstance(value, str) else None


def _result_texts(result: Any) -> tuple[str, ...]:
    if isinstance(result, str):
        return (result,)
    try:
        compact = json.dumps(result, separators=(",", ":"), ensure_ascii=False, default=str)
        return (compact, json.dumps(result, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return (str(result),)


#: Answers an argument's test keeps (a run's calls repeat their argument values); past it, it keeps no more.
_ANSWERS_KEPT: Final = 4096


class _ArgumentTest:
    """One argument's test, with its answer for each value met so far."""

    def __init__(self, key: str, test: Test) -> None:
        self.key = key
        self.test = test
        self.answers: dict[str, bool] = {}

    def matches(self, value: str) -> bool:
        answer = self.answers.get(value)
        if answer is None:
            answer = self.test(value)
            if len(self.answers) < _ANSWERS_KEPT:
                self.answers[value] = answer
        return answer


class DataMatcher:
    """Whether a call whose name matches a matcher matches it: True / False, or None when that depends on data the
    spans did not capture. ``required``: (argument, test) of ``command`` / ``path`` (a call lacking the argument is
    a :class:`ConfigProblem`); ``args``: (argument, test) of ``args``; ``result``: the test of ``result``."""

    def __init__(
        self, required: tuple[tuple[str, Test], ...], args: tuple[tuple[str, Test], ...], result: Test | None
    ) -> None:
        self.required = [_ArgumentTest(key, test) for key, test in required]
        self.args = [_ArgumentTest(key, test) for key, test in args]
        self.result = result

    def match(self, step: Step) -> bool | None:
        tool = step.tool
        if tool is None:
            return False
        unknown = False
        if self.required or self.args:
            if not tool.arguments_captured:
                unknown = True
            else:
                arguments = tool.arguments
                for test in self.required:
                    key = test.key
                    value = _string_arg(arguments, key)
                    if value is None:
                        raise ConfigProblem(
                            f"{key} matcher on {tool.name!r}, but call {step.span_id} has no string {key!r} "
                            f"argument (use args: {{{key}: ...}} to match across tools that may lack it)"
                        )
                    if not test.matches(value):
                        return False
                for test in self.args:
                    value = _string_arg(arguments, test.key)
                    if value is None or not test.matches(value):
                        return False
        result = self.result
        if result is not None:
            if not tool.result_captured:
                unknown = True
            elif not any(result(text) for text in _result_texts(tool.result)):
                return False
        return None if unknown else True


def each_matched(
    calls: Sequence[Step],
    names: Sequence[str],
    verdicts: dict[str, bool],
    data: DataMatcher,
    numbers: list[int | None],
) -> list[bool | None]:
    """``data.match(call)`` on each call (of tool ``names``) whose name ``verdicts`` accepts, False on the others.
    ``numbers``: each call's number by its argument text, among ``calls`` (``CallTexts.arguments_of``): when the
    matcher reads no result, a call of the same tool and text as an earlier one has equal arguments, and its
    answer."""
    by_text = data.result is None
    out: list[bool | None] = []
    for i, name in enumerate(names):
        if not verdicts[name]:
            out.append(False)
            continue
        first = numbers[i]
        out.append(out[first] if by_text and first is not None and first < i else data.match(calls[i]))
    return out
