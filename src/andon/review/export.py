"""The review stage's copy of the candidate: written by git, checked by stat.

A reviewer reads the candidate's files in a plain directory (no ``.git``, so nothing there
leads back to the history, and ``review-correctness`` cannot ``git show`` the tests it must
not see) and must change nothing in it. The old way — ``git archive`` into memory, Python's
tarfile writing every file, a sha256 of every file before and after the reviewer — cost
seconds on a repository of 6,000 files (issue 18). Here:

- git writes the files (``checkout-index`` from a temporary index holding only the paths the
  reviewer may see), in C, straight from the object store;
- each file's ``lstat`` (inode, mode, size, mtime, ctime in nanoseconds) is recorded, and the
  filesystem clock is waited out past the last write (one tick, a few milliseconds; see
  :func:`_past_tick`), so that any later write, rename, link or ``chmod`` gives the entry a
  later ctime — which no process can set back;
- after the reviewer, the directory is walked once (``lstat`` only) and only the entries
  whose stat changed are read, against their blob's git hash: a file merely touched is not
  a change (as before), one edited with its size and mtime restored is.

Raises GitError (a git command failed) and UsageError (``dest`` exists).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import treewalk
from ..errors import UsageError
from ..workspace import Repo
from ..worktrees import PARALLEL_CHECKOUT

# How long to wait for the filesystem clock to move past the export's last write before
# giving up and reading every file at the check (a filesystem with coarse timestamps).
_TICK_WAIT_S = 2.0

_Stat = tuple[int, int, int, int, int, int]  # dev, ino, mode, size, mtime_ns, ctime_ns
_UNREADABLE: _Stat = (-1, -1, -1, -1, -1, -1)  # an entry lstat refused: never an export's


def _key(st: os.stat_result) -> _Stat:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class ExportedTree:
    """A plain directory holding ``rev``'s kept files, and how to tell whether anyone changed
    it. ``entries``: repo-relative POSIX path → (git mode "100644"/"100755"/"120000", blob
    sha, stat key at export). ``trusted_stat`` is false when the filesystem clock did not
    move past the export's last write in time: then :meth:`changed` reads every file."""

    root: Path
    entries: dict[str, tuple[str, str, _Stat]] = field(default_factory=dict)
    trusted_stat: bool = True

    def changed(self) -> list[str]:
        """Sorted repo-relative paths of every file or symbolic link added, removed, or
        different in bytes, executable bit, link target or type since the export. Empty
        folders are not entries (as in git). An entry whose ``lstat`` is unchanged is not
        read; one whose stat changed is read and compared with its blob, so a file only
        touched is not reported. A root that is gone or no longer a folder reports every
        entry. A new byte-code cache (a ``*.pyc`` / ``*.pyo`` or anything under
        ``__pycache__/``) is not a change: Python writes one beside every module a reviewer
        imports (where ``PYTHONDONTWRITEBYTECODE`` is unset), the export is thrown away and
        nothing in it is merged; a cache the commit itself holds is compared as any file."""
        seen = _walk(self.root)
        out = sorted(p for p in seen.keys() - self.entries.keys() if not _bytecode_cache(p))
        for path, (mode, blob, before) in self.entries.items():
            now = seen.get(path)
            if now is None:
                out.append(path)
            elif now != before or not self.trusted_stat:
                algorithm = "sha256" if len(blob) == 64 else "sha1"
                if _git_entry(self.root / path, algorithm) != (mode, blob):
                    out.append(path)
        return sorted(out)


def _bytecode_cache(path: str) -> bool:
    parts = path.split("/")
    return "__pycache__" in parts[:-1] or parts[-1].endswith((".pyc", ".pyo"))


def export_tree(repo: Repo, rev: str, dest: Path, keep: Callable[[str], bool] = lambda p: True
                ) -> ExportedTree:
    """Write the files of ``rev`` whose repo-relative paths ``keep`` accepts into ``dest``
    (created, with its parents; no ``.git``) and return the :class:`ExportedTree` that checks
    it later. Submodules (gitlinks) are left out, as ``git archive`` left them out. Time:
    git's checkout of the kept files plus one ``lstat`` each; no file is read back.
    UsageError if ``dest`` exists; GitError if ``rev`` is not a commit."""
    dest = Path(dest)
    if dest.exists() or dest.is_symlink():
        raise UsageError(f"export destination already exists: {dest}")
    sha = repo.resolve(f"{rev}^{{commit}}")
    entries = {e.path: (e.mode, e.sha) for e in repo.entries(sha)
               if e.kind == "blob" and keep(e.path)}
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="andon-export-") as tmp:
        # a temporary index of exactly the kept files; git writes them under dest, reading
        # nothing from dest (no .git there) and running no filter of the checkout's
        index_info = b"".join(f"{mode} {blob}\t".encode() + os.fsencode(p) + b"\0"
                              for p, (mode, blob) in entries.items())
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        repo._run(("update-index", "--add", "-z", "--index-info"), None, index_info, True, env)
        repo._run((*PARALLEL_CHECKOUT, "checkout-index", "--all", "--force",
                   f"--prefix={dest}/"), None, None, True, env)
    trusted = _past_tick(dest)
    seen = _walk(dest)
    tree = ExportedTree(dest, trusted_stat=trusted)
    for path, (mode, blob) in entries.items():
        if path in seen:
            tree.entries[path] = (mode, blob, seen[path])
    return tree


def _past_tick(dest: Path) -> bool:
    """Wait until the filesystem clock of ``dest`` has moved past the ctime of everything
    just written there: a marker file is written (after the export, so its ctime is at
    least theirs) and rewritten until a rewrite carries a later ctime. From then on any
    change to an exported entry gives it a ctime later than the one recorded. Usually one
    or two rewrites (the clock ticks every few milliseconds); False if it did not move
    within ``_TICK_WAIT_S`` (then every file is read at the check). The marker is removed."""
    fd, name = tempfile.mkstemp(prefix=".andon-tick-", dir=dest)
    try:
        first = os.fstat(fd).st_ctime_ns
        deadline = time.monotonic() + _TICK_WAIT_S
        while time.monotonic() < deadline:
            os.fchmod(fd, 0o600 if os.fstat(fd).st_mode & 0o200 == 0 else 0o400)
            if os.fstat(fd).st_ctime_ns > first:
                return True
        return False
    finally:
        os.close(fd)
        os.unlink(name)


def _walk(root: Path) -> dict[str, _Stat]:
    """Every file, link or other non-folder under ``root`` (not following links) → its stat
    key; folders are walked, not listed."""
    out: dict[str, _Stat] = {}
    for rel, e in treewalk.entries(root):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:  # e.g. a path longer than the system allows: there, so a change
            out[rel] = _UNREADABLE
            continue
        if not stat.S_ISDIR(st.st_mode):
            out[rel] = _key(st)
    return out


def blob_id(data: bytes, algorithm: str = "sha1") -> str:
    """The git object id (hex) of a blob holding ``data``, in ``algorithm`` ("sha1", or
    "sha256" for a repository with that object format)."""
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def _git_entry(path: Path, algorithm: str) -> tuple[str, str] | None:
    """(git mode, blob id) of what is at ``path`` now, as git would record it without
    conversion; None for a folder, a special file or nothing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        mode, data = "120000", os.fsencode(os.readlink(path))
    elif stat.S_ISREG(st.st_mode):
        mode = "100755" if st.st_mode & stat.S_IXUSR else "100644"
        try:
            data = path.read_bytes()
        except OSError:
            return None
    else:
        return None
    return mode, blob_id(data, algorithm)
