"""Aider's chat history (``.aider.chat.history.md``).

``#### `` lines are the user's, ``> `` lines aider's own notes (tool output: edits applied,
commits, token reports), the rest the model's replies. A ``> Tokens:`` report gives the
usage of the reply before it (aider rounds ``2.4k``), read with the adapter's
``report_counts`` (cache writes counted once: aider adds them to ``sent`` twice); the last
``session`` cost is aider's total.
"""

from __future__ import annotations

from pathlib import Path

from andon.agents.aider_usage import TOKENS_LINE, report_counts
from andon.context.model import Conversation, Message, Part, RequestUsage, Thread
from andon.context.read import text_of


def history(path: Path) -> Conversation:
    """An aider chat history file."""
    conv = Conversation(path, "aider", [Thread("main")])
    thread = conv.main
    role = None
    buf: list[str] = []
    start = 0
    sent = received = 0
    session_cost = None

    def flush() -> None:
        if role and "".join(buf).strip():
            thread.messages.append(Message(role, [Part("tool_result" if role == "tool" else
                                                       "text", "".join(buf))],
                                           f"{path.name}:{start}"))

    with text_of(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith("# aider chat started"):
                kind = None
            elif line.startswith("####"):
                kind, line = "user", line[5:] if line.startswith("#### ") else line[4:]
            elif line.startswith(">"):
                kind, line = "tool", line[2:] if line.startswith("> ") else line[1:]
            else:
                kind = "assistant" if role in ("assistant", "user") or line.strip() else role
            m = TOKENS_LINE.match(line.rstrip("\n").rstrip()) if kind == "tool" else None
            if m:
                c = report_counts(m["body"]) or {}
                usage = RequestUsage(c.get("input_tokens", 0), c.get("output_tokens", 0),
                                     c.get("cache_read_tokens"), c.get("cache_write_tokens"))
                sent += usage.input_tokens
                received += usage.output_tokens
                session_cost = m["session"] or session_cost
                flush()
                role, buf = None, []
                for msg in reversed(thread.messages):
                    if msg.role == "assistant":
                        msg.usage = msg.usage or usage
                        break
                continue
            if kind != role:
                flush()
                role, buf, start = kind, [], n
            if kind is not None:
                buf.append(line)
    flush()
    conv.reported.update(input_tokens=sent, output_tokens=received)
    if session_cost is not None:
        conv.reported["cost_usd"] = float(session_cost.replace(",", ""))
    return conv
