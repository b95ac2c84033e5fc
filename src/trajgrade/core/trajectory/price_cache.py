"""genai-prices' answers kept on disk from one process to the next.

genai-prices takes a tenth of a second or more to import and load its bundled table: a quarter of what the command
line takes to grade a small file. What ``cost.py`` asks of it (a model's rates per million tokens) is kept in a
file under the user's cache directory (``$XDG_CACHE_HOME/trajgrade``, else ``~/.cache/trajgrade``), so that a
process that prices only models priced before never imports it.

The file holds the answers of one installed genai-prices: it names the installed table (its file's path, size and
modification time) and trajgrade's version, and a file that names another is not read. A process in which
genai-prices is imported already when the first price is looked up reads the table it has loaded, which it may
have updated from the network (``genai_prices.UpdatePrices``): it neither reads the file nor writes it. A file that
cannot be read or written is left alone: genai-prices answers, as without it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trajgrade.version import __version__

__all__ = ["Answer", "cache_path", "remembered"]

#: Two rates per million tokens (each ``None`` where genai-prices cannot say), or ``None`` for a model it does not
#: know.
Answer = tuple[float | None, float | None] | None

#: Answers a file keeps at most (a process asks about a few models).
_MAX_ANSWERS = 4096

_lock = threading.Lock()
_table: dict[str, Answer] | None = None  # the file's answers, once read (None: not read yet)
_stamp: str | None = None  # the installed table's stamp; "" when the file is not used in this process


def cache_path() -> Path:
    """The file of the answers."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trajgrade" / "genai-prices.json"


def remembered(kind: str, model: str, provider: str | None, look_up: Callable[[], Answer]) -> Answer:
    """The answer kept for (``kind``, ``model``, ``provider``), else ``look_up()``, kept for the next process."""
    key = json.dumps([kind, model, provider])
    with _lock:
        table = _loaded()
        if key in table:
            return table[key]
    answer = look_up()
    with _lock:
        if _stamp and key not in table and len(table) < _MAX_ANSWERS:
            table[key] = answer
            _write(table)
    return answer


def _loaded() -> dict[str, Answer]:
    """The file's answers, read at the first look-up of the process (empty when the file is not used)."""
    global _table, _stamp
    if _table is None:
        _stamp = "" if "genai_prices" in sys.modules else _installed_stamp()
        _table = _read(_stamp) if _stamp else {}
    return _table


def _installed_stamp() -> str:
    """What names the installed genai-prices table and this trajgrade ("" when genai-prices is not installed)."""
    try:
        spec = importlib.util.find_spec("genai_prices")
        if spec is None or not spec.submodule_search_locations:
            return ""
        data = Path(list(spec.submodule_search_locations)[0]) / "data.py"
        st = data.stat()
    except (OSError, ImportError, ValueError):
        return ""
    return f"{data}:{st.st_size}:{st.st_mtime_ns}:trajgrade {__version__}"


def _read(stamp: str) -> dict[str, Answer]:
    try:
        kept: Any = json.loads(cache_path().read_bytes())
    except (OSError, ValueError, RecursionError, RuntimeError):  # RuntimeError: no home directory
        return {}
    if not isinstance(kept, dict) or kept.get("table") != stamp or not isinstance(kept.get("answers"), dict):
        return {}
    return {key: _answer(value) for key, value in kept["answers"].items() if _valid(value)}


def _valid(value: Any) -> bool:
    """Whether ``value`` is an answer as the file holds it: ``null``, or two rates, each a number or ``null``."""
    return value is None or (
        isinstance(value, list)
        and len(value) == 2
        and all(v is None or (type(v) in (int, float) and 0 <= v < math.inf) for v in value)
    )


def _answer(value: list[Any] | None) -> Answer:
    if value is None:
        return None
    first, second = (None if v is None else float(v) for v in value)
    return first, second


def _write(table: dict[str, Answer]) -> None:
    """The answers written whole to a file beside the cache file, which then replaces it (a reader sees one or the
    other; of two processes writing at once, one's answers are kept)."""
    try:
        path = cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".genai-prices.", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"table": _stamp, "answers": table}, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, RuntimeError):
        pass
