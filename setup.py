"""The compiled parts of the package (the rest is in pyproject.toml).

- The sidecar's OTLP reader and its encoder of results and log events, in C (``_protowire.c``).
- The modules every span and every tool call goes through, compiled from their typed Python with mypyc: the
  trace file readers and the span views (of the SDK, of protobuf, of OTLP/JSON), the span records and the
  trajectory model, normalization, the build (the span tree, tool requests, content, summaries), prices, the
  numbering of a run's tool calls by text, the graders' passes over a run's steps, the loop grader's search, the
  comparison of a run with its baseline, and the in-flight checks' per-span counting, and the conventions' tables
  they read (``semconv.py``: its constants are then read as C variables, not looked up on a module per span).
  The same source runs interpreted where it is not compiled; ``make lint`` type-checks it strictly. Here mypy
  only has to type the modules for the compiler, without the project's config (its pydantic plugin) and
  without the runtime dependencies, which the build environment does not have.
"""

from mypyc.build import mypycify
from setuptools import Extension, setup

COMPILED = [
    "src/trajgrade/core/readers.py",
    "src/trajgrade/core/runfiles.py",
    "src/trajgrade/core/trajectory/model.py",
    "src/trajgrade/core/trajectory/span_shape.py",
    "src/trajgrade/core/trajectory/records.py",
    "src/trajgrade/core/trajectory/normalize.py",
    "src/trajgrade/core/trajectory/content.py",
    "src/trajgrade/core/trajectory/tool_requests.py",
    "src/trajgrade/core/trajectory/tree.py",
    "src/trajgrade/core/trajectory/summary.py",
    "src/trajgrade/core/trajectory/build.py",
    "src/trajgrade/core/trajectory/cost.py",
    "src/trajgrade/core/trajectory/call_texts.py",
    "src/trajgrade/core/graders/thresholds.py",
    "src/trajgrade/core/graders/budget.py",
    "src/trajgrade/core/graders/completed.py",
    "src/trajgrade/core/graders/execution_metrics.py",
    "src/trajgrade/core/graders/loop.py",
    "src/trajgrade/core/graders/repeats.py",
    "src/trajgrade/core/graders/tool_calls.py",
    "src/trajgrade/core/graders/tool_schema.py",
    "src/trajgrade/core/graders/tool_trajectory.py",
    "src/trajgrade/core/graders/baseline.py",
    "src/trajgrade/core/graders/composite.py",
    "src/trajgrade/core/graders/steps.py",
    "src/trajgrade/core/graders/loop_search.py",
    "src/trajgrade/core/graders/repetition.py",
    "src/trajgrade/core/graders/tool_matching.py",
    "src/trajgrade/core/graders/watch.py",
    "src/trajgrade/core/compare.py",
    "src/trajgrade/core/running.py",
    "src/trajgrade/core/inflight.py",
    "src/trajgrade/core/result_attributes.py",
    "src/trajgrade/core/assembler.py",
    "src/trajgrade/core/spans.py",
    "src/trajgrade/core/semconv.py",
    "src/trajgrade/doors/sidecar/records.py",
]
#: Modules they import whose constants mypyc copies into the compiled code: a change to one rebuilds them too.
INLINED = [
    "src/trajgrade/core/content_formats.py",
]

setup(
    ext_modules=[
        Extension(
            "trajgrade.doors.sidecar._protowire",
            ["src/trajgrade/doors/sidecar/_protowire.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        ),
        *mypycify(["--config-file=", "--ignore-missing-imports", *COMPILED], opt_level="3"),
    ]
)
