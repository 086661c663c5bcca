"""aider's token and cost accounting: its ``Tokens:``/``Cost:`` prints and its
``message_send`` events turned into requests in the store's convention (see
:mod:`andon.agents.aider` for what aider writes and why each correction is made).

Public names are used by :func:`andon.agents.aider.parse_run` only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..usage import TOKEN_FIELDS, Usage, as_cost, as_count, price_tokens

TOKENS_LINE = re.compile(r"^(?:> )?Tokens: (?P<body>.*?)\.(?: Cost: \$(?P<msg>[\d.,]+) "
                         r"message, \$(?P<session>[\d.,]+) session\.)?[ \t]*$", re.M)
COST_LINE = re.compile(r"(?:> )?Cost: \$(?P<msg>[\d.,]+) message, \$(?P<session>[\d.,]+) "
                       r"session\.[ \t]*$", re.M)


def read_reports(text: str) -> list[dict[str, Any]]:
    """The ``Tokens:`` reports of stdout or the chat history (``> `` quoted there), each
    with its ``Cost:`` — on the same line, or on the next one when aider printed both a
    cache hit and a cache write."""
    found = []
    for m in TOKENS_LINE.finditer(text):
        r: dict[str, Any] = m.groupdict()
        if r["msg"] is None:
            nxt = COST_LINE.match(text, m.end() + 1) if m.end() < len(text) else None
            if nxt:
                r["msg"], r["session"] = nxt.group("msg"), nxt.group("session")
        found.append(r)
    return found


def _true_input(sent: int, write: int, read: int) -> tuple[int, int, int, str]:
    """(input, cache write, cache read) of a request from aider's ``sent`` and its printed,
    maybe rounded, cache counts, and a note (see the module docstring): current aider adds
    the cache writes to a ``prompt_tokens`` that already holds both cache classes (sent =
    uncached + reads + 2 × writes); with litellm before it folded cache tokens into
    ``prompt_tokens``, sent = uncached + writes and the reads are missing. Only the lowest
    counts the prints may stand for decide between the two, and rounded counts are capped
    so that the parts never exceed the whole."""
    if not write and not read:
        return sent, write, read, ""
    if sent >= _rounding(read)[0] + 2 * _rounding(write)[0]:
        write = min(write, (sent - min(read, sent)) // 2)
        read = min(read, sent - 2 * write)
        return sent - write, write, read, "cache writes counted once (aider adds them twice)"
    return sent + read, write, read, "cache reads added (an older aider/litellm left them out)"


def _exact_cache(model: str | None, sent: int, write: int, read: int, out: int, cost: float,
                 overrides: Mapping[str, Any]) -> tuple[int, int] | None:
    """The exact (cache write, cache read) counts, when aider's cost is the price of exactly
    one count within the rounding of the printed one (``4.7k`` = 4,650..4,749) and the other
    class is exact (below 1k, or absent): the price is linear in the count, so two prices
    give it. None when the cost fits no such count (aider's fallback bills cache tokens
    twice; another price table) or both classes are rounded."""
    if not model or cost <= 0 or sent < _rounding(read)[0] + 2 * _rounding(write)[0]:
        return None
    if write >= 1000 and read < 1000:
        which, lo, hi = "w", *_rounding(write)
        hi = min(hi, (sent - read) // 2)      # uncached = sent - read - 2 × writes ≥ 0
    elif read >= 1000 and write < 1000:
        which, lo, hi = "r", *_rounding(read)
        hi = min(hi, sent - 2 * write)
    else:
        return None
    if hi <= lo:
        return None

    def at(n: int) -> float | None:
        w, r = (n, read) if which == "w" else (write, n)
        c, _, _ = price_tokens(model, {"input_tokens": sent - w, "output_tokens": out,
                                       "cache_read_tokens": r, "cache_write_tokens": w},
                               overrides)
        return None if c is None else float(c)
    a, b = at(lo), at(hi)
    if a is None or b is None or a == b:
        return None
    n: float | None = lo + (cost - a) * (hi - lo) / (b - a)
    if which == "w" and not _is_count(n, lo, hi):
        n = _fallback_write(model, sent, read, out, cost, overrides)
    if n is None or not _is_count(n, lo, hi):
        return None
    return (round(n), read) if which == "w" else (write, round(n))


def _unprinted_reads(model: str | None, inp: int, out: int, cost: float,
                     overrides: Mapping[str, Any]) -> int | None:
    """The cache reads of a request whose Tokens: report shows no cache at all, from aider's
    cost: with an OpenAI-style usage (``prompt_tokens_details.cached_tokens``) litellm prices
    the reads at the cache rate but aider reads only ``cache_read_input_tokens`` and prints
    none. The price is linear in the reads, so the cost gives them; None unless that is a
    whole count between 1 and the input (a cost from another price table fits none)."""
    if not model or cost <= 0 or inp <= 0:
        return None

    def at(n: int) -> float | None:
        c, _, _ = price_tokens(model, {"input_tokens": inp, "output_tokens": out,
                                       "cache_read_tokens": n, "cache_write_tokens": 0},
                               overrides)
        return None if c is None else float(c)
    a, b = at(0), at(inp)
    if a is None or b is None or a <= b:
        return None
    n = inp * (a - cost) / (a - b)
    # aider logs litellm's float cost unrounded: a true fit is whole to far better than 1e-3
    return round(n) if 1 <= round(n) <= inp and abs(n - round(n)) < 1e-3 else None


def _is_count(n: float | None, lo: int, hi: int) -> bool:
    return n is not None and lo <= round(n) <= hi and abs(n - round(n)) < 0.01


def _fallback_write(model: str, sent: int, read: int, out: int, cost: float,
                    overrides: Mapping[str, Any]) -> float | None:
    """The cache writes that aider's fallback cost (``compute_costs_from_tokens``: writes
    × 1.25 × input rate + reads × 0.1 × input rate + litellm's prompt count × input rate +
    output × output rate, litellm's count being ``sent - writes``) implies, at the table's
    rates; None when the table has no price."""
    def rate(field: str) -> float | None:   # per token, on a request far below any tier
        t = {"input_tokens": 0, "output_tokens": 0, field: 1000}
        c, _, _ = price_tokens(model, t, overrides)
        return None if c is None else float(c) / 1000
    r_in, r_out = rate("input_tokens"), rate("output_tokens")
    if not r_in or r_out is None:
        return None
    return (cost - read * r_in * 0.10 - sent * r_in - out * r_out) / (0.25 * r_in)


def _pair(sends: list[dict[str, Any]], reports: list[dict[str, Any]]
          ) -> list[dict[str, Any] | None]:
    """The Tokens: report of each message_send, in order: the next report whose printed
    ``sent`` is the event's ``prompt_tokens`` as aider rounds it (a capped or cut stdout
    loses reports; a flood of lookalike lines adds some)."""
    out: list[dict[str, Any] | None] = []
    j = 0
    for p in sends:
        sent = as_count(p.get("prompt_tokens"))
        k = j
        while k < len(reports) and (sent is None
                                    or not _near(_part(reports[k]["body"], "sent"), sent)):
            k += 1
        if sent is not None and k < len(reports):
            out.append(reports[k])
            j = k + 1
        else:
            out.append(None)
    return out


def _near(printed: int | None, n: int) -> bool:
    """``printed`` (read back from a Tokens: line) is ``n`` as aider rounds it."""
    if printed is None:
        return False
    return abs(printed - n) <= (0 if n < 1000 else 50 if n < 10_000 else 500)


def _rounding(n: int) -> tuple[int, int]:
    """The counts aider prints as ``n`` (its format_tokens: exact below 1k, one decimal
    below 10k, whole thousands above)."""
    if n < 1000:
        return n, n
    if n < 10_000:
        return n - 50, n + 49
    return n - 500, n + 499


def from_events(u: Usage, sends: list[dict[str, Any]], reports: list[dict[str, Any]],
                 overrides: Mapping[str, Any]) -> None:
    sent = [as_count(p.get("prompt_tokens")) for p in sends]
    got = [as_count(p.get("completion_tokens")) for p in sends]
    costs = [as_cost(p.get("cost")) for p in sends]
    u.turns = len(sends)
    fixes: set[str] = set()
    unpaired = False
    within = 0
    for p_, s_, o, c in zip(_pair(sends, reports), sent, got, costs, strict=True):
        if s_ is None or o is None:
            u.requests = []
            break
        w: int | None = None
        r: int | None = None
        if p_ is not None:
            w = _part(p_["body"], "cache write") or 0
            r = _part(p_["body"], "cache hit") or 0
            exact = _exact_cache(u.model, s_, w, r, o, c or 0.0, overrides)
            if exact is not None:
                w, r = exact
            else:
                within += _half_width(w) + _half_width(r)
            inp, w, r, why = _true_input(s_, w, r)
            fixes.add(why)
            if not w and not r and (n := _unprinted_reads(u.model, inp, o, c or 0.0,
                                                          overrides)):
                r = n
                fixes.add("cache reads from aider's cost (it prints none for an "
                          "OpenAI-style usage)")
        else:
            inp, unpaired = s_, True
        u.requests.append({"input_tokens": inp, "output_tokens": o, "cache_read_tokens": r,
                           "cache_write_tokens": w})
    if len(u.requests) == len(sends):
        for f in TOKEN_FIELDS:
            vals = [q[f] for q in u.requests]
            setattr(u, f, None if None in vals else sum(vals))
    else:
        u.input_tokens = None if None in sent else sum(sent)  # type: ignore[arg-type]
        u.output_tokens = None if None in got else sum(got)   # type: ignore[arg-type]
    u.notes += sorted(f for f in fixes if f)
    if within:
        u.tokens_within = within
        u.notes.append(f"cache tokens from aider's rounded Tokens: lines (approximate: "
                       f"input and cache counts within {within} tokens)")
    if unpaired:
        u.notes.append("a message_send without its Tokens: line: its cache tokens are "
                       "unknown and its input may count cache writes twice")
    total = None if None in costs else sum(c or 0.0 for c in costs)
    if total is None:
        total = as_cost(sends[-1].get("total_cost"))
    if total is not None and total == 0 and u.has_tokens:
        u.notes.append("aider logged cost 0 (it has no price for this model): not used")
    else:
        u.report_cost(total)


def from_reports(u: Usage, reports: list[dict[str, Any]]) -> float:
    """Usage from the Tokens:/Cost: prints alone; returns how far the printed cost may be
    from the true one (its rounding), in USD."""
    u.turns = len(reports)
    within = 0
    for r in reports:
        counts = report_counts(r["body"])
        if counts is None:
            u.requests = []
            break
        within += sum(_half_width(_part(r["body"], label) or 0)
                      for label in ("sent", "cache write", "cache hit"))
        u.requests.append(counts)
    if u.requests:
        for f in TOKEN_FIELDS:
            setattr(u, f, sum(q[f] for q in u.requests))
        u.tokens_within = within or None
    cost, slack = _printed_cost(reports)
    if cost is not None:
        if cost == 0 and u.has_tokens:
            u.notes.append("aider printed cost 0 (it has no price for this model): not used")
        else:
            u.report_cost(cost)
    u.notes.append("no analytics log: tokens from aider's rounded Tokens: lines "
                   "(approximate)")
    return slack


def report_counts(body: str) -> dict[str, int] | None:
    """One ``Tokens:`` report's body (``34k sent, 17k cache write, 180 received``) as the
    request's counts in the store's convention (input includes the cache; cache writes
    counted once, see :func:`_true_input`), tokens, maybe rounded as aider prints them.
    None when the report has no ``sent`` or no ``received`` count. The adapter and
    ``andon.context.aider`` (the chat history) read reports with this one function."""
    sent, got = _part(body, "sent"), _part(body, "received")
    if sent is None or got is None:
        return None
    inp, w, hit, _ = _true_input(sent, _part(body, "cache write") or 0,
                                 _part(body, "cache hit") or 0)
    return {"input_tokens": inp, "output_tokens": got, "cache_read_tokens": hit,
            "cache_write_tokens": w}


def _printed_cost(reports: list[dict[str, Any]]) -> tuple[float | None, float]:
    """The session's cost from the rounded ``Cost:`` prints and its rounding bound (USD):
    the last session figure, or the sum of the message figures when their rounding errors
    add up to less (small messages print 2 significant digits, a session over a cent only
    2 decimals: $0.01 for $0.0137)."""
    session = reports[-1].get("session") if reports else None
    msgs = [r.get("msg") for r in reports]
    if all(msgs):
        bound = sum(_half_unit(m) for m in msgs if m)
        if session is None or bound < _half_unit(session):
            return sum(float(m.replace(",", "")) for m in msgs), bound  # type: ignore
    if not session:
        return None, 0.0
    return float(session.replace(",", "")), _half_unit(session)


def _half_unit(printed: str) -> float:
    """Half a unit of the last digit printed: ``0.0014`` → 0.00005."""
    _, _, decimals = printed.partition(".")
    return 0.5 * 10 ** -len(decimals)


def _half_width(printed: int) -> int:
    """How far the true count may be from ``printed``, a count as aider rounds it (tokens)."""
    lo, hi = _rounding(printed)
    return max(printed - lo, hi - printed)


def _part(body: str, label: str) -> int | None:
    """``12k sent, 604 received`` → the count before ``label`` (k = 1e3, M = 1e6)."""
    m = re.search(rf"([\d.,]+)\s*([kKmM]?) {label}\b", body)
    if not m:
        return None
    n = float(m.group(1).replace(",", ""))
    return round(n * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)])
