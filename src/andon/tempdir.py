"""Where andon makes the trees it throws away: ``[andon] temp_dir``.

An attempt writes the project's files out up to three times — its worktree, the clone its
suite and hermetic runs share, its review export — and every test run gets a fresh HOME and
TMPDIR. On a disk each file created is a journal update. On the virtual machines
this project is tested on, an empty file took 20-40 µs to create on the disk in quiet spells
and 250-1,200 µs in slow spells lasting minutes after bursts of deletions (the root
filesystem is ext4 without a journal, where the kernel checks every inode freed in the last
minute before it hands out another: worktree_pool.py), while a tmpfs (``/dev/shm``) stayed
at 20-40 µs throughout: 18,000 creations per packet at 6,000 files is 0.5 s or 5-20 s (issue 18,
benchmarks/README.md). Debian 13, Fedora and Arch mount ``/tmp`` as a tmpfs anyway, so on
those machines andon's trees were in memory already.

``temp_dir`` is one of:

- ``"auto"`` (the default): ``$TMPDIR`` when it is set (the environment chose); else the
  system temp dir when it is a tmpfs already; else a private folder ``tmp-<uid>`` on
  ``/dev/shm`` when that is a tmpfs that allows running programs (no ``noexec``: a test may
  run a script of the tree) and has room (:func:`room_needed`); else the system temp dir.
- ``"system"``: the system temp dir as Python finds it (``$TMPDIR``, else ``/tmp``, …).
- an absolute path: that folder (made if missing).

:func:`use` keeps the choice for the rest of the process, once, at the start of a command
that makes trees, and :func:`harness_dir` hands it to the trees only the harness and the code
under test read: the gates' clones and each test run's HOME and TMPDIR. What an agent works
in — its worktree, a review export, a stage's prompt folder — stays in the system temp dir:
agent CLIs that sandbox themselves with bubblewrap (Codex) mount a fresh ``/dev``, in which a
worktree below ``/dev/shm`` does not exist ("Failed to write file", every patch refused).
"""

from __future__ import annotations

import atexit
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UsageError
from .mounts import filesystem_type

if TYPE_CHECKING:
    from .git.repo import Repo

SHM = Path("/dev/shm")
TMPFS_MAGIC = "tmpfs"
# room on the tmpfs for each worker: its three trees and what its test runs write beside
# them, plus a floor for the test runs' own temporary files, which no tree size predicts
TREES_PER_WORKER = 4
FLOOR_BYTES = 1 << 30  # 1 GiB


@dataclass(frozen=True)
class Choice:
    """Where the trees go (``path``) and why, in a phrase for ``andon run``'s and doctor's
    output (``why``), e.g. ``"tmpfs: /tmp is on disk"``."""

    path: Path
    why: str


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged process may still write on ``path``'s filesystem (statvfs)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (what the kernel estimates can be
    allocated without swapping); None where it cannot be read. A tmpfs's pages are memory."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_bytes(repo: Repo, rev: str = "HEAD") -> int:
    """Total size in bytes of the files of ``rev`` (``git ls-tree -r -l``; submodules count
    zero). 0 for a repository without commits."""
    listing = repo.git("ls-tree", "-r", "-l", "-z", "--full-tree", rev, check=False)
    total = 0
    for record in listing.split("\0"):
        meta = record.partition("\t")[0].split()
        if len(meta) == 4 and meta[1] == "blob" and meta[3].isdigit():
            total += int(meta[3])
    return total


def room_needed(tree: int, workers: int) -> int:
    """Bytes the tmpfs must have free for ``workers`` attempts of a ``tree``-byte repository
    at once: ``TREES_PER_WORKER`` trees each, plus ``FLOOR_BYTES``."""
    return TREES_PER_WORKER * tree * max(1, workers) + FLOOR_BYTES


def _private(parent: Path) -> Path | None:
    """``parent/tmp-<uid>``, made private (0700) if missing; None when it exists but is not
    a directory of this user's that only they can enter (a folder someone else made there
    first could be read or swapped under the trees)."""
    folder = parent / f"tmp-{os.getuid()}"
    return folder if private_folder(folder, tighten=False) else None


def private_folder(folder: Path, tighten: bool = True) -> bool:
    """Make ``folder`` (0700) if missing; whether it is now a directory of this user's that
    only they can enter. A folder of theirs that others could enter is closed to them
    (``chmod go-rwx``) when ``tighten``; one of another user's, or a link, never is: a name
    in a shared temp dir that someone else made first could be read or swapped under the
    trees andon makes there."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o077 and tighten:
            os.chmod(folder, stat.S_IMODE(st.st_mode) & 0o700, follow_symlinks=False)
            st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o077


def choose(setting: str, tree: int, workers: int = 1, shm: Path = SHM,
           system: Path | None = None, tmpdir_set: bool | None = None) -> Choice:
    """Where trees go for ``setting`` (``"auto"``, ``"system"`` or an absolute path; see the
    module docstring), a repository of ``tree`` bytes and ``workers`` attempts at once.
    ``shm`` is the tmpfs "auto" tries; ``system`` the system temp dir and ``tmpdir_set``
    whether ``$TMPDIR`` chose it (both read from the environment when None). UsageError for a
    path that is not absolute or cannot be made a folder. Changes nothing but the private
    folder it may make (or the folder ``setting`` names)."""
    if setting not in ("auto", "system"):
        path = Path(setting).expanduser()
        if not path.is_absolute():
            raise UsageError(f'[andon] temp_dir must be "auto", "system" or an absolute path, '
                             f"got {setting!r}")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"[andon] temp_dir {path}: cannot make it a folder: "
                             f"{exc.strerror}") from None
        if not path.is_dir():
            raise UsageError(f"[andon] temp_dir {path} is not a folder")
        return Choice(path, "[andon] temp_dir")
    system = Path(_system_temp()) if system is None else system
    if setting == "system":
        return Choice(system, '[andon] temp_dir = "system"')
    if bool(os.environ.get("TMPDIR")) if tmpdir_set is None else tmpdir_set:
        return Choice(system, "$TMPDIR")
    if filesystem_type(system) == TMPFS_MAGIC:
        return Choice(system, f"{system} is a tmpfs")
    refused = _shm_refusal(shm, tree, workers)
    if refused:
        return Choice(system, f"{system}: {refused}")
    private = _private(shm)
    if private is None:
        return Choice(system, f"{system}: {shm}/tmp-{os.getuid()} is not a private folder "
                              "of this user")
    return Choice(private, f"tmpfs: {system} is on disk")


def _shm_refusal(shm: Path, tree: int, workers: int) -> str | None:
    """Why ``shm`` cannot hold the trees, or None when it can."""
    if not shm.is_dir() or filesystem_type(shm) != TMPFS_MAGIC:
        return f"no tmpfs at {shm}"
    st = os.statvfs(shm)
    if st.f_flag & os.ST_RDONLY or st.f_flag & os.ST_NOEXEC:
        return f"{shm} is mounted read-only or noexec"
    need = room_needed(tree, workers)
    free, memory = free_bytes(shm), available_memory()
    if free < need or (memory is not None and memory < 2 * need):
        return (f"{shm} has too little room ({_mib(free)} free, {_mib(memory or 0)} of "
                f"memory available; {_mib(need)} needed, twice that in memory)")
    return None


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def _system_temp() -> str:
    # tempfile caches its choice in tempfile.tempdir; ask afresh so that a second use() in
    # one process (tests, the demo) starts from the environment, not from the last choice
    saved, tempfile.tempdir = tempfile.tempdir, None
    try:
        return tempfile.gettempdir()
    finally:
        tempfile.tempdir = saved


_harness: Path | None = None  # set by use(): where harness-only trees go in this process
_own: str | None = None  # this process's private folder below it (harness_dir)
_own_pid = 0  # the process that made it


def use(repo: Repo, setting: str, workers: int = 1) -> Choice:
    """:func:`choose` for ``repo``'s checked-out commit, kept for the rest of the process
    (forked workers inherit it) as the folder of the trees only the harness reads
    (:func:`harness_dir`). Returns the choice. UsageError as choose."""
    global _harness
    choice = choose(setting, tree_bytes(repo) if setting == "auto" else 0, workers)
    _harness = choice.path
    return choice


def harness_dir() -> str:
    """The ``dir`` for ``tempfile.mkdtemp`` of a tree only the harness and the code under
    test read (a gate clone, a test run's HOME and TMPDIR, a set-up's scratch): a private
    folder (``tmp*``, 0700) made once per process below what :func:`use` chose,
    else below the system temp dir; forked workers and lanes inherit it. Its own folder, so
    that test runs can be fenced off from every tree but their own (gates/base.py
    ``fenced``), whatever the system temp dir holds besides. Removed when empty at exit or
    at :func:`release`."""
    global _own, _own_pid
    parent = str(_harness) if _harness is not None else _system_temp()
    if _own is None or os.path.dirname(_own) != parent or not os.path.isdir(_own):
        _own = tempfile.mkdtemp(dir=parent)  # a neutral name: the code under test sees it
        _own_pid = os.getpid()
        atexit.register(_remove_if_empty, _own, _own_pid)
    return _own


def release() -> None:
    """Remove this process's tree folder if it is empty (the next :func:`harness_dir` makes
    another): when its fork servers are closed (contain/forkpool.py ``close_all``)."""
    global _own
    if _own is not None and _own_pid == os.getpid():  # never a forked child's: its parent's
        _remove_if_empty(_own, _own_pid)
        if not os.path.isdir(_own):
            _own = None


def _remove_if_empty(folder: str, pid: int) -> None:
    if os.getpid() == pid:  # not a forked child's exit: the folder is its parent's
        try:
            os.rmdir(folder)
        except OSError:
            pass  # trees still in it (the reaper's, a crash's): left as they are
