"""Fault injection for the resume tests: ``ANDON_CRASHPOINT=<name>`` kills the runner with
SIGKILL when it reaches that point, exactly as ``kill -9`` would. Unset, it does nothing."""

from __future__ import annotations

import os
import signal

POINTS = ("after-claim", "after-plant", "after-worktree", "after-agent", "after-gates",
          "before-update-ref", "after-update-ref")


def point(name: str) -> None:
    assert name in POINTS, name
    if os.environ.get("ANDON_CRASHPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
