"""The ``trajgrade`` command: trajectory, grade, validate, graders.

Exit codes: 0 all good; 1 a run failed its graders (``grade``); 2 unreadable input, input that held spans but
no run, a bad config (the other inputs are still read and printed), or a report that cannot be written; 3
trajgrade itself failed (a bug: its traceback is printed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from trajgrade.exceptions import ConfigError
from trajgrade.version import __version__

if TYPE_CHECKING:  # the commands import what they use, so that `trajgrade --version` loads nothing
    from trajgrade.core.runfiles import FileRun, TraceFiles
    from trajgrade.core.running import RunReport
    from trajgrade.core.trajectory.cost import Price

__all__ = ["main", "run"]

FORMATS = ("text", "json", "junit", "markdown", "html")
#: What genai-prices imports with its package for the price updater it starts only when asked, which no command
#: asks: the command line's own process defers them (``deferred_modules``), but for ``serve``, whose server runs
#: an event loop.
PRICE_UPDATER_IMPORTS = ("httpx2", "asyncio")
#: Pydantic's setting of the plugins it loads. At its first model, pydantic looks for plugins (which observe an
#: application's validation) in the entry points of every installed package: about 14 ms with a hundred packages.
#: The command line's own process validates only trajgrade's graders file and genai-prices' price table, and sets
#: it to load none, unless the environment sets it already; ``serve`` loads them as any application does.
PYDANTIC_PLUGINS_SETTING = "PYDANTIC_DISABLE_PLUGINS"
#: What the commands read, held until the command ends (see :func:`run`).
_READ: list[object] = []
#: The exit code of a command that failed in trajgrade's own code: not 1, which says a run failed its graders.
INTERNAL_ERROR = 3


def _trace_files(paths: Sequence[str]) -> TraceFiles:
    """The trace files of ``paths``, their reading under way (:class:`~trajgrade.core.runfiles.TraceFiles`): a
    command starts it first, so that the disk and the copy of the bytes go on beside its imports and graders file."""
    from trajgrade.core.runfiles import TraceFiles

    return TraceFiles(paths)


def _read_for_life(files: TraceFiles, prices: Mapping[str, Price] | None = None) -> tuple[list[FileRun], list[str]]:
    """The runs in ``files`` (:func:`~trajgrade.core.runfiles.read_runs`), kept until the command ends with what
    reading decoded (:func:`main` lets them go). Call it within :func:`_collection_paused`."""
    from trajgrade.core.runfiles import read_runs

    read = read_runs(files, prices, keep=_READ)
    _READ.append(read)
    return read


@contextmanager
def _collection_paused() -> Iterator[None]:
    """A command's start-up and reading with the cyclic garbage collector off; what they made then kept out of its
    walks until the command ends (:func:`main` lets it go).

    The imports, the graders file and reading (JSON decoded and runs rebuilt) make millions of objects that form
    no cycle and live until the command ends: the collector would walk them again and again as they are made,
    and at every collection after. In a process that keeps objects out of its walks already, the collector sees
    them as it sees the rest.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if enabled:
            gc.enable()


def _print_problems(problems: Sequence[str]) -> None:
    for problem in problems:
        print(f"trajgrade: {problem}", file=sys.stderr)


def cmd_trajectory(args: argparse.Namespace) -> int:
    with _collection_paused():
        files = _trace_files(args.paths)
        from trajgrade.reports.dicts import trajectory_to_dict

        read, problems = _read_for_life(files)
        runs = [r.trajectory for r in read]
    if args.format == "json":
        print(json.dumps({"runs": [trajectory_to_dict(t) for t in runs]}, indent=2, sort_keys=False))
    else:
        from trajgrade.reports.text import print_trajectories

        print_trajectories(runs)
    _print_problems(problems)
    return 2 if problems else 0


def _write_reports(reports: Sequence[tuple[str, RunReport]], fmt: str, output: str | None) -> list[str]:
    """Graded runs (each with the file it came from) in ``fmt``, to ``output`` or standard output; the problems to
    report (``output`` cannot be written)."""
    groups: dict[str, list[RunReport]] = {}
    for source, report in reports:
        groups.setdefault(source, []).append(report)
    grouped = list(groups.items())
    if fmt == "json":
        from trajgrade.reports.dicts import report_to_dict

        text = json.dumps({"runs": [report_to_dict(r) for _, r in reports]}, indent=2) + "\n"
    elif fmt == "junit":
        from trajgrade.reports.junit import to_junit

        text = to_junit(grouped)
    elif fmt == "markdown":
        from trajgrade.reports.markdown import to_markdown

        text = to_markdown(grouped)
    elif fmt == "html":
        from trajgrade.reports.html import to_html

        text = to_html(grouped)
    else:
        from trajgrade.reports.text import print_reports

        if output is None:
            print_reports([r for _, r in reports])
            return []
        from io import StringIO

        from rich.console import Console

        buffer = StringIO()
        print_reports([r for _, r in reports], Console(file=buffer, width=120))
        text = buffer.getvalue()
    if output is None:
        sys.stdout.write(text)
        return []
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        return [f"{output}: cannot write the report: {e.strerror or e}"]
    return []


def cmd_grade(args: argparse.Namespace) -> int:
    with _collection_paused():
        files = _trace_files(args.paths)
        from trajgrade.core.config_loading import load_config
        from trajgrade.core.running import grade_run

        try:
            config = load_config(args.config)
        except ConfigError as e:
            print(f"trajgrade: {e}", file=sys.stderr)
            return 2
        runs, problems = _read_for_life(files, dict(config.prices))
    reports = [(run.path, grade_run(config, run.trajectory)) for run in runs]
    problems += _write_reports(reports, args.format, args.output)
    _print_problems(problems)
    if problems:
        return 2
    return 0 if all(r.passed for _, r in reports) else 1


def cmd_compare(args: argparse.Namespace) -> int:
    with _collection_paused():
        files = _trace_files(args.candidate)
        from dataclasses import replace

        from pydantic import ValidationError

        from trajgrade.core.compare import match_runs
        from trajgrade.core.config_loading import load_config
        from trajgrade.core.graders.baseline import against
        from trajgrade.core.graders.options import BaselineConfig
        from trajgrade.core.running import RunReport, grade_run

        try:
            config = load_config(args.config) if args.config else None
            tolerance = BaselineConfig.model_validate(
                {
                    "path": args.baseline,
                    "key": "agent" if args.key == "file" else args.key,  # files are matched below
                    "max_tool_edits": None if args.max_tool_edits < 0 else args.max_tool_edits,
                    "max_increase": dict(_increase(x) for x in args.max_increase),
                }
            )
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            print(
                f"trajgrade: {where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}",
                file=sys.stderr,
            )
            return 2
        except (ConfigError, ValueError) as e:
            print(f"trajgrade: {e}", file=sys.stderr)
            return 2
        baseline = tolerance.runs
        candidate, problems = _read_for_life(files, dict(config.prices) if config else None)
    try:
        pairs, unmatched, missing = match_runs(baseline, candidate, args.key)
    except ValueError as e:
        print(f"trajgrade: {e}", file=sys.stderr)
        return 2
    reports: list[tuple[str, RunReport]] = []
    baseline_passed: dict[int, bool] = {}  # a baseline run shared by several candidates is graded once
    for _key, golden, run in pairs:
        result = against(golden, run.trajectory, tolerance)
        graded = None
        if config is not None:
            graded = grade_run(config, run.trajectory)
            if id(golden) not in baseline_passed:
                baseline_passed[id(golden)] = grade_run(config, golden.trajectory).passed
            verdict = {"baseline_passed": baseline_passed[id(golden)], "candidate_passed": graded.passed}
            result = replace(result, details={**result.details, "verdict": verdict})
        results = (result, *(graded.results if graded else ()))
        score = sum(r.score for r in results) / len(results)
        suite = graded.suite if graded else None
        reports.append((run.path, RunReport(run.trajectory, suite, results, all(r.passed for r in results), score)))
    problems += _write_reports(reports, args.format, args.output)
    problems += [f"{k}: no baseline run with this {args.key}" for k in unmatched]
    problems += [f"{k}: a baseline run with no candidate" for k in missing]
    _print_problems(problems)
    if not pairs:
        print("trajgrade: no run of the candidate matched a baseline run", file=sys.stderr)
    if problems or not pairs:
        return 2
    return 0 if all(r.passed for _, r in reports) else 1


def _increase(text: str) -> tuple[str, float]:
    from trajgrade.core.compare import METRICS

    metric, _, value = text.partition("=")
    if metric not in METRICS or not value:
        raise ValueError(f"--max-increase {text!r}: use METRIC=FRACTION with METRIC one of {', '.join(METRICS)}")
    return metric, float(value.removesuffix("%")) / (100 if value.endswith("%") else 1)


def cmd_validate(args: argparse.Namespace) -> int:
    from trajgrade.core.config_loading import load_config

    status = 0
    for path in args.configs:
        try:
            config = load_config(path)
        except ConfigError as e:
            print(f"trajgrade: {e}", file=sys.stderr)
            status = 2
            continue
        n = sum(len(s.graders) for s in config.suites)
        print(f"{path}: ok ({len(config.suites)} suite(s), {n} grader(s))")
    return status


def cmd_graders(args: argparse.Namespace) -> int:
    from trajgrade.core.graders.catalogue import CATALOGUE
    from trajgrade.reports.dicts import jsonable

    rows: list[dict[str, Any]] = []
    for spec in CATALOGUE:
        rows.append(
            {
                "type": spec.type,
                "aliases": list(spec.aliases),
                "summary": spec.summary,
                "fields": {name: _field_doc(f) for name, f in spec.config.model_fields.items()},
                "needs": list(spec.needs),
                "taxonomy": {
                    "determinism": spec.taxonomy.determinism,
                    "cost": spec.taxonomy.cost,
                    "portability": spec.taxonomy.portability,
                    "reference": spec.taxonomy.reference,
                    "temporal_scope": spec.taxonomy.temporal_scope,
                    "score_kind": spec.taxonomy.score_kind,
                },
            }
        )
    if args.format == "json":
        print(json.dumps({"graders": jsonable(rows)}, indent=2))
    else:
        from trajgrade.reports.text import print_catalogue

        print_catalogue(rows)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from trajgrade.core.config_loading import load_config
    from trajgrade.core.graders.options import parse_duration

    try:
        from trajgrade.doors.sidecar.receivers import Limits
        from trajgrade.doors.sidecar.server import SidecarOptions, serve
    except ImportError as e:
        print(f"trajgrade: serve needs the sidecar extra (pip install 'trajgrade[sidecar]'): {e}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
        token = None
        if args.auth_token_file:
            with open(args.auth_token_file) as f:
                token = f.read().strip()
            if not token:
                raise ValueError(f"{args.auth_token_file}: the token file is empty")
        if bool(args.tls_cert) != bool(args.tls_key):
            raise ValueError("--tls-cert and --tls-key go together")
        if args.push_metrics and not args.push_metrics.startswith(("http://", "https://", "grpc://")):
            raise ValueError(f"--push-metrics {args.push_metrics!r}: use http://host:port or grpc://host:port")
        options = SidecarOptions(
            otlp_http=args.otlp_http,
            otlp_grpc=args.otlp_grpc,
            forward=tuple(args.forward),
            metrics_port=args.metrics_port,
            push_metrics=args.push_metrics,
            push_interval_s=parse_duration(args.push_interval),
            settle_s=parse_duration(args.settle),
            max_traces=args.max_traces,
            max_trace_age_s=parse_duration(args.max_trace_age),
            max_buffered_spans=args.max_buffered_spans,
            max_buffered_bytes=args.max_buffered_bytes,
            max_grading_bytes=args.max_grading_bytes,
            limits=Limits(
                max_request_bytes=args.max_request_bytes,
                max_decompressed_bytes=args.max_decompressed_bytes,
                header_timeout_s=parse_duration(args.header_timeout),
                body_timeout_s=parse_duration(args.body_timeout),
                auth_token=token,
            ),
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            in_flight=not args.no_in_flight,
            log_events=not args.no_log_events,
        )
        if not options.otlp_http and not options.otlp_grpc:
            raise ValueError("give --otlp-http or --otlp-grpc (or both)")
    except (ConfigError, OSError, ValueError) as e:
        print(f"trajgrade: {e}", file=sys.stderr)
        return 2
    return serve(config, options)


def _field_doc(field: Any) -> str:
    annotation = getattr(field.annotation, "__name__", None) or str(field.annotation).replace("typing.", "")
    required = field.is_required()
    default = "" if required else f" = {field.default!r}"
    return f"{annotation}{' (required)' if required else default}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trajgrade", description="Grade AI-agent runs from their OpenTelemetry spans."
    )
    parser.add_argument("--version", action="version", version=f"trajgrade {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trajectory", help="rebuild each run's trajectory from OTLP trace files")
    p.add_argument("paths", nargs="+", metavar="PATH", help="OTLP/JSON, JSON Lines or protobuf files; - for stdin")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_trajectory)

    p = sub.add_parser("grade", help="grade each run of OTLP trace files with a graders file")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--config", required=True, metavar="FILE", help="graders file (YAML)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of standard output")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("compare", help="compare each candidate run with its baseline run")
    p.add_argument("baseline", metavar="BASELINE", help="a trace file or a directory of them")
    p.add_argument("candidate", nargs="+", metavar="CANDIDATE")
    p.add_argument("--key", default="agent", help="what matches runs: agent (default), root, file, or attribute:NAME")
    p.add_argument(
        "--max-tool-edits", type=int, default=0, metavar="N", help="tool call edits allowed (default 0; -1: any)"
    )
    p.add_argument(
        "--max-increase",
        action="append",
        default=[],
        metavar="METRIC=FRACTION",
        help="growth allowed, e.g. total_tokens=0.1 or cost_usd=10%%; repeatable (llm_calls, tool_calls, "
        "total_tokens, cost_usd, duration_ms)",
    )
    p.add_argument("--config", metavar="FILE", help="also grade both runs with this graders file")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--output", "-o", metavar="FILE")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("validate", help="check graders files")
    p.add_argument("configs", nargs="+", metavar="FILE")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("serve", help="run as an OTLP sidecar: receive traces, grade runs, forward every span")
    p.add_argument("--config", required=True, metavar="FILE", help="graders file (YAML)")
    p.add_argument("--otlp-http", metavar="HOST:PORT", help="OTLP/HTTP receiver (/v1/traces)")
    p.add_argument("--otlp-grpc", metavar="HOST:PORT", help="OTLP/gRPC receiver")
    p.add_argument(
        "--forward",
        action="append",
        default=[],
        metavar="URL",
        help="where every span and the log events go: http://host:port (/v1/traces and /v1/logs are added) or "
        "grpc://host:port; repeatable",
    )
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="Prometheus endpoint on 127.0.0.1")
    p.add_argument(
        "--push-metrics",
        metavar="URL",
        help="also push the metrics over OTLP to a collector: http://host:port (/v1/metrics is added) or grpc://",
    )
    p.add_argument("--push-interval", default="10s", help="how often metrics are pushed (default 10s)")
    p.add_argument("--settle", default="2s", help="wait after a run's root arrives before grading (default 2s)")
    p.add_argument(
        "--no-in-flight",
        action="store_true",
        help="grade runs when their root arrives only, without checking budgets and loops as their spans arrive",
    )
    p.add_argument(
        "--no-log-events",
        action="store_true",
        help="send no gen_ai.evaluation.result log events (breaches, results) to the --forward targets",
    )
    p.add_argument("--max-traces", type=int, default=10_000, help="traces in flight (default 10000)")
    p.add_argument("--max-trace-age", default="5m", help="grade a trace without root as partial after (5m)")
    p.add_argument("--max-buffered-spans", type=int, default=200_000, help="per target, before HTTP 429")
    p.add_argument(
        "--max-buffered-bytes", type=int, default=128 * 1024 * 1024, help="per target, before HTTP 429 (128 MiB)"
    )
    p.add_argument(
        "--max-grading-bytes",
        type=int,
        default=128 * 1024 * 1024,
        help="spans held for grading, all traces together; past it a run is graded as partial (128 MiB)",
    )
    p.add_argument("--max-request-bytes", type=int, default=16 * 1024 * 1024)
    p.add_argument("--max-decompressed-bytes", type=int, default=64 * 1024 * 1024)
    p.add_argument("--header-timeout", default="10s", help="a connection's request headers, or it is closed (10s)")
    p.add_argument("--body-timeout", default="30s", help="a request body, or HTTP 408 (30s)")
    p.add_argument("--auth-token-file", metavar="FILE", help="require 'Authorization: Bearer <token>'")
    p.add_argument("--tls-cert", metavar="FILE")
    p.add_argument("--tls-key", metavar="FILE")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("graders", help="list the grader catalogue")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_graders)
    return parser


def main(argv: Sequence[str] | None = None, *, ends_process: bool = False) -> int:
    """Run a command; its exit code. ``ends_process``: the process is the command's own and ends right after
    (:func:`run`), so what the command read is not let go, ``PRICE_UPDATER_IMPORTS`` are deferred and pydantic
    loads no plugin (``PYDANTIC_PLUGINS_SETTING``)."""
    args = build_parser().parse_args(argv)
    if ends_process and args.func is not cmd_serve:
        os.environ.setdefault(PYDANTIC_PLUGINS_SETTING, "__all__")
        if "genai_prices" not in sys.modules:
            from trajgrade.doors.deferred_modules import defer

            for name in PRICE_UPDATER_IMPORTS:
                defer(name)
    nothing_frozen = not gc.get_freeze_count()
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        if not ends_process:
            _READ.clear()
            if nothing_frozen:
                gc.unfreeze()  # what the command kept out of collections, when called in a longer-lived process


def run() -> NoReturn:
    """The ``trajgrade`` program: :func:`main`, an exception out of it exiting ``INTERNAL_ERROR``; then, after a
    command that read trace files, the process ends without Python's teardown.

    The operating system takes back a process's memory at once, where the interpreter would free what the
    command read object by object, then its modules: on a 100,000-step run that is a tenth of a second, and
    every run pays the teardown of the imports (about as much). Nothing is left to do by then: the report is
    written and closed, and standard output and error are flushed here. Other commands (``serve`` above all,
    whose exit handlers flush what it still holds) end as any program does.
    """
    try:
        code = main(ends_process=True)
    except Exception:
        traceback.print_exc()
        print("trajgrade: internal error (the traceback above): please report it", file=sys.stderr)
        code = INTERNAL_ERROR
    if not _READ:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader gone; a stream closed
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
