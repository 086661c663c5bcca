"""The ``codex`` adapter: OpenAI Codex CLI in non-interactive mode.

Invocation (the prompt on stdin, named by ``-``; cwd the attempt's worktree)::

    codex exec --json --output-last-message <evidence>/<stage>.last-message.txt \\
        [--model M] --sandbox workspace-write [extra_args...] -

``--sandbox workspace-write`` (edits and commands in the worktree; ``codex exec`` never asks
for approval) is the default ``permission_args``; replace it, e.g. with ``["--sandbox",
"danger-full-access"]``. (It was ``--full-auto``, which codex 0.171 refuses: "unexpected
argument '--full-auto' found", exit 2.) Inside andon's own sandbox (``[agent] sandbox`` at
``fs`` or ``fs+net``) the default is ``--sandbox danger-full-access`` instead: Codex's sandbox
is bubblewrap too and cannot nest in andon's (no new ``/proc`` mount inside it, so every
patch fails); andon's sandbox then does the containing (docs/sandbox.md).
Credentials: ``OPENAI_API_KEY`` or ``CODEX_API_KEY`` when set, or the login in
``$CODEX_HOME`` (default ``$HOME/.codex``); ``CODEX_HOME`` is passed through too.

Output read back — JSON Lines on stdout: ``thread.started {thread_id}``, ``turn.started``,
``turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens}}``,
``turn.failed {error: {message}}``, ``item.started|updated|completed {item: {id, type, ...}}``
(item types ``agent_message {text}``, ``reasoning``, ``command_execution``, ``file_change``,
``mcp_tool_call``, ``web_search``, ``todo_list``, ``error``), ``error {message}``.

Usage: OpenAI's convention already matches the store's (cached tokens are part of
``input_tokens``, reasoning part of ``output_tokens``); ``cached_input_tokens`` →
``cache_read_tokens``; cache writes are not reported (``None``). The usage of every
``turn.completed`` is summed (``codex exec`` runs one turn of many model requests).
``turns`` = the number of completed turns. The stream names no model and no request: both
come from the session's rollout file (``$CODEX_HOME/sessions/YYYY/MM/DD/
rollout-*-<thread_id>.jsonl``, see :func:`parse_rollout`) — the model of its
``turn_context`` unless ``model`` is configured, and the requests of its ``token_count``
events, which are priced one by one when they add up to the stream's totals (else the
totals are priced: ``pricing: "total"``). Codex reports no cost. The claim is the last
``agent_message``.

The older ``codex exec --json`` protocol (lines ``{"id", "msg": {"type": ...}}``, before the
``thread.*``/``turn.*``/``item.*`` events) is refused with a clear note (upgrade codex).

Sources: https://github.com/openai/codex/blob/main/docs/exec.md (JSON output mode, sample
output, ``--output-last-message``, ``CODEX_API_KEY``); the event types in
``codex-rs/exec/src/exec_events.rs`` of the same repository; ../shared/FORMATS.md (Codex CLI).
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import plain_file
from ..config import AgentSettings
from ..context import codex as context_codex
from ..usage import as_count
from .base import StageContext
from .external import (
    ExternalAgent,
    FormatError,
    Parsed,
    RunFiles,
    json_lines,
    note_problems,
    note_unknown,
)

KNOWN = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
         "item.updated", "item.completed", "item.plan.delta", "request_user_input", "error"}


class CodexAgent(ExternalAgent):
    name = "codex"
    executable = "codex"
    home_state = (".codex/",)

    def state_paths(self, env: Mapping[str, str]) -> list[str]:
        """``~/.codex``, and ``$CODEX_HOME`` when set (its sessions hold the usage)."""
        extra = [env["CODEX_HOME"]] if os.path.isabs(env.get("CODEX_HOME", "")) else []
        return [*super().state_paths(env), *extra]
    credential_env = ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME")
    api_hosts = ("api.openai.com", "chatgpt.com", "auth.openai.com")
    default_permission_args = ("--sandbox", "workspace-write")
    tested_version = "0.171.0"   # end to end against the real binary (tests/agent-clis.txt)
    docs = "docs/agents/codex.md"

    def permission_args(self, s: AgentSettings) -> list[str]:
        if s.permission_args is None and self.sandbox != "none":
            return ["--sandbox", "danger-full-access"]  # andon's sandbox contains it
        return super().permission_args(s)

    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        argv = [self.executable, "exec", "--json", "--output-last-message",
                str(last_message_file(files))]
        if s.model:
            argv += ["--model", s.model]
        return argv + self.permission_args(s) + list(s.extra_args or []) + ["-"]

    def parse(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> Parsed:
        out = parse_events(files.transcript)
        last = last_message_file(files)
        try:  # in the stage's own folder: the agent's to write
            out.claim = plain_file.read_text(last) or out.claim
        except OSError:
            pass
        u = out.usage
        u.model = s.model
        thread = out.meta.get("thread_id")
        home = Path(self.environ.get("CODEX_HOME")
                    or Path(self.environ.get("HOME", "~")) / ".codex").expanduser()
        rollout = rollout_file(home, thread) if thread and u.has_tokens else None
        if rollout is not None:
            rec = parse_rollout(rollout, s.model)
            if u.model is None and rec.usage.model:
                u.model = rec.usage.model
                u.notes.append("model read from the session's rollout file")
            # priced per request when the rollout's requests add up to the stream's totals
            u.requests = [{k: v for k, v in r.items() if k != "model"}
                          for r in rec.usage.requests]
        return out


def last_message_file(files: RunFiles) -> Path:
    return files.prefix.with_name(files.prefix.name + ".last-message.txt")


def parse_events(path: Path) -> Parsed:
    """Read a ``codex exec --json`` transcript (see the module docstring).

    Raises:
        FormatError: the lines are the older ``{id, msg}`` protocol, or JSON objects none of
            which is a known event.
    """
    out = Parsed()
    u = out.usage
    if not path.is_file() or path.stat().st_size == 0:
        u.notes.append("no output: usage unknown")
        return out
    unknown: Counter = Counter()
    turns: list[dict[str, Any]] = []
    last_message, failed, seen, legacy = "", "", 0, 0
    for ev in json_lines(path, u):
        kind = ev.get("type")
        if kind is None and isinstance(ev.get("msg"), dict):
            legacy += 1
            continue
        if kind not in KNOWN:
            unknown[str(kind)] += 1
            continue
        seen += 1
        if kind == "thread.started":
            out.meta["thread_id"] = ev.get("thread_id")
        elif kind == "turn.completed":
            turns.append(t if isinstance(t := ev.get("usage"), dict) else {})
        elif kind in ("turn.failed", "error"):
            err = ev.get("error") if kind == "turn.failed" else ev
            msg = err.get("message") if isinstance(err, dict) else None
            u.notes.append(f"{kind}: {msg}")
            if kind == "turn.failed" and msg:
                failed = str(msg)
        elif kind == "item.completed" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                last_message = item["text"]
    note_unknown(u, unknown)
    if legacy and not seen:
        raise FormatError("this is the older `codex exec --json` protocol (lines "
                          "`{id, msg}`); andon reads the thread.*/turn.*/item.* events of "
                          "current codex: upgrade codex")
    if not seen:
        raise FormatError("no codex exec --json event in the output")
    # a turn that failed before any answer: its error is what the agent said (the agent
    # gate shows it as the reason; stderr holds only codex's log lines)
    out.claim = last_message or (f"turn.failed: {failed}" if failed else "")
    u.turns = len(turns)
    counts = [(as_count(t.get("input_tokens")), as_count(t.get("output_tokens")),
               as_count(t.get("cached_input_tokens"))) for t in turns]
    if not turns:
        u.notes.append("no turn.completed event: usage unknown")
    elif any(c[0] is None or c[1] is None for c in counts):
        u.notes.append("a turn.completed event has no usage: tokens unknown")
    else:
        u.input_tokens = sum(c[0] or 0 for c in counts)  # none is None here
        u.output_tokens = sum(c[1] or 0 for c in counts)
        cached = [c[2] for c in counts]
        u.cache_read_tokens = None if None in cached else sum(c or 0 for c in cached)
        if len(turns) > 1:
            u.notes.append(f"usage summed over {len(turns)} turn.completed events")
    return out


def rollout_file(codex_home: Path, thread_id: str) -> Path | None:
    """The rollout file of ``thread_id`` under ``codex_home/sessions``, or None."""
    sessions = codex_home / "sessions"
    if not thread_id or not sessions.is_dir():
        return None
    # in the agent's own CODEX_HOME (bound writable in the sandbox): a link or a FIFO there is
    # not read (plain_file.py)
    return next(iter(sorted(p for p in sessions.glob(f"*/*/*/rollout-*{thread_id}.jsonl")
                            if plain_file.is_file(p))), None)


def rollout_model(codex_home: Path, thread_id: str) -> str | None:
    """The model named by the first ``turn_context`` record of the rollout file of
    ``thread_id`` under ``codex_home/sessions``, or None."""
    path = rollout_file(codex_home, thread_id)
    if path is None:
        return None
    try:
        with plain_file.open_regular(path) as raw, io.TextIOWrapper(
                raw, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f):
                if n > 500:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                payload = rec.get("payload") if isinstance(rec, dict) else None
                if rec.get("type") == "turn_context" and isinstance(payload, dict):
                    model = payload.get("model")
                    if isinstance(model, str) and model:
                        return model
    except OSError:
        return None
    return None


def parse_rollout(path: Path, configured_model: str | None = None) -> Parsed:
    """Read a Codex rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``: lines
    ``{timestamp, type, payload}``) with the one rollout parser, ``andon.context.codex``:
    the model of the ``turn_context`` records and one request per ``event_msg``
    ``token_count`` whose ``info.total_token_usage`` grew — codex writes the same
    ``token_count`` again (0.77 repeats each one after the tool output), so
    ``last_token_usage`` is taken only when the running total changed. The totals are the
    last ``total_token_usage``; a request list that does not add up to it (a rollout that
    starts mid-session) is dropped, with a note.
    """
    out = Parsed()
    u = out.usage
    conv = context_codex.rollout(path)
    note_problems(u, conv.problems)
    if conv.reported.get("thread_id") is not None:
        out.meta["thread_id"] = conv.reported["thread_id"]
    for r in conv.requests():
        req: dict[str, Any] = {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                               "cache_read_tokens": r.cache_read_tokens,
                               "cache_write_tokens": r.cache_write_tokens}
        u.requests.append({**req, "model": r.model} if r.model else req)
    u.model = configured_model or conv.model
    if "input_tokens" not in conv.reported:
        u.notes.append("no token_count event with usage: usage unknown")
        u.requests = []
        return out
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        setattr(u, k, conv.reported[k])
    u.turns = len(u.requests)
    sums = {f: sum(r[f] or 0 for r in u.requests) for f in ("input_tokens", "output_tokens")}
    if any(sums[f] != conv.reported[f] for f in sums):
        u.notes.append("the token_count requests do not add up to the session total: "
                       "priced on the total")
        u.requests = []
    return out
