"""Rebuild time of a trajectory from an OTLP/JSON file of a 200-tool-call run (target: under 50 ms).

For each ``tests/fixtures/*/*/long_200.json`` (made by the real instrumentations) it times reading the file,
normalizing the spans, building the trajectory, and the whole; the baseline, in the same run, is
``orjson.loads`` of the same file (the decoder the reader uses) plus a walk over every attribute (the floor of
reading it at all).
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from _common import Figure, median_time, print_table

from trajgrade.core.readers import read_bytes
from trajgrade.core.trajectory import build_trajectories, normalize

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 50.0


def walk_all(data: bytes) -> int:
    n = 0
    for rs in orjson.loads(data)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                n += sum(1 for a in span.get("attributes", []) if a["value"])
    return n


def figures() -> list[Figure]:
    out: list[Figure] = []
    files = sorted(ROOT.glob("tests/fixtures/*/*/long_200.json"))
    if not files:
        raise SystemExit("no long_200 fixtures under tests/fixtures: run `make fixtures`")
    for path in files:
        data = path.read_bytes()
        views = read_bytes(data, str(path))
        records = [normalize(v) for v in views]
        (run,) = build_trajectories(records)
        label = "/".join(path.relative_to(ROOT / "tests/fixtures").parts[:2])
        whole = median_time(
            lambda data=data: build_trajectories(normalize(v) for v in read_bytes(data, "x")), repeat=11
        )
        build = median_time(lambda records=records: build_trajectories(records), repeat=11)
        base = median_time(lambda data=data: walk_all(data), repeat=11)
        out.append(
            Figure(
                f"rebuild {label} ({run.summary.tool_calls} tool calls, {len(data) // 1024} KiB): read+normalize+build",
                whole * 1000,
                "ms",
                f"< {TARGET_MS:.0f} ms",
                whole * 1000 < TARGET_MS,
                base * 1000,
                "orjson.loads + walk",
            )
        )
        out.append(Figure(f"  of which build only ({label})", build * 1000, "ms", "-", True))
    return out


if __name__ == "__main__":
    figs = figures()
    print_table(figs)
    sys.exit(0 if all(f.ok for f in figs) else 1)
