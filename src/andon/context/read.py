"""Reading a transcript file: JSON lines with bad lines skipped, and which format it is.

``detect(path)`` names the format from the content (never from the file name alone);
``FORMATS`` lists every name ``--format`` accepts.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from andon import plain_file
from andon.context.model import TranscriptError
from andon.errors import Problem

FORMATS = ("claude-code", "claude-stream-json", "codex-rollout", "codex-exec-json",
           "gemini-session", "gemini-stream-json", "aider", "swe-agent", "mini-swe-agent",
           "openai-chat", "openai-responses", "anthropic-messages")

RESPONSES_ITEMS = {"message", "reasoning", "function_call", "function_call_output",
                   "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                   "web_search_call", "item_reference"}


def text_of(path: Path) -> TextIO:
    """``path`` open as UTF-8 text (undecodable bytes replaced): a regular file, or a link
    to one (:func:`andon.context.load` says whether a link is read); a FIFO or a device
    raises plain_file.NotPlain, never waited on or read without end."""
    return io.TextIOWrapper(plain_file.open_regular(path, follow=True), encoding="utf-8",
                            errors="replace")


def json_lines(path: Path, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each JSON object line of ``path`` with its 1-based number; a line that is not a JSON
    object is added to ``problems`` (file, line, expected vs got) and skipped."""
    with text_of(path) as fh:
        for n, line in enumerate(fh, 1):
            s = line.strip()
            if not s:
                continue
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as e:
                what = "a truncated JSON line" if s.startswith("{") else "text"
                problems.append(Problem(path, n, f"expected a JSON object, got {what} "
                                        f"{s[:40]!r} ({e.msg})"))
                continue
            if not isinstance(obj, dict):
                problems.append(Problem(path, n, "expected a JSON object, got "
                                        f"{type(obj).__name__}"))
                continue
            yield n, obj


def load_json(path: Path) -> Any:
    """The whole file as one JSON document. Raises ``TranscriptError`` naming line/column."""
    try:
        return json.loads(plain_file.read_text(path, follow=True))
    except json.JSONDecodeError as e:
        raise TranscriptError([Problem(path, e.lineno,
                                       f"expected JSON: {e.msg} (column {e.colno})")]) from e


def _line_format(obj: dict[str, Any]) -> str | None:
    t = obj.get("type")
    if "payload" in obj and "timestamp" in obj and t in (
            "session_meta", "turn_context", "response_item", "event_msg", "compacted"):
        return "codex-rollout"
    if isinstance(t, str) and (t.startswith(("thread.", "turn.", "item.")) or (t == "error"
                               and "message" in obj and "timestamp" not in obj)):
        return "codex-exec-json"
    if "uuid" in obj and ("sessionId" in obj or "parentUuid" in obj):
        return "claude-code"
    if t == "summary" and "leafUuid" in obj:
        return "claude-code"
    if t in ("system", "assistant", "user", "result") and "session_id" in obj:
        return "claude-stream-json"
    if t in ("init", "message", "tool_use", "tool_result", "result") and "timestamp" in obj:
        return "gemini-stream-json"
    return None


def _document_format(doc: Any) -> str | None:
    if isinstance(doc, dict):
        if "trajectory" in doc and "history" in doc:
            return "swe-agent"
        if "messages" in doc and "info" in doc and str(doc.get("trajectory_format", "")
                                                       ).startswith("mini-swe-agent"):
            return "mini-swe-agent"
        if "messages" in doc and "sessionId" in doc:
            return "gemini-session"
        if isinstance(doc.get("input"), list) or isinstance(doc.get("data"), list):
            return _document_format(doc.get("input") or doc.get("data"))
        if isinstance(doc.get("messages"), list):
            if "system" in doc or _anthropic_blocks(doc["messages"]):
                return "anthropic-messages"
            return "openai-chat"
    if isinstance(doc, list) and doc and all(isinstance(x, dict) for x in doc):
        if any((x.get("type") in RESPONSES_ITEMS and "role" not in x) or
               x.get("type") == "message" for x in doc):
            return "openai-responses"
        if all("role" in x for x in doc):
            return "anthropic-messages" if _anthropic_blocks(doc) else "openai-chat"
    return None


def _anthropic_blocks(messages: list[Any]) -> bool:
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") in (
                "tool_use", "tool_result", "thinking", "redacted_thinking") for b in c):
            return True
    return False


def detect(path: Path) -> str:
    """The format of the transcript at ``path`` (one of ``FORMATS``).

    Raises:
        TranscriptError: nothing in the file looks like a known format (names what was seen).
    """
    with text_of(path) as fh:
        head = fh.read(65536)
    if head.lstrip().startswith("# aider chat started") or "\n#### " in head:
        return "aider"
    seen = []
    for n, line in enumerate(head.splitlines()[:50], 1):
        s = line.strip()
        if not s.startswith("{"):
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found = _line_format(obj)
            if found:
                return found
            seen.append(f"line {n}: keys {sorted(obj)[:6]}")
    try:
        doc = json.loads(plain_file.read_text(path, follow=True))
    except (json.JSONDecodeError, UnicodeDecodeError):
        doc = None
    found = _document_format(doc) if doc is not None else None
    if found:
        return found
    what = "; ".join(seen[:3]) or (f"a JSON {type(doc).__name__}" if doc is not None
                                   else f"text starting {head[:40]!r}")
    raise TranscriptError([Problem(path, None, "unknown transcript format: expected one of "
                                   f"{', '.join(FORMATS)} (force one with --format); got {what}")])
