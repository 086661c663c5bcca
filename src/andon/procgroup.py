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
