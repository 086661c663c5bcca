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

Pricing (``pricing``): the price tables have tiers that apply per API request (a
long-context rate once one request's input passes e.g. 200k tokens), so a cost is priced
request by request whenever the adapter could read the run's requests (``requests``, the
token dicts of each request, not stored; ``priced_requests`` is their count) and their sum
equals the run's totals: ``pricing = "per_request"``. When only totals and the number of
requests are known (a ``requests`` count in a ``models`` entry: Gemini CLI's JSON), the
totals are split evenly over that many requests: ``pricing = "even_split"`` (exact unless
the requests straddle a tier boundary). Otherwise the totals are priced once,
``pricing = "total"`` — a tier may then be applied wrongly, and ``andon show`` says so.

A reported cost is believed unless the adapter asks for a check (``check_reported``; aider,
whose fallback bills cache tokens twice): when andon's own price of the same tokens differs
by more than ``CHECK_TOLERANCE`` (relative) and ``CHECK_SLACK_USD``, andon's price is used,
``cost_source`` is ``priced``, ``reported_cost_usd`` keeps the agent's figure and a note
gives both.

``wall_s`` is wall-clock seconds of the agent process as the harness measured it; ``turns``
is the agent's own count of turns (what a turn is differs per agent: see its adapter).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Literal

CostSource = Literal["reported", "priced", "unknown"]
Pricing = Literal["per_request", "even_split", "total"]
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
PRICES_LIBRARY = "genai-prices"
# A reported cost within 10 % (or a tenth of a cent) of andon's own price is kept: agents round
# what they print and use other tables; a wrong cache convention is off by far more (×1.5+).
CHECK_TOLERANCE = 0.10
CHECK_SLACK_USD = 0.001
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
    the four token fields and optionally ``cost_usd``. ``requests`` lists each API request's
    four token fields (and ``model`` when it is not ``model``), in order, when the transcript
    has them; it is used to price and not stored. ``tokens_within`` is how far (tokens) the
    input and cache counts may be from the truth when they come from rounded prints (Aider's
    ``Tokens: 17k sent``); None when they are exact. ``notes`` say what could not be read
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
    pricing: Pricing | None = None
    priced_requests: int | None = None
    reported_cost_usd: float | None = None
    tokens_within: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["requests"]   # can be thousands; the evidence is the transcript itself
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Usage:
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


def price(usage: Usage, overrides: Mapping[str, Any] | None = None,
          check_reported: bool = False, slack_usd: float = CHECK_SLACK_USD) -> Usage:
    """Fill in ``cost_usd`` when the agent reported none; return ``usage`` (changed in place).

    A reported cost is kept as is, unless ``check_reported`` and andon's own price of the
    tokens disagrees beyond the tolerance (see the module docstring; ``slack_usd`` widens
    it for a cost the agent printed rounded). Otherwise the requests
    in ``usage.requests`` are priced one by one (when they add up to the totals), else every
    model in ``usage.models`` (or ``usage.model`` alone) is priced on its totals, from
    ``overrides`` (``[prices."<model>"]`` in andon.toml: objects with ``input_per_mtok``,
    ``output_per_mtok`` and optional ``cache_read_per_mtok``, ``cache_write_per_mtok``, USD
    per million tokens) or else from genai-prices' bundled snapshot (offline). If any model
    has no price, or its input/output tokens are unknown, the cost is unknown (None) and a
    note says why: never a partial sum, never 0.
    """
    if usage.cost_source == "reported" and usage.cost_usd is not None:
        if check_reported:
            _check_reported(usage, overrides or {}, max(slack_usd, CHECK_SLACK_USD))
        return usage
    usage.cost_usd, usage.cost_source, usage.price_source = None, "unknown", None
    usage.pricing = usage.priced_requests = None
    cost, sources, pricing, why = _own_price(usage, overrides or {})
    if cost is None:
        if why:
            usage.notes.append(f"cost unknown: {why}")
        return usage
    usage.cost_usd, usage.cost_source, usage.pricing = float(cost), "priced", pricing
    usage.price_source = ", ".join(sorted(sources))
    if pricing == "per_request":
        usage.priced_requests = len(usage.requests)
    return usage


def _own_price(usage: Usage, overrides: Mapping[str, Any]
               ) -> tuple[Decimal | None, set[str], Pricing, str]:
    """andon's price of ``usage``: (USD or None, price sources, how it was priced, why-not)."""
    if usage.requests:
        if _requests_match(usage):
            parts = [(m, r) for r in usage.requests if (m := r.get("model") or usage.model)]
            if len(parts) == len(usage.requests):  # every request's model is known
                return _priced(parts, overrides, "per_request")
        elif "the requests do not add up" not in " ".join(usage.notes):
            usage.notes.append("the requests do not add up to the run's totals: the totals "
                               "are priced (a per-request price tier may be missed)")
    parts = list((usage.models or ({usage.model: _tokens(usage)} if usage.model else {}))
                 .items())
    if not parts:
        why = ("the model is unknown (set `model` for this agent in andon.toml)"
               if usage.has_tokens else "")
        return None, set(), "total", why
    return _priced(parts, overrides, "total")


def _priced(parts: Sequence[tuple[str, Mapping[str, Any]]], overrides: Mapping[str, Any],
            pricing: Pricing) -> tuple[Decimal | None, set[str], Pricing, str]:
    total, sources, split = Decimal(0), set(), pricing == "total"
    for model, tokens in parts:
        n = as_count(tokens.get("requests")) if pricing == "total" else None
        if n and n > 1:
            cost, source, why = _price_split(model, tokens, n, overrides)
        else:
            split = False
            cost, source, why = price_tokens(model, tokens, overrides)
        if cost is None:
            return None, set(), pricing, why
        total += cost
        sources.add(source)
    return total, sources, ("even_split" if split else pricing), ""


def _price_split(model: str, tokens: Mapping[str, Any], n: int, overrides: Mapping[str, Any]
                 ) -> tuple[Decimal | None, str, str]:
    """``tokens`` priced as ``n`` requests of equal size: ``n - 1`` requests of each count's
    floor share and one holding the remainders too, so the sums stay exact."""
    share = {f: tokens[f] // n for f in TOKEN_FIELDS if tokens.get(f) is not None}
    last = {f: share[f] + tokens[f] % n for f in share}
    a, source, why = price_tokens(model, share, overrides)
    b, _, why_b = price_tokens(model, last, overrides)
    if a is None or b is None:
        return None, "", why or why_b
    return a * (n - 1) + b, source, ""


def _requests_match(usage: Usage) -> bool:
    """The requests' sums equal the run's input and output totals (cache counts too, where
    both are known): only then is pricing them the same as pricing the run."""
    for f in TOKEN_FIELDS:
        total = getattr(usage, f)
        vals = [r.get(f) for r in usage.requests]
        if f in ("input_tokens", "output_tokens") and (total is None or None in vals):
            return False
        if total is not None and None not in vals and sum(v or 0 for v in vals) != total:
            return False
    return True


def _check_reported(usage: Usage, overrides: Mapping[str, Any], slack_usd: float) -> None:
    reported = usage.cost_usd
    own, sources, pricing, _ = _own_price(usage, overrides)
    if own is None or reported is None:
        return
    diff = abs(float(own) - reported)
    if diff <= slack_usd or diff <= CHECK_TOLERANCE * float(own):
        return
    ratio = f" (×{reported / float(own):.2f})" if own else ""
    usage.notes.append(f"the agent reported ${reported:.4f}, andon's price of the same tokens "
                       f"is ${float(own):.4f}{ratio}: andon's price used")
    usage.reported_cost_usd = reported
    usage.cost_usd, usage.cost_source, usage.pricing = float(own), "priced", pricing
    usage.price_source = ", ".join(sorted(sources))
    usage.priced_requests = len(usage.requests) if pricing == "per_request" else None


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
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price
    counts = PriceUsage(input_tokens=inp, output_tokens=out, cache_read_tokens=cr,
                        cache_write_tokens=cw)
    for ref, provider, renamed in _lookups(model):
        try:
            result = calc_price(counts, model_ref=ref, provider_id=provider)
        except LookupError:
            continue
        except ValueError as exc:  # counts the library finds inconsistent
            return None, "", f"{model}: {exc}"
        source = f"{PRICES_LIBRARY} {version}" + (f" (as {ref})" if renamed else "")
        return Decimal(str(result.total_price)), source, ""
    return None, "", (f"no price for model {model!r} in {PRICES_LIBRARY} {version}; add "
                      f'[prices."{model}"] to andon.toml')


_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
_DASHED_VERSION = re.compile(r"(?<=\D-)(\d)-(\d)(?=-|$)")


def _lookups(model: str) -> list[tuple[str, str | None, bool]]:
    """Names to try in the price library: (name, provider, renamed). As given, then without
    a provider prefix; then, renamed, without a date suffix and with a dashed version
    dotted (Codex writes ``gpt-5-1-codex-2025-11-13`` for the library's ``gpt-5.1-codex``)."""
    tries: list[tuple[str, str | None, bool]] = [(model, None, False)]
    prefix, _, rest = model.partition("/")
    if rest:
        provider = _PROVIDER_ALIASES.get(prefix)
        if provider:
            tries.append((rest, provider, False))
        tries.append((rest, None, False))
    for name, provider, _ in list(tries):
        plain = _DATE_SUFFIX.sub("", name)
        for alt in dict.fromkeys((plain, _DASHED_VERSION.sub(r"\1.\2", plain))):
            if alt != name:
                tries.append((alt, provider, True))
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
