"""Cost of an LLM call from its tokens, when the span does not carry a cost.

Prices come from the user's overrides first, then from ``genai-prices`` (the ``prices`` extra; its data
is bundled and it never goes to the network unless asked). An unknown model gives an unknown cost, never
zero. Per-token rates are looked up once per (model, provider) at a 1,000-token request size, so long
runs cost one look-up per model, not one per call (the cache rates only for a model whose calls read or
write the cache); tiered prices above that size are not applied. What genai-prices answers is kept on disk for
the next process (``price_cache.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from trajgrade.core import semconv as sc
from trajgrade.core.trajectory.model import Usage
from trajgrade.core.trajectory.price_cache import remembered

__all__ = ["Price", "call_cost", "load_prices"]

_PROBE_TOKENS = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


def call_cost(
    model: str | None, provider: str | None, usage: Usage | None, overrides: Mapping[str, Price]
) -> float | None:
    """The USD cost of one call, or ``None`` when the model or the tokens are unknown."""
    if model is None or usage is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    cache_read = usage.cache_read_tokens or 0
    cache_write = usage.cache_write_tokens or 0
    price = overrides.get(model)
    if price is None:
        provider = provider if provider not in sc.FRAMEWORK_PROVIDERS else None
        rates = _genai_rates(model, provider)
        if rates is None:
            return None
        if not cache_read and not cache_write:  # most calls: the cache rates are not looked up
            return (max(usage.input_tokens, 0) * rates[0] + usage.output_tokens * rates[1]) / 1e6
        cache_rates = _genai_cache_rates(model, provider)
        price = Price(input=rates[0], output=rates[1], cache_read=cache_rates[0], cache_write=cache_rates[1])
    if not cache_read and not cache_write:  # most calls
        return (max(usage.input_tokens, 0) * price.input + usage.output_tokens * price.output) / 1e6
    # OpenTelemetry's input tokens include cached tokens; price those at their own rate when one is known.
    plain_input = usage.input_tokens
    cost = 0.0
    if price.cache_read is not None:
        plain_input -= cache_read
        cost += cache_read * price.cache_read
    if price.cache_write is not None:
        plain_input -= cache_write
        cost += cache_write * price.cache_write
    cost += max(plain_input, 0) * price.input + usage.output_tokens * price.output
    return cost / 1e6


def load_prices() -> None:
    """Load genai-prices' bundled table now rather than on the first priced call.

    That takes about 0.15 s on the benchmark machine. A server calls this before it takes traffic, so that its
    first runs do not wait for it, and so that the table is among what start-up allocated (``serve`` freezes
    that out of garbage collection).
    """
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return
    data_snapshot.get_snapshot()


@functools.lru_cache(maxsize=512)
def _genai_rates(model: str, provider: str | None) -> tuple[float, float] | None:
    """USD per million input and output tokens (``None`` when genai-prices does not know the model)."""
    rates = remembered("rates", model, provider, lambda: _looked_up_rates(model, provider))
    if rates is None or rates[0] is None or rates[1] is None:
        return None
    return rates[0], rates[1]


def _looked_up_rates(model: str, provider: str | None) -> tuple[float, float] | None:
    input_rate = _per_million(model, provider, input_tokens=_PROBE_TOKENS, output_tokens=0)
    output_rate = _per_million(model, provider, input_tokens=0, output_tokens=_PROBE_TOKENS)
    if input_rate is None or output_rate is None:
        return None
    return input_rate, output_rate


@functools.lru_cache(maxsize=512)
def _genai_cache_rates(model: str, provider: str | None) -> tuple[float | None, float | None]:
    """USD per million cache-read and cache-write tokens, looked up for the first call that has them (each
    look-up takes milliseconds)."""
    n = _PROBE_TOKENS
    rates = remembered(
        "cache rates",
        model,
        provider,
        lambda: (
            _per_million(model, provider, input_tokens=n, cache_read_tokens=n, output_tokens=0),
            _per_million(model, provider, input_tokens=n, cache_write_tokens=n, output_tokens=0),
        ),
    )
    return (None, None) if rates is None else rates


def _per_million(model: str, provider: str | None, **tokens: int) -> float | None:
    """What genai-prices charges for ``tokens``, per million of the probe size; ``None`` when it cannot say."""
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    try:
        result = calc_price(PriceUsage(**tokens), model_ref=model, provider_id=provider)
    except (LookupError, ValueError):
        if provider is None:
            return None
        try:
            result = calc_price(PriceUsage(**tokens), model_ref=model)
        except (LookupError, ValueError):
            return None
    return float(result.total_price) * 1e6 / _PROBE_TOKENS
