"""Shared pieces of the benchmarks: timing, synthetic runs, and the result table."""

from __future__ import annotations

import compileall
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajgrade.core.trajectory import SpanRecord, Trajectory, build_trajectories
from trajgrade.core.trajectory.model import Usage
from trajgrade.core.trajectory.normalize import MISSING
from trajgrade.core.trajectory.records import replace_record, span_record

ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Write the bytecode of trajgrade's interpreted modules, as installing it from a wheel does, so that a command
    timed here does not compile them at every start (an editable install run with ``PYTHONDONTWRITEBYTECODE`` set
    would)."""
    compileall.compile_dir(ROOT / "src", quiet=1)


os.chdir(ROOT)  # every_grader.yaml names its baseline run by a path from the repository's root

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TOOLS = ("search", "read_file", "list_items", "get_weather", "write_file")
#: The tools' definitions, as the run's first model call carries them.
TOOL_DEFINITIONS = json.dumps(
    [
        {
            "type": "function",
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "page": {"type": "integer"}},
            },
        }
        for name in TOOLS
    ]
)


@dataclass
class Figure:
    """One measured figure: value, its target, and the ratio to the same-run baseline."""

    name: str
    value: float
    unit: str
    target: str
    ok: bool
    baseline: float | None = None
    baseline_name: str = ""

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None


def median_time(fn: Callable[[], Any], *, repeat: int = 15, number: int = 1) -> float:
    """Median seconds per call over ``repeat`` samples of ``number`` calls (GC collected before each sample)."""
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def synthetic_records(steps: int, *, trace: str = TRACE) -> list[SpanRecord]:
    """A run of ``steps`` steps: model calls each followed by a tool call, with realistic, varied arguments."""
    t0 = 1_700_000_000_000_000_000
    root = span_record(
        trace_id=trace,
        span_id=f"{1:016x}",
        parent_span_id=None,
        name="invoke_agent bench",
        kind="agent",
        start_unix_nano=t0,
        end_unix_nano=t0 + steps * 2_000_000,
        error=False,
        agent_name="bench",
        attributes={},
    )
    records = [root]
    for i in range(steps):
        span_id = f"{i + 2:016x}"
        start = t0 + i * 1_000_000
        if i % 2 == 0:
            records.append(
                span_record(
                    trace_id=trace,
                    span_id=span_id,
                    parent_span_id=root.span_id,
                    name="chat gpt-4o-mini",
                    kind="llm_call",
                    start_unix_nano=start,
                    end_unix_nano=start + 900_000,
                    error=False,
                    model="gpt-4o-mini",
                    provider="openai",
                    usage=Usage(input_tokens=100 + i, output_tokens=20),
                    requested_tool_calls=((f"call_{i + 1}", TOOLS[((i + 1) // 2) % len(TOOLS)], MISSING),),
                    tool_definitions=TOOL_DEFINITIONS if i == 0 else None,
                )
            )
        else:
            name = TOOLS[(i // 2) % len(TOOLS)]
            records.append(
                span_record(
                    trace_id=trace,
                    span_id=span_id,
                    parent_span_id=root.span_id,
                    name=f"execute_tool {name}",
                    kind="tool_call",
                    start_unix_nano=start,
                    end_unix_nano=start + 500_000,
                    error=i % 97 == 0,
                    tool_name=name,
                    tool_call_id=f"call_{i}",
                    tool_arguments=json.dumps({"query": f"topic {i // 10}", "page": i % 7}),
                    tool_result=json.dumps({"items": [i, i + 1], "next": i + 2}),
                )
            )
    return records


def _attr(key: str, value: str | int) -> dict[str, Any]:
    return {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}


def synthetic_otlp(steps: int, *, trace: str = TRACE) -> dict[str, Any]:
    """The run of :func:`synthetic_records` as an OTLP/JSON request, marked by the GenAI conventions as an
    instrumentation writes it (what the command line reads)."""
    t0 = 1_700_000_000_000_000_000
    root_id = f"{1:016x}"

    def span(i: int, name: str, start: int, end: int, attrs: list[dict[str, Any]], error: bool = False) -> dict:
        out = {
            "traceId": trace,
            "spanId": f"{i:016x}",
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": attrs,
        }
        if i != 1:
            out["parentSpanId"] = root_id
        if error:
            out["status"] = {"code": 2, "message": "tool failed"}
        return out

    spans = [
        span(
            1,
            "invoke_agent bench",
            t0,
            t0 + steps * 2_000_000,
            [_attr("gen_ai.operation.name", "invoke_agent"), _attr("gen_ai.agent.name", "bench")],
        )
    ]
    for i in range(steps):
        start = t0 + i * 1_000_000
        if i % 2 == 0:
            tool = TOOLS[((i + 1) // 2) % len(TOOLS)]
            call = {"type": "tool_call", "id": f"call_{i + 1}", "name": tool, "arguments": {}}
            attrs = [
                _attr("gen_ai.operation.name", "chat"),
                _attr("gen_ai.provider.name", "openai"),
                _attr("gen_ai.request.model", "gpt-4o-mini"),
                _attr("gen_ai.usage.input_tokens", 100 + i),
                _attr("gen_ai.usage.output_tokens", 20),
                _attr("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [call]}])),
            ]
            if i == 0:
                attrs.append(_attr("gen_ai.tool.definitions", TOOL_DEFINITIONS))
            spans.append(span(i + 2, "chat gpt-4o-mini", start, start + 900_000, attrs))
        else:
            name = TOOLS[(i // 2) % len(TOOLS)]
            attrs = [
                _attr("gen_ai.operation.name", "execute_tool"),
                _attr("gen_ai.tool.name", name),
                _attr("gen_ai.tool.call.id", f"call_{i}"),
                _attr("gen_ai.tool.call.arguments", json.dumps({"query": f"topic {i // 10}", "page": i % 7})),
                _attr("gen_ai.tool.call.result", json.dumps({"items": [i, i + 1], "next": i + 2})),
            ]
            spans.append(span(i + 2, f"execute_tool {name}", start, start + 500_000, attrs, error=i % 97 == 0))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "bench-agent")]},
                "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
            }
        ]
    }


def looping_records(steps: int, *, trace: str = TRACE, block: int = 4, width: int = 48) -> list[SpanRecord]:
    """The loop and similarity graders' worst case: every tool call is in a loop. Tool calls come in blocks of
    ``block`` calls of ``search`` with ``width`` nested argument leaves, each differing from the one before in a
    single leaf (similar: each pair is compared leaf by leaf at every period) and with the same result (no
    progress), then one ``read_file`` call ends the block: a run of n steps holds about n / (2 * (block + 1))
    loops, each reported with its evidence. Model calls alternate with the tool calls, as in
    :func:`synthetic_records`."""
    records = synthetic_records(steps, trace=trace)
    out = [records[0]]
    for i, r in enumerate(records[1:]):
        if r.kind != "tool_call":
            out.append(r)
            continue
        k = i // 2
        if k % (block + 1) == block:
            name, args = "read_file", {"path": f"notes/{k}.md"}
        else:
            name = "search"
            args = {
                "query": "the same question",
                "filters": {f"f{j}": f"value {j}" for j in range(width - 2)},
                "page": k % (block + 1),
            }
        out.append(
            replace_record(
                r,
                name=f"execute_tool {name}",
                tool_name=name,
                tool_arguments=json.dumps(args),
                tool_result=json.dumps({"items": [], "next": None}),
                error=False,
            )
        )
    return out


def synthetic_run(steps: int, *, looping: bool = False) -> Trajectory:
    (t,) = build_trajectories(looping_records(steps) if looping else synthetic_records(steps))
    return t


def print_table(figures: list[Figure]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="trajgrade benchmarks (this machine, one run)", title_justify="left")
    for col in ("figure", "value", "target", "baseline (same run)", "ratio", "ok"):
        table.add_column(col)
    for f in figures:
        base = f"{f.baseline:.4g} {f.unit} ({f.baseline_name})" if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "-"
        table.add_row(f.name, f"{f.value:.4g} {f.unit}", f.target, base, ratio, "yes" if f.ok else "NO")
    Console(width=160).print(table)
