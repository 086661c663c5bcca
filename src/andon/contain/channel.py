"""The harness's end of the verdict channel: how a pytest run is started, and what its hook said.

``plan(command)`` maps the configured ``[test] command`` to an interpreter and a start-up mode,
or says why it cannot (the run then starts as before, and the evidence says
``verdict channel: not used (<why>)``). ``Channel`` makes the two pipes, the nonce and the boot
argv, reads the hook's lines while the run goes on (a full pipe would block the test process),
and verifies them: every line must carry a valid MAC and the next sequence number, and exactly
one ``end`` line must arrive; otherwise the channel is *lost* (closed, written over or cut short
by the code under test). Line format: contain/boot.py.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .interpreter import shebang_python

BOOT = Path(__file__).with_name("boot.py")
_MAX_LINES = 100_000  # a hook flooding the pipe cannot exhaust the harness's memory
# the oldest pytest whose plugin hooks arm the hook (7.4.4 checked, with pluggy 1.x)
MIN_PYTEST = (7, 0)


@dataclass(frozen=True)
class Plan:
    """How to start one run: ``interpreter`` (None: not through boot.py, see ``why``),
    ``mode`` "m" (``python -m pytest``: the cwd goes first on sys.path) or "s" (a script),
    and the pytest arguments that followed the runner in the command."""

    interpreter: str | None
    mode: str
    args: list[str]
    why: str = ""


def plan(command: list[str]) -> Plan:
    """Map ``command`` (already resolved: ``python`` → andon's interpreter) to a Plan."""
    if len(command) >= 3 and command[1:3] == ["-m", "pytest"]:
        return Plan(command[0], "m", command[3:])
    if command and os.path.basename(command[0]) in ("pytest", "py.test"):
        interp = shebang_python(command[0])
        if interp:
            return Plan(interp, "s", command[1:])
        return Plan(None, "", command, f"{command[0]} has no '#!<absolute python>' line")
    return Plan(None, "", command, "the test command is neither '<python> -m pytest' nor a "
                "pytest script")


@dataclass
class Record:
    """What the hook said in one run. ``lost`` is why the channel cannot be trusted, or ""."""

    lines: list[tuple[str, list[str]]] = field(default_factory=list)  # (kind, fields)
    lost: str = ""
    # why the hook was never armed, when the runner is too old for the plugin's events (an
    # honest "channel not used", not a lost channel); "" otherwise
    unarmed: str = ""

    def of(self, kind: str) -> list[list[str]]:
        return [f for k, f in self.lines if k == kind]


class Channel:
    """Two pipes and a nonce for one run. Use: ``argv = ch.boot_argv(...)``; start the process
    with ``pass_fds=ch.child_fds``; ``ch.started()``; after it ended, ``ch.record()``."""

    def __init__(self, canary: str = "") -> None:
        """``canary``: the run's canary module (repo-relative), handed to boot.py with the nonce
        (never on the command line) so that its failures are reported cheaply."""
        self.nonce = secrets.token_hex(32).encode()
        self._canary = canary
        self._r, self._w = os.pipe()            # hook → harness
        self._nr, self._nw = os.pipe()          # harness → boot: the nonce
        self.child_fds = (self._w, self._nr)
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, daemon=True)

    def boot_argv(self, interpreter: str, mode: str, paths: list[str],
                  pytest_args: list[str]) -> list[str]:
        return [interpreter, "-I", "-B", str(BOOT), f"{self._w}:{self._nr}", mode, *paths,
                "--", *pytest_args]

    def started(self) -> None:
        """Close the child's ends here, hand over the nonce, start reading."""
        os.close(self._w)
        os.close(self._nr)
        try:
            os.write(self._nw, self.nonce + (b"\n" + self._canary.encode() if self._canary
                                             else b""))
        except OSError:
            pass  # the child died already; the record will say lost
        os.close(self._nw)
        self._thread.start()

    def abandon(self) -> None:
        """The process could not be started: close every end."""
        for fd in (self._r, self._w, self._nr, self._nw):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read(self) -> None:
        total = 0
        while True:
            b = os.read(self._r, 65536)
            if not b:
                break
            total += len(b)
            if total < 64 * 1024 * 1024:
                self._chunks.append(b)
        os.close(self._r)

    def record(self, timeout_s: float = 10) -> Record:
        """Verify and parse what arrived. Call after the process (and its group) ended."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return Record(lost="the channel was still held open after the run ended")
        return verify(b"".join(self._chunks), self.nonce)


def _too_old(versions: str) -> bool:
    """``versions`` is the boot line's "pytest X.Y.Z, pluggy A.B.C"."""
    word = versions.split(",", 1)[0].removeprefix("pytest ").strip()
    try:
        got = tuple(int(x) for x in word.split(".")[:2])
    except ValueError:
        return False
    return got < MIN_PYTEST


def verify(data: bytes, nonce: bytes) -> Record:
    """Parse ``data`` (the pipe's whole content); a bad MAC, a gap in the sequence, no ``end``
    line or more than one make the record ``lost`` (the lines read so far are kept). A record
    whose ``boot`` line names a pytest older than MIN_PYTEST and that has no ``armed`` line is
    not lost but ``unarmed``: that runner never raises the plugin's events. A pytest from
    MIN_PYTEST on always arms the hook before any project code runs, so there a missing
    ``armed`` line stays a lost channel."""
    rec = Record()
    expect = 1
    ends = 0
    text = data.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        rec.lost = "the channel's last line was cut off"
    for raw in text.split("\n")[:-1][:_MAX_LINES]:
        seq, _, rest = raw.partition(" ")
        mac, _, body = rest.partition(" ")
        want = hashlib.blake2b(f"{seq} {body}".encode("utf-8", "replace"), key=nonce,
                               digest_size=16).hexdigest()
        if not secrets.compare_digest(mac, want) or seq != str(expect):
            rec.lost = rec.lost or f"line {expect} of the channel is not the hook's: {raw[:120]!r}"
            break
        expect += 1
        kind, *fields = body.split("\t")
        rec.lines.append((kind, fields))
        ends += kind == "end"
    if not rec.lost and not rec.of("armed") and (boot := rec.of("boot")) and boot[0] \
            and _too_old(boot[0][0]):
        rec.unarmed = (f"{boot[0][0]}: the plugin's events never fired, so the hook was "
                       f"never armed (pytest >= {MIN_PYTEST[0]} arms it)")
        return rec
    if not rec.lost:
        if ends == 0:
            rec.lost = "no end line (the channel was closed or the run ended early)"
        elif ends > 1:
            rec.lost = f"{ends} end lines"
        elif not rec.of("armed"):
            rec.lost = "the hook was never armed"
    return rec
