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

Servers live as long as this process (one per interpreter, start-up environment and slot:
the pool, contain/forkpool.py); a forked process starts its own, but for the lanes of
gates/lanes.py, which borrow them. A server is *stale* when a file it read at
start-up — a module's source or byte code, a site folder (a new ``.pth``), the interpreter,
andon's boot files — has changed since: it refuses the spawn and a new one starts. A server
that died is replaced. When no server can be had (not Linux, a command andon does not start
through boot.py, a server that would not start), the run starts fresh, and its evidence says
why (``SuiteRun.start``).

This module is one server and its protocol; the pool and how a run starts: forkpool.py; the
child's side: zygote.py.
"""

from __future__ import annotations

import array
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import tempdir
from ..errors import AndonError

BOOT = Path(__file__).with_name("boot.py")
READY_TIMEOUT_S = 120.0  # a busy machine can take seconds to import pytest
ANSWER_TIMEOUT_S = 60.0  # a fork, or the reaping of a killed child
MAX_MESSAGE = 1 << 20
# a contained run's read-only folders and the writable ones below them (netless.Fence.paths)
FencePaths = tuple[list[str], list[str]] | None
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
    closed: bool = False
    owner: int = field(default_factory=os.getpid)  # the process that started (and reaps) it
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0  # the id of the last request; the server echoes each request's id

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
        server._send({"given": sorted(start_env)})  # answered by "ready": see ready()
        return server

    def ready(self) -> None:
        """Wait for the server's "ready" message. Raises Unavailable (with its log's tail)
        when it dies or says nothing in READY_TIMEOUT_S."""
        if self.coerced is not None:
            return
        with self.lock:
            msg = self._answer(READY_TIMEOUT_S, 1)
        if not isinstance(msg.get("coerced"), dict):
            raise Unavailable(f"the fork server answered {msg!r} at start-up")
        self.coerced = msg["coerced"]

    def spawn(self, mode: str, paths: list[str], args: list[str], cwd: Path,
              env: dict[str, str], log_fd: int, channel_fds: tuple[int, int],
              netless: bool, fence: FencePaths = None) -> Forked:
        """Fork a run: ``boot.py <w>:<r> mode paths -- args`` in ``cwd`` with ``env``, its
        output to ``log_fd``, the channel's child ends ``channel_fds`` (write, read); without
        network when ``netless``, contained by ``fence`` (netless.py ``enter``).
        Raises Unavailable when the server is stale or gone (it is closed then)."""
        spec = {"mode": mode, "paths": paths, "args": args, "cwd": str(cwd), "env": env,
                "netless": netless, "readonly": fence[0] if fence else [],
                "writable": fence[1] if fence else []}
        try:
            self.ready()
            msg = self._request({"spawn": spec}, [log_fd, *channel_fds])
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
            msg = self._request({"reap": pid})
        except Unavailable:
            self.close()
            return None
        status = msg.get("status")
        return status if isinstance(status, int) else None

    def close(self) -> None:
        """Hang up (the server kills what it has not reaped and exits) and reap it."""
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        if self.owner != os.getpid():
            return  # a borrowed server (a lane's): its owner reaps it
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)  # only the server used it

    def _request(self, doc: dict, fds: list[int] | tuple[int, ...] = ()) -> dict:
        with self.lock:
            self._send(doc, fds)
            return self._answer(ANSWER_TIMEOUT_S, self.sent)

    def _send(self, doc: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
        self.sent += 1
        data = json.dumps({**doc, "id": self.sent}).encode("utf-8")
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            self.sock.sendmsg([data], anc)
        except OSError as exc:
            raise Unavailable(f"the fork server is gone ({exc})") from exc

    def _answer(self, timeout_s: float, request: int) -> dict:
        """The answer to request ``request``; an older one (its asker, a lane, was killed
        before reading it) is dropped."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.sock.settimeout(max(0.0, deadline - time.monotonic()))
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
            if isinstance(msg, dict) and msg.get("id") == request:
                return msg

    def _log_tail(self) -> str:
        try:
            text = (self.scratch / "server.log").read_text(errors="replace").strip()
        except OSError:
            return "no output"
        return text.splitlines()[-1] if text else "no output"
