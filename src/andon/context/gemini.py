"""Gemini CLI: chat recordings (``~/.gemini/tmp/<hash>/chats/session-*.json``) and
``gemini -p … -o stream-json`` output (non-JSON console lines are reported and skipped).

Usage is Gemini's: ``input`` (the prompt) includes cached tokens; thoughts are output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from andon.context.model import (
    Conversation,
    Message,
    Part,
    RequestUsage,
    Thread,
    join_calls,
    text_of,
)
from andon.context.read import json_lines, load_json


def _result_text(result: Any) -> str:
    out = []
    for r in result if isinstance(result, list) else [result]:
        resp = (r.get("functionResponse") or {}).get("response") if isinstance(r, dict) else None
        if isinstance(resp, dict):
            out.append(text_of(resp.get("output", resp.get("error", resp))))
        elif r is not None:
            out.append(text_of(r))
    return "\n".join(out)


def session(path: Path, doc: Any = None) -> Conversation:
    """A Gemini CLI chat recording (one JSON document, ``messages[]``). ``reported``: the
    summed tokens, ``session_id``, and ``replies_without_tokens`` when a reply has no
    ``tokens`` object (the adapter then leaves the requests unknown)."""
    doc = doc if doc is not None else load_json(path)
    conv = Conversation(path, "gemini-session", [Thread("main")])
    thread = conv.main
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0}
    for i, m in enumerate(doc.get("messages") or []):
        src, ts, kind = f"messages[{i}]", m.get("timestamp"), m.get("type")
        if kind == "user":
            thread.messages.append(Message("user", [Part("text", text_of(m.get("content")))],
                                           src, ts, m.get("id")))
            continue
        if kind != "gemini":
            continue  # info / error / warning lines of the CLI, not sent to the model
        parts = [Part("reasoning", f"{t.get('subject', '')}\n{t.get('description', '')}")
                 for t in m.get("thoughts") or [] if isinstance(t, dict)]
        if m.get("content"):
            parts.append(Part("text", text_of(m["content"])))
        results = []
        for c in m.get("toolCalls") or []:
            args = c.get("args") if isinstance(c.get("args"), dict) else None
            parts.append(Part("tool_call", json.dumps(c.get("args"), ensure_ascii=False),
                              c.get("name"), c.get("id"), args))
            results.append(Part("tool_result", _result_text(c.get("result")), c.get("name"),
                                c.get("id"), is_error=c.get("status") == "error"))
        tok = m.get("tokens") or {}
        usage = None
        if not isinstance(m.get("tokens"), dict):
            conv.reported["replies_without_tokens"] = conv.reported.get(
                "replies_without_tokens", 0) + 1
        if tok:
            usage = RequestUsage(int(tok.get("input") or 0) + int(tok.get("tool") or 0),
                                 int(tok.get("output") or 0) + int(tok.get("thoughts") or 0),
                                 int(tok.get("cached") or 0), None, m.get("model"))
            totals["input_tokens"] += usage.input_tokens
            totals["output_tokens"] += usage.output_tokens
            totals["cache_read_tokens"] += usage.cache_read_tokens or 0
        conv.model = m.get("model") or conv.model
        thread.messages.append(Message("assistant", parts, src, ts, m.get("id"), usage))
        if results:
            thread.messages.append(Message("tool", results, src, ts))
    conv.reported.update(totals)
    if isinstance(doc.get("sessionId"), str):
        conv.reported["session_id"] = doc["sessionId"]
    join_calls(conv)
    return conv


def stream_json(path: Path) -> Conversation:
    """``gemini -o stream-json`` lines: init, message (deltas), tool_use, tool_result, result.

    ``reported``: the totals of the ``result`` events (summed; output = ``total_tokens -
    input_tokens``, thoughts included) and their number ``results``, only when there is one;
    ``session_id`` from ``init``. The adapter (``agents/gemini.py``) reads these."""
    conv = Conversation(path, "gemini-stream-json", [Thread("main")])
    thread = conv.main
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0}
    for n, ev in json_lines(path, conv.problems):
        kind, src, ts = ev.get("type"), f"{path.name}:{n}", ev.get("timestamp")
        last = thread.messages[-1] if thread.messages else None
        if kind == "init":
            conv.model = ev.get("model") or conv.model
            conv.reported["session_id"] = ev.get("session_id")
        elif kind == "message":
            role = "assistant" if ev.get("role") == "assistant" else "user"
            text = text_of(ev.get("content"))
            if ev.get("delta") and last is not None and last.role == role and last.parts \
                    and last.parts[-1].kind == "text":
                last.parts[-1].text += text
            elif role == "assistant" and last is not None and last.role == "assistant" \
                    and last.usage is None:
                last.parts.append(Part("text", text))
            else:
                thread.messages.append(Message(role, [Part("text", text)], src, ts))
        elif kind == "tool_use":
            params = ev.get("parameters")
            call = Part("tool_call", json.dumps(params, ensure_ascii=False), ev.get("tool_name"),
                        ev.get("tool_id"), params if isinstance(params, dict) else None)
            if last is not None and last.role == "assistant":
                last.parts.append(call)
            else:
                thread.messages.append(Message("assistant", [call], src, ts))
        elif kind == "tool_result":
            thread.messages.append(Message("tool", [Part(
                "tool_result", text_of(ev.get("output", ev.get("error"))), None,
                ev.get("tool_id"), is_error=ev.get("status") == "error")], src, ts))
        elif kind == "result" and isinstance(ev.get("stats"), dict):
            s = ev["stats"]
            inp = int(s.get("input_tokens") or 0)
            out = int(s.get("total_tokens") or 0) - inp if s.get("total_tokens") else int(
                s.get("output_tokens") or 0)
            totals["input_tokens"] += inp
            totals["output_tokens"] += out
            totals["cache_read_tokens"] += int(s.get("cached") or 0)
            conv.reported["results"] = conv.reported.get("results", 0) + 1
    if conv.reported.get("results"):
        conv.reported.update(totals)
    join_calls(conv)
    return conv
