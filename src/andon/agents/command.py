"""The ``command`` adapter: any shell command is an agent.

The command runs under ``/bin/sh -c`` with the worktree as cwd, the stage prompt on stdin and
in the file named by ``ANDON_PROMPT_FILE``. Also set: ``ANDON_PACKET_ID``, ``ANDON_STAGE``,
``ANDON_ATTEMPT``, ``ANDON_WORKTREE``. stdout and stderr go to the transcript file on disk
(never held in memory). On timeout the whole process group is killed with SIGKILL, so an
agent that forks helpers cannot outlive its stage. The last lines of its output are recorded
as its claim — and ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import AgentRun, StageContext
from .process import run_process

CLAIM_BYTES = 2000


class CommandAgent:
    name = "command"

    def __init__(self, command: str):
        if not command.strip():
            raise ValueError("the command agent needs a command: --command '...' or "
                             "[agent] command = '...' in andon.toml")
        self.command = command

    def run(self, ctx: StageContext) -> AgentRun:
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        env = dict(os.environ)
        env.update(
            ANDON_PROMPT_FILE=str(ctx.prompt_file), ANDON_PACKET_ID=ctx.packet.id,
            ANDON_STAGE=ctx.stage, ANDON_ATTEMPT=str(ctx.attempt),
            ANDON_WORKTREE=str(ctx.worktree), PYTHONDONTWRITEBYTECODE="1",
        )
        if ctx.review_file:
            env["ANDON_REVIEW_FILE"] = str(ctx.review_file)
        p = run_process(["/bin/sh", "-c", self.command], ctx.worktree, env, ctx.prompt_file,
                        transcript, ctx.timeout_s)
        return AgentRun(agent=self.name, exit_status=p.exit_status, timed_out=p.timed_out,
                        duration_s=p.duration_s, transcript_path=transcript,
                        claim=_tail(transcript))


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - CLAIM_BYTES))
        return f.read().decode("utf-8", errors="replace")
