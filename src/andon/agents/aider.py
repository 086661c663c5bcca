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
from pathlib import Path
from typing import Any

from ..config import AgentSettings
from ..usage import Usage, as_cost, as_count
from .base import StageContext
from .external import (DEVNULL, ExternalAgent, FormatError, Parsed, RunFiles, json_lines,
                       tail_text)

TOKENS_LINE = re.compile(r"^Tokens: (?P<body>.*?)\.(?: Cost: \$(?P<msg>[\d.,]+) message, "
                         r"\$(?P<session>[\d.,]+) session\.)?\s*$", re.M)
MODEL_LINE = re.compile(r"^(?:Main model|Model): (\S+)", re.M)


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
        return parse_run(log, files.transcript, s.model)


def parse_run(analytics_log: Path, stdout: Path, configured_model: str | None = None
              ) -> Parsed:
    """Read aider's analytics log and stdout (see the module docstring).

    Raises:
        FormatError: the analytics log holds JSON objects but none has ``event`` and
            ``properties`` (not an aider analytics log, or a format this adapter predates).
    """
    out = Parsed(claim=tail_text(stdout))
    u = out.usage
    text = stdout.read_text(encoding="utf-8", errors="replace") if stdout.is_file() else ""
    reports = [m.groupdict() for m in TOKENS_LINE.finditer(text)]
    printed_model = MODEL_LINE.search(text)
    sends: list[dict[str, Any]] = []
    if analytics_log.is_file() and analytics_log.stat().st_size:
        events = list(json_lines(analytics_log, u))
        if events and not any("event" in e and isinstance(e.get("properties"), dict)
                              for e in events):
            raise FormatError("the analytics log has no {event, properties} records")
        sends = [e["properties"] for e in events
                 if e.get("event") == "message_send" and isinstance(e.get("properties"), dict)]
    if sends:
        _from_events(u, sends)
        if reports:
            _cache_from_reports(u, reports)
    elif reports:
        _from_reports(u, reports)
    else:
        u.notes.append("no message_send event and no Tokens: line: usage unknown")
    logged_model = next((p.get("main_model") for p in reversed(sends)
                         if isinstance(p.get("main_model"), str)
                         and p["main_model"] not in ("None", "")
                         and not p["main_model"].endswith("/REDACTED")), None)
    u.model = configured_model or logged_model or (printed_model.group(1) if printed_model
                                                   else None)
    return out


def _from_events(u: Usage, sends: list[dict[str, Any]]) -> None:
    sent = [as_count(p.get("prompt_tokens")) for p in sends]
    got = [as_count(p.get("completion_tokens")) for p in sends]
    u.turns = len(sends)
    u.input_tokens = None if None in sent else sum(sent)  # type: ignore[arg-type]
    u.output_tokens = None if None in got else sum(got)   # type: ignore[arg-type]
    total = as_cost(sends[-1].get("total_cost"))
    if total is None:
        costs = [as_cost(p.get("cost")) for p in sends]
        total = None if None in costs else sum(costs)    # type: ignore[arg-type]
    if total is not None and total == 0 and u.has_tokens:
        u.notes.append("aider logged cost 0 (it has no price for this model): not used")
    else:
        u.report_cost(total)


def _cache_from_reports(u: Usage, reports: list[dict[str, str]]) -> None:
    reads = [_part(r["body"], "cache hit") for r in reports]
    writes = [_part(r["body"], "cache write") for r in reports]
    if any(reads) or any(writes):
        u.cache_read_tokens = sum(x or 0 for x in reads)
        u.cache_write_tokens = sum(x or 0 for x in writes)
        u.notes.append("cache tokens from aider's rounded Tokens: lines (approximate)")


def _from_reports(u: Usage, reports: list[dict[str, str]]) -> None:
    sent = [_part(r["body"], "sent") for r in reports]
    got = [_part(r["body"], "received") for r in reports]
    u.turns = len(reports)
    u.input_tokens = None if None in sent else sum(sent)   # type: ignore[arg-type]
    u.output_tokens = None if None in got else sum(got)    # type: ignore[arg-type]
    _cache_from_reports(u, reports)
    session = reports[-1].get("session")
    if session:
        cost = float(session.replace(",", ""))
        if cost == 0 and u.has_tokens:
            u.notes.append("aider printed cost 0 (it has no price for this model): not used")
        else:
            u.report_cost(cost)
    u.notes.append("no analytics log: tokens from aider's rounded Tokens: lines "
                   "(approximate)")


def _part(body: str, label: str) -> int | None:
    """``12k sent, 604 received`` → the count before ``label`` (k = 1e3, M = 1e6)."""
    m = re.search(rf"([\d.,]+)\s*([kKmM]?) {label}\b", body)
    if not m:
        return None
    n = float(m.group(1).replace(",", ""))
    return round(n * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)])
