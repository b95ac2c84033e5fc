"""Deferred modules run at the first use of one of their names, as a plain import would have run them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from trajgrade.doors.deferred_modules import DeferredModule, defer

#: Each module below appends its name to ``ran`` (a module of the same folder, imported as usual) as it runs.
SOURCES = {
    "ran.py": "names = []\n",
    "lone.py": "import ran\nran.names.append(__name__)\nVALUE = 42\n",
    "pack/__init__.py": "import ran\nran.names.append(__name__)\nfrom . import helper\nSHARED = helper.TWO\n",
    "pack/helper.py": "import ran\nran.names.append(__name__)\nTWO = 2\n",
    "pack/sub.py": "import ran\nran.names.append(__name__)\nfrom . import SHARED\nDOUBLE = SHARED * 2\n",
    "broken.py": "import ran\nran.names.append(__name__)\nraise RuntimeError('broken on purpose')\n",
}


@pytest.fixture
def ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    for name, text in SOURCES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import ran as module

    yield module.names
    for name in [*sys.modules]:
        if name.split(".")[0] in {"ran", "lone", "pack", "broken"}:
            del sys.modules[name]


def test_a_deferred_module_runs_at_its_first_name(ran: list[str]) -> None:
    assert defer("lone")
    import lone

    assert ran == [] and isinstance(lone, DeferredModule) and lone.__name__ == "lone"
    assert lone.VALUE == 42
    assert ran == ["lone"] and type(lone) is ModuleType and sys.modules["lone"] is lone
    assert lone.VALUE == 42 and ran == ["lone"]
    with pytest.raises(AttributeError):
        _ = lone.missing
    assert not defer("lone")  # imported already


def test_a_submodule_imported_first_runs_its_package_first(ran: list[str]) -> None:
    assert defer("pack")
    import pack.sub

    assert ran == ["pack", "pack.helper", "pack.sub"]
    assert pack.sub.DOUBLE == 4 and pack.SHARED == 2 and type(pack) is ModuleType


def test_from_import_runs_it_and_a_missing_name_is_an_import_error(ran: list[str]) -> None:
    assert defer("pack")
    from pack import SHARED

    assert SHARED == 2 and ran == ["pack", "pack.helper"]
    with pytest.raises(ImportError):
        from pack import nothing  # noqa: F401


def test_a_module_that_fails_is_gone_as_after_a_failed_import(ran: list[str]) -> None:
    assert defer("broken")
    import broken

    with pytest.raises(RuntimeError, match="broken on purpose"):
        _ = broken.anything
    assert "broken" not in sys.modules
    with pytest.raises(RuntimeError, match="broken on purpose"):
        import broken
    assert ran == ["broken", "broken"]


def test_nothing_is_deferred_that_is_imported_or_unknown(ran: list[str]) -> None:
    assert not defer("ran") and not defer("json") and not defer("no_such_module_here")
    assert type(sys.modules["json"]) is ModuleType and "no_such_module_here" not in sys.modules
