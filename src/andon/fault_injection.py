"""Fault injection for the resume tests: ``ANDON_CRASHPOINT=<name>`` kills the runner with
SIGKILL when it reaches that point, exactly as ``kill -9`` would. Unset, it does nothing."""

from __future__ import annotations

import os
import signal

POINTS = ("after-claim", "after-plant", "after-worktree", "after-agent", "after-gates",
          "before-update-ref", "after-update-ref")


# In a worker process of `andon run --workers N` (workers.py): the runner's pid, killed first,
# so that a crash point is a kill -9 of the runner (every worker with it), not of one worker.
runner_pid: int | None = None


def point(name: str) -> None:
    assert name in POINTS, name
    if os.environ.get("ANDON_CRASHPOINT") == name:
        if runner_pid is not None:
            os.kill(runner_pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
