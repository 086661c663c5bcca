"""Agent adapters, picked by name. See ``base.py`` for the interface."""

from __future__ import annotations

from .base import Agent, AgentRun, StageContext
from .command import CommandAgent
from .scripted import ScriptedAgent

ADAPTERS = ("command", "scripted")


def make_agent(spec: str, command: str | None = None) -> Agent:
    """Build an adapter from ``--agent``: ``command`` or ``scripted:module:function``.

    Raises:
        ValueError: unknown adapter name (the message lists the known ones) or bad settings.
    """
    name, _, rest = spec.partition(":")
    if name == "command":
        return CommandAgent(rest or command or "")
    if name == "scripted":
        return ScriptedAgent.from_spec(rest)
    raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(ADAPTERS)}")


__all__ = ["Agent", "AgentRun", "StageContext", "CommandAgent", "ScriptedAgent", "make_agent"]
