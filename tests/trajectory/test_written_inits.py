"""The records whose ``__init__`` is written out (``@dataclass(init=False)``, so that mypyc compiles it) take each of
their fields as a keyword, in the order the class declares them, and set every one: a field added to the class and
not to its ``__init__`` would be missing from the record, read as an ``AttributeError`` far from the cause.

Read from the source, not from the classes: the compiled ones do not expose their ``__init__``'s signature."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "trajgrade" / "core"
MODULES = [SRC / "trajectory" / "model.py", SRC / "assembler.py"]


def _derived(declaration: ast.AnnAssign) -> bool:
    """A field declared ``field(init=False, ...)``: set by ``__init__`` from the others, not taken."""
    value = declaration.value
    return isinstance(value, ast.Call) and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords
    )


def _written_inits() -> list[tuple[str, list[str], list[str], list[str], list[str]]]:
    """(class, its fields, the fields it should take, __init__'s keyword parameters, the attributes it sets) of each
    class with a written ``__init__``; it should take none when it takes no parameter (a buffer that starts empty)."""
    found = []
    for path in MODULES:
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef) or not any(
                isinstance(d, ast.Call) and any(k.arg == "init" for k in d.keywords) for d in node.decorator_list
            ):
                continue
            declared = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            fields = [s.target.id for s in declared]
            taken = [s.target.id for s in declared if not _derived(s)]
            (init,) = [s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
            sets = [
                t.attr
                for s in init.body
                if isinstance(s, ast.Assign)
                for t in s.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
            parameters = [a.arg for a in init.args.kwonlyargs]
            found.append((node.name, fields, taken if parameters else [], parameters, sets))
    return found


def test_the_written_inits_are_found() -> None:
    assert [name for name, *_ in _written_inits()] == [
        "Usage", "Step", "AgentSummary", "Summary", "Trajectory", "TraceBuffer"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "fields", "taken", "parameters", "sets"), _written_inits(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_written_init_takes_and_sets_every_field(
    name: str, fields: list[str], taken: list[str], parameters: list[str], sets: list[str]
) -> None:
    assert sets == fields
    assert parameters == taken
