"""The ``claude-code`` adapter: Claude Code in headless mode.

Invocation (the prompt on stdin, cwd the attempt's worktree)::

    claude -p --output-format stream-json --verbose [--model M] \\
        <permission args> [extra_args...]

Permission args: ``--dangerously-skip-permissions``, except as root, where Claude Code refuses
that flag (and ``--permission-mode bypassPermissions``): one line on stderr, exit 1, before
any request. As root the default is ``--permission-mode acceptEdits --allowedTools=Bash``
(documented flags: edits in the worktree accepted, every Bash command allowed, other tools
that would ask are denied), see :func:`default_permission_args`. ``permission_args`` in
``[agents.claude-code]`` replaces either. Credentials: ``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN`` or ``CLAUDE_CODE_OAUTH_TOKEN`` when set, or the login kept under
``$HOME/.claude``.

Output read back — one JSON object a line (``--output-format stream-json`` needs
``--verbose`` with ``-p``):

- ``{"type": "system", "subtype": "init", "model", "session_id", "claude_code_version" (older:
  "version"), ...}``;
- ``{"type": "assistant" | "user", "message": <Anthropic message>, "parent_tool_use_id",
  "session_id"}`` — assistant messages carry ``message.usage`` (Anthropic convention, partial
  ``output_tokens`` on early lines of one message: de-duplicated by ``message.id``, the
  largest kept);
- last, ``{"type": "result", "subtype": "success" | "error_max_turns" |
  "error_during_execution" | ..., "is_error", "result" (final text), "num_turns",
  "duration_ms", "total_cost_usd" (older: "cost_usd"), "usage", "modelUsage": {model:
  {inputTokens, outputTokens, cacheReadInputTokens, cacheCreationInputTokens, costUSD}}}``.

Usage: ``modelUsage`` (per model) when present, else ``usage``; cost ``total_cost_usd``
(``reported``). Without a ``result`` event (timeout, crash, capped output) the tokens are the
sum of the assistant messages' usage and the cost is priced message by message (one
assistant message is one API request, so a long-context tier is judged per request). With a
result event that has no cost, its totals are priced (``pricing: "total"``): the messages'
usage is partial there (claude 2.1.7 wrote ``output_tokens`` 5 on the message, 25 in the
result). ``turns`` is ``num_turns``.
Other event types (``stream_event``, ``system/compact_boundary``, future kinds) are counted.

Sources: Claude Code headless mode and CLI reference,
https://docs.claude.com/en/docs/claude-code/headless and
https://docs.claude.com/en/docs/claude-code/cli-reference ; the result message
(``SDKResultMessage``) in the Agent SDK reference,
https://docs.claude.com/en/api/agent-sdk/typescript ; ../shared/FORMATS.md (Claude Code).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from ..config import AgentSettings
from ..usage import Usage, from_anthropic, sum_counts
from .base import StageContext
from .external import (
    ExternalAgent,
    FormatError,
    Parsed,
    RunFiles,
    json_lines,
    note_unknown,
)

KNOWN = {"system", "assistant", "user", "result", "stream_event"}
BYPASS_ARGS = ("--dangerously-skip-permissions",)
ROOT_ARGS = ("--permission-mode", "acceptEdits", "--allowedTools=Bash")
# Claude Code's own guard: as root, bypass mode is refused unless one of these is "1".
ROOT_BYPASS_ENV = ("IS_SANDBOX", "CLAUDE_CODE_BUBBLEWRAP")


def default_permission_args(euid: int) -> tuple[str, ...]:
    """The permission args andon gives Claude Code when ``permission_args`` is not set:
    bypass for a normal user, the documented allowlist for root (``euid`` 0)."""
    return ROOT_ARGS if euid == 0 else BYPASS_ARGS


def refused_as_root(args: list[str] | tuple[str, ...], euid: int,
                    environ: dict[str, str]) -> bool:
    """Whether Claude Code would refuse to start with these permission args: as root, bypass
    mode (``--dangerously-skip-permissions``, ``--allow-dangerously-skip-permissions``,
    ``--permission-mode bypassPermissions``) unless ``IS_SANDBOX=1`` or
    ``CLAUDE_CODE_BUBBLEWRAP=1`` reach it."""
    if euid != 0 or any(environ.get(k) == "1" for k in ROOT_BYPASS_ENV):
        return False
    joined = " ".join(args)
    return "dangerously-skip-permissions" in joined or "bypassPermissions" in joined


class ClaudeCodeAgent(ExternalAgent):
    name = "claude-code"
    executable = "claude"
    home_state = (".claude/", ".claude.json")
    credential_env = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    default_permission_args = BYPASS_ARGS
    docs = "docs/agents/claude-code.md"
    tested_version = "2.1.332"   # end to end against the real binary (tests/agent-clis.txt)

    def permission_args(self, s: AgentSettings) -> list[str]:
        if s.permission_args is not None:
            return list(s.permission_args)
        return list(default_permission_args(os.geteuid()))

    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose"]
        if s.model:
            argv += ["--model", s.model]
        return argv + self.permission_args(s) + list(s.extra_args or [])

    def parse(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> Parsed:
        return parse_stream(files.transcript, s.model)


def parse_stream(path: Path, configured_model: str | None = None) -> Parsed:
    """Read a ``--output-format stream-json`` transcript (see the module docstring).

    Raises:
        FormatError: the file has JSON objects but none is a Claude Code event (no ``type``
            known to this adapter) — e.g. ``--output-format json`` or another tool's output.
    """
    out = Parsed()
    u = out.usage
    if not path.is_file() or path.stat().st_size == 0:
        u.notes.append("no output: usage unknown")
        u.model = configured_model
        return out
    unknown: Counter = Counter()
    messages: dict[str, dict[str, Any]] = {}   # message id -> largest usage seen
    models: dict[str, str] = {}                # message id -> model
    last_text, result, init, seen = "", None, None, 0
    for ev in json_lines(path, u):
        kind = ev.get("type")
        if kind not in KNOWN:
            unknown[f"{kind}/{ev.get('subtype')}" if ev.get("subtype") else str(kind)] += 1
            continue
        seen += 1
        if kind == "system" and ev.get("subtype") == "init":
            init = ev
        elif kind == "assistant" and isinstance(ev.get("message"), dict):
            msg = ev["message"]
            text = "".join(b.get("text", "") for b in msg.get("content") or []
                           if isinstance(b, dict) and b.get("type") == "text")
            if text and ev.get("parent_tool_use_id") is None:
                last_text = text
            usage, mid = msg.get("usage"), msg.get("id") or f"#{len(messages)}"
            if isinstance(usage, dict):
                old = messages.get(mid, {})
                messages[mid] = {k: max(v, old.get(k, 0)) if isinstance(v, (int, float))
                                 and not isinstance(v, bool) else v for k, v in usage.items()}
                models[mid] = msg.get("model") or models.get(mid) or ""
        elif kind == "result":
            result = ev
    note_unknown(u, unknown)
    if not seen:
        raise FormatError("no Claude Code stream-json event in the output (is it "
                          "`--output-format stream-json --verbose`?)" if unknown else
                          "the output holds no JSON events")
    if init:
        u.model = init.get("model") or None
        version = init.get("claude_code_version") or init.get("version")
        if version:
            u.notes.append(f"claude code {version}")
    if result is not None:
        _from_result(out, result)
    elif messages:
        parts: dict[str, list[dict]] = {}
        for mid, usage in messages.items():
            model = models.get(mid) or u.model or configured_model or "?"
            counts = from_anthropic(usage.get("input_tokens"), usage.get("output_tokens"),
                                    usage.get("cache_read_input_tokens"),
                                    usage.get("cache_creation_input_tokens"))
            parts.setdefault(model, []).append(counts)
            u.requests.append({**counts, "model": model})   # one message = one API request
        u.models = {m: sum_counts(p) for m, p in parts.items()}
        _set_totals(u)
        u.notes.append("no result event: tokens summed from the assistant messages (the "
                       "last message's output may be partial)")
    else:
        u.notes.append("no result event and no usage in the messages: usage unknown")
    out.claim = out.claim or last_text
    if u.model is None:
        u.model = configured_model
    return out


def _from_result(out: Parsed, r: dict[str, Any]) -> None:
    u = out.usage
    if isinstance(r.get("result"), str):
        out.claim = r["result"]
    if r.get("is_error") or str(r.get("subtype", "")).startswith("error"):
        u.notes.append(f"result: {r.get('subtype')}" + (" (is_error)" if r.get("is_error")
                                                          else ""))
    turns = r.get("num_turns")
    u.turns = turns if isinstance(turns, int) and not isinstance(turns, bool) else None
    per_model = r.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        for model, m in per_model.items():
            if not isinstance(m, dict):
                continue
            counts: dict[str, Any] = from_anthropic(
                m.get("inputTokens"), m.get("outputTokens"), m.get("cacheReadInputTokens"),
                m.get("cacheCreationInputTokens"))
            if m.get("costUSD") is not None:
                counts["cost_usd"] = m.get("costUSD")
            u.models[model] = counts
        _set_totals(u)
        if u.model not in u.models and u.models:  # the model that did most of the work
            u.model = max(u.models, key=lambda k: u.models[k].get("output_tokens") or 0)
    elif isinstance(r.get("usage"), dict):
        x = r["usage"]
        counts = from_anthropic(x.get("input_tokens"), x.get("output_tokens"),
                                x.get("cache_read_input_tokens"),
                                x.get("cache_creation_input_tokens"))
        for k, v in counts.items():
            setattr(u, k, v)
    else:
        u.notes.append("the result event has no usage block: tokens unknown")
    cost = r.get("total_cost_usd", r.get("cost_usd"))
    u.report_cost(cost)
    if u.cost_source != "reported":
        u.notes.append("the result event reports no cost")


def _set_totals(u: Usage) -> None:
    for k, v in sum_counts(u.models.values()).items():
        setattr(u, k, v)
