"""Codex CLI: rollouts (``~/.codex/sessions/**/rollout-*.jsonl``) and ``codex exec --json``.

Rollout ``token_count`` events carry the usage of the call just made (``last_token_usage``)
and the running total; Codex repeats an event unchanged (same total), which is one call, not
two. Usage is OpenAI's: cached tokens are inside ``input_tokens`` already.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from andon.context.api import responses_item
from andon.context.model import Conversation, Message, Part, RequestUsage, Thread, join_calls
from andon.context.read import json_lines


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def openai_usage(u: Any, model: str | None = None) -> RequestUsage | None:
    """``{input_tokens, cached_input_tokens, output_tokens}`` as a request's usage (None
    without input and output counts). Cache writes only when reported
    (``cache_write_input_tokens``)."""
    if not isinstance(u, dict):
        return None
    inp, out = _count(u.get("input_tokens")), _count(u.get("output_tokens"))
    if inp is None or out is None:
        return None
    return RequestUsage(inp, out, _count(u.get("cached_input_tokens")),
                        _count(u.get("cache_write_input_tokens")), model)


def _attach(thread: Thread, usage: RequestUsage, since: int, src: str) -> None:
    """Give ``usage`` to the last assistant message after index ``since`` (the request's
    output); a request whose output was not written gets an empty assistant message."""
    for m in reversed(thread.messages[since:]):
        if m.role == "assistant" and m.usage is None:
            m.usage = usage
            return
    thread.messages.append(Message("assistant", [], src, usage=usage))


def rollout(path: Path) -> Conversation:
    """A Codex rollout (JSON lines ``{timestamp, type, payload}``).

    ``reported`` holds the last running total (``input_tokens`` … ``cache_write_tokens``)
    and ``thread_id``; each request's usage is on the assistant message it produced, with
    the model of the ``turn_context`` before it. The Codex adapter reads its usage here.
    """
    conv = Conversation(path, "codex-rollout", [Thread("main")])
    thread = conv.main
    last_total: Any = None
    since = 0
    boundary = False
    for n, rec in json_lines(path, conv.problems):
        kind, p, src = rec.get("type"), rec.get("payload") or {}, f"{path.name}:{n}"
        if kind == "turn_context" and isinstance(p.get("model"), str):
            conv.model = p["model"]
        elif kind == "session_meta":
            conv.reported["thread_id"] = p.get("id")
        elif kind == "compacted":
            thread.messages.append(Message("user", [Part("compaction_summary",
                                                         str(p.get("message", "")))],
                                           src, rec.get("timestamp"), boundary=True))
            boundary = False
        elif kind == "response_item":
            m = responses_item(p)
            if m is None:
                continue
            m.source, m.timestamp, m.boundary = src, rec.get("timestamp"), boundary
            boundary = False
            thread.messages.append(m)
        elif kind == "event_msg":
            if p.get("model_context_window"):
                conv.context_window = int(p["model_context_window"])
            if p.get("type") != "token_count" or not p.get("info"):
                continue
            info = p["info"]
            if info.get("model_context_window"):
                conv.context_window = int(info["model_context_window"])
            total = info.get("total_token_usage")
            if total == last_total:
                continue  # the same call reported again
            last_total = total
            totals = openai_usage(total)
            if totals is not None:
                conv.reported.update(input_tokens=totals.input_tokens,
                                     output_tokens=totals.output_tokens,
                                     cache_read_tokens=totals.cache_read_tokens,
                                     cache_write_tokens=totals.cache_write_tokens)
            req = openai_usage(info.get("last_token_usage"), conv.model)
            if req is not None:
                _attach(thread, req, since, src)
                since = len(thread.messages)
    join_calls(conv)
    return conv


def _item_messages(item: dict[str, Any], src: str) -> list[Message]:
    t, iid = item.get("type"), item.get("id")
    if t == "agent_message":
        return [Message("assistant", [Part("text", str(item.get("text", "")))], src, id=iid)]
    if t == "reasoning":
        return [Message("assistant", [Part("reasoning", str(item.get("text", "")))], src, id=iid)]
    if t == "command_execution":
        cmd = str(item.get("command", ""))
        return [Message("assistant", [Part("tool_call", cmd, "shell", iid, {"command": cmd})],
                        src, id=iid),
                Message("tool", [Part("tool_result", str(item.get("aggregated_output", "")),
                                      "shell", iid,
                                      is_error=item.get("exit_code") not in (0, None))], src)]
    if t == "file_change":
        changes = item.get("changes") or []
        text = "\n".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
        paths = [c.get("path") for c in changes]
        return [Message("assistant", [Part("tool_call", text, "apply_patch", iid,
                                           {"paths": paths})], src, id=iid)]
    if t in ("mcp_tool_call", "web_search"):
        name = item.get("tool") or t
        return [Message("assistant", [Part("tool_call", str(item.get("arguments") or
                                                            item.get("query") or ""),
                                           name, iid)], src, id=iid),
                Message("tool", [Part("tool_result", str(item.get("result") or ""), name, iid)],
                        src)]
    if t == "todo_list":
        return [Message("assistant", [Part("tool_call", str(item.get("items", "")),
                                           "todo_list", iid)], src, id=iid)]
    return []


def exec_json(path: Path) -> Conversation:
    """``codex exec --json`` events; ``turn.completed`` usage is one turn's total."""
    conv = Conversation(path, "codex-exec-json", [Thread("main")])
    thread = conv.main
    since = 0
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0}
    for n, ev in json_lines(path, conv.problems):
        kind, src = ev.get("type"), f"{path.name}:{n}"
        if kind == "thread.started":
            conv.reported["thread_id"] = ev.get("thread_id")
        elif kind == "item.completed" and isinstance(ev.get("item"), dict):
            thread.messages.extend(_item_messages(ev["item"], src))
        elif kind == "turn.completed" and (u := openai_usage(ev.get("usage"))) is not None:
            _attach(thread, u, since, src)
            since = len(thread.messages)
            totals["input_tokens"] += u.input_tokens
            totals["output_tokens"] += u.output_tokens
            totals["cache_read_tokens"] += u.cache_read_tokens or 0
    if since:
        conv.reported.update(totals)
    join_calls(conv)
    return conv
