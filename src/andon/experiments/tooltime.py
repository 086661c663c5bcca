"""``tool_s``: seconds an agent spent in tool calls, from its transcript's timestamps.

The transcript is read by the ``andon context`` parsers (:func:`andon.context.load`). A tool
call's time runs from the message that made the call to the message that carries its result
(joined by call id); calls that overlap (parallel tool use) count once — the union of the
intervals, so the figure never exceeds the wall time. A call without a result (the agent was
stopped) is left out.

Known only where the format has a timestamp on every message: Claude Code session logs,
Codex rollouts, Gemini CLI ``-o stream-json``. ``claude -p --output-format stream-json`` and
``codex exec --json`` (what the adapters save) carry none today, nor do plain-text logs:
there the value is None, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from ..context import load
from ..context.model import Conversation, TranscriptError


def tool_seconds(paths: Iterable[Path]) -> float | None:
    """Seconds in tool calls over the transcripts ``paths`` (one per stage run), or None
    when there is none or any of them cannot say (unknown format, no timestamps)."""
    total, seen = 0.0, False
    for path in paths:
        try:
            conv = load(Path(path))
        except TranscriptError:
            return None
        seconds = conversation_tool_seconds(conv)
        if seconds is None:
            return None
        total, seen = total + seconds, True
    return round(total, 3) if seen else None


def conversation_tool_seconds(conv: Conversation) -> float | None:
    """Seconds in tool calls in one conversation (module docstring); None when a tool call
    or result has no readable timestamp or no call id, or no message has a timestamp."""
    started: dict[str, datetime] = {}
    spans: list[tuple[datetime, datetime]] = []
    stamped = False
    for thread in conv.threads:
        for m in thread.messages:
            at = _time(m.timestamp)
            stamped = stamped or at is not None
            for p in m.parts:
                if p.kind not in ("tool_call", "tool_result"):
                    continue
                if at is None or not p.call_id:  # cannot be timed or paired
                    return None
                if p.kind == "tool_call":
                    started[p.call_id] = at
                elif p.call_id in started:
                    spans.append((started.pop(p.call_id), at))
    if not stamped:
        return None
    return _union_seconds(spans)


def _union_seconds(spans: list[tuple[datetime, datetime]]) -> float:
    """Length of the union of the intervals, in seconds (an inverted one counts 0)."""
    total = 0.0
    end: datetime | None = None
    for a, b in sorted(spans):
        if end is not None and a < end:
            a = end
        if b > a:
            total += (b - a).total_seconds()
            end = b if end is None or b > end else end
    return total


def _time(value: object) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or an offset), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
