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
from ..context import claude as context_claude
from ..context import model as context_model
from ..usage import Usage, from_anthropic, sum_counts
from .base import StageContext
from .external import (
    ExternalAgent,
    FormatError,
    Parsed,
    RunFiles,
    note_problems,
    note_unknown,
)

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
    api_hosts = ("api.anthropic.com", "console.anthropic.com", "claude.ai")
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
    """Read a ``--output-format stream-json`` transcript (see the module docstring) with the
    one stream-json parser, ``andon.context.claude.stream_json``: the messages' usage (one
    response written as several lines counts once), the ``result`` event, the init event's
    model and version, the kinds of event it does not know.

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
    conv = context_claude.stream_json(path)
    rep = conv.reported
    note_problems(u, conv.problems)
    note_unknown(u, Counter(rep.get("unknown_events") or {}))
    if not rep.get("events"):
        raise FormatError("no Claude Code stream-json event in the output (is it "
                          "`--output-format stream-json --verbose`?)" if rep.get("unknown_events")
                          else "the output holds no JSON events")
    u.model = conv.model or None
    if rep.get("claude_code_version"):
        u.notes.append(f"claude code {rep['claude_code_version']}")
    requests = [m.usage for t in conv.threads for m in t.messages if m.usage is not None]
    if "subtype" in rep or "num_turns" in rep or "result" in rep or "cost_usd" in rep \
            or "model_usage" in rep or "input_tokens" in rep:
        _from_result(out, rep)
    elif requests:
        parts: dict[str, list[dict]] = {}
        for r in requests:
            model = r.model or u.model or configured_model or "?"
            read, write = r.cache_read_tokens or 0, r.cache_write_tokens or 0
            counts = from_anthropic(r.input_tokens - read - write, r.output_tokens, read, write)
            parts.setdefault(model, []).append(counts)
            u.requests.append({**counts, "model": model})   # one message = one API request
        u.models = {m: sum_counts(p) for m, p in parts.items()}
        _set_totals(u)
        u.notes.append("no result event: tokens summed from the assistant messages (the "
                       "last message's output may be partial)")
    else:
        u.notes.append("no result event and no usage in the messages: usage unknown")
    out.claim = out.claim or _last_text(conv)
    if u.model is None:
        u.model = configured_model
    return out


def _last_text(conv: context_model.Conversation) -> str:
    """The text of the main thread's last assistant message that has any."""
    for m in reversed(conv.main.messages):
        text = "".join(p.text for p in m.parts if p.kind == "text")
        if m.role == "assistant" and text:
            return text
    return ""


def _from_result(out: Parsed, r: dict[str, Any]) -> None:
    """The usage of the ``result`` event, as the stream-json parser reported it."""
    u = out.usage
    if isinstance(r.get("result"), str):
        out.claim = r["result"]
    if r.get("is_error") or str(r.get("subtype", "")).startswith("error"):
        u.notes.append(f"result: {r.get('subtype')}" + (" (is_error)" if r.get("is_error")
                                                          else ""))
    turns = r.get("num_turns")
    u.turns = turns if isinstance(turns, int) and not isinstance(turns, bool) else None
    per_model = r.get("model_usage")
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
    elif "input_tokens" in r:  # the parser's convention: input includes the cache
        read, write = r.get("cache_read_tokens") or 0, r.get("cache_write_tokens") or 0
        counts = from_anthropic(r["input_tokens"] - read - write, r.get("output_tokens"),
                                read, write)
        for k, v in counts.items():
            setattr(u, k, v)
    else:
        u.notes.append("the result event has no usage block: tokens unknown")
    u.report_cost(r.get("cost_usd"))
    if u.cost_source != "reported":
        u.notes.append("the result event reports no cost")


def _set_totals(u: Usage) -> None:
    for k, v in sum_counts(u.models.values()).items():
        setattr(u, k, v)
