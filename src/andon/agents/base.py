"""What every agent adapter takes and gives back.

An adapter turns one stage prompt into one run of an agent inside the attempt's worktree.
What it returns is a record: the harness stores it and decides nothing from it (the agent's
exit status and claims are evidence of what the agent *said*, not of what is true).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..packet import Packet
from ..sandbox.plan import Plan
from ..usage import Usage

if TYPE_CHECKING:
    from ..config import Config


@dataclass(frozen=True)
class StageContext:
    """Inputs of one stage run.

    ``prompt_file`` holds ``prompt`` (UTF-8); ``evidence_dir`` is where the adapter writes its
    transcript; ``timeout_s`` is wall-clock seconds for the whole agent process group.
    """

    packet: Packet
    stage: str
    attempt: int
    worktree: Path
    prompt: str
    prompt_file: Path
    evidence_dir: Path
    timeout_s: float
    review_file: Path | None = None  # review stages: where the reviewer writes its JSON
    sandbox: Plan | None = None  # what the agent process may reach (andon.sandbox); None: all


def last_line(text: str | None, limit: int = 300) -> str:
    """The last non-blank line of what a stage printed (stripped, at most ``limit``
    characters), '' for none: where a failed stage usually says why."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:limit] if lines else ""


@dataclass
class AgentRun:
    """What one stage run left behind. ``usage`` (tokens, cost, wall time: see
    :mod:`andon.usage`) is None when the adapter has no way to report any; the store keeps
    it as ``Usage.to_dict()``. ``exit_status`` is the process's own; ``provider_error`` is
    the model API failure the agent printed when it exited 0 without an answer (Aider does:
    it prints litellm's error and exits 0), else None — the ``agent`` gate reads it, so a
    run that could not reach its model is named as such without a rewritten exit status."""

    agent: str
    exit_status: int | None
    timed_out: bool
    duration_s: float
    transcript_path: Path
    claim: str = ""
    usage: Usage | None = None
    provider_error: str | None = None
    sandbox: str = "none"          # the level achieved: "none", "fs" or "fs+net"
    limit_hit: str | None = None   # the [agent] cap the stage hit, which ended it


class Agent(ABC):
    """An adapter: :meth:`run` one stage. Everything the harness sets or reads on an adapter
    is declared here, with its default:

    - ``name``: the adapter's name as ``--agent`` spells it; recorded with every attempt and
      stage run, and named in messages.
    - ``network``: ``"on"``, or ``"off"`` when ``[agent] network = "off"`` (``make_agent``
      sets it): an adapter that starts a process then runs it without network.
    - ``sandbox``: the level its stages get (``"none"``, ``"fs"``, ``"fs+net"``), set by
      ``make_agent`` from ``[agent] sandbox``; the attempt builds each stage's plan with it.
    - ``command``: the shell command the adapter runs, or None; the runner fingerprints the
      files in the checkout it names, so an agent rewriting its own script is caught.
    """

    name: str = ""
    network: Literal["on", "off"] = "on"
    command: str | None = None
    sandbox: str = "none"  # the level make_agent found for [agent] sandbox (andon.sandbox)

    @classmethod
    def configured(cls, arg: str, command: str | None, config: Config | None) -> Agent:
        """The adapter ``--agent <name>[:<arg>]`` asks for (``make_agent`` calls it):
        ``command`` is ``--command``, ``config`` andon.toml (None: the defaults). This default
        takes neither.

        Raises:
            InvalidValue: what the adapter cannot be built from, said in the user's words.
        """
        return cls()

    @abstractmethod
    def run(self, ctx: StageContext) -> AgentRun:
        """Run one stage in ``ctx.worktree``. What the agent did — a crash, a timeout, odd
        output — is recorded in the returned run, not raised."""
