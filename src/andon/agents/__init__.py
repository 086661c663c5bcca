"""Agent adapters, picked by name. See ``base.py`` for the interface.

Adapters are found through :data:`ADAPTERS`, a table of ``name → "module:Class"``; a module
is imported only when its name is used (``make_agent``, :func:`adapter_class`, or
``from andon.agents import CodexAgent``), so importing this package — as the runner does —
loads no adapter.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .. import sandbox
from ..contain import netless
from ..errors import InvalidValue
from ..suggest import closest
from .base import Agent, AgentRun, StageContext

if TYPE_CHECKING:
    from ..config import Config
    from .aider import AiderAgent
    from .claude_code import ClaudeCodeAgent
    from .codex import CodexAgent
    from .command import CommandAgent
    from .external import ExternalAgent
    from .gemini import GeminiAgent
    from .scripted import ScriptedAgent

# Every adapter, by the name `--agent` uses: where its class lives (imported on first use).
ADAPTERS: dict[str, str] = {
    "command": "andon.agents.command:CommandAgent",
    "scripted": "andon.agents.scripted:ScriptedAgent",
    "claude-code": "andon.agents.claude_code:ClaudeCodeAgent",
    "codex": "andon.agents.codex:CodexAgent",
    "aider": "andon.agents.aider:AiderAgent",
    "gemini": "andon.agents.gemini:GeminiAgent",
}
# The adapters for agent CLIs (ExternalAgent): the names `[agents.<name>]` settings may use.
EXTERNAL = ("claude-code", "codex", "aider", "gemini")

# `from andon.agents import X` for the classes, resolved lazily (module __getattr__).
_CLASSES = {target.rpartition(":")[2]: target for target in ADAPTERS.values()}
_CLASSES["ExternalAgent"] = "andon.agents.external:ExternalAgent"


def adapter_class(name: str) -> type[Agent]:
    """The adapter class registered as ``name`` in :data:`ADAPTERS`, its module imported now.

    Raises:
        InvalidValue: (a UsageError and a ValueError) ``name`` is not in the table; the
            message has a did-you-mean when one is close, and lists every known name.
    """
    target = ADAPTERS.get(name)
    if target is None:
        raise _unknown(name, name)
    return _load(target)


def _unknown(spec: str, name: str) -> InvalidValue:
    near = closest(name, ADAPTERS)
    hint = f"did you mean {near!r}? " if near else ""
    known = (a if a != "scripted" else "scripted:module:function" for a in ADAPTERS)
    return InvalidValue(f"unknown agent {spec!r}; {hint}known agents: {', '.join(known)}")


def external_class(name: str) -> type[ExternalAgent]:
    """The adapter class of the agent CLI ``name`` (one of :data:`EXTERNAL`), imported now."""
    from .external import ExternalAgent

    cls = adapter_class(name)
    if not issubclass(cls, ExternalAgent):
        raise InvalidValue(f"{name!r} is not an agent CLI; those are: {', '.join(EXTERNAL)}")
    return cls


def _load(target: str) -> Any:
    module, _, cls = target.partition(":")
    return getattr(import_module(module), cls)


def __getattr__(attr: str) -> Any:
    if attr in _CLASSES:
        return _load(_CLASSES[attr])
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


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
    # the sandbox level every stage of this agent gets; refused here, before anything runs
    agent.sandbox = sandbox.level_for(config, in_process=spec.partition(":")[0] == "scripted")
    if config is not None and config.agent.network == "off":
        if spec.partition(":")[0] == "scripted":
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
    if name not in ADAPTERS or (name in EXTERNAL and rest):
        raise _unknown(spec, name)
    return adapter_class(name).configured(rest, command, config)


__all__ = ["Agent", "AgentRun", "StageContext", "CommandAgent", "ScriptedAgent", "make_agent",
           "ClaudeCodeAgent", "CodexAgent", "AiderAgent", "GeminiAgent", "ExternalAgent",
           "EXTERNAL", "ADAPTERS", "adapter_class", "external_class"]
