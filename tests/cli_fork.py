"""``python -m andon ARGS`` as a process forked from a server that has imported andon
(tests/cli_server.py says what the child shares with it and what it gets as a fresh process
would): what ``helpers.andon`` uses for the commands that need a process of their own,
unless ``ANDON_TESTS_FRESH_CLI=1`` (then each starts a fresh interpreter, as before).

One server per test process, started on first use (about half a second), ended with it."""

from __future__ import annotations

import fcntl
import json
import locale
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVER = Path(__file__).with_name("cli_server.py")
# where the suite's processes work unless a test moves them: the server imports andon there
# (rich keeps the working folder it was imported in)
HOME = Path(__file__).resolve().parent.parent
# read as the interpreter, libc or the loader start, so fixed for the server's children: a
# request that sets any of them otherwise gets a fresh process
START_VARS = ("PYTHON", "LC_", "LANG", "LANGUAGE", "TZ", "LD_", "MALLOC_")
REAP_TIMEOUT_S = 30.0  # a killed child's return code, once the server has reaped it


@dataclass
class _Server:
    proc: subprocess.Popen
    sock: socket.socket  # requests go here
    env: dict[str, str]  # the environment it started with
    said: bytearray  # what it wrote on its stderr (only an error of its own ever does)

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        try:
            while chunk := os.read(self.proc.stderr.fileno(), 1 << 16):
                self.said += chunk
        except BlockingIOError:
            pass
        return self.said[-4000:].decode(errors="replace")


_lock = threading.Lock()
_server: _Server | None = None


def _started() -> _Server:
    """The server, started if there is none or it has ended."""
    global _server
    with _lock:
        if _server is not None and _server.proc.poll() is None:
            return _server
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        # stdin this process's, stdout and stderr pipes, as its children's will be: Python
        # reads at start-up what kind of file each standard stream is (tests/cli_server.py)
        proc = subprocess.Popen([sys.executable, str(SERVER), str(theirs.fileno())],
                                pass_fds=[theirs.fileno()], cwd=HOME, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        theirs.close()
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # it writes nothing there
        fl = fcntl.fcntl(proc.stderr.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(proc.stderr.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)
        _server = _Server(proc, ours, env, bytearray())
        return _server


def _start_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(START_VARS)}


def run(argv: list[str], env: Mapping[str, str], timeout: float | None,
        module: str = "andon", cwd: Path | None = None) -> subprocess.CompletedProcess | None:
    """``subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
    text=True, env=env, timeout=timeout, cwd=cwd)``, the child forked from the server; None
    when it must be a fresh process instead (``env`` sets a variable read at start-up
    otherwise than the server's, or the server has just ended). As ``run``: raises
    subprocess.TimeoutExpired once ``timeout`` seconds have passed (with the bytes read so
    far if they were still being read), and any exception while waiting, the child killed
    either way."""
    server = _started()
    server.stderr()  # drained, so a pipe it fills slowly never blocks it
    if _start_env(env) != _start_env(server.env):
        return None
    deadline = None if timeout is None else time.monotonic() + timeout
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    answer, theirs = socket.socketpair()
    request = json.dumps({"module": module, "argv": argv, "cwd": str(cwd or os.getcwd()),
                          "env": dict(env)}).encode()
    try:
        socket.send_fds(server.sock, [request], [0, out_w, err_w, theirs.fileno()])
    except OSError:
        pass  # the server has ended: no pid comes back (below)
    finally:
        os.close(out_w)
        os.close(err_w)
        theirs.close()
    with answer:
        started = _Answer(answer)
        pid, pidfd = started.pid()
        if pid is None:  # nothing forked
            os.close(out_r)
            os.close(err_r)
            return None
        args = [sys.executable, "-m", module, *argv]
        try:
            out, err, timed_out = _read(out_r, err_r, deadline)
            code = None if timed_out else started.line(deadline)
            if code is None:
                _kill(pidfd)
                started.line(time.monotonic() + REAP_TIMEOUT_S)
                # as subprocess: the output read when time ran out reading it, none when
                # it ran out waiting for the process after its output had closed
                raise subprocess.TimeoutExpired(args, timeout, *((out or None, err or None)
                                                                 if timed_out else (None, None)))
        except BaseException:
            _kill(pidfd)
            raise
        finally:
            os.close(pidfd)
    if not code:
        raise RuntimeError(f"tests/cli_server.py ended before its child {pid} did; it said:\n"
                           f"{server.stderr()}")
    return subprocess.CompletedProcess(args, int(code), _text(out), _text(err))


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:  # it has ended (a grandchild holds its output)
        pass


class _Answer:
    """The server's answer on a stream socket: the child's pid with its pidfd, then its
    return code, each a line."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def pid(self) -> tuple[int | None, int]:
        msg, fds, _, _ = socket.recv_fds(self.sock, 64, 1)
        self.buf = msg
        line = self.line(None)
        return (int(line), fds[0]) if line and fds else (None, -1)

    def line(self, deadline: float | None) -> str | None:
        """The next line; "" at end of file (the server ended); None at the deadline."""
        while b"\n" not in self.buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.sock], [], [], left)[0]:
                return None
            chunk = self.sock.recv(64)
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def _read(out_r: int, err_r: int, deadline: float | None) -> tuple[bytes, bytes, bool]:
    """Both pipes to their end (or the deadline): their bytes, and whether time ran out."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        try:
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
        finally:
            os.close(out_r)
            os.close(err_r)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), timed_out


def _text(data: bytes) -> str:
    # as subprocess's text mode: the locale's encoding, universal newlines
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")
