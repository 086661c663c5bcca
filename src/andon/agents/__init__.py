"""Agent adapters, picked by name. See ``base.py`` for the interface."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from ..contain import netless
from ..errors import InvalidValue
from .aider import AiderAgent
from .base import Agent, AgentRun, StageContext
from .claude_code import ClaudeCodeAgent
from .codex import CodexAgent
from .command import CommandAgent
from .external import ExternalAgent
from .gemini import GeminiAgent
from .scripted import ScriptedAgent

if TYPE_CHECKING:
    from ..config import Config

# Adapters for agent CLIs, by the name `--agent` and `[agents.<name>]` use.
EXTERNAL: dict[str, type[ExternalAgent]] = {
    "claude-code": ClaudeCodeAgent, "codex": CodexAgent, "aider": AiderAgent,
    "gemini": GeminiAgent}
ADAPTERS = ("command", "scripted", *EXTERNAL)


def make_agent(spec: str, command: str | None = None, config: Config | None = None) -> Agent:
    """Build an adapter from ``--agent``: ``command``, ``scripted:module:function``, or one
    of the agent CLIs (``claude-code``, ``codex``, ``aider``, ``gemini``) with its
    ``[agents.<name>]`` settings and the ``[prices]`` of ``config``.

    Raises:
        InvalidValue: (a UsageError and a ValueError) unknown adapter name (the message lists
            the known ones), an ``[agents.<name>]`` table for an adapter that does not exist,
            an agent CLI that is not installed, bad settings, or ``[agent] network = "off"``
            where this machine cannot run a process without network (or for the in-process
            scripted adapter).
    """
    agent = _make(spec, command, config)
    if config is not None and config.agent.network == "off":
        if isinstance(agent, ScriptedAgent):
            raise InvalidValue('[agent] network = "off" cannot contain the scripted adapter: it '
                             'runs inside andon; use a command agent, or network = "on"')
        cut, why = netless.available()
        if not cut:
            raise InvalidValue(f'[agent] network = "off" in andon.toml, but this machine cannot '
                             f'run the agent without network: {why}. Set [agent] network = '
                             f'"on" (or run andon where user namespaces are allowed; see '
                             f'`andon doctor`)')
        agent.network = "off"
    return agent


def _make(spec: str, command: str | None, config: Config | None) -> Agent:
    name, _, rest = spec.partition(":")
    if config is not None:
        unknown = sorted(set(config.agents) - set(EXTERNAL))
        if unknown:
            raise InvalidValue(f"andon.toml has [agents.{unknown[0]}], but the adapters with "
                             f"settings are: {', '.join(EXTERNAL)}")
    prices = config.prices if config is not None else {}
    if name == "command":
        passthrough = config.agent.env_passthrough if config is not None else ()
        return CommandAgent(rest or command or "", prices=prices, env_passthrough=passthrough)
    if name == "scripted":
        return ScriptedAgent.from_spec(rest)
    if name in EXTERNAL and not rest:
        settings = config.agents.get(name) if config is not None else None
        return EXTERNAL[name](settings, prices)
    close = difflib.get_close_matches(name, ADAPTERS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    known = (a if a != "scripted" else "scripted:module:function" for a in ADAPTERS)
    raise InvalidValue(f"unknown agent {spec!r}; {hint}known agents: {', '.join(known)}")


__all__ = ["Agent", "AgentRun", "StageContext", "CommandAgent", "ScriptedAgent", "make_agent",
           "ClaudeCodeAgent", "CodexAgent", "AiderAgent", "GeminiAgent", "ExternalAgent",
           "EXTERNAL", "ADAPTERS"]
