"""Prices: genai-prices' table is loaded when a server asks, not on the first priced call."""

from __future__ import annotations

import subprocess
import sys

from trajgrade.core.trajectory.cost import call_cost
from trajgrade.core.trajectory.model import Usage

_CHECK = """
from genai_prices import data_snapshot
from trajgrade.core.trajectory.cost import load_prices
before = data_snapshot._bundled_snapshot.cache_info().currsize
load_prices()
print(before, data_snapshot._bundled_snapshot.cache_info().currsize)
"""


def test_load_prices_loads_the_bundled_table_before_any_call() -> None:
    # A fresh interpreter: in this one an earlier test may already have priced a call.
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "1"]


def test_a_known_model_is_priced_and_an_unknown_one_is_not() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    cost = call_cost("gpt-4o", "openai", usage, {})
    assert cost is not None and cost > 0
    assert call_cost("no-such-model-xyz", "openai", usage, {}) is None
