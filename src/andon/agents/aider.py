"""The ``aider`` adapter: Aider in one-message scripting mode.

Invocation (cwd the attempt's worktree; aider reads the prompt from a file)::

    aider --message-file <prompt> --yes-always --no-auto-commits --no-dirty-commits \\
        --no-gitignore --no-check-update --no-show-release-notes --no-pretty --no-stream \\
        --no-analytics --analytics-log <evidence>/<stage>.aider-analytics.jsonl \\
        --chat-history-file <evidence>/<stage>.aider-chat.md \\
        --input-history-file <evidence>/<stage>.aider-input.txt \\
        --llm-history-file <evidence>/<stage>.aider-llm.txt [--model M] [extra_args...]

Auto-commits are off (andon commits what the agent left), ``.gitignore`` is left alone, and
aider's history files go to the evidence folder, not into the worktree. ``--yes-always`` is
the default ``permission_args``. ``--no-analytics`` sends nothing anywhere; the local
``--analytics-log`` is still written (aider writes the log file whether or not uploading is
on). After the run, files named ``.aider*`` that aider created in the worktree root (its
tag cache) are removed, with a note: they are the tool's state, not the work. Credentials:
``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``OPENROUTER_API_KEY``,
``DEEPSEEK_API_KEY`` when set; name others (and ``AIDER_*`` settings) in ``env_passthrough``.

Output read back:

- the analytics log: one JSON object a line ``{event, properties, user_id, time}``; each
  ``message_send`` event (one LLM request) has ``properties`` ``prompt_tokens`` (the tokens
  sent, cache included), ``completion_tokens``, ``cost`` (this message, USD),
  ``total_cost`` (the session so far) and ``main_model``;
- stdout: the reply, and after each request a line ``Tokens: 12k sent, 1.2k cache write,
  3.4k cache hit, 604 received. Cost: $0.02 message, $0.05 session.`` (rounded).

Usage: tokens are the sums over ``message_send`` events, the cost their last ``total_cost``
(``reported``). Aider logs cost 0 for a model it has no price for: a zero cost with tokens
is treated as not reported, and priced. Cache reads and writes come only from the rounded
``Tokens:`` lines (noted as approximate). Without an analytics log, everything comes from
the ``Tokens:`` lines (noted as approximate). ``turns`` = the number of LLM requests. The
model: the configured ``model``, else ``main_model``, else the ``Model:`` line aider prints.
The claim is the tail of stdout.

Sources: https://aider.chat/docs/scripting.html (``--message``, ``--yes``/``--yes-always``,
``--no-auto-commits``), https://aider.chat/docs/config/options.html (every flag above),
``aider/analytics.py`` and ``aider/coders/base_coder.py`` in Aider-AI/aider (the log line
shape, the ``message_send`` event and the ``Tokens:`` report); ../shared/FORMATS.md (Aider).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import AgentSettings
from ..usage import TOKEN_FIELDS, Usage, as_cost, as_count, price, price_tokens
from .base import StageContext
from .external import (DEVNULL, ExternalAgent, FormatError, Parsed, RunFiles, json_lines,
                       tail_text)

TOKENS_LINE = re.compile(r"^(?:> )?Tokens: (?P<body>.*?)\.(?: Cost: \$(?P<msg>[\d.,]+) "
                         r"message, \$(?P<session>[\d.,]+) session\.)?[ \t]*$", re.M)
COST_LINE = re.compile(r"(?:> )?Cost: \$(?P<msg>[\d.,]+) message, \$(?P<session>[\d.,]+) "
                       r"session\.[ \t]*$", re.M)
MODEL_LINE = re.compile(r"^(?:> )?(?:Main model|Model): (\S+)", re.M)


class AiderAgent(ExternalAgent):
    name = "aider"
    executable = "aider"
    credential_env = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                      "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")
    default_permission_args = ("--yes-always",)
    docs = "docs/agents/aider.md"

    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        p = str(files.prefix)
        argv = [self.executable, "--message-file", str(ctx.prompt_file),
                *self.permission_args(s), "--no-auto-commits", "--no-dirty-commits",
                "--no-gitignore", "--no-check-update", "--no-show-release-notes",
                "--no-pretty", "--no-stream", "--no-analytics",
                "--analytics-log", p + ".aider-analytics.jsonl",
                "--chat-history-file", p + ".aider-chat.md",
                "--input-history-file", p + ".aider-input.txt",
                "--llm-history-file", p + ".aider-llm.txt"]
        if s.model:
            argv += ["--model", s.model]
        return argv + list(s.extra_args or [])

    def stdin(self, ctx: StageContext) -> Path:
        return DEVNULL

    def before(self, ctx: StageContext) -> set[str]:
        return {p.name for p in ctx.worktree.glob(".aider*")}

    def after(self, ctx: StageContext, state: Any, usage: Usage) -> None:
        made = sorted(p for p in ctx.worktree.glob(".aider*") if p.name not in state)
        for p in made:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        if made:
            usage.notes.append("removed aider's own files from the worktree: "
                               + ", ".join(p.name for p in made))

    def parse(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> Parsed:
        log = Path(str(files.prefix) + ".aider-analytics.jsonl")
        return parse_run(log, files.transcript, s.model,
                         Path(str(files.prefix) + ".aider-chat.md"), self.prices)


def parse_run(analytics_log: Path, stdout: Path, configured_model: str | None = None,
              chat_history: Path | None = None, prices: Mapping[str, Any] | None = None
              ) -> Parsed:
    """Read aider's analytics log and stdout, or else its chat history (see the module
    docstring), and check a reported cost against andon's price of the tokens (with
    ``prices``, ``[prices]`` of andon.toml).

    Raises:
        FormatError: the analytics log holds JSON objects but none has ``event`` and
            ``properties`` (not an aider analytics log, or a format this adapter predates).
    """
    out = Parsed(claim=tail_text(stdout))
    u = out.usage
    text = stdout.read_text(encoding="utf-8", errors="replace") if stdout.is_file() else ""
    reports = _reports(text)
    if chat_history is not None and chat_history.is_file():
        # the chat history holds the same lines, never capped like stdout
        history = chat_history.read_text(encoding="utf-8", errors="replace")
        if from_history := _reports(history):
            reports = from_history
            text = text or history
    printed_model = MODEL_LINE.search(text)
    sends: list[dict[str, Any]] = []
    if analytics_log.is_file() and analytics_log.stat().st_size:
        events = list(json_lines(analytics_log, u))
        if events and not any("event" in e and isinstance(e.get("properties"), dict)
                              for e in events):
            raise FormatError("the analytics log has no {event, properties} records")
        sends = [e["properties"] for e in events
                 if e.get("event") == "message_send" and isinstance(e.get("properties"), dict)]
    logged_model = next((p.get("main_model") for p in reversed(sends)
                         if isinstance(p.get("main_model"), str)
                         and p["main_model"] not in ("None", "")
                         and not p["main_model"].endswith("/REDACTED")), None)
    u.model = configured_model or logged_model or (printed_model.group(1) if printed_model
                                                   else None)
    slack = 0.0
    if sends:
        _from_events(u, sends, reports, prices or {})
    elif reports:
        slack = _from_reports(u, reports)
    else:
        u.notes.append("no message_send event and no Tokens: line: usage unknown")
    price(u, prices, check_reported=True, slack_usd=slack)
    return out


def _reports(text: str) -> list[dict[str, Any]]:
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


def _true_input(sent: int, write: int, read: int) -> tuple[int, str]:
    """The request's input tokens from aider's ``sent`` (see the module docstring): current
    aider adds the cache writes to a ``prompt_tokens`` that already holds both cache
    classes (sent = uncached + reads + 2 × writes); with litellm before it folded cache
    tokens into ``prompt_tokens``, sent = uncached + writes and the reads are missing."""
    if not write and not read:
        return sent, ""
    if sent >= read + 2 * write:
        return sent - write, "cache writes counted once (aider adds them twice)"
    return sent + read, "cache reads added (an older aider/litellm left them out)"


def _exact_cache(model: str | None, sent: int, write: int, read: int, out: int, cost: float,
                 overrides: Mapping[str, Any]) -> tuple[int, int] | None:
    """The exact (cache write, cache read) counts, when aider's cost is the price of exactly
    one count within the rounding of the printed one (``4.7k`` = 4,650..4,749) and the other
    class is exact (below 1k, or absent): the price is linear in the count, so two prices
    give it. None when the cost fits no such count (aider's fallback bills cache tokens
    twice; another price table) or both classes are rounded."""
    if not model or cost <= 0 or sent < read + 2 * write:
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
    n = lo + (cost - a) * (hi - lo) / (b - a)
    exact = round(n)
    if not (lo <= exact <= hi and abs(n - exact) < 0.01):
        return None
    return (exact, read) if which == "w" else (write, exact)


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


def _true_input(sent: int, write: int, read: int) -> tuple[int, str]:
    """The request's input tokens from aider's ``sent`` (see the module docstring): current
    aider adds the cache writes to a ``prompt_tokens`` that already holds both cache
    classes (sent = uncached + reads + 2 × writes); with litellm before it folded cache
    tokens into ``prompt_tokens``, sent = uncached + writes and the reads are missing."""
    if not write and not read:
        return sent, ""
    if sent >= read + 2 * write:
        return sent - write, "cache writes counted once (aider adds them twice)"
    return sent + read, "cache reads added (an older aider/litellm left them out)"


def _exact_cache(model: str | None, sent: int, write: int, read: int, out: int, cost: float,
                 overrides: Mapping[str, Any]) -> tuple[int, int] | None:
    """The exact (cache write, cache read) counts, when aider's cost is the price of exactly
    one count within the rounding of the printed one (``4.7k`` = 4,650..4,749) and the other
    class is exact (below 1k, or absent): the price is linear in the count, so two prices
    give it. None when the cost fits no such count (aider's fallback bills cache tokens
    twice; another price table) or both classes are rounded."""
    if not model or cost <= 0 or sent < read + 2 * write:
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
    n = lo + (cost - a) * (hi - lo) / (b - a)
    exact = round(n)
    if not (lo <= exact <= hi and abs(n - exact) < 0.01):
        return None
    return (exact, read) if which == "w" else (write, exact)


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


def _printed(n: int) -> set[int]:
    """What ``_part`` reads back from aider's rounded print of ``n``."""
    lo, hi = _rounding(n)
    return {n} if n < 1000 else {round(n, -2) if n < 10_000 else round(n, -3)} | {lo, hi}


def _rounding(n: int) -> tuple[int, int]:
    """The counts aider prints as ``n`` (its format_tokens: exact below 1k, one decimal
    below 10k, whole thousands above)."""
    if n < 1000:
        return n, n
    if n < 10_000:
        return n - 50, n + 49
    return n - 500, n + 499


def _from_events(u: Usage, sends: list[dict[str, Any]], reports: list[dict[str, Any]],
                 overrides: Mapping[str, Any]) -> None:
    sent = [as_count(p.get("prompt_tokens")) for p in sends]
    got = [as_count(p.get("completion_tokens")) for p in sends]
    costs = [as_cost(p.get("cost")) for p in sends]
    u.turns = len(sends)
    fixes: set[str] = set()
    approximate = unpaired = False
    for p_, s_, o, c in zip(_pair(sends, reports), sent, got, costs):
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
            elif w >= 1000 or r >= 1000:
                approximate = True
            inp, why = _true_input(s_, w, r)
            fixes.add(why)
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
    if approximate:
        u.notes.append("cache tokens from aider's rounded Tokens: lines (approximate)")
    if unpaired:
        u.notes.append("a message_send without its Tokens: line: its cache tokens are "
                       "unknown and its input may count cache writes twice")
    total = None if None in costs else sum(costs)   # type: ignore[arg-type]
    if total is None:
        total = as_cost(sends[-1].get("total_cost"))
    if total is not None and total == 0 and u.has_tokens:
        u.notes.append("aider logged cost 0 (it has no price for this model): not used")
    else:
        u.report_cost(total)


def _from_reports(u: Usage, reports: list[dict[str, Any]]) -> float:
    """Usage from the Tokens:/Cost: prints alone; returns how far the printed cost may be
    from the true one (its rounding), in USD."""
    sent = [_part(r["body"], "sent") for r in reports]
    got = [_part(r["body"], "received") for r in reports]
    u.turns = len(reports)
    for s_, o, r in zip(sent, got, reports):
        if s_ is None or o is None:
            u.requests = []
            break
        w, hit = _part(r["body"], "cache write") or 0, _part(r["body"], "cache hit") or 0
        inp, _ = _true_input(s_, w, hit)
        u.requests.append({"input_tokens": inp, "output_tokens": o, "cache_read_tokens": hit,
                           "cache_write_tokens": w})
    if u.requests:
        for f in TOKEN_FIELDS:
            setattr(u, f, sum(q[f] for q in u.requests))
    cost, slack = _printed_cost(reports)
    if cost is not None:
        if cost == 0 and u.has_tokens:
            u.notes.append("aider printed cost 0 (it has no price for this model): not used")
        else:
            u.report_cost(cost)
    u.notes.append("no analytics log: tokens from aider's rounded Tokens: lines "
                   "(approximate)")
    return slack


def _printed_cost(reports: list[dict[str, Any]]) -> tuple[float | None, float]:
    """The session's cost from the rounded ``Cost:`` prints and its rounding bound (USD):
    the last session figure, or the sum of the message figures when their rounding errors
    add up to less (small messages print 2 significant digits, a session over a cent only
    2 decimals: $0.01 for $0.0137)."""
    session = reports[-1].get("session") if reports else None
    msgs = [r.get("msg") for r in reports]
    if all(msgs):
        bound = sum(_half_unit(m) for m in msgs)  # type: ignore[arg-type]
        if session is None or bound < _half_unit(session):
            return sum(float(m.replace(",", "")) for m in msgs), bound  # type: ignore
    if not session:
        return None, 0.0
    return float(session.replace(",", "")), _half_unit(session)


def _half_unit(printed: str) -> float:
    """Half a unit of the last digit printed: ``0.0014`` → 0.00005."""
    _, _, decimals = printed.partition(".")
    return 0.5 * 10 ** -len(decimals)


def _part(body: str, label: str) -> int | None:
    """``12k sent, 604 received`` → the count before ``label`` (k = 1e3, M = 1e6)."""
    m = re.search(rf"([\d.,]+)\s*([kKmM]?) {label}\b", body)
    if not m:
        return None
    n = float(m.group(1).replace(",", ""))
    return round(n * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)])
