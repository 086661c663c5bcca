"""What one stage run used: tokens, cost, time — in one convention for every agent.

Tokens follow the OpenTelemetry GenAI semantic conventions (``gen_ai.usage.*``); adapters
convert at the edge, so the store never mixes conventions:

- ``input_tokens`` (``gen_ai.usage.input_tokens``): every prompt token, cache reads and
  cache writes INCLUDED;
- ``output_tokens`` (``gen_ai.usage.output_tokens``): every generated token, reasoning
  INCLUDED;
- ``cache_read_tokens`` (``gen_ai.usage.cache_read.input_tokens``): the part of the input
  served from a prompt cache;
- ``cache_write_tokens`` (``gen_ai.usage.cache_creation.input_tokens``): the part of the
  input written to a prompt cache.

Anthropic reports ``input_tokens`` WITHOUT the cache tokens: :func:`from_anthropic` adds
them back. OpenAI and Gemini already include cached tokens in their input counts.

Every count is an ``int`` or ``None`` (not reported); ``None`` is never turned into 0.
Cost is USD with ``cost_source``:

- ``reported`` — the agent reported it; used as is, never recomputed;
- ``priced`` — andon computed it from the tokens with a price table; ``price_source`` names
  it (``genai-prices 0.2.3``, or ``andon.toml [prices."<model>"]``);
- ``unknown`` — ``cost_usd`` is ``None`` (unknown model, unknown tokens): never 0.

``wall_s`` is wall-clock seconds of the agent process as the harness measured it; ``turns``
is the agent's own count of turns (what a turn is differs per agent: see its adapter).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Literal

CostSource = Literal["reported", "priced", "unknown"]
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
PRICES_LIBRARY = "genai-prices"
# litellm-style provider prefixes (aider names models like "gemini/gemini-2.5-pro") mapped to
# the provider ids of the price library.
_PROVIDER_ALIASES = {"gemini": "google", "vertex_ai": "google", "google": "google",
                     "anthropic": "anthropic", "openai": "openai", "openrouter": "openrouter",
                     "deepseek": "deepseek", "groq": "groq", "mistral": "mistral",
                     "xai": "x-ai", "bedrock": "aws"}


@dataclass
class Usage:
    """Usage of one stage run (see the module docstring for units and conventions).

    ``models`` breaks tokens (and cost, when reported per model) down by model name, when
    the agent used several (Claude Code uses a small model for side tasks); each value has
    the four token fields and optionally ``cost_usd``. ``notes`` say what could not be read
    (truncated lines, unknown event types, a capped transcript, why cost is unknown).
    """

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: CostSource = "unknown"
    price_source: str | None = None
    wall_s: float | None = None
    turns: int | None = None
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Usage":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)

    @property
    def has_tokens(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    def report_cost(self, cost: Any) -> None:
        """Record a cost the agent reported (a number ≥ 0); anything else is ignored."""
        c = as_cost(cost)
        if c is not None:
            self.cost_usd, self.cost_source, self.price_source = c, "reported", None


def as_count(v: Any) -> int | None:
    """A token count from JSON: a non-negative int (or integral float), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        return None
    return int(v) if v >= 0 else None


def as_cost(v: Any) -> float | None:
    """A USD amount from JSON: a finite number ≥ 0, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and v >= 0 else None


def from_anthropic(input_tokens: Any, output_tokens: Any, cache_read: Any,
                   cache_write: Any) -> dict[str, int | None]:
    """Anthropic counts (``input_tokens`` EXCLUDES cache) → the OpenTelemetry convention.

    Missing cache counts are taken as 0 only when ``input_tokens`` is known (Anthropic omits
    them when no cache was used); a missing ``input_tokens`` leaves input unknown.
    """
    uncached, out = as_count(input_tokens), as_count(output_tokens)
    cr, cw = as_count(cache_read), as_count(cache_write)
    if uncached is None:
        return {"input_tokens": None, "output_tokens": out, "cache_read_tokens": cr,
                "cache_write_tokens": cw}
    cr, cw = cr or 0, cw or 0
    return {"input_tokens": uncached + cr + cw, "output_tokens": out,
            "cache_read_tokens": cr, "cache_write_tokens": cw}


def sum_counts(parts: Iterable[Mapping[str, Any]]) -> dict[str, int | None]:
    """Field-wise sum of token dicts; a field is None if it is None in every part, and
    None too if any part lacks it while others have it (a partial sum would understate)."""
    parts = list(parts)
    out: dict[str, int | None] = {}
    for f in TOKEN_FIELDS:
        vals = [p.get(f) for p in parts]
        known = [v for v in vals if v is not None]
        out[f] = sum(known) if known and len(known) == len(vals) else None
    return out


# -- pricing --------------------------------------------------------------------------------

def library_version() -> str | None:
    """Version of the installed price library, or None if it is not installed."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(PRICES_LIBRARY)
    except PackageNotFoundError:
        return None


def price(usage: Usage, overrides: Mapping[str, Any] | None = None) -> Usage:
    """Fill in ``cost_usd`` when the agent reported none; return ``usage`` (changed in place).

    A reported cost is kept as is. Otherwise every model in ``usage.models`` (or
    ``usage.model`` alone) is priced from ``overrides`` (``[prices."<model>"]`` in andon.toml:
    objects with ``input_per_mtok``, ``output_per_mtok`` and optional ``cache_read_per_mtok``,
    ``cache_write_per_mtok``, USD per million tokens) or else from genai-prices' bundled
    snapshot (offline). If any model has no price, or its input/output tokens are unknown,
    the cost is unknown (None) and a note says why: never a partial sum, never 0.
    """
    if usage.cost_source == "reported" and usage.cost_usd is not None:
        return usage
    usage.cost_usd, usage.cost_source, usage.price_source = None, "unknown", None
    parts = usage.models or ({usage.model: _tokens(usage)} if usage.model else {})
    if not parts:
        if usage.has_tokens:
            usage.notes.append("cost unknown: the model is unknown (set `model` for this "
                               "agent in andon.toml)")
        return usage
    total, sources = Decimal(0), set()
    for model, tokens in parts.items():
        cost, source, why = price_tokens(model, tokens, overrides or {})
        if cost is None:
            usage.notes.append(f"cost unknown: {why}")
            return usage
        total += cost
        sources.add(source)
    usage.cost_usd, usage.cost_source = float(total), "priced"
    usage.price_source = ", ".join(sorted(sources))
    return usage


def price_tokens(model: str, tokens: Mapping[str, Any], overrides: Mapping[str, Any]
                 ) -> tuple[Decimal | None, str, str]:
    """USD for ``tokens`` (OpenTelemetry convention) of ``model``: (cost, source, why-not)."""
    inp, out = tokens.get("input_tokens"), tokens.get("output_tokens")
    if inp is None or out is None:
        return None, "", f"{model}: input or output tokens not reported"
    cr, cw = tokens.get("cache_read_tokens") or 0, tokens.get("cache_write_tokens") or 0
    if model in overrides:
        p = overrides[model]
        rate_in = Decimal(str(p.input_per_mtok))
        rate_cr = Decimal(str(p.cache_read_per_mtok if p.cache_read_per_mtok is not None
                              else p.input_per_mtok))
        rate_cw = Decimal(str(p.cache_write_per_mtok if p.cache_write_per_mtok is not None
                              else p.input_per_mtok))
        uncached = max(0, inp - cr - cw)
        cost = (uncached * rate_in + cr * rate_cr + cw * rate_cw
                + out * Decimal(str(p.output_per_mtok))) / Decimal(1_000_000)
        return cost, f'andon.toml [prices."{model}"]', ""
    version = library_version()
    if version is None:
        return None, "", f"{model}: the price library {PRICES_LIBRARY} is not installed"
    from genai_prices import Usage as PriceUsage, calc_price
    counts = PriceUsage(input_tokens=inp, output_tokens=out, cache_read_tokens=cr,
                        cache_write_tokens=cw)
    for ref, provider in _lookups(model):
        try:
            result = calc_price(counts, model_ref=ref, provider_id=provider)
        except LookupError:
            continue
        except ValueError as exc:  # counts the library finds inconsistent
            return None, "", f"{model}: {exc}"
        return (Decimal(str(result.total_price)), f"{PRICES_LIBRARY} {version}", "")
    return None, "", (f"no price for model {model!r} in {PRICES_LIBRARY} {version}; add "
                      f'[prices."{model}"] to andon.toml')


def _lookups(model: str) -> list[tuple[str, str | None]]:
    """Names to try in the price library: as given, then without a provider prefix."""
    tries: list[tuple[str, str | None]] = [(model, None)]
    prefix, _, rest = model.partition("/")
    if rest:
        provider = _PROVIDER_ALIASES.get(prefix)
        if provider:
            tries.append((rest, provider))
        tries.append((rest, None))
    return tries


def _tokens(u: Usage) -> dict[str, int | None]:
    return {f: getattr(u, f) for f in TOKEN_FIELDS}


# -- totals for reports ---------------------------------------------------------------------

def totals(usages: Iterable[Mapping[str, Any] | None], wall: Iterable[float | None] = ()
           ) -> dict[str, Any]:
    """Sum stored usage dicts (``stage_runs.usage``) for a report.

    Returns ``{runs, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    cost_usd, cost_unknown_runs, wall_s}``: token and cost sums over the runs that reported
    them (``None`` when none did); ``cost_unknown_runs`` counts runs whose cost is unknown, so
    a reader can tell a partial sum from a complete one. ``wall`` gives the runs' wall seconds
    when they are not in the usage dicts (stage runs store their own duration).
    """
    usages = list(usages)
    out: dict[str, Any] = {"runs": len(usages)}
    for f in TOKEN_FIELDS:
        known = [u[f] for u in usages if u and u.get(f) is not None]
        out[f] = sum(known) if known else None
    costs = [u.get("cost_usd") for u in usages if u]
    known_costs = [c for c in costs if c is not None]
    out["cost_usd"] = float(sum(known_costs)) if known_costs else None
    out["cost_unknown_runs"] = len(usages) - len(known_costs)
    walls = [w for w in wall if w is not None]
    if not walls:
        walls = [u["wall_s"] for u in usages if u and u.get("wall_s") is not None]
    out["wall_s"] = float(sum(walls)) if walls else None
    return out
