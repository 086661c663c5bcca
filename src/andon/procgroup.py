"""Process groups the harness starts and ends: agents and test runs alike.

Every child runs in its own session (``start_new_session=True``), so its pid is also its
process-group id. We wait for the leader WITHOUT reaping it, then SIGKILL the whole group, and
only then reap: while the leader is unreaped its pid (= the group id) cannot be reused, so the
kill can never hit an unrelated group that took the number.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path


def wait_unreaped(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Block until ``proc`` exits or ``timeout_s`` seconds pass; True if the timeout ran out.

    Linux: a pidfd becomes readable the moment the process exits, so the end is seen at once.
    Elsewhere: poll ``waitid(WNOWAIT)`` every few milliseconds.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
            return not ready
        finally:
            os.close(fd)
    deadline = time.monotonic() + timeout_s
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(0.005, left))
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL every process in the group; an empty group is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_leftover_group(pgid: int, cwd_prefix: str) -> bool:
    """After a crash of the runner: SIGKILL the group ``pgid`` if any of its processes still
    works under ``cwd_prefix`` (the attempt's worktree) — the check keeps a reused group id of
    an unrelated program safe. Linux only (reads /proc); elsewhere does nothing. True if killed.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pgrp = int(stat.rsplit(")", 1)[1].split()[2])
            cwd = os.readlink(entry / "cwd")
        except (OSError, ValueError, IndexError):
            continue
        if pgrp == pgid and cwd.startswith(cwd_prefix):
            kill_group(pgid)
            return True
    return False
