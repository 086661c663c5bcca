"""Worktrees and snapshots: where an agent works, and how its work becomes a commit.

An attempt's worktree is a repository of its own (a single-branch clone, no remote, no
reflog); ``plant`` and ``snapshot`` make commits through a temporary index, never through a
checkout; ``export`` and ``clone_at`` give reviewers and gates a copy with no way back to
the user's history. :class:`andon.git.repo.Repo` offers each of these as a method; they
live here, beside their helpers, and are given the repository as a :class:`Git` (what they
use of it), so that the two modules do not import each other.

Raises GitError (a git command failed), UsageError (a path that exists, escapes the worktree
or holds the main work tree) and SnapshotError (defined here).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol

from . import reaper, treewalk, worktree_pool
from .errors import AndonError, UsageError
from .git import hazards, submodules
from .git.objects import Entry


class Git(Protocol):
    """What these functions use of a :class:`andon.git.repo.Repo`."""

    root: Path
    git_dir: Path

    def git(self, *args: str, cwd: Path | None = None, input: bytes | None = None,
            check: bool = True) -> str: ...

    def succeeds(self, *args: str, cwd: Path | None = None) -> bool: ...

    def resolve(self, rev: str) -> str: ...

    def set_ref(self, ref: str, new: str, expected_old: str | None) -> None: ...

    def commit_tree(self, tree: str, parent: str, message: str) -> str: ...

    def entries(self, rev: str) -> tuple[Entry, ...]: ...

    def kinds(self, rev: str, paths: list[str]) -> dict[str, str]: ...

    def _run(self, args: tuple[str, ...], cwd: Path | None, input: bytes | None,
             check: bool, env: Mapping[str, str] | None = None
             ) -> subprocess.CompletedProcess: ...


class SnapshotError(AndonError):
    """The worktree could not be read into a commit: gone, replaced by a link, or holding
    something git refuses (a nested repository without commits). What the agent left, not
    a harness fault; ``path`` is the repo-relative path git named, when it named one."""

    def __init__(self, message: str, path: str | None = None):
        self.path = path
        super().__init__(message)


# Written into the config of every clone andon makes (an agent's worktree, a gate's clone),
# where it lives minutes and is thrown away: a commit there (an agent's, or a test of the
# project that runs git) starts no `git maintenance run --auto` process, which for so young
# a repository only counts its objects. Never the user's repository: its housekeeping is
# theirs (andon's own commands there start none; pack_loose packs what andon wrote).
NO_AUTO_GC = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")

# For the git commands that write a whole tree (an attempt's worktree, a gate's clone, the
# review export): git's parallel checkout (2.32+; older gits ignore the key), a worker per
# core for trees of 100 files or more. Creating a file is the kernel's work, and after many
# deletions on ext4 it took ~200 µs a file here: 6,000 files in 1.0-1.4 s serially, 0.4-0.75
# s on two cores (benchmarks/README.md, twentieth pass).
PARALLEL_CHECKOUT = ("-c", "checkout.workers=0")


def add_worktree(repo: Git, path: Path, branch: str, start: str, history: str = "full") -> Path:
    """:func:`make_worktree`'s worktree, without saying how it was made."""
    return make_worktree(repo, path, branch, start, history)[0]


def make_worktree(repo: Git, path: Path, branch: str, start: str, history: str = "full"
                  ) -> tuple[Path, dict[str, str]]:
    """Create branch ``branch`` at ``start`` and give it a worktree at ``path`` that is a
    repository of its own: a single-branch clone of ``branch`` with no remote, no
    alternates, no tags and no other refs, so nothing in it leads to other branches, later
    commits or the repository's object store (catalogue kind 17, mining git history).
    ``history`` is "full" (every ancestor of ``start``: ``git log`` and blame work) or
    "shallow" (only ``start``; faster on very large repositories). The reflog, which
    names the repository it was cloned from, is removed. The user's
    ``user.name``/``user.email`` are copied (a stand-in when there are none) so an agent
    can commit. Submodules are checked out at the commits ``start`` records, from the
    user's checkout (:mod:`andon.git.submodules`). Returns the path and how the tree was
    written: ``{"made": "pool"}`` (a finished attempt's tree reset to ``start``:
    :mod:`andon.worktree_pool`) or ``{"made": "clone"}``, with ``"pool_refused": why`` when a
    waiting tree could not be used. GitError if the branch exists; UsageError
    if ``path`` exists or ``history`` is unknown."""
    if history not in ("full", "shallow"):
        raise UsageError(f"history must be 'full' or 'shallow', got {history!r}")
    path = _unresolved_last(path)
    if path.exists() or path.is_symlink():  # a dangling link would send the clone away
        raise UsageError(f"worktree path already exists: {path}")
    ref = f"refs/heads/{branch}"
    repo.set_ref(ref, start, "0" * 40)  # ZERO_SHA: must not exist yet
    # --no-local makes git send a pack of what ``branch`` reaches instead of hard-linking
    # or borrowing the whole object store; a file:// URL is needed for --depth.
    depth = ("--depth", "1") if history == "shallow" else ()
    clone = (*PARALLEL_CHECKOUT, "clone", "--quiet", "--no-local", "--single-branch",
             "--no-tags", *depth,
             *(a for key, value in _identity(repo).items() for a in ("-c", f"{key}={value}")),
             *NO_AUTO_GC, "--branch", branch, repo.git_dir.as_uri())

    def without_checkout(at: Path) -> Path:
        repo.git(*clone, "--no-checkout", str(at))
        _unlink_origin(repo, at)
        return at / ".git"

    reused, refused = worktree_pool.reuse(repo.git, path, start, without_checkout)
    made = {"made": "pool" if reused else "clone"}
    if refused:
        made["pool_refused"] = refused
    if not reused:
        repo.git(*clone, str(path))
        _unlink_origin(repo, path)
    submodules.populate(repo, path, repo.resolve(start))
    # git's own record of the checkout it just made, before any agent runs: the stat data
    # that lets the snapshot hash only what changed (copy2 keeps its mtime, by which git
    # tells racily clean entries)
    _copy_index(path / ".git" / "index", index_of(path))
    return path, made


def _copy_index(src: Path, dest: Path) -> None:
    """``src`` copied to ``dest`` with its mtime (by which git tells racily clean entries),
    or nothing: a name planted at ``dest`` (a link to a file elsewhere) is removed, never
    written through, and one planted again in between makes the copy give up."""
    with contextlib.suppress(OSError):
        dest.unlink(missing_ok=True)
        st = os.stat(src)
        data = src.read_bytes()
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fd)


def _unlink_origin(repo: Git, clone: Path) -> None:
    repo.git("remote", "remove", "origin", cwd=clone)
    # "clone: from <the user's repository>" (absent with core.logAllRefUpdates=false)
    shutil.rmtree(clone / ".git" / "logs", ignore_errors=True)


def index_of(worktree: Path) -> Path:
    """The harness's index of ``worktree``: beside it in the worktree root (which the agent
    sandbox hides), never inside it. Its entries must equal the tree of the commit a caller
    compares with (checked every time: :func:`index_at`); only its stat data is reused, so
    that ``git add`` and ``update-index --refresh`` hash only the files whose stat changed
    (issue 18: at 6,000 files every snapshot hashed all of them). The limit: a file rewritten
    to the same size with its mtime put back, within the same ctime tick (the same second,
    for a git built without nanosecond times) as the index's last record of it, is taken as
    unchanged. The snapshot then keeps the parent's bytes for it (what is judged is still
    what is merged), and the strays check calls the worktree clean, so the suite runs in a
    fresh clone of the candidate."""
    return worktree.parent / f".{worktree.name}.index"


def index_at(repo: Git, env: Mapping[str, str], worktree: Path, rev: str) -> None:
    """Make ``env``'s GIT_INDEX_FILE hold exactly ``rev``'s tree: kept when it already does
    (``diff-index --cached``: entries, modes and blob ids; stat data is only a hint git
    checks against the files, with ctime and inode), else read afresh from ``rev``."""
    index = Path(env["GIT_INDEX_FILE"])
    if index.is_file() and repo._run(
            ("diff-index", "--cached", "--quiet", "--no-renames", rev, "--"), worktree, None,
            False, env).returncode == 0:
        return
    repo._run(("read-tree", rev), worktree, None, True, env)

def _identity(repo: Git) -> dict[str, str]:
    """The user's name and email as git reads them (the last value wins), else a stand-in
    each, so that an agent's commit works: one git process for both."""
    last: dict[str, str] = {}
    listed = repo.git("config", "-z", "--get-regexp", r"^user\.(name|email)$", check=False)
    for entry in filter(None, listed.split("\0")):
        key, _, value = entry.partition("\n")
        last[key.lower()] = value  # an empty later value wins too, as with --get
    return {key: last.get(key, "").strip() or stand_in
            for key, stand_in in (("user.name", "agent"), ("user.email", "agent@andon.localhost"))}


def remove_worktree(repo: Git, path: Path, reuse: bool = False) -> None:
    """Remove the worktree at ``path`` whatever state the agent left it in (a directory
    already gone is fine), then prune git's records of linked worktrees — unless ``path``
    holds a ``.git`` folder (andon's worktrees are clones: git has no record of them, and
    the linked worktrees of an older andon hold a ``.git`` file). The path is free
    when this returns; the files are deleted in the background (:mod:`andon.reaper`), or,
    with ``reuse``, the tree waits for the next attempt's :func:`add_worktree`
    (:mod:`andon.worktree_pool`). The caller names only paths it created. UsageError for
    the top level or a path inside or around it."""
    path = _unresolved_last(path)
    if path == repo.root or repo.root.is_relative_to(path) or path.is_relative_to(repo.root):
        raise UsageError(f"refusing to remove {path}: it is or holds the main work tree")
    if reuse and worktree_pool.put(path):
        index_of(path).unlink(missing_ok=True)
        return
    dot_git = path / ".git"
    linked = not dot_git.is_dir() or dot_git.is_symlink()  # or gone: git may know of it
    if linked and path in list_worktrees(repo):  # a linked worktree from an older andon
        repo.git("worktree", "remove", "--force", "--force", str(path), check=False)
    reaper.discard(path, aside=True)  # the path is free now, the files go in the background
    index_of(path).unlink(missing_ok=True)
    if linked:
        repo.git("worktree", "prune")

def list_worktrees(repo: Git) -> list[Path]:
    """Every linked worktree git knows of, the main one first."""
    out = repo.git("worktree", "list", "--porcelain", "-z")
    return [Path(f[len("worktree "):]) for f in out.split("\0") if f.startswith("worktree ")]

def plant(repo: Git, base: str, files: Mapping[str, tuple[bytes, bool]], message: str) -> str:
    """A commit, child of ``base``, adding each file (relative path → (bytes, executable))
    even if .gitignore matches it, made with plumbing: no worktree, no ref moves. Returns
    its sha, or ``base`` when every file is already there identically.
    UsageError for a path that is absolute, has '..' or '.git', or runs through a file or
    symlink of ``base``."""
    base = repo.resolve(base)
    for rel in files:
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or ".git" in parts:
            raise UsageError(f"planted path must be relative inside the worktree, got {rel!r}")
    # what each folder on the way and each path is in base: one git process for them all
    kinds = repo.kinds(base, list(dict.fromkeys(
        "/".join(PurePosixPath(rel).parts[:i]) for rel in files
        for i in range(1, len(PurePosixPath(rel).parts) + 1))))
    entries = []
    for rel, source in files.items():
        parts = PurePosixPath(rel).parts
        for i in range(1, len(parts) + 1):  # a link or file on the way would be replaced
            kind = kinds["/".join(parts[:i])]
            if i < len(parts) and kind and kind != "tree":
                raise UsageError(f"planted path {rel!r} runs through "
                                 f"{'/'.join(parts[:i])!r}, which is not a directory")
            if i == len(parts) and kind == "tree":
                raise UsageError(f"planted path {rel!r} is a directory in the base")
        data, executable = source
        blob = repo.git("hash-object", "-w", "--no-filters", "--stdin", input=data).strip()
        mode = "100755" if executable else "100644"
        entries.append(f"{mode} {blob}\t{'/'.join(parts)}\0")
    with tempfile.TemporaryDirectory(prefix="andon-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        repo._run(("read-tree", base), None, None, True, env)
        repo._run(("update-index", "--add", "-z", "--index-info"), None,
                  "".join(entries).encode(), True, env)
        tree = repo._run(("write-tree",), None, None, True, env).stdout.decode().strip()
    if tree == repo.resolve(f"{base}^{{tree}}"):
        return base
    return repo.commit_tree(tree, base, message)

def snapshot(repo: Git, worktree: Path, parent: str, message: str) -> str:
    """Commit everything on disk in ``worktree`` (tracked and untracked, .gitignore
    respected; files tracked in ``parent`` kept even if .gitignore matches them) as a new
    commit whose only parent is ``parent``, whatever the agent did to the worktree's HEAD,
    branch, index, config or ``.git`` itself: the files are read into this repository's
    object store through the harness's index of the worktree (:func:`index_of`, made to hold
    ``parent``'s tree first) or a temporary one, and git never runs in the agent's repository
    (its config could name commands to run). Always a new commit, even if the tree equals
    the parent's. SnapshotError if ``worktree`` is gone, a symbolic link, inside the main
    work tree, or holds something git refuses to add."""
    worktree = _unresolved_last(worktree)
    if worktree.is_symlink():
        raise SnapshotError(f"the worktree {worktree} was replaced by a symbolic link")
    if not worktree.is_dir():
        raise SnapshotError(f"the worktree {worktree} is no longer a directory")
    if worktree.is_relative_to(repo.root):
        raise SnapshotError(f"{worktree} is inside the main work tree, not a worktree")
    if found := hazards.in_files(worktree):  # `git add --all` would wait on it for ever
        raise SnapshotError(hazards.describe(found, worktree, advice=False),
                            hazards.shown(found[0][0], worktree))
    parent = repo.resolve(parent)
    with tempfile.TemporaryDirectory(prefix="andon-index-") as tmp:
        own = index_of(worktree)
        env = {"GIT_INDEX_FILE": str(own if own.is_file() else Path(tmp) / "index"),
               "GIT_WORK_TREE": str(worktree), "GIT_DIR": str(repo.git_dir)}
        index_at(repo, env, worktree, parent)
        # the user's sparse-checkout rules are about their checkout, not the agent's
        # no untracked cache or file-system monitor: both trust what folder times or a
        # daemon say instead of looking, and the agent can set a folder's time back
        proc = repo._run(("-c", "core.sparseCheckout=false", "-c", "index.sparse=false",
                          "-c", "core.untrackedCache=false", "-c", "core.fsmonitor=false",
                          "add", "--all", "--", "."), worktree, None, False, env)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            named = re.search(r"'([^']+?)/?'", err)
            raise SnapshotError(f"git could not read the worktree: {err}",
                                named.group(1) if named else None)
        tree = repo._run(("write-tree",), worktree, None, True, env).stdout.decode().strip()
    return repo.commit_tree(tree, parent, message)

def export(repo: Git, rev: str, dest: Path, keep: Callable[[str], bool] = lambda p: True
           ) -> dict[str, str]:
    """Write the files of ``rev`` whose paths ``keep`` accepts into ``dest`` (created;
    no ``.git``, so nothing there leads back to the repository's history), and return
    their manifest (see :func:`manifest`)."""
    dest.mkdir(parents=True)
    data = repo._run(("archive", "--format=tar", rev), None, None, True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if m.isdir() or keep(m.name)]
        _extract(tar, dest, members)
    return treewalk.manifest(dest)

def _extract(tar: tarfile.TarFile, dest: Path, members: list[tarfile.TarInfo]) -> None:
    """Extract ``members`` into ``dest`` under PEP 706's ``data`` filter: nothing written
    outside ``dest``, no absolute link nor one leading out of it, no device. Pythons before
    3.11.4 (Debian 12's python3 is 3.11.2) have no filters: the same refusals are made here
    (and hard links, which ``git archive`` never writes, are refused too).
    Raises tarfile.TarError naming the member."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
        return
    root = dest.resolve()
    for m in members:
        path = root / m.name
        kind_ok = m.isreg() or m.isdir() or m.issym()
        link_ok = not m.issym() or (not os.path.isabs(m.linkname) and (
            path.parent / m.linkname).resolve().is_relative_to(root))
        if not (kind_ok and link_ok and path.resolve().is_relative_to(root)):
            raise tarfile.TarError(f"{m.name!r} would be written or lead outside {dest}")
    tar.extractall(dest, members=members)

def clone_at(repo: Git, rev: str, dest: Path) -> Path:
    """A fresh clone at ``dest`` checked out detached at ``rev``: only committed content, no
    untracked or ignored files from any worktree. ``rev`` may be on any branch or dangling.
    Submodules are checked out at the commits ``rev`` records (:mod:`andon.git.submodules`)."""
    sha, dest = repo.resolve(rev), Path(dest).resolve()
    # --shared borrows the source's object store through objects/info/alternates instead of
    # copying it (--no-hardlinks copies every object: slow on big repos). It also makes every
    # object readable, so a sha that no ref reaches (a snapshot not yet on a branch) checks
    # out without a fetch. The clone is short-lived, so the source pruning objects under it
    # is not a practical risk (gc keeps unreachable objects for two weeks by default).
    repo.git("clone", "--quiet", "--no-checkout", "--shared", *NO_AUTO_GC, str(repo.git_dir),
             str(dest))
    repo.git(*PARALLEL_CHECKOUT, "checkout", "--quiet", "--detach", sha, cwd=dest)
    submodules.populate(repo, dest, sha)
    return dest


# Loose objects from which a pack is worth making before clones read them (``git gc --auto``
# waits for 6,700): each loose object is a file of its own, zlib-compressed on its own, so a
# clone of 6,000 loose files took 1.2 s of CPU against 0.3 s packed (issue 18).
LOOSE_LIMIT = 500


def pack_loose(repo: Git, at_least: int = LOOSE_LIMIT) -> int:
    """Put the repository's loose objects into one new pack when there are ``at_least`` of
    them, so that every clone andon makes (the worktree's ``--no-local`` clone packs what it
    sends; checkouts read blobs) reads packs: ``git repack -d -l -n`` — incremental (no
    ``-a``: existing packs are left as they are, the work is proportional to what is
    loose), only this repository's own objects (``-l``: not its alternates'), no
    ``info/refs`` update (``-n``). Only storage changes: no ref, object or file of the
    checkout; git's own ``gc --auto`` does the same. Returns how many loose objects there
    were when it packed, else 0. GitError if git fails."""
    loose = loose_objects(repo.git_dir / "objects")
    if loose < at_least:
        return 0
    repo.git("repack", "-d", "-l", "-n", "-q")
    return loose


# a loose object's folder (its id's first two hex digits) and file name (the rest)
_LOOSE_FOLDER = re.compile(r"[0-9a-fA-F]{2}")
_LOOSE_NAME = re.compile(r"[0-9a-fA-F]{38}|[0-9a-fA-F]{62}")


def loose_objects(objects: Path) -> int:
    """How many loose objects the object folder ``objects`` holds, counted as ``git
    count-objects`` counts them (files in ``objects/<2 hex digits>/`` named by the rest of a
    SHA-1 or SHA-256 id; anything else there is git's "garbage"), without its process: a
    listing of up to 256 folders. 0 when there is no such folder."""
    count = 0
    with contextlib.suppress(FileNotFoundError):
        for folder in os.scandir(objects):
            if _LOOSE_FOLDER.fullmatch(folder.name) and folder.is_dir():
                count += sum(1 for f in os.scandir(folder.path) if _LOOSE_NAME.fullmatch(f.name))
    return count


def _unresolved_last(path: Path) -> Path:
    """``path`` with its parent resolved but not its last component, so that a worktree the
    agent replaced by a symbolic link is seen as the link, never as what it points to."""
    path = Path(path)
    return path.parent.resolve() / path.name
