"""Graders files read: YAML in, validated graders out, with errors that name the file, line, grader and field.

Both forms of a grader entry may be mixed in one list::

    graders:
      - type: token-budget          # options under `config` (metric-threshold / tool-calls form)
        config: {max: 50000}
      - name: perf                  # options flat beside `type` (execution-metrics form)
        type: execution_metrics
        max_tool_calls: 10
        weight: 2
    scoring: {threshold: 0.8}       # optional; without it every grader must pass

``suites:`` lists ``{name, match, graders, scoring}``; ``match`` selects runs by agent name, root span name,
service name or root-span attributes (regexes, unanchored); the first matching suite wins, and a bare
top-level ``graders:`` is the suite that matches every run. ``evaluators:``, ``assert:`` and
``execution: {evaluators: ...}`` are read as ``graders:``, so AgentV files load as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trajgrade.core.config import Config, Grader, Match, Scoring, Suite
from trajgrade.core.graders.base import GraderSpec
from trajgrade.core.graders.catalogue import CATALOGUE, lookup
from trajgrade.core.graders.options import parse_duration
from trajgrade.core.patterns import check_pattern
from trajgrade.core.trajectory.cost import Price
from trajgrade.exceptions import ConfigError

__all__ = ["MAX_CONFIG_NODES", "load_config", "parse_config"]

Path_ = tuple[str | int, ...]
_ENTRY_KEYS = frozenset({"type", "name", "weight", "enforce", "config"})
_GRADER_LIST_KEYS = ("graders", "evaluators", "assert")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")


def load_config(path: str | Path) -> Config:
    """Load and validate a graders file. Raises :class:`ConfigError` naming the file, line and field."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{source}: cannot read: {e}") from None
    return parse_config(text, source)


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate a graders file given as YAML text."""
    try:
        node, data = _parse_yaml(text)
    except yaml.YAMLError as e:
        raise ConfigError(_yaml_error(source, e)) from None
    if _expanded_size(node) > MAX_CONFIG_NODES:
        raise ConfigError(
            f"{source}: its aliases expand to more than {MAX_CONFIG_NODES:,} YAML nodes "
            "(a graders file is never that large)"
        )
    return _Loader(source, _lines(node)).config(data)


#: libyaml's parser, when PyYAML was built with it: about fifteen times as fast as the pure-Python one.
_FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (its lines) and its data, parsed once. A file libyaml refuses is parsed again by
    the pure-Python parser, whose messages are the ones reported."""
    try:
        return _compose_and_construct(text, _FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
    return _compose_and_construct(text, yaml.SafeLoader)


def _compose_and_construct(text: str, loader_type: type[yaml.SafeLoader]) -> tuple[yaml.Node | None, Any]:
    loader = loader_type(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def _yaml_error(source: str, e: yaml.YAMLError) -> str:
    """``file:line: invalid YAML: problem``, with what the parser was reading and from which line, when it says."""
    mark = getattr(e, "problem_mark", None)
    line = f"{mark.line + 1}:" if mark is not None else ""
    message = f"{source}:{line} invalid YAML: {getattr(e, 'problem', None) or e}"
    context, context_mark = getattr(e, "context", None), getattr(e, "context_mark", None)
    if context and context_mark is not None:
        message += f" ({context} from line {context_mark.line + 1})"
    return message


def _is_amount(value: Any) -> bool:
    """A finite number >= 0 (a weight, a price)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value >= 0


#: The most YAML nodes a graders file may hold once its aliases are expanded (an alias bomb expands to billions).
MAX_CONFIG_NODES = 100_000


def _expanded_size(node: yaml.Node | None) -> int:
    """How many nodes ``node`` holds with every alias expanded, counted without expanding them (each node once)."""
    if node is None:
        return 0
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        n, children_done = stack.pop()
        if id(n) in sizes:
            continue
        if isinstance(n, yaml.MappingNode):
            children = [c for pair in n.value for c in pair]
        elif isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        else:
            sizes[id(n)] = 1
            continue
        if children_done:
            sizes[id(n)] = min(1 + sum(sizes[id(c)] for c in children), MAX_CONFIG_NODES + 1)
        else:
            stack.append((n, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(node)]


def _lines(node: yaml.Node | None) -> dict[Path_, int]:
    lines: dict[Path_, int] = {}

    def walk(n: yaml.Node, path: Path_) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key)
                lines[(*path, k)] = key.start_mark.line + 1
                walk(value, (*path, k))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*path, i))

    if node is not None:
        walk(node, ())
    return lines


def _where(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


class _Loader:
    def __init__(self, source: str, lines: dict[Path_, int]) -> None:
        self.source = source
        self.lines = lines

    def error(self, path: Path_, message: str, grader: str | None = None, entry: Path_ | None = None) -> ConfigError:
        """An error at ``path`` (its line is reported); ``entry`` is the grader it belongs to, when any."""
        probe = path
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        where = _where(entry if entry is not None else path)
        label = f"{where} ({grader})" if grader else where
        return ConfigError(
            f"{self.source}:{line}: {label}: {message}" if line else f"{self.source}: {label}: {message}"
        )

    def config(self, data: Any) -> Config:
        if data is None:
            raise self.error((), "the file is empty: expected `graders:` (a list) or `suites:`")
        if isinstance(data, list):
            return Config(suites=(self.suite({"graders": data}, (), "default", bare_list=True),), source=self.source)
        if not isinstance(data, dict):
            raise self.error((), "expected a mapping with `graders:` or `suites:`")
        suites: list[Suite] = []
        for i, raw in enumerate(self._list(data.get("suites"), ("suites",))):
            if not isinstance(raw, dict):
                raise self.error(("suites", i), "a suite is a mapping {name, match, graders, scoring}")
            unknown = set(raw) - {"name", "match", "graders", "evaluators", "assert", "scoring"}
            if unknown:
                raise self.error(("suites", i, sorted(unknown)[0]), "unknown field in a suite")
            suites.append(self.suite(raw, ("suites", i), str(raw.get("name") or f"suite-{i}")))
        for key, cases in (("evalcases", data.get("evalcases")), ("tests", data.get("tests"))):
            for i, case in enumerate(self._list(cases, (key,))):
                if isinstance(case, dict) and isinstance(case.get("execution"), dict):
                    suites.append(
                        self.suite(case["execution"], (key, i, "execution"), str(case.get("id", f"{key}-{i}")))
                    )
                elif isinstance(case, dict) and "assert" in case:
                    suites.append(self.suite(case, (key, i), str(case.get("id", f"{key}-{i}"))))
        top = data
        if isinstance(data.get("execution"), dict) and not any(k in data for k in _GRADER_LIST_KEYS):
            top = data["execution"]
            base: Path_ = ("execution",)
        else:
            base = ()
        if any(k in top for k in _GRADER_LIST_KEYS):
            scoring_source = top if "scoring" in top else data
            suites.append(self.suite({**top, "scoring": scoring_source.get("scoring")}, base, "default"))
        if not suites:
            raise self.error((), "no graders: expected `graders:` (a list) or `suites:`")
        return Config(suites=tuple(suites), prices=self.prices(data.get("prices")), source=self.source)

    def _list(self, value: Any, path: Path_) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, "expected a list")
        return value

    def suite(self, raw: Mapping[str, Any], path: Path_, name: str, bare_list: bool = False) -> Suite:
        key = next((k for k in _GRADER_LIST_KEYS if k in raw), "graders")
        entries_path = path if bare_list else (*path, key)
        graders = self.graders(self._list(raw.get(key), entries_path), entries_path)
        if not graders:
            raise self.error(entries_path, "a suite needs at least one grader")
        scoring = self.scoring(raw.get("scoring"), (*path, "scoring"), graders)
        match = self.match(raw.get("match"), (*path, "match")) if raw.get("match") is not None else None
        return Suite(name=name, graders=graders, scoring=scoring, match=match)

    def graders(self, entries: Sequence[Any], path: Path_) -> tuple[Grader, ...]:
        out: list[Grader] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            grader = self.grader(entry, (*path, i))
            if grader.name in seen:
                raise self.error(
                    (*path, i, "name"),
                    f"name: duplicate grader name {grader.name!r} (also {_where((*path, seen[grader.name]))}); "
                    "give each grader of a list its own name",
                    grader.type,
                    (*path, i),
                )
            seen[grader.name] = i
            out.append(grader)
        return tuple(out)

    def grader(self, entry: Any, path: Path_) -> Grader:
        if isinstance(entry, str):
            entry = {"type": entry}
        if not isinstance(entry, dict):
            raise self.error(path, "a grader is a mapping with `type`")
        type_name = entry.get("type")
        if not isinstance(type_name, str):
            raise self.error((*path, "type"), "missing `type` (see `trajgrade graders` for the catalogue)")
        spec = lookup(type_name)
        if spec is None:
            raise self.error((*path, "type"), f"unknown grader type {type_name!r} (see `trajgrade graders`)")
        name = entry.get("name", spec.type)
        if not isinstance(name, str) or not _NAME.match(name):
            raise self.error((*path, "name"), f"name: must be a short identifier, got {name!r}", spec.type, path)
        weight = entry.get("weight", 1.0)
        if not _is_amount(weight):
            raise self.error((*path, "weight"), "weight: must be a finite number >= 0", spec.type, path)
        enforce = entry.get("enforce", False)
        if not isinstance(enforce, bool):
            raise self.error((*path, "enforce"), "enforce: must be true or false", spec.type, path)
        if enforce and spec.watch is None:
            raise self.error(
                (*path, "enforce"),
                f"enforce: {spec.type} is only known when the run ends, so it cannot stop a run (graders that can: "
                f"{', '.join(s.type for s in CATALOGUE if s.watch is not None)})",
                spec.type,
                path,
            )
        options, options_path = self.options(entry, path, spec)
        try:
            validated = spec.config.model_validate(options)
        except ValidationError as e:
            first = e.errors()[0]
            loc = tuple(first["loc"])
            message = str(first["msg"]).removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                message = f"unknown field for {spec.type} (fields: {', '.join(spec.config.model_fields)})"
            elif first["type"] == "missing":
                message = "is required"
            within = (*options_path[len(path) :], *loc)  # the field's path in the grader's entry
            field_path = _where(within) if within else ""
            text = f"{field_path}: {message}" if field_path else message
            raise self.error((*options_path, *loc), text, spec.type, entry=path) from None
        return Grader(name=name, type=spec.type, weight=float(weight), spec=spec, options=validated, enforce=enforce)

    def options(self, entry: dict[str, Any], path: Path_, spec: GraderSpec) -> tuple[dict[str, Any], Path_]:
        """A grader's raw options (under `config`, or flat beside `type`), with composite children compiled."""
        if "config" in entry:
            extra = set(entry) - _ENTRY_KEYS
            if extra:
                raise self.error(
                    (*path, sorted(extra)[0]),
                    f"{sorted(extra)[0]}: options go under `config` in this form, not beside it",
                    spec.type,
                    path,
                )
            options = entry["config"] if entry["config"] is not None else {}
            options_path: Path_ = (*path, "config")
        else:
            options = {k: v for k, v in entry.items() if k not in _ENTRY_KEYS}
            options_path = path
        if not isinstance(options, dict):
            raise self.error(options_path, "options must be a mapping", spec.type, path)
        options = dict(options)
        children_key = getattr(spec.config, "children_field", None)
        if isinstance(children_key, str):
            for alias in ("evaluators", "graders", "assert"):
                if alias in options and alias != children_key:
                    options[children_key] = options.pop(alias)
            raw_children = options.get(children_key)
            if not isinstance(raw_children, list) or not raw_children:
                raise self.error(
                    (*options_path, children_key),
                    f"{children_key}: a composite needs a list of graders",
                    spec.type,
                    path,
                )
            options[children_key] = self.graders(raw_children, (*options_path, children_key))
        return options, options_path

    def scoring(self, raw: Any, path: Path_, graders: Sequence[Grader]) -> Scoring:
        if raw is None:
            return Scoring()
        if not isinstance(raw, dict):
            raise self.error(path, "scoring is a mapping {threshold, weights}")
        unknown = set(raw) - {"threshold", "weights", "timeout"}
        if unknown:
            raise self.error((*path, sorted(unknown)[0]), "unknown field (scoring has threshold, weights and timeout)")
        threshold = raw.get("threshold")
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1
        ):
            raise self.error((*path, "threshold"), "threshold must be a number from 0 to 1")
        weights = raw.get("weights") or {}
        if not isinstance(weights, dict):
            raise self.error((*path, "weights"), "weights maps grader names to numbers")
        names = {g.name for g in graders}
        for key, w in weights.items():
            if key not in names:
                raise self.error((*path, "weights", key), f"no grader named {key!r} in this list")
            if not _is_amount(w):
                raise self.error((*path, "weights", key), "a weight is a finite number >= 0")
        timeout = raw.get("timeout", 5.0)
        if isinstance(timeout, str):
            try:
                timeout = parse_duration(timeout)
            except ValueError as e:
                raise self.error((*path, "timeout"), f"timeout: {e}") from None
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise self.error((*path, "timeout"), "timeout: seconds per grader, a number > 0 or a duration ('2s')")
        return Scoring(
            threshold=float(threshold) if threshold is not None else None,
            weights={str(k): float(v) for k, v in weights.items()},
            timeout=float(timeout),
        )

    def match(self, raw: Any, path: Path_) -> Match:
        if not isinstance(raw, dict):
            raise self.error(path, "match is a mapping of agent_name, root_span_name, service_name, attributes")
        unknown = set(raw) - {"agent_name", "root_span_name", "service_name", "attributes"}
        if unknown:
            raise self.error((*path, sorted(unknown)[0]), "unknown field in match")

        def compile_(value: Any, at: Path_) -> str:
            if not isinstance(value, str):
                raise self.error(at, "expected a regex string")
            try:
                check_pattern(value)
            except ValueError as e:
                raise self.error(at, str(e)) from None
            return value

        attrs = raw.get("attributes") or {}
        if not isinstance(attrs, dict):
            raise self.error((*path, "attributes"), "attributes maps attribute keys to regexes")
        return Match(
            agent_name=compile_(raw["agent_name"], (*path, "agent_name")) if "agent_name" in raw else None,
            root_span_name=compile_(raw["root_span_name"], (*path, "root_span_name"))
            if "root_span_name" in raw
            else None,
            service_name=compile_(raw["service_name"], (*path, "service_name")) if "service_name" in raw else None,
            attributes={str(k): compile_(v, (*path, "attributes", k)) for k, v in attrs.items()},
        )

    def prices(self, raw: Any) -> dict[str, Price]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.error(("prices",), "prices maps model names to {input, output} in USD per million tokens")
        out: dict[str, Price] = {}
        for model, p in raw.items():
            at: Path_ = ("prices", model)
            if not isinstance(p, dict) or "input" not in p or "output" not in p:
                raise self.error(at, "a price needs input and output (USD per million tokens)")
            unknown = set(p) - {"input", "output", "cache_read", "cache_write"}
            if unknown:
                raise self.error((*at, sorted(unknown)[0]), "unknown field (input, output, cache_read, cache_write)")
            for k, v in p.items():
                if not _is_amount(v):
                    raise self.error((*at, k), "a price is a finite number >= 0")
            out[str(model)] = Price(
                input=float(p["input"]),
                output=float(p["output"]),
                cache_read=p.get("cache_read"),
                cache_write=p.get("cache_write"),
            )
        return out
