"""``python -m andon ARGS`` as a process forked from a server that has imported andon
(tests/cli_server.py says what the child shares with it and what it gets as a fresh process
would): what ``helpers.andon`` uses for the commands that need a process of their own,
unless ``ANDON_TESTS_FRESH_CLI=1`` (then each starts a fresh interpreter, as before).

One server per test process, started on first use (about half a second), ended with it."""

from __future__ import annotations

import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

SERVER = Path(__file__).with_name("cli_server.py")
# read by the interpreter as it starts, so fixed for the server's children: a request that
# sets any of them otherwise gets a fresh process
START_VARS = ("PYTHON", "LC_", "LANG", "LANGUAGE")

_lock = threading.Lock()
_server: tuple[subprocess.Popen, socket.socket, dict[str, str]] | None = None


def _started() -> tuple[subprocess.Popen, socket.socket, dict[str, str]]:
    """The server, started if there is none or it has ended; its socket and start-up env."""
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        # in "/": a test's temporary folder, the working one when it starts, may go
        proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=theirs, cwd="/",
                                stdout=subprocess.DEVNULL, env=env)
        theirs.close()
        _server = proc, ours, env
        return _server


def _start_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(START_VARS)}


def run(argv: list[str], env: Mapping[str, str], timeout: float | None,
        module: str = "andon", cwd: Path | None = None) -> subprocess.CompletedProcess | None:
    """``subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
    text=True, env=env, timeout=timeout, cwd=cwd)``, the child forked from the server; None
    when it must be a fresh process instead (``env`` sets a variable the interpreter reads as
    it starts otherwise than the server's). Raises subprocess.TimeoutExpired as ``run`` does,
    the child killed."""
    server = _started()
    if _start_env(env) != _start_env(server[2]):
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    answer, theirs = socket.socketpair()
    request = json.dumps({"module": module, "argv": argv, "cwd": str(cwd or os.getcwd()),
                          "env": dict(env)}).encode()
    try:
        socket.send_fds(server[1], [request], [0, out_w, err_w, theirs.fileno()])
    except OSError:
        pass  # the server has ended: no pid comes back (below)
    finally:
        os.close(out_w)
        os.close(err_w)
        theirs.close()
    with answer, answer.makefile("r") as lines:
        pid = lines.readline()
        if not pid:  # nothing forked: the caller starts a fresh process
            os.close(out_r)
            os.close(err_r)
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        out, err, timed_out = _read(out_r, err_r, deadline)
        if timed_out:
            os.kill(int(pid), signal.SIGKILL)
        code = lines.readline()
    args = [sys.executable, "-m", module, *argv]
    if timed_out:
        raise subprocess.TimeoutExpired(args, timeout, _text(out), _text(err))
    if not code:
        raise RuntimeError(f"tests/cli_server.py ended before its child {pid.strip()} did")
    return subprocess.CompletedProcess(args, int(code), _text(out), _text(err))


def _read(out_r: int, err_r: int, deadline: float | None) -> tuple[bytes, bytes, bool]:
    """Both pipes to their end (or the deadline): their bytes, and whether time ran out."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        try:
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), True
                for key, _ in sel.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
        finally:
            os.close(out_r)
            os.close(err_r)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), False


def _text(data: bytes) -> str:
    # as subprocess's text mode: the locale's encoding, universal newlines
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")
