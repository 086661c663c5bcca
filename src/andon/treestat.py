"""What a tree the harness wrote looks like to ``lstat``, and waiting out the filesystem clock.

Shared by the review export (:mod:`andon.review.export`: did the reviewer change anything?)
and the pool of clones (:mod:`andon.clone_pool`: what must go before a clone is used
again?). A stat key is ``(dev, ino, mode, size, mtime_ns, ctime_ns)``. Once the filesystem
clock has moved past the harness's last write (:func:`past_tick`), any later write, rename,
link, ``chmod`` or ``utime`` gives the entry a later ctime, which no process can set back
(only the clock can), so an entry whose key is unchanged holds what the harness wrote.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

# How long to wait for the filesystem clock to move past the last write before giving up
# (a filesystem with coarse timestamps): then stat keys are not trusted.
TICK_WAIT_S = 2.0

Stat = tuple[int, int, int, int, int, int]  # dev, ino, mode, size, mtime_ns, ctime_ns


def key(st: os.stat_result) -> Stat:
    """The stat key of ``st`` (see the module docstring)."""
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def past_tick(dest: Path, wait_s: float = TICK_WAIT_S) -> bool:
    """Wait until the filesystem clock of ``dest`` has moved past the ctime of everything
    just written there: a marker file is written (after those writes, so its ctime is at
    least theirs) and changed until a change carries a later ctime. From then on any change
    to an entry gives it a ctime later than the one recorded. Usually one or two rounds (the
    clock ticks every few milliseconds); False if it did not move within ``wait_s`` seconds.
    The marker is removed."""
    fd, name = tempfile.mkstemp(prefix=".andon-tick-", dir=dest)
    try:
        first = os.fstat(fd).st_ctime_ns
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            os.fchmod(fd, 0o600 if os.fstat(fd).st_mode & 0o200 == 0 else 0o400)
            if os.fstat(fd).st_ctime_ns > first:
                return True
        return False
    finally:
        os.close(fd)
        os.unlink(name)


def walk(root: Path, skip_top: frozenset[str] = frozenset()
         ) -> tuple[dict[str, Stat], dict[str, int]]:
    """Every file, link or other non-folder under ``root`` (not following links) → its stat
    key, and every folder below ``root`` → its ``st_mode``; paths are relative POSIX. Names
    in ``skip_top`` are left out at the top level only (``.git``). A folder that cannot be
    listed is listed with no entries."""
    files: dict[str, Stat] = {}
    dirs: dict[str, int] = {}
    stack = [("", str(root))]
    while stack:
        prefix, where = stack.pop()
        try:
            it = os.scandir(where)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        with it:
            for e in it:
                if not prefix and e.name in skip_top:
                    continue
                rel = prefix + e.name
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    dirs[rel] = st.st_mode
                    stack.append((rel + "/", e.path))
                else:
                    files[rel] = key(st)
    return files, dirs
