"""The ``scripted`` adapter: a Python callable is the agent (tests and the demo).

The callable gets the :class:`StageContext` and changes files in ``ctx.worktree`` as an agent
would; whatever string it returns is recorded as its claim. ``scripted:module:function`` on
the command line imports ``module.function``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import plain_file
from ..errors import InvalidValue
from .base import Agent, AgentRun, StageContext

if TYPE_CHECKING:
    from ..config import Config

Behaviour = Callable[[StageContext], str | None]


class ScriptedAgent(Agent):
    name = "scripted"  # it runs inside andon, so never without network (make_agent refuses "off")

    def __init__(self, behaviour: Behaviour):
        self.behaviour = behaviour

    @classmethod
    def configured(cls, arg: str, command: str | None, config: Config | None
                   ) -> ScriptedAgent:
        """``--agent scripted:module:function`` (``arg`` is ``module:function``)."""
        return cls.from_spec(arg)

    @classmethod
    def from_spec(cls, spec: str) -> ScriptedAgent:
        """``module:function`` → the agent. Raises InvalidValue naming what was not found."""
        module_name, _, func_name = spec.partition(":")
        if not func_name:
            raise InvalidValue(f"scripted agent must be 'scripted:module:function', got {spec!r}")
        try:
            func = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise InvalidValue(f"cannot load scripted agent {spec!r}: {exc}") from None
        return cls(func)

    def run(self, ctx: StageContext) -> AgentRun:
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        started = time.monotonic()
        status, claim = 0, ""
        try:
            claim = self.behaviour(ctx) or ""
        except Exception as exc:  # noqa: BLE001 - an agent crashing is evidence, not a harness failure
            status, claim = 1, f"{type(exc).__name__}: {exc}"
        plain_file.write(transcript, claim)
        return AgentRun(agent=self.name, exit_status=status, timed_out=False,
                        duration_s=time.monotonic() - started, transcript_path=transcript,
                        claim=claim)
