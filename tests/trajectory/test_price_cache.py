"""genai-prices' answers kept on disk: a later process prices the same models without importing genai-prices, at
the same costs; a file of another table, a bad answer, a cache directory that cannot be written and a process that
imported genai-prices itself are each priced by genai-prices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from trajgrade.core.trajectory.price_cache import cache_path

#: Prices calls of a known model (with and without cache tokens) and of an unknown one, in a process of its own;
#: prints the costs and whether genai-prices was imported. ``sys.argv[1]``: code run first.
_PRICE = """
import json, sys
exec(sys.argv[1])
from trajgrade.core.trajectory.cost import call_cost
from trajgrade.core.trajectory.model import Usage
plain = Usage(input_tokens=1000, output_tokens=500)
cached = Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=400)
costs = [
    call_cost("gpt-4o", "openai", plain, {}),
    call_cost("claude-sonnet-4-5", "anthropic", cached, {}),
    call_cost("no-such-model-xyz", "openai", plain, {}),
]
print(json.dumps({"costs": costs, "imported": "genai_prices" in sys.modules}))
"""


def _priced(cache: Path, first: str = "") -> dict[str, Any]:
    env = os.environ | {"XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", _PRICE, first], capture_output=True, text=True, check=True, env=env)
    assert done.stderr == ""
    return dict(json.loads(done.stdout))


def _kept(cache: Path) -> dict[str, Any]:
    return dict(json.loads((cache / "trajgrade" / "genai-prices.json").read_text()))


def test_a_later_process_prices_from_the_file_without_genai_prices(tmp_path: Path) -> None:
    first = _priced(tmp_path)
    assert first["imported"]
    gpt, claude, unknown = first["costs"]
    assert gpt > 0 and claude > 0 and unknown is None
    kept = _kept(tmp_path)
    assert set(kept["answers"]) == {
        json.dumps(["rates", "gpt-4o", "openai"]),
        json.dumps(["rates", "claude-sonnet-4-5", "anthropic"]),
        json.dumps(["cache rates", "claude-sonnet-4-5", "anthropic"]),
        json.dumps(["rates", "no-such-model-xyz", "openai"]),
    }
    assert kept["answers"][json.dumps(["rates", "no-such-model-xyz", "openai"])] is None
    second = _priced(tmp_path)
    assert second == {"costs": first["costs"], "imported": False}
    # the costs genai-prices gives in a process that never had the file
    assert _priced(tmp_path / "elsewhere")["costs"] == first["costs"]


def test_answers_of_another_table_are_not_read(tmp_path: Path) -> None:
    first = _priced(tmp_path)
    kept = _kept(tmp_path)
    stamp = kept["table"]
    wrong = {key: [1000.0, 1000.0] for key in kept["answers"]}
    cache_file = tmp_path / "trajgrade" / "genai-prices.json"
    cache_file.write_text(json.dumps({"table": stamp.replace("data.py", "data_other.py"), "answers": wrong}))
    assert _priced(tmp_path) == first  # genai-prices answered, and wrote its answers for its own table
    assert _kept(tmp_path) == kept


def test_a_bad_answer_is_looked_up_again(tmp_path: Path) -> None:
    first = _priced(tmp_path)
    kept = _kept(tmp_path)
    gpt = json.dumps(["rates", "gpt-4o", "openai"])
    for bad in (["x", 1.0], [1.0], -1.0, [1.0, -2.0], {"input": 1.0}):
        cache_file = tmp_path / "trajgrade" / "genai-prices.json"
        cache_file.write_text(json.dumps({**kept, "answers": {**kept["answers"], gpt: bad}}))
        assert _priced(tmp_path) == first | {"imported": True}, bad
        assert _kept(tmp_path) == kept
    for not_json in ("{not json", "[" * 100_000):
        cache_file.write_text(not_json)
        assert _priced(tmp_path) == first | {"imported": True}


def test_a_cache_that_cannot_be_written_leaves_genai_prices_to_answer(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    expected = _priced(tmp_path / "cache")["costs"]
    assert _priced(not_a_directory) == {"costs": expected, "imported": True}
    assert _priced(not_a_directory) == {"costs": expected, "imported": True}


def test_a_process_that_imported_genai_prices_neither_reads_nor_writes_the_file(tmp_path: Path) -> None:
    first = _priced(tmp_path)
    kept = _kept(tmp_path)
    doubled = {
        key: None if v is None else [None if r is None else 2 * r for r in v] for key, v in kept["answers"].items()
    }
    cache_file = tmp_path / "trajgrade" / "genai-prices.json"
    cache_file.write_text(json.dumps({**kept, "answers": doubled}))
    assert _priced(tmp_path, "import genai_prices") == first
    assert _kept(tmp_path)["answers"] == doubled  # untouched
    assert _priced(tmp_path)["costs"] == [2 * first["costs"][0], 2 * first["costs"][1], None]  # the file, read


def test_the_file_is_under_the_cache_directory_the_environment_names(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_path() == tmp_path / "trajgrade" / "genai-prices.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_path() == tmp_path / "home" / ".cache" / "trajgrade" / "genai-prices.json"
