"""The fork servers of this process, one per interpreter, start-up environment, blocked
plugins and slot (contain/forkserver.py says what a server is and why), and how one run's
process starts: forked from the pool's server, or fresh (``Launch``).

The pool is per process. A forked andon process (a worker of ``andon run --workers``, an
experiment's run: each beside this one) starts servers of its own; the lanes of
gates/lanes.py borrow this process's (``lending``), each using only the slots of its own
runs while this process waits for them. Servers are hung up on when the process exits.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .. import tempdir
from . import netless
from .forkserver import NOT_AHEAD, PER_RUN, FencePaths, Forked, Server, Unavailable, blocked_plugins

_lock = threading.Lock()
_pool: dict[tuple, Server] = {}
_owner = os.getpid()


def available() -> str | None:
    """Why no run here can be forked (None: they can): Linux's ``pidfd_open`` is how the
    harness waits for a process that is not its own child."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return "fork servers need Linux (pidfd_open)"
    return None


def server_for(interpreter: str, env: dict[str, str], args: list[str], slot: int) -> Server:
    """A ready server for runs of ``interpreter`` whose environment is ``env`` (per-run
    variables aside) and pytest arguments ``args``, in ``slot``; started when there is none.
    Raises Unavailable."""
    server = _started(interpreter, env, args, slot)
    try:
        server.ready()
    except Unavailable:
        server.close()
        raise
    return server


def start_all(interpreter: str, env: dict[str, str], runs: list[tuple[list[str], int]]
              ) -> list[Server]:
    """Start the pool's server for each ``(args, slot)`` of ``runs`` that has none, all at
    the same time, and return without waiting for them (a run waits for its own: ``ready``);
    one that cannot start is left out (its run starts fresh, saying why)."""
    started = []
    for args, slot in runs:
        try:
            started.append(_started(interpreter, env, args, slot))
        except Unavailable:
            pass
    return started


def ready_all(interpreter: str, env: dict[str, str], runs: list[tuple[list[str], int]]
              ) -> None:
    """:func:`start_all`, then wait for each of those servers to be ready."""
    for server in start_all(interpreter, env, runs):
        try:
            server.ready()
        except Unavailable:
            server.close()


def _started(interpreter: str, env: dict[str, str], args: list[str], slot: int) -> Server:
    """The pool's server for this key, started (not waited for) when there is none or it
    died. Raises Unavailable."""
    if why := available():
        raise Unavailable(why)
    start_env = {k: v for k, v in env.items() if k not in PER_RUN}
    blocked = NOT_AHEAD | blocked_plugins(args)
    key = (interpreter, slot, blocked, tuple(sorted(start_env.items())))
    with _lock:
        server = _pool.get(key)
        if server is not None and (server.closed or _dead(server)):
            server = None  # it died or was given up: replaced below
        if server is None:
            server = _pool[key] = Server.start(interpreter, start_env, blocked, key)
    return server


def spawn(interpreter: str, slot: int, mode: str, paths: list[str], args: list[str],
          cwd: Path, env: dict[str, str], log_fd: int, channel_fds: tuple[int, int],
          netless: bool, fence: FencePaths = None) -> Forked:
    """Fork one run (see :meth:`Server.spawn`) from the pool's server for ``slot``; a stale
    or dead server is replaced once. Raises Unavailable when there is still none."""
    for attempt in (1, 2):
        server = server_for(interpreter, env, args, slot)
        try:
            return server.spawn(mode, paths, args, cwd, env, log_fd, channel_fds, netless,
                                fence)
        except Unavailable:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class Launch:
    """How one run's process starts: forked from the pool's server for ``slot`` when an
    ``interpreter`` (the run goes through boot.py) is given and ``wanted``, else fresh —
    behind contain/netless.py's wrapper when ``cut`` or ``fence`` (the folders a contained
    run may not write and those it may: netless.py ``fence``). ``how`` says which (``"fork
    server"``, ``"fresh"``, ``"fresh: <why not forked>"``), ``wrapper`` the argv prefix of a
    fresh run.
    The server is readied when this is made, before the caller lists its own children."""

    def __init__(self, interpreter: str | None, slot: int,
                 boot_args: tuple[str, list[str], list[str]], env: dict[str, str],
                 wanted: bool, cut: bool, fence: FencePaths = None):
        self.interpreter, self.slot, self.boot_args, self.cut = interpreter, slot, boot_args, cut
        self.fence = fence
        self.how = "fresh"
        if interpreter is not None and wanted:
            try:
                server_for(interpreter, env, boot_args[2], slot)
                self.how = "fork server"
            except Unavailable as exc:
                self.how = f"fresh: {exc}"
        self.wrapper = self._wrapper() if self.how != "fork server" else []

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], log: IO[bytes],
              child_fds: tuple[int, ...]) -> subprocess.Popen | Forked:
        """Start the run (``argv``: its fresh command line) with its output to ``log`` and
        ``child_fds`` passed on; a server that fails now leaves the run to a fresh start."""
        if self.how == "fork server" and self.interpreter is not None:
            mode, paths, args = self.boot_args
            try:
                w, r = child_fds
                return spawn(self.interpreter, self.slot, mode, paths, args, cwd, env,
                             log.fileno(), (w, r), self.cut, self.fence)
            except Unavailable as exc:
                self.how = f"fresh: {exc}"
                self.wrapper = self._wrapper()
        return subprocess.Popen([*self.wrapper, *argv], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=child_fds)

    def _wrapper(self) -> list[str]:
        # the argv prefix of a fresh run: none when it keeps the network and is not contained
        if not self.cut and self.fence is None:
            return []
        ro, rw = self.fence or ((), ())
        return netless.wrap([], self.cut, ro, rw)


def _dead(server: Server) -> bool:
    """Whether the server process has ended. A lane cannot ask (it is its parent's child:
    ``poll`` would say "ended" for any pid not its own); a dead one shows at its next
    request there, which then starts the run fresh."""
    if server.owner != os.getpid():
        return False
    return server.proc.poll() is not None


def pids() -> set[int]:
    """This process's fork servers (children of it that are not a run's leftovers)."""
    with _lock:
        return {s.proc.pid for s in _pool.values() if not s.closed}


def close_all() -> None:
    """Hang up on every server of this process (they exit) and reap them; then this
    process's tree folder, empty now unless a tree is still being deleted, goes too."""
    with _lock:
        servers = list(_pool.values())
        _pool.clear()
    for s in servers:
        s.close()
    tempdir.release()


_inherited: list[Server] = []
_lending = False


@contextmanager
def lending() -> Iterator[None]:
    """Processes forked inside this block keep this process's servers (gates/lanes.py's
    lanes): each uses only the servers of its own runs' slots, which are distinct, and this
    process uses none until they have ended. Anything else forked (a worker, an experiment's
    run: they run beside this process) starts servers of its own."""
    global _lending
    _lending = True
    try:
        yield
    finally:
        _lending = False


def _forget_in_child() -> None:
    # A forked andon process (a worker) must not talk to its parent's servers unless they are
    # lent (lending()): two processes on one socket would read each other's answers. Its
    # copies of the sockets are closed (the servers still see the parent's) and it starts
    # servers of its own.
    global _pool, _owner, _lock
    _lock = threading.Lock()
    if _lending:  # a lane: the parent's servers, each with a lock of this process
        for s in _pool.values():
            s.lock = threading.Lock()
        _owner = -1  # never hung up on from here: they are the parent's
        return
    for s in _pool.values():
        _inherited.append(s)  # never collected here: Popen's finaliser is the parent's
        try:
            s.sock.close()
        except OSError:
            pass
    _pool, _owner = {}, os.getpid()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(lambda: close_all() if os.getpid() == _owner else None)
