"""How the ``loop`` grader finds repetitions: arguments flattened to leaves, their similarity, the search for
blocks of calls repeated back to back, the words its evidence gives them, and the same followed call by call in
flight (the rules are in ``loop.py``'s docstring).

This module has no pydantic model and no config: it is compiled with mypyc at install (``setup.py``), as
it runs on every tool call of every run, and a long run of loops has thousands to write.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from trajgrade.core.graders.base import Evidence, GraderResult
from trajgrade.core.graders.steps import call_names
from trajgrade.core.graders.watch import Repetitions, RunSoFar
from trajgrade.core.trajectory.call_texts import CallTexts
from trajgrade.core.trajectory.model import Step

__all__ = ["LoopWatch", "Seen", "describe_loops", "find_loops", "flatten", "repeated", "result_key", "similarity"]

_MAX_LEAVES: Final = 256


#: Folded strings and leaf paths a search keeps (the same values and paths come back call after call).
_MAX_SEEN: Final = 4096


class Seen:
    """What flattening has met so far in one search: each string's folded form, and each leaf path by the path of
    its container and its key (a dict's key or a list's index), so that the calls' leaves share one string per
    path instead of each building its own. Each holds at most ``_MAX_SEEN`` entries."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.paths: dict[str, dict[str | int, str]] = {}
        self.path_count = 0

    def children(self, path: str) -> dict[str | int, str] | None:
        """The paths met under ``path`` (filled as they are met), or None once the paths kept are at their limit."""
        paths = self.paths.get(path)
        if paths is None and self.path_count < _MAX_SEEN:
            paths = self.paths[path] = {}
            self.path_count += 1
        return paths

    def keep(self, paths: dict[str | int, str], key: str | int, path: str) -> str:
        """``path``, kept in ``paths`` (from :meth:`children`) under ``key`` while there is room."""
        if self.path_count < _MAX_SEEN:
            paths[key] = path
            self.path_count += 1
        return path


def _text(value: str, seen: Seen | None) -> str:
    """``value`` with runs of white space as one space, case folded; kept in ``seen`` when given."""
    if seen is None:
        return " ".join(value.split()).casefold()
    texts = seen.texts
    folded = texts.get(value)
    if folded is None:
        folded = " ".join(value.split()).casefold()
        if len(texts) < _MAX_SEEN:
            texts[value] = folded
    return folded


def _leaf(value: Any, seen: Seen | None) -> Any:
    if isinstance(value, str):
        return _text(value, seen)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _key_path(path: str, k: Any, paths: dict[str | int, str] | None, seen: Seen | None) -> str:
    """The path of the value at key ``k`` of the object at ``path``; the one ``seen`` kept when it is a string key
    met before."""
    if paths is None or seen is None or type(k) is not str:
        return f"{path}.{k}" if path else str(k)
    known = paths.get(k)
    if known is not None:
        return known
    return seen.keep(paths, k, f"{path}.{k}" if path else k)


def _index_path(path: str, i: int, paths: dict[str | int, str] | None, seen: Seen | None) -> str:
    """The path of the item at index ``i`` of the list at ``path``, as :func:`_key_path`."""
    if paths is None or seen is None:
        return f"{path}[{i}]"
    known = paths.get(i)
    if known is not None:
        return known
    return seen.keep(paths, i, f"{path}[{i}]")


def _leaves(value: Any, path: str = "", out: dict[str, Any] | None = None, seen: Seen | None = None) -> dict[str, Any]:
    out = {} if out is None else out
    if len(out) >= _MAX_LEAVES:
        return out
    if isinstance(value, dict):
        if not value:
            out[path] = "{}"
        paths = seen.children(path) if seen is not None else None
        for k, v in value.items():
            key = _key_path(path, k, paths, seen)
            if isinstance(v, (dict, list, tuple)):
                _leaves(v, key, out, seen)
            elif len(out) < _MAX_LEAVES:
                out[key] = _leaf(v, seen)
    elif isinstance(value, (list, tuple)):
        if not value:
            out[path] = "[]"
        paths = seen.children(path) if seen is not None else None
        for i, v in enumerate(value):
            key = _index_path(path, i, paths, seen)
            if isinstance(v, (dict, list, tuple)):
                _leaves(v, key, out, seen)
            elif len(out) < _MAX_LEAVES:
                out[key] = _leaf(v, seen)
    else:
        out[path] = _leaf(value, seen)
    return out


def flatten(arguments: Any, seen: Seen | None = None) -> dict[str, Any]:
    """``_leaves(arguments)``, without recursion for the usual case: a flat object of scalars. ``seen`` keeps the
    folded strings and the leaf paths across calls (a search over a run passes one)."""
    if type(arguments) is not dict or not 0 < len(arguments) <= _MAX_LEAVES:
        return _leaves(arguments, seen=seen)
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        t = type(v)
        if t is str:
            out[k if type(k) is str else str(k)] = _text(v, seen)
        elif t is int or t is bool or v is None:
            out[k if type(k) is str else str(k)] = v
        elif t is float:
            out[k if type(k) is str else str(k)] = int(v) if v.is_integer() else v
        else:
            return _leaves(arguments, seen=seen)
    return out


#: (Final: compiled code reads it as a constant, not from the module's namespace on every leaf.)
_ABSENT: Final[Any] = object()


def similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Fraction of equal leaf values over the union of leaf paths of two flattened argument sets."""
    if not a and not b:
        return 1.0
    shared = equal = 0
    for k, v in a.items():
        w = b.get(k, _ABSENT)
        if w is not _ABSENT:
            shared += 1
            if w == v and type(w) is type(v):
                equal += 1
    return equal / (len(a) + len(b) - shared)


#: ``json.dumps(value, sort_keys=True, default=str)``, its encoder made once.
_CANONICAL: Final = json.JSONEncoder(sort_keys=True, default=str)


def result_key(step: Step) -> bytes | None:
    """A digest of the whole result (keys sorted), so that results differing anywhere count as progress."""
    if step.tool is None or not step.tool.result_captured:
        return None
    try:
        text = _CANONICAL.encode(step.tool.result)
    except (TypeError, ValueError):
        text = str(step.tool.result)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _arguments(step: Step, seen: Seen | None = None) -> dict[str, Any]:
    return flatten(step.tool.arguments if step.tool is not None else None, seen)


class _Leaves:
    """A call's flattened arguments, with their paths and their values also in order: two calls with the same paths
    (most similar calls: the same tool, its arguments of the same shape) are compared value by value, without a
    lookup per path. ``number``: the argument text's number (``CallTexts``), None when it has none (arguments not
    parsed from text, or by another parser); ``known``: its similarity to the leaves of earlier texts met so far (its
    index among ``_Flattened.values``), by those leaves."""

    def __init__(self, by_path: dict[str, Any], number: int | None = None) -> None:
        self.by_path = by_path
        self.paths = tuple(by_path)
        self.values = list(by_path.values())
        self.number = number
        self.known: dict[_Leaves, int] = {}

    def similarity(self, before: _Leaves) -> float:
        """``similarity(self.by_path, before.by_path)``."""
        if self.paths != before.paths:
            return similarity(self.by_path, before.by_path)
        values, earlier = self.values, before.values
        n = len(values)
        if not n:
            return 1.0
        equal = 0
        for i in range(n):
            v, w = values[i], earlier[i]
            # the same string object is equal to itself (a float may not be: NaN)
            if (w is v and type(v) is str) or (w == v and type(w) is type(v)):
                equal += 1
        return equal / n


class _Flattened:
    """The leaves of the calls of one search, flattened once per argument text (a loop repeats the same
    arguments: the run's ``CallTexts``), and the similarity of two such texts computed once per pair met. Past
    ``_MAX_SEEN`` texts (or pairs) what is kept is dropped and kept anew, so that the texts a long run repeats late
    are kept too."""

    def __init__(self, numbers: list[int | None]) -> None:
        self.seen = Seen()
        self.numbers = numbers  # by call
        self.by_number: dict[int | None, _Leaves] = {}  # never by None
        self.pairs = 0  # the similarities kept in the leaves' ``known``
        # Each similarity met, once: the search records a similarity by its index here, a small int (a float
        # would be a new object for each call). A similarity is equal leaves over all leaves, each count at most
        # twice ``_MAX_LEAVES``: the values met are bounded.
        self.values: list[float] = []
        self.indices: dict[float, int] = {}

    def leaves(self, step: Step, j: int) -> _Leaves:
        """The leaves of ``step``, call ``j`` of the search."""
        number = self.numbers[j]
        # looked up before it is known not to be None: compiled code would make the int anew as a key
        known = self.by_number.get(number)
        if known is not None:
            return known
        leaves = _Leaves(_arguments(step, self.seen), number)
        if number is not None:
            if len(self.by_number) >= _MAX_SEEN:
                self.by_number.clear()
            self.by_number[number] = leaves
        return leaves

    def similarity_index(self, leaves: _Leaves, before: _Leaves) -> int:
        """The index among ``values`` of ``leaves.similarity(before)``, kept for a pair of texts in ``leaves.known``
        (looked up by the leaves themselves: a pair of numbers as the key would make an int object at every
        look-up). Past ``_MAX_SEEN`` pairs, the leaves kept are dropped, and with them what they know."""
        if leaves.number is None or before.number is None:
            return self._index(leaves.similarity(before))
        known = leaves.known
        index = known.get(before)
        if index is None:
            index = self._index(leaves.similarity(before))
            if self.pairs >= _MAX_SEEN:
                self.by_number.clear()
                self.pairs = 0
                known.clear()
            known[before] = index
            self.pairs += 1
        return index

    def _index(self, similarity: float) -> int:
        index = self.indices.get(similarity)
        if index is None:
            index = self.indices[similarity] = len(self.values)
            self.values.append(similarity)
        return index


def _similarities(
    calls: list[Step], threshold: float, max_period: int, texts: CallTexts, names: tuple[str | None, ...]
) -> tuple[list[list[int]], list[float]]:
    """``similar[period][j]``: the similarity of call j to call j - period (its index among the similarities met,
    returned beside), or -1 when the two are not the same action (another tool, a similarity under ``threshold``,
    or a result that changed).

    Each call is compared with each of the ``max_period`` calls before it of the same tool, flattening the
    arguments of the calls compared (once per distinct text; only those of the last ``max_period`` calls are
    kept beside).
    """
    n = len(calls)
    # Each call's result digest, made on first use (most pairs never get that far): False until then.
    results: list[bytes | None | bool] = [False] * n
    similar = [[] if period == 0 else [-1] * n for period in range(max_period + 1)]  # row 0: unused
    # The leaves of call k at recent[k % size], flattened when first compared (None until then).
    size = max_period + 1
    recent: list[_Leaves | None] = [None] * size
    flattened = _Flattened(texts.arguments_of(calls))
    values = flattened.values
    for j in range(n):
        recent[j % size] = None
        name = names[j]
        for period in range(1, min(max_period, j) + 1):
            if name is None or name != names[j - period]:
                continue  # another tool, or a call without one
            a, b = calls[j].tool, calls[j - period].tool
            if a is None or b is None:
                continue
            leaves = recent[j % size]
            if leaves is None:
                leaves = recent[j % size] = flattened.leaves(calls[j], j)
            before = recent[(j - period) % size]
            if before is None:
                before = recent[(j - period) % size] = flattened.leaves(calls[j - period], j - period)
            index = flattened.similarity_index(leaves, before)
            if values[index] < threshold:
                continue
            if a.same_result_text(b):  # the same outcome, without a digest of each
                similar[period][j] = index
                continue
            ra = results[j]
            if ra is False:
                ra = results[j] = result_key(calls[j])
            rb = results[j - period]
            if rb is False:
                rb = results[j - period] = result_key(calls[j - period])
            if ra is not None and rb is not None and ra != rb:
                continue  # the outcome changed: progress
            similar[period][j] = index
    return similar, values


def find_loops(
    calls: list[Step],
    max_repeats: int,
    threshold: float,
    max_period: int,
    texts: CallTexts | None = None,
    names: tuple[str | None, ...] | None = None,
) -> list[tuple[int, int, int, tuple[float, ...]]]:
    """(start, end, period, similarities) of every repetition longer than max_repeats, longest first.

    One pass compares each call with each of the ``max_period`` calls before it (``_similarities``), the calls of
    one argument text as one (``texts``: the run's numbering of its calls, by default one of ``calls``), and of
    another tool told by name (``names``: the calls' tool names, ``steps.tool_columns``, by default read from the
    calls). Then, for each period, the runs of calls similar to the call a period before are read from what that
    pass recorded.
    """
    n = len(calls)
    if names is None:
        names = call_names(calls)
    numbered = texts if texts is not None else CallTexts(calls)
    similar, values = _similarities(calls, threshold, max_period, numbered, names)
    # Tuples of numbers: what the garbage collector stops tracking at its first look (a long run's thousands of
    # loops would be walked by every collection while they are graded). A run's loops mostly repeat the same few
    # similarities: each tuple of them is made once, by the tuple of their indices.
    found: list[tuple[int, int, int, tuple[float, ...]]] = []
    shared: dict[tuple[int, ...], tuple[float, ...]] = {}
    for period in range(1, max_period + 1):
        row = similar[period]
        i = period
        while i < n:
            start = i - period
            j = i
            while j < n and row[j] >= 0:
                j += 1
            matched = j - i
            repeats = (matched + period) // period  # whole blocks, the first included
            if repeats > max_repeats and (period == 1 or not _is_shorter_cycle(calls, start, period)):
                indices = tuple(row[i : start + repeats * period])
                sims = shared.get(indices)
                if sims is None:
                    sims = shared[indices] = tuple([values[k] for k in indices])
                found.append((start, start + repeats * period, period, sims))
            i = max(j, i + 1) if matched else i + 1
    found.sort(key=lambda f: (-(f[1] - f[0]), f[0]))
    kept: list[tuple[int, int, int, tuple[float, ...]]] = []
    # The kept spans, by start: none holds another (each is kept only when no longer or equal one holds it), so
    # their ends rise with their starts, and the one starting last at or before a span is the only one that can
    # hold it.
    starts: list[int] = []
    ends: list[int] = []
    for f in found:
        at = bisect.bisect_right(starts, f[0])
        if at and ends[at - 1] >= f[1]:
            continue
        kept.append(f)
        starts.insert(at, f[0])
        ends.insert(at, f[1])
    return kept


#: A loop as its evidence describes it: the tool names of one period of its calls, its repeats, its period and the
#: similarity of each call to the one a period before.
_Loop = tuple[tuple[str | None, ...], int, int, tuple[float, ...]]


def describe_loops(
    loops: list[tuple[int, int, int, tuple[float, ...]]],
    names: tuple[str | None, ...],
    span_ids: tuple[str, ...],
    max_repeats: int,
) -> tuple[int, list[Evidence], list[dict[str, Any]]]:
    """The longest repetition among ``loops`` (``find_loops``), and each loop's evidence and details, its calls'
    tool ``names`` and ``span_ids`` beside them (``steps.tool_columns``). A run's loops mostly repeat the same few
    tools, lengths and similarities: each such loop is described once."""
    evidence: list[Evidence] = []
    details: list[dict[str, Any]] = []
    longest = 0
    written: dict[_Loop, tuple[str, str, tuple[float, ...]]] = {}
    for start, end, period, sims in loops:
        repeats = (end - start) // period
        if repeats > longest:
            longest = repeats
        key = (names[start : start + period], repeats, period, sims)
        described = written.get(key)
        if described is None:
            described = written[key] = _described(key[0], repeats, period, max_repeats, sims)
        tools, description, rounded = described
        ids = span_ids[start:end]
        evidence.append(Evidence(description, ids))
        details.append(
            {
                "tools": tools,
                "period": period,
                "repeats": repeats,
                "span_ids": ids,  # the evidence's own tuple: tuples of strings and numbers are soon untracked
                "similarities": rounded,
            }
        )
    return longest, evidence, details


def repeated(one_period: Sequence[str | None], repeats: int, period: int, max_repeats: int) -> tuple[str, str]:
    """A repetition's tools (``a -> b``, the tool names of one period of its calls) and what it did, in words."""
    tools = " -> ".join([name for name in one_period if name is not None])
    return tools, f"{tools} repeated {repeats} times in a row (period {period}, max {max_repeats})"


def _described(
    one_period: Sequence[str | None], repeats: int, period: int, max_repeats: int, sims: tuple[float, ...]
) -> tuple[str, str, tuple[float, ...]]:
    """A loop's tools, its evidence's description, with its similarities shown (two decimals), and its similarities
    rounded (four)."""
    tools, text = repeated(one_period, repeats, period, max_repeats)
    distinct = set(sims)
    shown = {s: f"{s:.2f}" for s in distinct}
    rounded = {s: round(s, 4) for s in distinct}
    listed = ", ".join([shown[s] for s in sims])
    return tools, f"{text}; similarity to the call a period before: [{listed}]", tuple([rounded[s] for s in sims])


def _is_shorter_cycle(calls: list[Step], start: int, period: int) -> bool:
    """A block of period p that is itself a repetition of a shorter period is reported at that period."""
    block = [(s.tool.name if s.tool else None, _arguments(s)) for s in calls[start : start + period]]
    return any(period % q == 0 and all(block[k] == block[k % q] for k in range(period)) for q in range(1, period))


class _ResultKey:
    """A call's result digest (``result_key``), made when the call is first found similar to another: most calls
    are not, and their results are never parsed."""

    def __init__(self, step: Step) -> None:
        self._step: Step | None = step
        self._key: bytes | None = None

    def get(self) -> bytes | None:
        if self._step is not None:
            self._key = result_key(self._step)
            self._step = None
        return self._key


#: A call as the in-flight check compares it: tool name, argument leaves (None: not captured), its result's digest.
_Call = tuple[str, dict[str, Any] | None, _ResultKey]


class LoopWatch:
    """The ``loop`` grader checked in flight, call by call: each run follows its repetitions (``start``) and each
    tool call is compared with the ``max_period`` calls before it (``check``); ``found(repeats, period, block)``
    makes the failing result of a repetition past ``max_repeats``, ``block`` its latest calls."""

    def __init__(
        self,
        threshold: float,
        max_repeats: int,
        max_period: int,
        found: Callable[[int, int, list[Step]], GraderResult],
    ) -> None:
        self._threshold = threshold
        self._max_repeats = max_repeats
        self._max_period = max_period
        self._found = found

    def start(self) -> Repetitions:
        return Repetitions(self._max_period, self.similar)

    def similar(self, a: _Call, b: _Call) -> bool:
        """The same tool, arguments similar enough, and the result not changed (a changed result is progress). A call
        whose arguments were not captured is similar to none."""
        leaves_a, leaves_b = a[1], b[1]
        if a[0] != b[0] or leaves_a is None or leaves_b is None or similarity(leaves_a, leaves_b) < self._threshold:
            return False
        key_a, key_b = a[2].get(), b[2].get()
        return key_a is None or key_b is None or key_a == key_b

    def check(self, run: RunSoFar, step: Step | None, repetitions: Repetitions) -> GraderResult | None:
        assert step is not None and step.tool is not None
        tool = step.tool
        leaves = flatten(tool.arguments) if tool.arguments_captured else None
        repeats, period = repetitions.add((tool.name, leaves, _ResultKey(step)), step)
        if repeats <= self._max_repeats:
            return None
        return self._found(repeats, period, repetitions.last(repeats * period))
