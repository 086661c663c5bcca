"""The ``aider`` adapter: Aider in one-message scripting mode.

Invocation (cwd the attempt's worktree; aider reads the prompt from a file)::

    aider --message-file <prompt> --yes-always --no-auto-commits --no-dirty-commits \\
        --no-gitignore --no-check-update --no-show-release-notes --no-pretty --no-stream \\
        --no-detect-urls --no-show-model-warnings \\
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

No network but the model API's, as far as aider lets it: ``LITELLM_LOCAL_MODEL_COST_MAP=True``
(unless set otherwise here) makes litellm read its bundled price map instead of fetching it
at start; ``--no-check-update`` and ``--no-show-release-notes`` stop the PyPI and release-note
look-ups; ``--no-detect-urls`` stops aider fetching the URLs a packet's text holds (with
``--yes-always`` it would); ``--no-show-model-warnings`` stops it opening its documentation in
a browser (``--yes-always`` answers yes to that too). One fetch has no switch in 0.86: aider's
own model-info cache (``$HOME/.aider/caches/model_prices_and_context_window.json``, 5 s
timeout, tried at each model look-up while the cache is missing or empty); without network
it fails at once and aider prints the error and goes on. ``COLUMNS`` is set wide: aider's
console otherwise wraps its output at 80 columns (a ``Tokens:`` report cut before
``session.``, an error message split).

Aider exits 0 when the model API fails (``litellm.<Kind>Error: ...`` printed, no answer
received): such a run — exit 0, no output token, a litellm error in stdout — keeps its exit
status 0 and carries the error as ``provider_error`` and in its claim, so the ``agent`` gate
names it (layer ``environment``) instead of "the agent changed nothing".

Output read back:

- the analytics log: one JSON object a line ``{event, properties, user_id, time}``; each
  ``message_send`` event (one message, normally one LLM request) has ``properties``
  ``prompt_tokens`` (what aider calls sent: see below), ``completion_tokens``, ``cost``
  (this message, USD), ``total_cost`` (the session so far) and ``main_model``;
- the chat history (``> `` quoted, never capped) or else stdout: after each request a line
  ``Tokens: 12k sent, 1.2k cache write, 3.4k cache hit, 604 received. Cost: $0.02 message,
  $0.05 session.`` (rounded like aider's ``format_tokens``; ``Cost:`` on the next line when
  there are both a cache hit and a cache write).

Usage: one request per ``message_send``, paired in order with its ``Tokens:`` report (the
only source of the cache counts). Current aider's ``sent`` is litellm's prompt count, which
already holds both cache classes, plus the cache writes again (Aider-AI/aider#5516): the
input is ``sent - writes``; with an older litellm that left the cache out of the prompt
count, ``sent`` = uncached + writes and the input is ``sent + reads`` (told apart by
``sent < reads + 2 × writes``). A rounded cache count is made exact when aider's cost is
the price of exactly one count within the rounding, by andon's table or by aider's fallback
formula; otherwise it is noted as approximate, with its bound in
``Usage.tokens_within``.
The cost is the sum of the events' ``cost`` (``reported``), checked against andon's price of
the same requests: far off (aider's fallback bills cache writes twice), andon's price is
used and ``reported_cost_usd`` keeps aider's. Aider logs cost 0 for a model it has no price
for: a zero cost with tokens is treated as not reported, and priced. Without an analytics
log, everything comes from the ``Tokens:``/``Cost:`` lines (approximate, bounded the same
way). ``turns`` = the number of requests. The model: the configured ``model``, else
``main_model``, else the ``Model:`` line aider prints. The claim is the tail of stdout.

Sources: https://aider.chat/docs/scripting.html (``--message``, ``--yes``/``--yes-always``,
``--no-auto-commits``), https://aider.chat/docs/config/options.html (every flag above),
``aider/analytics.py`` and ``aider/coders/base_coder.py`` in Aider-AI/aider (the log line
shape, the ``message_send`` event and the ``Tokens:`` report); ../shared/FORMATS.md (Aider).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import plain_file
from ..config import AgentSettings
from ..usage import Usage, price
from .aider_usage import from_events, from_reports, read_reports
from .base import AgentRun, StageContext
from .external import (
    DEVNULL,
    ExternalAgent,
    FormatError,
    Parsed,
    RunFiles,
    json_lines,
    tail_text,
)

MODEL_LINE = re.compile(r"^(?:> )?(?:Main model|Model): (\S+)", re.M)
# How aider prints a failed model request (litellm's exception, then its own hint lines).
API_ERROR = re.compile(r"^(?:> )?(litellm\.\w*(?:Error|Exception)\b.*)$", re.M)
WIDE = 10_000


class AiderAgent(ExternalAgent):
    name = "aider"
    executable = "aider"
    home_state = (".aider/",)
    credential_env = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                      "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")
    api_hosts = ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com",
                 "openrouter.ai", "api.deepseek.com")
    default_permission_args = ("--yes-always",)
    docs = "docs/agents/aider.md"
    tested_version = "0.86.2"   # end to end against the real binary (tests/agent-clis.txt)

    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        p = str(files.prefix)
        argv = [self.executable, "--message-file", str(ctx.prompt_file),
                *self.permission_args(s), "--no-auto-commits", "--no-dirty-commits",
                "--no-gitignore", "--no-check-update", "--no-show-release-notes",
                "--no-pretty", "--no-stream", "--no-detect-urls", "--no-show-model-warnings",
                "--no-analytics",
                "--analytics-log", p + ".aider-analytics.jsonl",
                "--chat-history-file", p + ".aider-chat.md",
                "--input-history-file", p + ".aider-input.txt",
                "--llm-history-file", p + ".aider-llm.txt"]
        if s.model:
            argv += ["--model", s.model]
        return argv + list(s.extra_args or [])

    def env(self, ctx: StageContext, s: AgentSettings) -> dict[str, str]:
        env = super().env(ctx, s)
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = self.environ.get("LITELLM_LOCAL_MODEL_COST_MAP",
                                                               "True")
        # aider's console wraps at 80 columns when stdout is no terminal: its Tokens:/Cost:
        # reports and litellm's errors would be cut mid-line in the transcript
        env["COLUMNS"] = str(WIDE)
        return env

    def stdin(self, ctx: StageContext) -> Path:
        return DEVNULL

    def run(self, ctx: StageContext) -> AgentRun:
        run = super().run(ctx)
        out = run.usage.output_tokens if run.usage is not None else None
        if run.exit_status == 0 and not run.timed_out and not out:
            error = api_error(run.transcript_path)
            if error:
                return dataclasses.replace(
                    run, provider_error=error,
                    claim=f"aider exited 0 but the model API failed: {error}")
        return run

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


def api_error(stdout: Path) -> str | None:
    """The last ``litellm.<Kind>Error: ...`` line aider printed (its report of a failed
    model request), or None."""
    found = API_ERROR.findall(tail_text(stdout, 64 * 1024))
    return found[-1].strip() if found else None


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
    try:
        text = plain_file.read_text(stdout)
    except OSError:
        text = ""
    reports = read_reports(text)
    # both files are in the stage's own folder, the agent's to write: a link or a FIFO
    # there is not read (plain_file.py)
    try:  # the chat history holds the same lines, never capped like stdout
        history = plain_file.read_text(chat_history) if chat_history is not None else ""
    except OSError:
        history = ""
    if history and (from_history := read_reports(history)):
        reports = from_history
        text = text or history
    printed_model = MODEL_LINE.search(text)
    sends: list[dict[str, Any]] = []
    if plain_file.is_file(analytics_log) and analytics_log.stat().st_size:
        try:
            events = list(json_lines(analytics_log, u))
        except OSError:  # swapped since the look
            events = []
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
        from_events(u, sends, reports, prices or {})
    elif reports:
        slack = from_reports(u, reports)
    else:
        u.notes.append("no message_send event and no Tokens: line: usage unknown")
    price(u, prices, check_reported=True, slack_usd=slack)
    return out
