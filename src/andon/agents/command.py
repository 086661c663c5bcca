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
import signal
import subprocess
import time
from pathlib import Path

from .base import AgentRun, StageContext

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
        started = time.monotonic()
        with open(transcript, "wb") as out, open(ctx.prompt_file, "rb") as stdin:
            proc = subprocess.Popen(["/bin/sh", "-c", self.command], cwd=ctx.worktree,
                                    stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=ctx.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)
                proc.wait()
        return AgentRun(
            agent=self.name, exit_status=None if timed_out else proc.returncode,
            timed_out=timed_out, duration_s=time.monotonic() - started,
            transcript_path=transcript, claim=_tail(transcript),
        )


def _kill_group(pgid: int) -> None:
    # Also after a normal exit: background children of the agent must not keep running
    # (and writing into the worktree) while the harness gates it.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - CLAIM_BYTES))
        return f.read().decode("utf-8", errors="replace")
