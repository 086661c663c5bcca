"""Process groups the harness starts and ends: agents and test runs alike.

Every child runs in its own session (``start_new_session=True``), so its pid is also its
process-group id. We wait for the leader WITHOUT reaping it, then SIGKILL the whole group, and
only then reap: while the leader is unreaped its pid (= the group id) cannot be reused, so the
kill can never hit an unrelated group that took the number.

A helper can leave its group (``setsid``, ``start_new_session``, a double fork into a new
session), so the group kill alone does not end everything an agent started. On Linux the
process that runs agents becomes a child subreaper (:func:`become_subreaper`): orphans of the
agent's tree are re-parented to it instead of to PID 1, and :func:`kill_leftovers` then kills
and reaps them. Elsewhere neither does anything.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 100        # kill rounds after a stage: each round hands the next generation over
SWEEP_DEADLINE_S = 10.0   # ...and at most this long in all
_subreaper_lock = threading.Lock()
_subreaper: bool | None = None


class Child(Protocol):
    """A started process the harness ends: a ``Popen``, or a run a fork server forked
    (contain/forkserver.py ``Forked``), whose ``wait`` reaps it and returns its status."""

    pid: int

    def wait(self) -> int: ...


def wait_unreaped(proc: Child, timeout_s: float) -> bool:
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


def _processes():
    """(pid, process group, working folder) of every process /proc lets us read; Linux only
    (nothing elsewhere)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            # bytes: a process may name itself with bytes that are no UTF-8
            pgrp = int((_stat_after_name(name) or b"").split()[2])
            cwd = os.readlink(f"/proc/{name}/cwd")
        except (OSError, ValueError, IndexError):
            continue
        yield int(name), pgrp, cwd


def _inside(cwd: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return cwd == prefix or cwd.startswith(prefix + "/")  # P1-1 is not inside P1-10


def kill_leftover_group(pgid: int, cwd_prefix: str) -> bool:
    """After a crash of the runner: SIGKILL the group ``pgid`` if any of its processes still
    works under ``cwd_prefix`` (the attempt's worktree) — the check keeps a reused group id of
    an unrelated program safe. Linux only (reads /proc); elsewhere does nothing. True if killed.
    """
    for _pid, pgrp, cwd in _processes():
        if pgrp == pgid and _inside(cwd, cwd_prefix):
            kill_group(pgid)
            return True
    return False


def kill_working_under(cwd_prefix: str, spare: frozenset[int] = frozenset()) -> list[int]:
    """After a crash of the runner: SIGKILL the process group of every process (not this one,
    nor in its own group) whose working folder is ``cwd_prefix`` or inside it, and return those
    group ids; groups in ``spare`` (already killed) are left out. It ends an agent the killed
    runner started but had no time to record (the pid file is written just after the agent
    starts). Linux only; elsewhere returns []."""
    mine = os.getpgrp()
    killed: list[int] = []
    for _pid, pgrp, cwd in _processes():
        if pgrp != mine and pgrp not in spare and pgrp not in killed and _inside(cwd, cwd_prefix):
            kill_group(pgrp)
            killed.append(pgrp)
    return killed


# -- what the agent left running -------------------------------------------------------------

def become_subreaper() -> bool:
    """Make this process a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER, 1)``), once per
    process; True if it is one. Orphans among its descendants — a helper an agent started in a
    session of its own, whose parent then exited — are then re-parented to this process
    instead of to PID 1, so :func:`kill_leftovers` can find them. The attribute is not
    inherited by children (an agent does not become a subreaper). Linux only: elsewhere (or
    if the kernel refuses) False, and nothing changes.
    """
    global _subreaper
    with _subreaper_lock:
        if _subreaper is None:
            _subreaper = False
            if sys.platform.startswith("linux"):
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
                except (OSError, AttributeError):
                    pass
        return _subreaper


def forget_subreaper() -> None:
    """In a forked child (a worker of ``andon run --workers N``): the parent's subreaper
    attribute was not inherited, so :func:`become_subreaper` must ask the kernel again."""
    global _subreaper
    _subreaper = None


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts: signal 0 is refused, not
    undeliverable). Raises nothing for a pid that is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stat(pid: int | str) -> list[str] | None:
    """Fields 3… of /proc/<pid>/stat (state, ppid, pgrp, …; after the command name, which may
    hold spaces and parentheses); None if the process is gone."""
    rest = _stat_after_name(pid)
    return rest.decode("ascii", "replace").split() if rest is not None else None


def _stat_after_name(pid: int | str) -> bytes | None:
    """The bytes of /proc/<pid>/stat after the command name's closing parenthesis, or None
    if the process is gone. Read with os.open/os.read, not Path.read_text: own_children reads
    this file of every process on the machine, twice for each child the harness starts
    (before_child, then the sweep), and the pathlib and text layers cost three times the
    read. One read holds the whole line: the kernel writes it at once, well under 4 KiB (a
    name of at most 64 bytes, then some 50 numbers)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    _, paren, rest = data.rpartition(b")")
    return rest if paren else None


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of /proc/<pid>/stat); None
    where there is no /proc or the process is gone."""
    f = _stat(pid)
    return int(f[19]) if f else None


def own_children() -> set[int]:
    """The pids whose parent is this process (living or zombie); empty without /proc."""
    me, found = str(os.getpid()).encode(), set[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if name.isdigit():
            rest = _stat_after_name(name)
            # state, then ppid: the one field needed of each of hundreds of processes
            fields = rest.split(None, 2) if rest is not None else ()
            if len(fields) > 1 and fields[1] == me:
                found.add(int(name))
    return found


def kill_leftovers(known: set[int], since: int | None, max_rounds: int = SWEEP_ROUNDS,
                   deadline_s: float = SWEEP_DEADLINE_S, sandboxed: bool = False
                   ) -> tuple[int, int]:
    """After an agent's group was killed and its leader reaped: SIGKILL (its process group,
    then itself) and reap every child of this process that the agent left behind, round after
    round — killing one hands its own children over — until none is left or the bounds run
    out. Returns ``(killed, left)``: processes that were still running and were killed, and
    those found after the last round (still running).

    Which children are the agent's: those NOT in ``known`` (this process's children just
    before the agent was started) and started no earlier than ``since`` (the agent's start
    time, :func:`start_time`). That holds because the harness starts its processes one at a
    time from one thread and waits for each (``subprocess.run``, or ``Popen`` then wait in
    ``run_process``, ``runners.pytest`` and ``gates.tools``); while an agent runs, the only other
    threads are ``run_process``'s own pipe readers, which start nothing. So at this point
    every other child is older than the agent, or a zombie the subreaper collected. A child
    ``subprocess`` tracks is never waited for here: only pids that passed the test are.

    ``sandboxed``: the agent ran under bubblewrap with a pid namespace, whose init (pid 1
    inside, ``bwrap``) reports the agent's exit to bwrap's monitor and exits a moment after
    it: orphaned to this process, it is killed and reaped like the rest but not counted —
    it is andon's, not something the agent left (what the agent left inside the namespace
    dies with its init).

    Does nothing (``(0, 0)``) where this process is no subreaper (not Linux) or ``since`` is
    unknown.
    """
    if since is None or not _subreaper:
        return 0, 0
    killed = 0
    own_group = os.getpgrp()
    deadline = time.monotonic() + deadline_s
    for _ in range(max_rounds):
        found = _leftovers(known, since)
        if not found:
            return killed, 0
        for pid, (state, pgrp) in found.items():
            if state != "Z":
                killed += 0 if sandboxed and _is_sandbox_init(pid) else 1
                if pgrp != own_group:
                    kill_group(pgrp)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in found:
            _reap(pid, deadline)
        if time.monotonic() >= deadline:
            break
    return killed, sum(1 for s, _ in _leftovers(known, since).values() if s != "Z")


def before_child() -> set[int]:
    """Call just before starting a child that runs untrusted code (an agent, a test run, a
    tool on the agent's files): makes this process a subreaper and returns the children it
    already has, which :func:`end_child` must never touch."""
    become_subreaper()
    return own_children()


def end_child(proc: Child, known: set[int], sandboxed: bool = False
              ) -> tuple[int, int]:
    """End ``proc`` (started with ``start_new_session=True``, not yet reaped) and everything
    it left running: its group is killed, it is reaped, then every helper that escaped into a
    session of its own is killed and reaped (:func:`kill_leftovers`). Returns (killed, still
    running) for those helpers; ``sandboxed``: ``proc`` is bubblewrap's monitor, see
    :func:`kill_leftovers`."""
    since = start_time(proc.pid)  # unreaped until the wait below: cannot be another process
    kill_group(proc.pid)
    proc.wait()
    return kill_leftovers(known, since, sandboxed=sandboxed)


def _is_sandbox_init(pid: int) -> bool:
    """True for bubblewrap's init: ``bwrap`` running as pid 1 of a pid namespace below ours
    (``NSpid``: its pid here, then 1)."""
    try:
        # bytes, then text: the Name line holds whatever bytes the process named itself with
        status = Path(f"/proc/{pid}/status").read_bytes().decode("utf-8", "replace")
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    nspid = fields.get("NSpid", "").split()
    return fields.get("Name", "").strip() == "bwrap" and len(nspid) > 1 and nspid[-1] == "1"


def _leftovers(known: set[int], since: int) -> dict[int, tuple[str, int]]:
    """The children of this process the agent left: pid → (state, process group)."""
    found = {}
    for pid in own_children() - known:
        f = _stat(pid)
        if f and int(f[19]) >= since:
            found[pid] = (f[0], int(f[2]))
    return found


def _reap(pid: int, deadline: float) -> None:
    """Wait (until ``deadline``) for our SIGKILLed child ``pid`` to die, and reap it."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    try:
        while True:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:  # not (or no longer) our child
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(0.005, left))
    finally:
        if fd is not None:
            os.close(fd)
