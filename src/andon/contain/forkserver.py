"""Harness pytest runs forked from a server that has already started (issue 18: time to verdict).

A harness run of a small suite spends most of its CPU before any test runs: the interpreter's
start-up and ``import pytest`` (about 0.2 of 0.3 CPU-seconds on this project's tests). A *fork
server* (the name Python's multiprocessing gives the same idea; Android calls its own a zygote)
is a process of the tests' interpreter that has done that part once — ``boot.py serve``: boot's
own modules, pytest and pluggy, imported as a fresh run imports them, with ``sys.path`` holding
only the interpreter's own folders, and no project code, no nonce, no audit hook — and forks a
child for each run. The child becomes what a fresh ``boot.py`` process is at the same point
(zygote.py), then arms the verdict channel and runs pytest exactly as a fresh process does.

What a run keeps, forked or not: its own process, session and process group; its working
folder, environment, HOME and TMPDIR; its own network namespace when cut off; the audit hook
installed before any project code; ``sys.modules`` as a fresh start has them. What it shares
with the other children of one server: the hash seed (``PYTHONHASHSEED`` is drawn once per
interpreter) and ``/proc/self/cmdline``. So each run of a repeated set (red's runs, hermetic's,
flaky's, the base re-runs) names its ``slot``, and each slot is a server of its own: repeated
runs never share a hash seed, as they never did.

Servers live as long as this process (one per interpreter, start-up environment and slot);
a forked process (a lane, a worker) starts its own. A server is *stale* when a file it read at
start-up — a module's source or byte code, a site folder (a new ``.pth``), the interpreter,
andon's boot files — has changed since: it refuses the spawn and a new one starts. A server
that died is replaced. When no server can be had (not Linux, a command andon does not start
through boot.py, a server that would not start), the run starts fresh, and its evidence says
why (``SuiteRun.start``).

Protocol and the child's side: zygote.py.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .. import tempdir
from ..errors import AndonError
from . import netless

BOOT = Path(__file__).with_name("boot.py")
READY_TIMEOUT_S = 120.0  # a busy machine can take seconds to import pytest
ANSWER_TIMEOUT_S = 60.0  # a fork, or the reaping of a killed child
MAX_MESSAGE = 1 << 20
# set per run (runners/pytest.py harness_env): never part of a server's start-up environment
PER_RUN = frozenset(("HOME", "TMPDIR", "PWD", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                     "XDG_CACHE_HOME", "XDG_STATE_HOME"))
# pytest's default plugins a server does not import ahead: those some harness run blocks (-p
# no:cacheprovider, which blocks stepwise too; the plain profile's three), since a fresh
# process that blocks a plugin never imports it. Every other default plugin is imported by
# every run before any project code, so importing it in the server changes nothing.
NOT_AHEAD = frozenset(("cacheprovider", "stepwise", "faulthandler", "threadexception",
                       "unraisableexception"))


def blocked_plugins(args: list[str]) -> frozenset[str]:
    """The plugin names ``args`` block (``-p no:NAME``, ``-pno:NAME``), read as pytest's
    ``consider_preparse`` reads them."""
    found, i = set(), 0
    while i < len(args):
        opt, i = args[i], i + 1
        if opt == "-p" and i < len(args):
            value, i = args[i], i + 1
        elif opt.startswith("-p") and opt != "-p":
            value = opt[2:]
        else:
            continue
        if value.strip().startswith("no:"):
            found.add(value.strip()[3:])
    return frozenset(found)


class Unavailable(AndonError):
    """No server for this run; the message says why (the run then starts fresh: it never
    escapes ``Launch``)."""


@dataclass
class Forked:
    """A run forked by a server: what procgroup and runners/pytest.py use of a ``Popen``.
    The pid is unreaped until :meth:`wait`, as a Popen's is until its ``wait``."""

    pid: int
    server: Server
    returncode: int | None = None

    def wait(self) -> int:
        """Reap the run (through its server) and return its exit status, negative for a
        signal as ``Popen.returncode``. A server that died meanwhile left the run to this
        process (a subreaper, procgroup.before_child): reaped here then."""
        if self.returncode is None:
            status = self.server.reap(self.pid)
            if status is None:
                try:
                    status = os.waitpid(self.pid, 0)[1]
                except ChildProcessError:
                    status = None
            self.returncode = os.waitstatus_to_exitcode(status) if status is not None else -9
        return self.returncode


@dataclass
class Server:
    """One fork server process and this process's end of its socket."""

    interpreter: str
    key: tuple
    proc: subprocess.Popen
    sock: socket.socket
    scratch: Path
    coerced: dict[str, str] | None = None  # read from its "ready" message
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, interpreter: str, env: dict[str, str], blocked: frozenset[str],
              key: tuple) -> Server:
        """Start a server of ``interpreter`` with ``env`` (its HOME and TMPDIR are its own
        scratch folder) that imports no default plugin of ``blocked``; it is ready once
        :meth:`ready` returns. Raises Unavailable."""
        scratch = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        start_env = {**env, "HOME": str(scratch), "TMPDIR": str(scratch)}
        try:
            with (scratch / "server.log").open("wb") as log:
                proc = subprocess.Popen(
                    [interpreter, "-I", "-B", str(BOOT), "serve", str(theirs.fileno()),
                     ",".join(sorted(blocked))],
                    cwd=scratch, env=start_env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
                    start_new_session=True)
        except OSError as exc:
            ours.close()
            raise Unavailable(f"the fork server could not start: {exc}") from exc
        finally:
            theirs.close()
        server = cls(interpreter, key, proc, ours, scratch)
        server._send({"given": sorted(start_env)})
        return server

    def ready(self) -> None:
        """Wait for the server's "ready" message. Raises Unavailable (with its log's tail)
        when it dies or says nothing in READY_TIMEOUT_S."""
        if self.coerced is not None:
            return
        with self.lock:
            msg = self._answer(READY_TIMEOUT_S)
        if not isinstance(msg.get("coerced"), dict):
            raise Unavailable(f"the fork server answered {msg!r} at start-up")
        self.coerced = msg["coerced"]

    def spawn(self, mode: str, paths: list[str], args: list[str], cwd: Path,
              env: dict[str, str], log_fd: int, channel_fds: tuple[int, int],
              netless: bool) -> Forked:
        """Fork a run: ``boot.py <w>:<r> mode paths -- args`` in ``cwd`` with ``env``, its
        output to ``log_fd``, the channel's child ends ``channel_fds`` (write, read).
        Raises Unavailable when the server is stale or gone (it is closed then)."""
        spec = {"mode": mode, "paths": paths, "args": args, "cwd": str(cwd), "env": env,
                "netless": netless}
        try:
            self.ready()
            with self.lock:
                self._send({"spawn": spec}, [log_fd, *channel_fds])
                msg = self._answer(ANSWER_TIMEOUT_S)
            if not isinstance(msg.get("pid"), int):
                raise Unavailable(str(msg.get("stale") or msg.get("error") or msg))
        except Unavailable:
            self.close()
            raise
        return Forked(msg["pid"], self)

    def reap(self, pid: int) -> int | None:
        """The wait status of ``pid`` (already ended or killed), reaped by the server; None
        when the server is gone."""
        try:
            with self.lock:
                self._send({"reap": pid})
                msg = self._answer(ANSWER_TIMEOUT_S)
        except Unavailable:
            self.close()
            return None
        status = msg.get("status")
        return status if isinstance(status, int) else None

    def close(self) -> None:
        """Hang up (the server kills what it has not reaped and exits) and reap it."""
        _pool_drop(self)
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)  # only the server used it

    def _send(self, doc: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
        data = json.dumps(doc).encode("utf-8")
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            self.sock.sendmsg([data], anc)
        except OSError as exc:
            raise Unavailable(f"the fork server is gone ({exc})") from exc

    def _answer(self, timeout_s: float) -> dict:
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except TimeoutError as exc:
            self.proc.kill()
            raise Unavailable(f"the fork server said nothing in {timeout_s:g} s") from exc
        except OSError as exc:
            raise Unavailable(f"the fork server is gone ({exc})") from exc
        if not data:
            raise Unavailable("the fork server ended: " + self._log_tail())
        msg = json.loads(data)
        return msg if isinstance(msg, dict) else {"error": msg}

    def _log_tail(self) -> str:
        try:
            text = (self.scratch / "server.log").read_text(errors="replace").strip()
        except OSError:
            return "no output"
        return text.splitlines()[-1] if text else "no output"


# -- the pool: one server per (interpreter, start-up environment, slot), per process ---------

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
    if why := available():
        raise Unavailable(why)
    start_env = {k: v for k, v in env.items() if k not in PER_RUN}
    blocked = NOT_AHEAD | blocked_plugins(args)
    key = (interpreter, slot, blocked, tuple(sorted(start_env.items())))
    with _lock:
        server = _pool.get(key)
        if server is not None and server.proc.poll() is not None:
            server = None  # it died: replaced below
        if server is None:
            server = _pool[key] = Server.start(interpreter, start_env, blocked, key)
    try:
        server.ready()
    except Unavailable:
        server.close()
        raise
    return server


def spawn(interpreter: str, slot: int, mode: str, paths: list[str], args: list[str],
          cwd: Path, env: dict[str, str], log_fd: int, channel_fds: tuple[int, int],
          netless: bool) -> Forked:
    """Fork one run (see :meth:`Server.spawn`) from the pool's server for ``slot``; a stale
    or dead server is replaced once. Raises Unavailable when there is still none."""
    for attempt in (1, 2):
        server = server_for(interpreter, env, args, slot)
        try:
            return server.spawn(mode, paths, args, cwd, env, log_fd, channel_fds, netless)
        except Unavailable:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class Launch:
    """How one run's process starts: forked from the pool's server for ``slot`` when an
    ``interpreter`` (the run goes through boot.py) is given and ``wanted``, else fresh —
    behind contain/netless.py's wrapper when ``cut``. ``how`` says which (``"fork server"``,
    ``"fresh"``, ``"fresh: <why not forked>"``), ``wrapper`` the argv prefix of a fresh run.
    The server is readied when this is made, before the caller lists its own children."""

    def __init__(self, interpreter: str | None, slot: int,
                 boot_args: tuple[str, list[str], list[str]], env: dict[str, str],
                 wanted: bool, cut: bool):
        self.interpreter, self.slot, self.boot_args, self.cut = interpreter, slot, boot_args, cut
        self.how = "fresh"
        if interpreter is not None and wanted:
            try:
                server_for(interpreter, env, boot_args[2], slot)
                self.how = "fork server"
            except Unavailable as exc:
                self.how = f"fresh: {exc}"
        self.wrapper = netless.wrap([]) if cut and self.how != "fork server" else []

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], log: IO[bytes],
              child_fds: tuple[int, ...]) -> subprocess.Popen | Forked:
        """Start the run (``argv``: its fresh command line) with its output to ``log`` and
        ``child_fds`` passed on; a server that fails now leaves the run to a fresh start."""
        if self.how == "fork server" and self.interpreter is not None:
            mode, paths, args = self.boot_args
            try:
                w, r = child_fds
                return spawn(self.interpreter, self.slot, mode, paths, args, cwd, env,
                             log.fileno(), (w, r), self.cut)
            except Unavailable as exc:
                self.how = f"fresh: {exc}"
                self.wrapper = netless.wrap([]) if self.cut else []
        return subprocess.Popen([*self.wrapper, *argv], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=child_fds)


def pids() -> set[int]:
    """This process's fork servers (children of it that are not a run's leftovers)."""
    with _lock:
        return {s.proc.pid for s in _pool.values()}


def _pool_drop(server: Server) -> None:
    with _lock:
        if _pool.get(server.key) is server:
            del _pool[server.key]


def close_all() -> None:
    """Hang up on every server of this process (they exit) and reap them."""
    with _lock:
        servers = list(_pool.values())
    for s in servers:
        s.close()


_inherited: list[Server] = []


def _forget_in_child() -> None:
    # A forked andon process (a lane, a worker) must not talk to its parent's servers: two
    # processes on one socket would read each other's answers. Its copies of the sockets are
    # closed (the servers still see the parent's) and it starts servers of its own.
    global _pool, _owner, _lock
    _lock = threading.Lock()
    for s in _pool.values():
        _inherited.append(s)  # never collected here: Popen's finaliser is the parent's
        try:
            s.sock.close()
        except OSError:
            pass
    _pool, _owner = {}, os.getpid()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(lambda: close_all() if os.getpid() == _owner else None)
