"""``import trajgrade`` and ``trajgrade --version`` load only what they need (the names are imported lazily)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from trajgrade.doors.cli import main


def _loaded(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    return sorted(m for m in json.loads(out) if m.startswith("trajgrade") or m.startswith("opentelemetry"))


def test_import_and_version_load_nothing_else() -> None:
    report = "import json, sys; sys.stderr.write(json.dumps(list(sys.modules)))"
    assert _loaded(f"import trajgrade; {report}") == ["trajgrade", "trajgrade.version"]
    version = (
        "import sys; sys.argv = ['trajgrade', '--version']\n"
        "from trajgrade.doors.cli import main\n"
        "try: main()\n"
        "except SystemExit: pass\n"
    )
    assert _loaded(version + report) == [
        "trajgrade",
        "trajgrade.doors",
        "trajgrade.doors.cli",
        "trajgrade.exceptions",
        "trajgrade.version",
    ]


def test_every_public_name_is_there_when_used() -> None:
    import trajgrade

    for name in trajgrade.__all__:
        assert getattr(trajgrade, name) is not None
    assert set(dir(trajgrade)) >= set(trajgrade.__all__)


FIXTURES = Path(__file__).parent / "fixtures"
#: A run whose model calls carry tokens and no cost: reading it looks up prices in genai-prices.
PRICED_RUN = FIXTURES / "openinference" / "openai" / "three_tools.json"
THRESHOLD = "graders:\n  - type: token-budget\n    config: {max: 40000}\n"
SCHEMA = "graders:\n  - type: tool-schema\n    schemas: {search: {type: object}}\n    allowlist: [search]\n"
#: A schema the run's ``search`` call does not satisfy: its violation is described by jsonschema.
BROKEN_SCHEMA = "graders:\n  - type: tool-schema\n    schemas: {search: {type: object, required: [page]}}\n"
#: What no command but the one that needs it runs: the price updater's network and event loop, JSON Schema, the
#: regex engine (every pattern of these graders files is a plain string).
HEAVY = ("httpx2", "asyncio", "jsonschema", "jsonschema_rs", "referencing", "regex")
#: What describes a schema's violation: jsonschema (and its references' library).
DESCRIBING = ("jsonschema", "referencing")


def _command(argv: list[str], then: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    """What the command line's process (``main(..., ends_process=True)``, as ``run`` calls it) ran of each module
    in ``HEAVY`` and of genai-prices, its exit code, whether pydantic looked for plugins, and what ``then`` printed
    (code run after it); ``env``: what the process's environment sets besides the test's own (which loses any
    pydantic plugin setting). The process has a cache directory of its own, empty: no price is kept from another."""
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from trajgrade.doors.cli import main\n"
        "from trajgrade.doors.deferred_modules import DeferredModule\n"
        "with redirect_stdout(io.StringIO()):\n"
        f"    exit_code = main({argv!r}, ends_process=True)\n"
        "ran = {n: n in sys.modules and not isinstance(sys.modules[n], DeferredModule)\n"
        f"       for n in {(*HEAVY, 'genai_prices', 'yaml')!r}}}\n"
        "from pydantic.plugin import _loader\n"
        "plugins_sought = _loader._plugins is not None\n"
        f"{then}\n"
        "print(json.dumps({'exit': exit_code, 'ran': ran, 'plugins_sought': plugins_sought}))\n"
    )
    with tempfile.TemporaryDirectory() as cache:  # no price kept from an earlier process: genai-prices answers
        environment = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
        environment |= {"XDG_CACHE_HOME": cache} | (env or {})
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment
        ).stdout
    lines = out.splitlines()
    return {**json.loads(lines[-1]), "printed": lines[:-1]}


@pytest.mark.parametrize(
    ("argv", "graders", "needed"),
    [
        (["trajectory", str(PRICED_RUN)], None, {"genai_prices"}),
        (["grade", "--config", "{config}", str(PRICED_RUN)], THRESHOLD, {"genai_prices", "yaml"}),
        (["grade", "--config", "{config}", str(PRICED_RUN)], SCHEMA, {"genai_prices", "yaml", "jsonschema_rs"}),
        (
            ["grade", "--config", "{config}", str(PRICED_RUN)],
            BROKEN_SCHEMA,
            {"genai_prices", "yaml", "jsonschema_rs", *DESCRIBING},
        ),
        (["validate", "{config}"], SCHEMA, {"yaml", "jsonschema_rs"}),
    ],
    ids=["trajectory", "grade-threshold", "grade-tool-schema", "grade-tool-schema-violated", "validate-tool-schema"],
)
def test_commands_run_only_the_libraries_they_use(
    tmp_path: Path, argv: list[str], graders: str | None, needed: set[str]
) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(graders or "")
    done = _command([a.format(config=config) for a in argv])
    assert done["exit"] in (0, 1)
    ran = {name for name, yes in done["ran"].items() if yes}
    assert ran & set(HEAVY) == needed & set(HEAVY)
    assert needed <= ran


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_trajectory_loads_no_grader(fmt: str) -> None:
    """``trajgrade trajectory`` reads and rebuilds runs: the graders, their config and the in-flight checks stay
    unloaded (the run collector is handed its checks by a door that has them)."""
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from trajgrade.doors.cli import main\n"
        "with redirect_stdout(io.StringIO()) as out:\n"
        f"    exit_code = main(['trajectory', '--format', {fmt!r}, {str(PRICED_RUN)!r}], ends_process=True)\n"
        "sys.stderr.write(json.dumps([exit_code, len(out.getvalue()), list(sys.modules)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    exit_code, printed, modules = json.loads(done.stderr.splitlines()[-1])
    assert exit_code == 0 and printed > 0
    grading = ("trajgrade.core.graders", "trajgrade.core.config", "trajgrade.core.inflight", "trajgrade.core.running")
    assert [m for m in modules if m.startswith(grading)] == []
    assert "trajgrade.core.collector" in modules  # the runs were read as every door reads them


@pytest.mark.parametrize(("setting", "sought"), [(None, False), ("some_plugin", True)])
def test_pydantic_looks_for_no_plugins_unless_the_environment_says(
    tmp_path: Path, setting: str | None, sought: bool
) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text(THRESHOLD)
    env = {} if setting is None else {"PYDANTIC_DISABLE_PLUGINS": setting}
    done = _command(["grade", "--config", str(config), str(PRICED_RUN)], env=env)
    assert done["exit"] == 0
    assert done["plugins_sought"] is sought


def test_a_command_prices_from_the_answers_an_earlier_one_kept_without_genai_prices(tmp_path: Path) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - {name: spend, type: cost, max_usd: 1.0}\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    reports = []
    for n in (1, 2):
        report = tmp_path / f"report{n}.json"
        done = _command(
            ["grade", "--config", str(config), "--format", "json", "-o", str(report), str(PRICED_RUN)], env=env
        )
        assert done["exit"] == 0 and done["ran"]["genai_prices"] is (n == 1)
        reports.append(json.loads(report.read_text()))
    assert reports[0] == reports[1]
    assert reports[0]["runs"][0]["summary"]["cost_usd"] > 0


def test_the_price_updater_works_after_the_command_line_deferred_its_imports(tmp_path: Path) -> None:
    """httpx2 and asyncio, imported for real after a command, work; the prices are those of a process that
    deferred nothing."""
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - {name: spend, type: cost, max_usd: 1.0}\n")
    report = tmp_path / "report.json"
    then = (
        "import asyncio, httpx2, genai_prices\n"
        "from genai_prices import Usage, calc_price\n"
        "print(asyncio.run(genai_prices.wait_prices_updated_async(0)))\n"
        "print(genai_prices.UpdatePrices().request_timeout == httpx2.Timeout(timeout=10, connect=5))\n"
        "client = httpx2.Client(transport=httpx2.MockTransport(lambda request: httpx2.Response(204)))\n"
        "print(client.get('http://prices.invalid/').status_code)\n"
        "print(calc_price(Usage(input_tokens=1000, output_tokens=500), 'gpt-4o').total_price)\n"
        "print(type(asyncio).__name__, type(httpx2).__name__)\n"
    )
    done = _command(["grade", "--config", str(config), "--format", "json", "-o", str(report), str(PRICED_RUN)], then)
    assert not done["ran"]["httpx2"] and not done["ran"]["asyncio"] and done["ran"]["genai_prices"]
    from genai_prices import Usage, calc_price

    price = calc_price(Usage(input_tokens=1000, output_tokens=500), "gpt-4o").total_price
    assert done["printed"] == ["False", "True", "204", str(price), "module module"]
    in_process = tmp_path / "in_process.json"
    assert main(["grade", "--config", str(config), "--format", "json", "-o", str(in_process), str(PRICED_RUN)]) == 0
    assert json.loads(report.read_text()) == json.loads(in_process.read_text())
    assert json.loads(report.read_text())["runs"][0]["summary"]["cost_usd"] > 0
