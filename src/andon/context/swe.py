"""SWE-agent ``.traj`` files and mini-swe-agent trajectories.

SWE-agent keeps ``history[]`` (what the model was sent, in order) and ``info.model_stats``
(``instance_cost``, ``tokens_sent`` summed over calls, ``tokens_received``, ``api_calls``):
no per-call usage. mini-swe-agent keeps ``messages[]`` with each response's usage in
``extra.response.usage`` (OpenAI's convention) and ``info.model_stats.instance_cost``.
"""

from __future__ import annotations

import re
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
from andon.context.read import load_json

_BASH = re.compile(r"```(?:bash|sh)?\n(.*?)```", re.S)


def _action_tool(action: str) -> str:
    return action.strip().split(maxsplit=1)[0] if action.strip() else "action"


def _split(text: str, action: str, call_id: str) -> list[Part]:
    """The reply as its prose and its action (the last place the action is written, from
    the fence that holds it), without repeating a character: the two concatenate back."""
    at = text.rfind(action.strip()) if action.strip() else -1
    if at < 0:
        return [Part("text", text), Part("tool_call", action, _action_tool(action), call_id,
                                         {"command": action})]
    fence = text.rfind("```", 0, at)
    cut = fence if fence >= 0 and "```" not in text[fence + 3:at] else at
    parts = [Part("text", text[:cut])] if text[:cut] else []
    return [*parts, Part("tool_call", text[cut:], _action_tool(action), call_id,
                         {"command": action})]


def swe_agent(path: Path, doc: Any = None) -> Conversation:
    """A SWE-agent trajectory: ``{trajectory, history, info}``."""
    doc = doc if doc is not None else load_json(path)
    conv = Conversation(path, "swe-agent", [Thread("main")])
    thread = conv.main
    calls = 0
    for i, h in enumerate(doc.get("history") or []):
        role, src = h.get("role", "user"), f"history[{i}]"
        text = text_of(h.get("content"))
        if role == "assistant":
            action = str(h.get("action") or "")
            parts = [Part("text", text)]
            if action.strip():
                calls += 1
                parts = _split(text, action, f"call-{calls}")
            thread.messages.append(Message("assistant", parts, src))
        elif role == "tool" or h.get("message_type") == "observation":
            last_call = f"call-{calls}" if calls else None
            thread.messages.append(Message("tool", [Part("tool_result", text, None, last_call)],
                                           src))
        else:
            thread.messages.append(Message("system" if role == "system" else "user",
                                           [Part("text", text)], src))
    info = doc.get("info") or {}
    stats = info.get("model_stats") or {}
    if "instance_cost" in stats:
        conv.reported["cost_usd"] = stats["instance_cost"]
    for k, name in (("tokens_sent", "input_tokens"), ("tokens_received", "output_tokens"),
                    ("api_calls", "api_calls")):
        if k in stats:
            conv.reported[name] = stats[k]
    conv.reported["exit_status"] = info.get("exit_status")
    join_calls(conv)
    return conv


def mini_swe_agent(path: Path, doc: Any = None) -> Conversation:
    """A mini-swe-agent trajectory: ``{info, messages, trajectory_format}``."""
    doc = doc if doc is not None else load_json(path)
    conv = Conversation(path, "mini-swe-agent", [Thread("main")])
    thread = conv.main
    calls = 0
    for i, m in enumerate(doc.get("messages") or []):
        role, src, text = m.get("role", "user"), f"messages[{i}]", text_of(m.get("content"))
        if role == "assistant":
            resp = (m.get("extra") or {}).get("response") or {}
            usage = None
            u = resp.get("usage") if isinstance(resp, dict) else None
            if isinstance(u, dict):
                cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
                usage = RequestUsage(int(u.get("prompt_tokens") or 0),
                                     int(u.get("completion_tokens") or 0),
                                     int(cached or 0), None, resp.get("model"), resp.get("id"))
                conv.model = conv.model or resp.get("model")
            found = _BASH.findall(text)
            parts = [Part("text", text)]
            if found:
                calls += 1
                parts = _split(text, found[-1], f"call-{calls}")
            thread.messages.append(Message("assistant", parts, src, id=resp.get("id"),
                                           usage=usage))
        elif role == "user" and i > 1 and calls:
            thread.messages.append(Message("tool", [Part("tool_result", text, None,
                                                         f"call-{calls}")], src))
        else:
            thread.messages.append(Message(role if role in ("system", "user") else "user",
                                           [Part("text", text)], src))
    stats = (doc.get("info") or {}).get("model_stats") or {}
    if "instance_cost" in stats:
        conv.reported["cost_usd"] = stats["instance_cost"]
    if "api_calls" in stats:
        conv.reported["api_calls"] = stats["api_calls"]
    join_calls(conv)
    return conv
