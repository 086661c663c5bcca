"""What this machine can contain an agent with, probed once per process.

``capabilities()`` answers three questions, each by doing it rather than by reading version
numbers: can bubblewrap start a process in new user, mount, pid, IPC and UTS namespaces with
every capability dropped and uid 65534 (``fs``), can it add a network namespace too
(``fs+net``), and which process caps exist (a cgroup v1 or v2 ``pids`` and ``memory`` folder
andon may create sub-folders in, else ``setrlimit``). Landlock's ABI version (kernel ≥ 5.13)
is read with ``landlock_create_ruleset(NULL, 0, VERSION)`` and reported only: andon does not
enforce with it (see docs/sandbox.md). Never raises; every "no" carries the reason and the
way to get it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

PROBE_TIMEOUT_S = 20.0
SANDBOX_UID = 65534  # "nobody": the uid the agent has inside its user namespace
CGROUP_V1 = Path("/sys/fs/cgroup")
LANDLOCK_CREATE_RULESET = 444  # the syscall number on x86_64 and arm64 alike
LANDLOCK_CREATE_RULESET_VERSION = 1
# Tests point this at a missing file to see andon refuse, for real, where bwrap is absent.
BWRAP_ENV = "ANDON_BWRAP"


@dataclass(frozen=True)
class Capabilities:
    """``bwrap``: the bubblewrap executable or None; ``fs`` / ``net``: ``(works, why not)``
    for the two levels; ``landlock``: the ABI version, 0 when absent; ``cgroup``: the folder
    (v1 ``pids`` hierarchy or v2 root) andon makes per-stage groups in, or None;
    ``notes``: why not, for what is missing."""

    bwrap: str | None
    fs: tuple[bool, str]
    net: tuple[bool, str]
    landlock: int
    cgroup_pids: Path | None
    cgroup_memory: Path | None
    notes: list[str] = field(default_factory=list)

    def works(self, level: str) -> tuple[bool, str]:
        """``(True, "")`` when ``level`` ("none", "fs", "fs+net") can be had here."""
        return {"none": (True, ""), "fs": self.fs}.get(level, self.net)

    def best(self, want_net: bool) -> str:
        """The strongest level here: ``fs+net`` only when the network is to be cut."""
        if want_net and self.net[0]:
            return "fs+net"
        return "fs" if self.fs[0] else "none"


_lock = threading.Lock()
_cached: Capabilities | None = None


def bwrap_path() -> str | None:
    """The bubblewrap executable (``ANDON_BWRAP`` if set, else ``bwrap`` on PATH)."""
    forced = os.environ.get(BWRAP_ENV)
    if forced:
        return forced if os.access(forced, os.X_OK) else None
    return shutil.which("bwrap")


def base_args(bwrap: str) -> list[str]:
    """bwrap's namespaces and identity, the same for the probe and every agent stage."""
    return [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]


def _try(argv: list[str]) -> tuple[bool, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=PROBE_TIMEOUT_S, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap could not run: {exc}"
    if p.returncode == 0:
        return True, ""
    last = (p.stderr.strip().splitlines() or [f"exited {p.returncode}"])[-1]
    return False, f"bubblewrap refused: {last}"


def _landlock() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        v = libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def _cgroup(controller: str) -> Path | None:
    """A folder under which andon may make a group with ``controller``: cgroup v1's
    ``/sys/fs/cgroup/<controller>/<this process's group>``, or the v2 group of this process
    when the controller is delegated there. None when neither is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            base = CGROUP_V1 / controller / path.lstrip("/")
            if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
                return base
    for line in lines:
        if line.startswith("0::"):
            base = CGROUP_V1 / line[3:].lstrip("/")
            try:
                ok = controller in (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                ok = False
            if ok and os.access(base, os.W_OK):
                return base
    return None


def probe() -> Capabilities:
    """Try each thing now (about 10 ms per bwrap start). Never raises."""
    notes: list[str] = []
    bwrap = bwrap_path() if sys.platform.startswith("linux") else None
    if bwrap is None:
        why = ("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap; "
               "Fedora: dnf install bubblewrap)" if sys.platform.startswith("linux")
               else f"the sandbox needs Linux (this is {sys.platform})")
        fs = net = (False, why)
    else:
        # --as-pid-1: no bwrap init in the namespace, so bwrap's monitor waits for the
        # process itself; with an init, the init outlives the monitor and every probe would
        # leave an orphan to this process's subreaper (zombies in a long-lived process)
        common = [*base_args(bwrap), "--as-pid-1", "--ro-bind", "/", "/", "--proc", "/proc",
                  "--dev", "/dev", "--tmpfs", "/tmp"]
        fs = _try([*common, "--", "/bin/true"])
        net = _try([*common, "--unshare-net", "--", "/bin/true"]) if fs[0] else fs
    pids, memory = _cgroup("pids"), _cgroup("memory")
    if pids is None:
        notes.append("no writable cgroup with the pids controller: max_processes is "
                      "enforced with RLIMIT_NPROC, which the kernel ignores for uid 0")
    if memory is None:
        notes.append("no writable cgroup with the memory controller: memory_mb is "
                     "enforced with RLIMIT_AS (address space, not resident memory)")
    return Capabilities(bwrap, fs, net, _landlock(), pids, memory, notes)


def capabilities() -> Capabilities:
    """:func:`probe`, once per process."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = probe()
        return _cached


def forget() -> None:
    """Drop the cached answer (tests that change ``ANDON_BWRAP``)."""
    global _cached
    with _lock:
        _cached = None
