"""``import trajgrade`` and ``trajgrade --version`` load only what they need (the names are imported lazily)."""

from __future__ import annotations

import json
import subprocess
import sys


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
