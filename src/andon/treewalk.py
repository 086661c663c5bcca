"""Every entry under a folder, for the walks over trees an agent or the code under test wrote.

Such a tree can nest folders deeper than Python's recursion limit (a few thousand relative
``mkdir`` calls), where ``os.walk`` and ``Path.rglob`` (recursive on Python 3.11) raise
``RecursionError``, which no ``except OSError`` catches: a walk meant to find the agent's
change stopped the line as a harness error instead. This walk keeps its own stack.

No andon imports: the environment fingerprint, the manifests, the review export, the
worktree pool and the joint plan's ``.git`` search all use it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from . import plain_file


def entries(root: str | os.PathLike[str], *,
            skip: Callable[[os.DirEntry[str]], bool] | None = None,
            descend: Callable[[str, os.DirEntry[str]], bool] | None = None,
            ) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` for every entry below ``root``, depth first, folders before
    what they hold; the path is "/"-separated and relative to ``root``.

    Links are yielded, never followed. ``skip(entry)`` true: the entry is neither yielded
    nor entered. ``descend(rel, entry)`` false: a folder is yielded but not entered (default:
    every folder is). A folder that cannot be listed (gone, no permission, a path longer
    than the system allows) is yielded and not entered; ``root`` itself unlistable yields
    nothing. Raises nothing of its own; memory grows with the number of folders waiting on
    the stack, never with the depth of the call stack."""
    stack = [("", os.fspath(root))]
    while stack:
        prefix, where = stack.pop()
        try:
            with os.scandir(where) as it:
                found = list(it)  # closed before yielding: no open folder per level
        except OSError:
            continue
        for entry in found:
            if skip is not None and skip(entry):
                continue
            rel = prefix + entry.name
            yield rel, entry
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and (descend is None or descend(rel, entry)):
                stack.append((rel + "/", entry.path))


def umask() -> int | None:
    """This process's umask, read without changing it (Linux's ``/proc/self/status``; None
    elsewhere). With it, the permissions git gives a file it writes: ``0o666 & ~umask`` for
    mode 100644, ``0o777 & ~umask`` for 100755 and for a folder."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


class Folders:
    """fds of the folders of ``source`` on the way to the current one, each opened from the
    last without following a symbolic link, so that a folder swapped for a link while a walk
    runs leads nowhere else. Only that chain is open (paths visited in git's order open each
    folder once), and it is walked in a loop: a tree nested deeper than Python's recursion
    limit, or wider than the fd limit, is no error. ``close()`` when done."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        self.chain: list[tuple[str, int]] = []  # (name, fd), the top first
        try:
            self.top: int | None = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            self.top = None

    def fd(self, rel: str) -> int | None:
        """The fd of folder ``rel`` ("a/b"; "" the top), or None if a step of it is not a
        plain folder."""
        if self.top is None:
            return None
        names = rel.split("/") if rel else []
        keep = 0
        while keep < min(len(names), len(self.chain)) and self.chain[keep][0] == names[keep]:
            keep += 1
        for _, fd in self.chain[keep:]:
            os.close(fd)
        del self.chain[keep:]
        for name in names[keep:]:
            at = self.chain[-1][1] if self.chain else self.top
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=at)
            except OSError:
                return None
            self.chain.append((name, fd))
        return self.chain[-1][1] if self.chain else self.top

    def close(self) -> None:
        for _, fd in self.chain:
            os.close(fd)
        self.chain.clear()
        if self.top is not None:
            os.close(self.top)


def manifest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (not following links) → :func:`file_marker`, so any change
    an agent makes shows up."""
    out: dict[str, str] = {}
    for rel, e in sorted(entries(root), key=lambda found: found[0]):
        try:
            marker = file_marker(Path(e.path))
        except OSError as exc:  # e.g. a path longer than the system allows: still a change
            marker = f"unreadable:{exc.strerror}"
        if marker is not None:
            out[rel] = marker
    return out


def file_marker(path: Path) -> str | None:
    """sha256 of a file's bytes with its executable bit, ``link:<target>`` for a symlink
    (never followed), what it is for anything else but a directory ("a FIFO": never opened),
    None for a directory or nothing there."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # anything else (a path too long) is the caller's: still a change
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISREG(st.st_mode):
        try:
            data = plain_file.read(path)
        except OSError:  # replaced, or unreadable, since the look
            return "unreadable"
        mode = "x" if os.access(path, os.X_OK) else "-"
        return mode + hashlib.sha256(data).hexdigest()
    return None if stat.S_ISDIR(st.st_mode) else plain_file.kind(st.st_mode)
