"""``[agent] memory_mb`` and ``max_processes``: one cgroup per agent stage, watched.

Where this process may make cgroups (``probe._cgroup``: cgroup v1's ``pids`` / ``memory``
hierarchies, or a v2 group with those controllers delegated), each stage gets a fresh group
``andon-<pid>-<n>-<random>`` with ``pids.max`` and ``memory.limit_in_bytes`` (v1) / ``memory.max``
(v2). The agent enters it before its first instruction: ``launch.py`` writes its own pid to
``cgroup.procs`` and only then execs the agent (or bubblewrap), so no child escapes the cap.
A watcher thread reads ``pids.events`` (``max N``: a fork was refused) and the memory
events (``oom_kill N``) every ``POLL_S`` seconds; at the first hit it kills every process of
the group, so a fork bomb or a leak ends the stage rather than spinning until the timeout,
and :meth:`Caps.hit` names the limit for the stage's failure (layer ``environment``).
Without a usable cgroup the launcher sets ``RLIMIT_NPROC`` (``max_processes`` on top of the
tasks the user has now: the kernel counts the whole user) / ``RLIMIT_AS`` instead — weaker:
the kernel ignores ``RLIMIT_NPROC`` for uid 0, and a hit is not detected.

A run killed outright (``kill -9``, a lost machine) leaves its stage's group behind, empty
once its processes end, and nothing else removes it: the first stage of each process
removes the empty ``andon-<pid>-…`` groups of processes that no longer run (:func:`_sweep`).
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import signal
import threading
import time
from pathlib import Path

from ..contain.procgroup import alive
from .probe import capabilities

POLL_S = 0.1
KILL_ROUNDS = 200
_seq = itertools.count(1)
_NAME = re.compile(r"andon-(\d+)-\d+-[0-9a-f]+")
# a group younger than this is not swept: its maker may run in another pid namespace (a
# container on the same hierarchy), where its pid means nothing here, and be about to move
# its agent in; an empty group of a live stage exists only for that moment
STALE_AFTER_S = 120
_swept: set[Path] = set()  # the hierarchies this process has swept


class Caps:
    """The caps of one stage. ``groups``: the cgroup folders made; ``rlimits``: what the
    launcher sets instead (``--nproc N`` / ``--as BYTES``); :meth:`launcher_args` gives the
    launcher's options; :meth:`watch` starts the watcher; :meth:`close` stops it, kills what
    is left in the groups and removes them."""

    def __init__(self, memory_mb: int | None, max_processes: int | None):
        self.memory_mb, self.max_processes = memory_mb, max_processes
        self.groups: list[Path] = []
        self.rlimits: list[str] = []
        self._hit: str | None = None
        self.unenforced: list[str] = []  # caps asked for that nothing enforces here (notes)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        caps = capabilities()
        # never a name a group left behind by an earlier process of the same (reused) pid
        # still holds: the mkdir would fail and the cap fall back to RLIMIT_NPROC, which the
        # kernel ignores for root (a fork bomb took every pid of the machine)
        name = f"andon-{os.getpid()}-{next(_seq)}-{secrets.token_hex(4)}"
        if max_processes:
            g = self._make(caps.cgroup_pids, name)
            if g is not None and _write(g / "pids.max", str(max_processes)):
                self.groups.append(g)
                self.pids: Path | None = g
            else:
                self.pids = None
                # RLIMIT_NPROC counts every task of the user, not of the stage: on top of
                # what the user runs already, or an honest agent could not fork at all
                self.rlimits += ["--nproc", str(max_processes + _user_tasks())]
                if os.getuid() == 0:
                    self.unenforced.append(
                        f"max_processes = {max_processes} not enforced: no pids cgroup could "
                        "be made here, and the kernel ignores RLIMIT_NPROC for root")
        else:
            self.pids = None
        self.memory: Path | None = None
        if memory_mb:
            g = caps.cgroup_memory
            g = self._make(g, name) if g is not None and g != self.pids else self.pids \
                if g is not None else None
            limit = str(memory_mb * 1024 * 1024)
            if g is not None and (_write(g / "memory.limit_in_bytes", limit)
                                  or _write(g / "memory.max", limit)):
                if g not in self.groups:
                    self.groups.append(g)
                self.memory = g
            else:
                self.rlimits += ["--as", limit]

    @staticmethod
    def _make(base: Path | None, name: str) -> Path | None:
        if base is None:
            return None
        _sweep(base)
        try:
            (base / name).mkdir()
        except OSError:
            return None
        return base / name

    def launcher_args(self) -> list[str]:
        return [a for g in self.groups for a in ("--cgroup", str(g))] + self.rlimits

    def watch(self) -> None:
        if not self.groups:
            return
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            hit = self._check()
            if hit:
                self._hit = hit
                self._kill()
                return

    def _check(self) -> str | None:
        if self.pids is not None and _count(self.pids / "pids.events", "max"):
            return (f"max_processes: the stage reached [agent] max_processes = "
                    f"{self.max_processes} processes and threads (a fork was refused)")
        if self.memory is not None and (_count(self.memory / "memory.oom_control", "oom_kill")
                                        or _count(self.memory / "memory.events", "oom_kill")):
            return (f"memory_mb: the stage used [agent] memory_mb = {self.memory_mb} MB "
                    f"and the kernel killed a process of it")
        return None

    def _kill(self) -> None:
        for _ in range(KILL_ROUNDS):
            pids = [int(x) for g in self.groups for x in _read(g / "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            threading.Event().wait(0.01)

    def hit(self) -> str | None:
        """The limit the stage hit (checked once more now), or None."""
        return self._hit or (self._check() if self.groups else None)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._hit is None:
            self._hit = self._check() if self.groups else None
        self._kill()
        # an emptied cgroup can stay busy for a moment: one try now, the rest off the
        # stage's clock (a process that exits at once may leave an empty group behind)
        busy = [g for g in self.groups if not _rmdir(g)]
        if busy:
            threading.Thread(target=_remove, args=(busy,), daemon=True).start()


def _sweep(base: Path) -> None:
    """Remove, once per process and hierarchy, the groups in ``base`` named as this module
    names them whose process no longer runs, made :data:`STALE_AFTER_S` or more ago;
    ``rmdir`` removes only an empty one, so a group whose stage still has a process (an
    agent that outlived a killed andon) stays, as does any group of a pid that runs now
    (perhaps another process by a reused pid)."""
    if base in _swept:
        return
    _swept.add(base)
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        m = _NAME.fullmatch(name)
        if m is None or alive(int(m.group(1))):
            continue
        try:
            if time.time() - os.stat(base / name).st_mtime < STALE_AFTER_S:
                continue
        except OSError:
            continue
        _rmdir(base / name)


def _rmdir(g: Path) -> bool:
    try:
        g.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove(groups: list[Path]) -> None:
    for g in groups:
        for _ in range(100):
            try:
                g.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                threading.Event().wait(0.02)


def _user_tasks() -> int:
    """Tasks (processes and threads) of this user now, from /proc; 0 where unreadable."""
    uid, n = os.getuid(), 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for d in names:
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{d}/task"))
            except OSError:
                continue
    return n


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


def _count(path: Path, key: str) -> int:
    m = re.search(rf"^{key} (\d+)$", _read(path), re.MULTILINE)
    return int(m.group(1)) if m else 0
