"""A function run in a forked child process, and how it ended.

Why a process and not a thread: the harness's containment assumes one thread starts
processes — after an agent stage it sweeps every leftover child of the process
(``contain/procgroup``), which in a threaded pool would be another thread's pytest. A forked
child needs nothing pickled (scripted agents are Python callables) and a child that crashes
takes nothing else with it.

The child: ignores SIGINT and leaves the parent's process group, so that a Ctrl-C at the
terminal reaches neither it nor what it starts (the parent decides), asks
the kernel to SIGKILL it when the parent dies (``PR_SET_PDEATHSIG``, Linux), becomes its own
subreaper on demand (the flag is not inherited), runs ``fn()``, writes ``{"value": …}`` or
``{"error", "traceback"}`` as JSON to a pipe and leaves with ``os._exit`` (no parent clean-up
runs twice). A child that uses the store must not inherit an open SQLite connection (close
it before :func:`start`, reopen after): SQLite's locks must not cross a fork. One that never
touches it (a test lane, the worktree's build) may: it leaves with ``os._exit``, which runs
no finaliser, and fcntl locks are each process's own.

Used by ``andon experiment run`` (experiments/pool.py) for its runs, by ``andon run
--workers`` (workers.py) for its attempts, by gates/lanes.py for test lanes and by
worktree_build.py for an attempt's worktree.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import reaper
from .contain import procgroup

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Child:
    """A started child: its pid and the read end of its result pipe (select on it: it is
    readable once the child wrote its result or died)."""

    pid: int
    fd: int


def start(fn: Callable[[], Any], close: Iterable[int] = ()) -> Child:
    """Fork a child that runs ``fn()`` (module docstring); return at once in the parent.
    ``fn``'s value must be JSON-serialisable; ``close``: file descriptors the child closes
    first (the parent's ends of other pipes)."""
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return Child(pid, r)
    code = 1  # the child: never returns, never runs the parent's clean-up
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # out of the terminal's process group too: a Ctrl-C reaches every process of that
        # group, and git (which sets its own handlers) would die of it mid-clone
        os.setpgid(0, 0)
        os.close(r)
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        die_with(parent)
        procgroup.forget_subreaper()
        result: dict[str, Any] = {"value": fn()}
        code = 0
    except BaseException as exc:  # noqa: BLE001 - every end goes to the parent
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    try:
        # what the child discarded is deleted before the parent hears it is done (os._exit
        # runs no atexit hook)
        for problem in reaper.drain():
            print(f"andon: could not delete {problem}", file=sys.stderr)
        data = json.dumps(result).encode()
        while data:
            data = data[os.write(w, data):]
    finally:
        os._exit(code)


def collect(child: Child) -> dict[str, Any]:
    """Read the child's result and reap it: ``{"value": …}``, ``{"error", "traceback"}`` if
    ``fn`` raised, or ``{"error": "the process died (killed by signal 9)"}`` when it ended
    without writing one. Blocks until the child closed its pipe."""
    chunks = []
    while chunk := os.read(child.fd, 65536):
        chunks.append(chunk)
    os.close(child.fd)
    _, status = os.waitpid(child.pid, 0)
    try:
        return dict(json.loads(b"".join(chunks)))
    except ValueError:
        how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.waitstatus_to_exitcode(status)}")
        return {"error": f"the process died ({how})"}


def kill(child: Child) -> None:
    """SIGKILL the child and reap it (what it started in sessions of its own is the
    caller's to end, e.g. ``procgroup.kill_working_under``)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(child.fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child.pid, 0)


def die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (``PR_SET_PDEATHSIG``), so
    that a ``kill -9`` of the parent ends its children at once. Linux only; elsewhere
    nothing. Exits at once if ``parent`` is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
