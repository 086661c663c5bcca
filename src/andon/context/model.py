"""The normalised conversation every transcript parser produces.

A ``Conversation`` holds ``Thread``s (``main`` first, then one per sub-agent / sidechain);
a thread is a list of ``Message``s in the order the agent saw them; a message is a list of
``Part``s. Token counts (``Part.tokens``) are filled in later by ``context.tokens``;
``Message.usage`` is what the provider reported for the request that produced that
(assistant) message, in one convention: ``input_tokens`` is the whole context of the
request (cache reads and writes included), ``output_tokens`` includes reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from andon.errors import Problem, UsageError

#: what a part can be; anything else is a bug in a parser
PART_KINDS = ("text", "tool_call", "tool_result", "reasoning", "image", "compaction_summary")
ROLES = ("system", "user", "assistant", "tool")


class TranscriptError(UsageError, ValueError):
    """A transcript cannot be read: unknown format, not JSON, or no message at all.

    ``problems`` lists each one with the file and the line (or key) and what was expected.
    """

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass(slots=True)
class RequestUsage:
    """One model request as the provider reported it (tokens; None = not reported)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    model: str | None = None
    key: str | None = None  # what identifies the request in the log (message id + request id)

    def as_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens, "model": self.model}


@dataclass(slots=True)
class Part:
    """One piece of a message. ``text`` is what the model saw (a tool call: its arguments).

    ``tool`` names the tool of a call or result (results get it by joining ``call_id``);
    ``args`` keeps a call's parsed arguments (paths for the read/edit analysis).
    """

    kind: str
    text: str
    tool: str | None = None
    call_id: str | None = None
    args: dict[str, Any] | None = None
    is_error: bool = False
    tokens: int = 0


@dataclass(slots=True)
class Message:
    """One message: a role, its parts, where it came from (``source``: file:line or key)."""

    role: str
    parts: list[Part]
    source: str
    timestamp: str | None = None
    id: str | None = None
    usage: RequestUsage | None = None
    #: a compaction boundary: the context restarts with this message
    boundary: bool = False

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.parts)


@dataclass(slots=True)
class Thread:
    """The main conversation or one sub-agent's (``name``: "main" or "sidechain:<id>")."""

    name: str
    messages: list[Message] = field(default_factory=list)


@dataclass(slots=True)
class Conversation:
    """A whole transcript, normalised.

    ``reported`` holds the totals the agent itself reported (``cost_usd``, ``input_tokens``,
    ``output_tokens``, ``api_calls`` … as found); ``problems`` the lines skipped as unreadable;
    ``context_window`` the model's window in tokens when the transcript says it.
    """

    path: Path
    format: str
    threads: list[Thread]
    model: str | None = None
    reported: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    context_window: int | None = None

    @property
    def main(self) -> Thread:
        return self.threads[0]

    def thread(self, name: str) -> Thread:
        """The thread called ``name``, made (empty) on first use."""
        for t in self.threads:
            if t.name == name:
                return t
        t = Thread(name)
        self.threads.append(t)
        return t

    def requests(self) -> list[RequestUsage]:
        """Every reported request, in thread and message order."""
        return [m.usage for t in self.threads for m in t.messages if m.usage is not None]


def join_calls(conv: Conversation) -> None:
    """Give every tool result the name (and arguments) of the call with its ``call_id``."""
    calls: dict[str, Part] = {}
    for t in conv.threads:
        for m in t.messages:
            for p in m.parts:
                if p.kind == "tool_call" and p.call_id:
                    calls[p.call_id] = p
    for t in conv.threads:
        for m in t.messages:
            for p in m.parts:
                if p.kind == "tool_result" and p.call_id in calls:
                    call = calls[p.call_id]
                    p.tool = p.tool or call.tool
                    p.args = p.args if p.args is not None else call.args


def text_of(content: Any) -> str:
    """A message content (a string, a list of blocks, anything else) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for b in content:
            if isinstance(b, dict):
                out.append(str(b.get("text", "")) if "text" in b else text_of(b.get("content")))
            else:
                out.append(text_of(b))
        return "\n".join(x for x in out if x)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("output") or content)
    return str(content)
