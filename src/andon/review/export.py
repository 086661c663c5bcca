"""The review stage's copy of the candidate: written by git, checked by stat.

A reviewer reads the candidate's files in a plain directory (no ``.git``, so nothing there
leads back to the history, and ``review-correctness`` cannot ``git show`` the tests it must
not see) and must change nothing in it. The old way — ``git archive`` into memory, Python's
tarfile writing every file, a sha256 of every file before and after the reviewer — cost
seconds on a repository of 6,000 files (issue 18). Here:

- the worktree's files that are the candidate's are hard-linked (no inode to allocate:
  :func:`_link`); git writes the others (``checkout-index`` from a temporary index holding
  only the paths the reviewer may see), in C, straight from the object store;
- each file's ``lstat`` (inode, mode, size, mtime, ctime in nanoseconds) is recorded, and the
  filesystem clock is waited out past the last write (one tick, a few milliseconds; see
  :func:`_past_tick`), so that any later write, rename, link or ``chmod`` gives the entry a
  later ctime — which no process can set back; a linked file is read against its blob only
  then, and written by git instead when it differs;
- after the reviewer, the directory is walked once (``lstat`` only) and the entries whose
  stat changed are read, against their blob's git hash, with every linked one (a page
  mapped before the export takes writes that move no timestamp): a file merely touched is
  not a change (as before), one edited with its size and mtime restored is.

Raises GitError (a git command failed) and UsageError (``dest`` exists).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import plain_file, treewalk
from ..errors import UsageError
from ..git.repo import Repo
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
    # hard links to the worktree's files: read at every check, whatever their stat, since a
    # page of one mapped and dirtied before the export takes later stores without moving
    # its mtime or ctime (tests/test_review_export_links.py)
    linked: frozenset[str] = frozenset()

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
        root = os.fspath(self.root)  # joined as strings: a Path per entry was a third of it
        for path, (mode, blob, before) in self.entries.items():
            now = seen.get(path)
            if now is None:
                out.append(path)
            elif now != before or not self.trusted_stat or path in self.linked:
                algorithm = "sha256" if len(blob) == 64 else "sha1"
                if _git_entry(os.path.join(root, path), algorithm) != (mode, blob):
                    out.append(path)
        return sorted(out)


def _bytecode_cache(path: str) -> bool:
    parts = path.split("/")
    return "__pycache__" in parts[:-1] or parts[-1].endswith((".pyc", ".pyo"))


def export_tree(repo: Repo, rev: str, dest: Path, keep: Callable[[str], bool] = lambda p: True,
                linked_from: Path | None = None) -> ExportedTree:
    """Write the files of ``rev`` whose repo-relative paths ``keep`` accepts into ``dest``
    (created, with its parents; no ``.git``) and return the :class:`ExportedTree` that checks
    it later. Submodules (gitlinks) are left out, as ``git archive`` left them out. Time:
    git's checkout of the kept files plus one ``lstat`` each, or a link and a read of each
    file linked.
    ``linked_from`` (the attempt's worktree, on the same filesystem): each regular file there
    is hard-linked instead when it is ``rev``'s, read after its stat was recorded
    (:func:`_link`). UsageError if ``dest`` exists; GitError if ``rev`` is not a commit."""
    dest = Path(dest)
    if dest.exists() or dest.is_symlink():
        raise UsageError(f"export destination already exists: {dest}")
    sha = repo.resolve(f"{rev}^{{commit}}")
    entries = {e.path: (e.mode, e.sha) for e in repo.entries(sha)
               if e.kind == "blob" and keep(e.path)}
    dest.mkdir(parents=True)
    linked = _link(linked_from, dest, entries) if linked_from is not None else set()
    _checkout(repo, dest, {p: e for p, e in entries.items() if p not in linked})
    trusted = _past_tick(dest)
    seen = _walk(dest)
    # a linked file's bytes are the worktree's: read now, after the stat above was taken,
    # so that a write before it shows here and one after it changes that stat
    algorithm = "sha256" if len(sha) == 64 else "sha1"
    at = os.fspath(dest)
    wrong = {p: entries[p] for p in linked
             if os.lstat(os.path.join(at, p)).st_nlink != 2
             or _git_entry(os.path.join(at, p), algorithm) != entries[p]}
    if wrong:
        for p in wrong:
            os.unlink(os.path.join(at, p))
        _checkout(repo, dest, wrong)
        trusted = _past_tick(dest) and trusted
        seen.update({p: _key(os.lstat(os.path.join(at, p))) for p in wrong})
    tree = ExportedTree(dest, trusted_stat=trusted, linked=frozenset(linked - wrong.keys()))
    for path, (mode, blob) in entries.items():
        if path in seen:
            tree.entries[path] = (mode, blob, seen[path])
    return tree


def _checkout(repo: Repo, dest: Path, entries: dict[str, tuple[str, str]]) -> None:
    """git writes ``entries`` (path → (mode, blob)) under ``dest``."""
    if not entries:
        return
    with tempfile.TemporaryDirectory(prefix="andon-export-") as tmp:
        # a temporary index of exactly these files; git writes them under dest, reading
        # nothing from dest (no .git there) and running no filter of the checkout's
        index_info = b"".join(f"{mode} {blob}\t".encode() + os.fsencode(p) + b"\0"
                              for p, (mode, blob) in entries.items())
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        repo._run(("update-index", "--add", "-z", "--index-info"), None, index_info, True, env)
        repo._run((*PARALLEL_CHECKOUT, "checkout-index", "--all", "--force",
                   f"--prefix={dest}/"), None, None, True, env)


def _link(source: Path, dest: Path, entries: dict[str, tuple[str, str]]) -> set[str]:
    """Hard-link into ``dest`` each regular file of ``entries`` that ``source`` holds as git
    would write it — the permissions git gives its mode under this process's umask, no
    other link, no extended attribute (a note to the reviewer, an ACL) — and return their
    paths. A link allocates no inode: 6,000 files in 0.11-0.13 s in any state of this
    machine's disk, where git's writes took 0.06-1.3 s (benchmarks/README.md, nineteenth and
    twentieth passes). Each folder of ``source`` is opened without following a symbolic
    link (:class:`andon.treewalk.Folders`), and a linked name must still be the inode its
    checks were made on, so nothing outside ``source`` is reached; other filesystems
    (EXDEV) link nothing. The bytes are not read here: :func:`export_tree` reads them once
    the stat is recorded, and every check after the reviewer reads them again. A
    reviewer's write to a linked file reaches the worktree's too; it is found as any change
    (:meth:`ExportedTree.changed`), and the attempt fails."""
    umask = treewalk.umask()
    if umask is None:
        return set()
    linked: set[str] = set()
    folders = treewalk.Folders(source)
    to = os.fspath(dest)
    made = {""}  # folders of dest made so far
    try:
        for path, (mode, _blob) in entries.items():
            want = {"100644": 0o666 & ~umask, "100755": 0o777 & ~umask}.get(mode)
            parent, _, name = path.rpartition("/")
            at = folders.fd(parent) if want is not None else None
            if at is None:
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=at)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1
                        or stat.S_IMODE(st.st_mode) != want or os.listxattr(fd)):
                    continue
                _made(to, parent, made)
                target = os.path.join(to, path)
                os.link(name, target, src_dir_fd=at, follow_symlinks=False)
                if not os.path.samestat(os.lstat(target), st):  # the name was swapped
                    os.unlink(target)
                    continue
            except OSError as e:
                if e.errno == errno.EXDEV:
                    break
                continue
            finally:
                os.close(fd)
            linked.add(path)
    finally:
        folders.close()
    return linked


def _made(dest: str, rel: str, made: set[str]) -> None:
    """Folder ``rel`` of ``dest`` and those above it made, in a loop (pathlib's ``mkdir``
    recurses once per level); ``made`` holds those already there."""
    missing = []
    while rel not in made:
        missing.append(rel)
        rel = rel.rpartition("/")[0]
    for folder in reversed(missing):
        os.mkdir(os.path.join(dest, folder))
        made.add(folder)


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


def _git_entry(path: str, algorithm: str) -> tuple[str, str] | None:
    """(git mode, blob id) of what is at ``path`` now, as git would record it without
    conversion; None for a folder, a special file or nothing. What is read is what was
    looked at: an entry gone or swapped for another kind in between (a process of the
    reviewer's racing the check) is None, so it differs from any blob."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            return "120000", blob_id(os.fsencode(os.readlink(path)), algorithm)
        except OSError:  # not a link any more
            return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        # a link or a FIFO swapped in since the lstat is not opened (plain_file.NotPlain)
        with plain_file.open_regular(path) as f:
            now = os.fstat(f.fileno())
            data = f.read()
    except OSError:
        return None
    return "100755" if now.st_mode & stat.S_IXUSR else "100644", blob_id(data, algorithm)
