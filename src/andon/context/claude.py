"""Claude Code: session logs (``~/.claude/projects/**/*.jsonl``) and ``claude -p`` stream-json.

Session logs write one API response as several lines (one per content block) that share
``message.id`` and ``requestId`` and repeat the usage, early lines with a partial
``output_tokens``: the lines become one message and one request, the largest usage kept.
Sidechain lines (``isSidechain``) go to their own thread, one per sub-agent (the chain of
``parentUuid``); a ``compact_boundary`` restarts the context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from andon import plain_file
from andon.context.api import anthropic_parts
from andon.context.model import Conversation, Message, Part, RequestUsage, Thread, join_calls
from andon.context.read import json_lines


def anthropic_usage(u: dict[str, Any], model: str | None = None,
                    key: str | None = None) -> RequestUsage:
    """Anthropic usage (input excludes cache) in the one convention (input includes it)."""
    read = int(u.get("cache_read_input_tokens") or 0)
    write = int(u.get("cache_creation_input_tokens") or 0)
    return RequestUsage(int(u.get("input_tokens") or 0) + read + write,
                        int(u.get("output_tokens") or 0), read, write, model, key)


def _merge(msg: Message, rec_usage: RequestUsage | None) -> None:
    if rec_usage is None:
        return
    if msg.usage is None or rec_usage.output_tokens > msg.usage.output_tokens:
        msg.usage = rec_usage


def session(path: Path) -> Conversation:
    """A Claude Code session log (JSON lines), with the sub-agent logs Claude Code 2.x
    writes beside it (``<sessionId>/subagents/agent-*.jsonl``), each its own thread
    ``subagent:<file stem>``."""
    conv = Conversation(path, "claude-code", [Thread("main")])
    _read(conv, path, None)
    for sub in sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl")):
        if plain_file.is_file(sub):  # found, not named: a link or a FIFO there is not read
            _read(conv, sub, f"subagent:{sub.stem}")
    join_calls(conv)
    return conv


def _read(conv: Conversation, path: Path, fixed: str | None) -> None:
    """The records of ``path`` into ``conv``: all in thread ``fixed`` when given, else
    main and one ``sidechain:N`` per inline sub-agent."""
    thread_of: dict[str, str] = {}  # uuid -> thread name
    open_msg: dict[tuple[str, str], Message] = {}  # (message id, request id) -> message
    pending_boundary: set[str] = set()
    n_side = 0
    for n, rec in json_lines(path, conv.problems):
        kind = rec.get("type")
        uuid, parent = rec.get("uuid"), rec.get("parentUuid")
        if fixed:
            name = fixed
        elif rec.get("isSidechain"):
            name = thread_of.get(parent or "", "")
            if not name.startswith("sidechain"):
                n_side += 1
                name = f"sidechain:{n_side}"
        else:
            name = "main"
        if uuid:
            thread_of[uuid] = name
        thread = conv.thread(name)
        src = f"{path.name}:{n}"
        if kind == "system" and rec.get("subtype") == "compact_boundary":
            pending_boundary.add(name)
            continue
        if kind not in ("user", "assistant"):
            continue
        msg = rec.get("message") or {}
        if kind == "assistant":
            mid, rid = msg.get("id"), rec.get("requestId")
            model = msg.get("model")
            conv.model = conv.model or (model if model != "<synthetic>" else None)
            usage = anthropic_usage(msg["usage"], model, f"{mid}/{rid}") if isinstance(
                msg.get("usage"), dict) else None
            key = (str(mid), str(rid))
            last = thread.messages[-1] if thread.messages else None
            if mid and key in open_msg:
                # the same response again: its usage counts once, on its first message
                first = open_msg[key]
                _merge(first, usage)
                usage = None
                if last is first:
                    first.parts.extend(anthropic_parts(msg.get("content")))
                    continue
            m = Message("assistant", anthropic_parts(msg.get("content")), src,
                        rec.get("timestamp"), mid, usage)
            if mid:
                open_msg[key] = m
        else:
            parts = anthropic_parts(msg.get("content"))
            if rec.get("isCompactSummary"):
                parts = [Part("compaction_summary", p.text) for p in parts]
            m = Message("user", parts, src, rec.get("timestamp"), uuid)
        if name in pending_boundary:
            m.boundary = True
            pending_boundary.discard(name)
        thread.messages.append(m)


STREAM_KINDS = {"system", "assistant", "user", "result", "stream_event"}


def stream_json(path: Path) -> Conversation:
    """``claude -p --output-format stream-json --verbose`` output (JSON lines).

    Besides the conversation, ``reported`` gets what the adapter's usage reading needs
    (``agents/claude_code.py`` reads this, not the file): ``events`` (how many lines were
    Claude Code events), ``unknown_events`` (``{kind[/subtype]: n}`` of the others),
    ``claude_code_version``, and from the ``result`` event ``result`` (the final text),
    ``model_usage`` (its ``modelUsage``, per model) and the totals. One response written as
    several lines (one ``message.id``) is one message and one request, the largest usage kept.
    """
    conv = Conversation(path, "claude-stream-json", [Thread("main")])
    rep = conv.reported
    boundary = False
    seen, unknown = 0, dict[str, int]()
    first_of: dict[tuple[str, str], Message] = {}  # (thread, message id) -> its first message
    for n, ev in json_lines(path, conv.problems):
        kind, src = ev.get("type"), f"{path.name}:{n}"
        if kind not in STREAM_KINDS:
            key = f"{kind}/{ev.get('subtype')}" if ev.get("subtype") else str(kind)
            unknown[key] = unknown.get(key, 0) + 1
            continue
        seen += 1
        if kind == "system" and ev.get("subtype") == "init":
            conv.model = ev.get("model")
            rep["session_id"] = ev.get("session_id")
            version = ev.get("claude_code_version") or ev.get("version")
            if version:
                rep["claude_code_version"] = version
            continue
        if kind == "system" and ev.get("subtype") == "compact_boundary":
            boundary = True
            continue
        if kind == "result":
            _result(conv, ev)
            continue
        if kind not in ("user", "assistant"):
            continue
        parent = ev.get("parent_tool_use_id")
        name = f"sidechain:{parent}" if parent else "main"
        thread = conv.thread(name)
        msg = ev.get("message") or {}
        usage = anthropic_usage(msg["usage"], msg.get("model"), msg.get("id")) if (
            kind == "assistant" and isinstance(msg.get("usage"), dict)) else None
        first = first_of.get((name, str(msg.get("id")))) if kind == "assistant" else None
        if first is not None:
            # the same response again: its usage counts once, on its first message
            _merge(first, usage)
            if thread.messages[-1] is first:
                first.parts.extend(anthropic_parts(msg.get("content")))
                continue
            usage = None
        m = Message(kind, anthropic_parts(msg.get("content")), src, ev.get("timestamp"),
                    msg.get("id"), usage, boundary)
        if kind == "assistant" and msg.get("id") and first is None:
            first_of[name, str(msg["id"])] = m
        boundary = False
        thread.messages.append(m)
    rep["events"] = seen
    if unknown:
        rep["unknown_events"] = unknown
    join_calls(conv)
    return conv


def _result(conv: Conversation, ev: dict[str, Any]) -> None:
    rep = conv.reported
    cost = ev.get("total_cost_usd", ev.get("cost_usd"))
    if cost is not None:
        rep["cost_usd"] = cost
    for k in ("num_turns", "duration_ms", "subtype", "is_error", "result"):
        if k in ev:
            rep[k] = ev[k]
    if isinstance(ev.get("usage"), dict):
        u = anthropic_usage(ev["usage"])
        rep.update(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                   cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens)
    per_model = ev.get("modelUsage")
    if isinstance(per_model, dict):
        rep["model_usage"] = per_model
    for model, mu in (per_model or {}).items():
        if isinstance(mu, dict) and mu.get("contextWindow"):
            conv.context_window = int(mu["contextWindow"])
            conv.model = conv.model or model
