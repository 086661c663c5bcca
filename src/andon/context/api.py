"""Provider message formats: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses.

``anthropic_parts`` is shared with the Claude Code parsers (their messages are Anthropic's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from andon.context.model import Conversation, Message, Part, Thread, join_calls, text_of
from andon.context.read import load_json


def _args(raw: Any) -> tuple[str, dict[str, Any] | None]:
    """A call's arguments as the text the model wrote and, when they are an object, parsed."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return raw, None
        return raw, parsed if isinstance(parsed, dict) else None
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False), raw
    return ("" if raw is None else json.dumps(raw, ensure_ascii=False)), None


def anthropic_parts(content: Any) -> list[Part]:
    """Anthropic content (a string or blocks) as parts."""
    if isinstance(content, str):
        return [Part("text", content)]
    parts: list[Part] = []
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            parts.append(Part("text", str(b.get("text", ""))))
        elif t in ("thinking", "redacted_thinking"):
            parts.append(Part("reasoning", str(b.get("thinking") or b.get("data") or "")))
        elif t in ("tool_use", "server_tool_use"):
            text, args = _args(b.get("input"))
            parts.append(Part("tool_call", text, tool=b.get("name"), call_id=b.get("id"),
                              args=args))
        elif t == "tool_result":
            inner = b.get("content")
            images = [x for x in inner if isinstance(x, dict) and x.get("type") == "image"] \
                if isinstance(inner, list) else []
            parts.append(Part("tool_result", text_of(inner), call_id=b.get("tool_use_id"),
                              is_error=bool(b.get("is_error"))))
            parts.extend(Part("image", "[image]") for _ in images)
        elif t in ("image", "document"):
            parts.append(Part("image", f"[{t}]"))
        else:
            parts.append(Part("text", text_of(b)))
    return parts


def anthropic_messages(path: Path, doc: Any) -> Conversation:
    """An Anthropic Messages request: ``{system, messages[{role, content}]}`` or a list."""
    doc = doc if doc is not None else load_json(path)
    messages = doc.get("messages", []) if isinstance(doc, dict) else doc
    thread = Thread("main")
    system = doc.get("system") if isinstance(doc, dict) else None
    if system:
        thread.messages.append(Message("system", [Part("text", text_of(system))], "system"))
    for i, m in enumerate(messages):
        thread.messages.append(Message(m.get("role", "user"), anthropic_parts(m.get("content")),
                                       f"messages[{i}]"))
    conv = Conversation(path, "anthropic-messages", [thread],
                        model=doc.get("model") if isinstance(doc, dict) else None)
    join_calls(conv)
    return conv


def _chat_parts(m: dict[str, Any]) -> list[Part]:
    content = m.get("content")
    parts: list[Part] = []
    if m.get("role") == "tool":
        return [Part("tool_result", text_of(content), call_id=m.get("tool_call_id"))]
    if isinstance(content, list):
        for c in content:
            if isinstance(c, dict) and c.get("type") in ("image_url", "input_image", "image"):
                parts.append(Part("image", "[image]"))
            else:
                parts.append(Part("text", text_of([c])))
    elif content:
        parts.append(Part("text", str(content)))
    if m.get("reasoning_content") or m.get("reasoning"):
        parts.insert(0, Part("reasoning", text_of(m.get("reasoning_content") or m["reasoning"])))
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {})
        text, args = _args(fn.get("arguments"))
        parts.append(Part("tool_call", text, tool=fn.get("name"), call_id=call.get("id"),
                          args=args))
    return parts


def openai_chat(path: Path, doc: Any) -> Conversation:
    """OpenAI Chat Completions ``messages`` (a list, or ``{messages: [...]}``)."""
    doc = doc if doc is not None else load_json(path)
    messages = doc.get("messages", []) if isinstance(doc, dict) else doc
    thread = Thread("main")
    for i, m in enumerate(messages):
        role = "system" if m.get("role") == "developer" else m.get("role", "user")
        thread.messages.append(Message(role, _chat_parts(m), f"messages[{i}]"))
    conv = Conversation(path, "openai-chat", [thread],
                        model=doc.get("model") if isinstance(doc, dict) else None)
    join_calls(conv)
    return conv


def responses_item(item: dict[str, Any]) -> Message | None:
    """One OpenAI Responses item as a message (None for items that carry no content)."""
    t = item.get("type", "message")
    if t == "message":
        role = {"developer": "system"}.get(item.get("role", ""), item.get("role", "user"))
        parts = []
        for c in item.get("content") or []:
            if isinstance(c, dict) and c.get("type") in ("input_image", "image"):
                parts.append(Part("image", "[image]"))
            elif isinstance(c, dict):
                parts.append(Part("text", str(c.get("text", ""))))
        if isinstance(item.get("content"), str):
            parts.append(Part("text", item["content"]))
        return Message(role, parts, "")
    if t == "reasoning":
        text = text_of(item.get("summary")) or text_of(item.get("content"))
        return Message("assistant", [Part("reasoning", text)], "")
    if t in ("function_call", "custom_tool_call"):
        text, args = _args(item.get("arguments", item.get("input")))
        return Message("assistant", [Part("tool_call", text, tool=item.get("name"),
                                          call_id=item.get("call_id"), args=args)], "")
    if t == "local_shell_call":
        action = item.get("action") or {}
        cmd = action.get("command")
        text = " ".join(cmd) if isinstance(cmd, list) else str(cmd or "")
        return Message("assistant", [Part("tool_call", text, tool="shell",
                                          call_id=item.get("call_id"), args={"command": text})], "")
    if t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        return Message("tool", [Part("tool_result", text_of(item.get("output")),
                                     call_id=item.get("call_id"))], "")
    return None


def openai_responses(path: Path, doc: Any) -> Conversation:
    """OpenAI Responses input items (a list, or ``{input: [...]}`` / ``{data: [...]}``)."""
    doc = doc if doc is not None else load_json(path)
    key = "input" if isinstance(doc, dict) and "input" in doc else "data"
    items = doc.get(key, []) if isinstance(doc, dict) else doc
    thread = Thread("main")
    for i, item in enumerate(items):
        m = responses_item(item)
        if m is not None:
            m.source = f"{key}[{i}]" if isinstance(doc, dict) else f"[{i}]"
            m.id = item.get("id")
            thread.messages.append(m)
    conv = Conversation(path, "openai-responses", [thread])
    join_calls(conv)
    return conv
