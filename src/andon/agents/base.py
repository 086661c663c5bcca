"""What every agent adapter takes and gives back.

An adapter turns one stage prompt into one run of an agent inside the attempt's worktree.
What it returns is a record: the harness stores it and decides nothing from it (the agent's
exit status and claims are evidence of what the agent *said*, not of what is true).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..packet import Packet


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


@dataclass
class AgentRun:
    """What one stage run left behind. ``usage`` is None when the agent reported none."""

    agent: str
    exit_status: int | None
    timed_out: bool
    duration_s: float
    transcript_path: Path
    claim: str = ""
    usage: dict[str, Any] | None = field(default=None)


class Agent(Protocol):
    name: str
    network: str  # "on", or "off": the agent runs without network (make_agent sets it)

    def run(self, ctx: StageContext) -> AgentRun: ...
