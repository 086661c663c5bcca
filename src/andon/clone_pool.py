"""Clones used again, reset to the commit asked for, instead of new ones (issue 18).

Writing a checkout of thousands of files and deleting it again is most of what an attempt
costs the harness on a large repository (6,000 files: about 3 s per checkout on this disk,
three per packet). While ``andon run`` is running, its :class:`ClonePool` keeps the trees it
handed out — the agent's worktree, the gates' fresh clones, the review's export — and
gives them out again, reset, so that the work is proportional to what changed:

1. the tree is renamed to the path asked for (a new temporary folder each time: nothing
   that knew the old path finds it) and its ``.git`` is deleted, whatever is in it — the
   code under test and the agent could write there (hooks, config, objects, index);
2. the tree is walked once with ``lstat``: every file or link whose stat key
   (:mod:`andon.treestat`) differs from the one recorded when the harness handed the tree
   out is deleted, and so is everything the harness did not write (untracked and ignored
   files, caches, nested repositories) and every folder that is new or has another mode
   or other extended attributes (a default ACL sets the modes of the files made in it);
   since the harness recorded the keys after the filesystem clock had moved past its own
   writes, any change since (even one restoring size and mtime) shows in the ctime. Keys
   recorded at an agent's snapshot are the agent's (modes git does not keep, bytes git
   converts on add): those files go whatever their key;
3. a new ``.git`` is made the way a new clone's is (``git clone --no-checkout``:
   ``--shared`` for the gates' clones, ``--no-local --single-branch`` for an agent, so it
   holds the base's history only), the index the harness's own checkout wrote last time
   (kept in this process's memory, out of reach of the code that ran in the tree) is put
   in, and git checks out the commit asked for: only the files that differ from it, or
   that step 2 deleted, are written;
4. git is asked whether anything differs (``git status --porcelain --ignored
   --untracked-files=all`` empty, ``HEAD`` at the commit): if anything does, or any step
   failed, the tree is deleted and a new clone made as before.

So a reset tree holds exactly the commit's files, with a ``.git`` as new as a new clone's;
what is not the same as a new clone: unchanged files keep their older mtime and inode (the
folders' times are set to now, so they carry no note from an earlier use). Trees whose
commit records a submodule, and ``agent_history = "shallow"`` worktrees, are never
pooled; a kept tree is not reset to a commit whose ``.gitattributes`` differ from its last
one's (a file git has no reason to write could be converted otherwise by a new clone),
and after a snapshot that changed them every file goes at the reset. The pool belongs to
the process that opened it (a forked worker makes new clones), holds at most ``limit``
idle trees, and deletes them when closed.

Raises GitError and UsageError from :mod:`andon.worktrees` (a new clone failing, a path
that exists); a failure while resetting a kept tree is never raised (a new clone is made).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import treestat, worktrees
from .errors import AndonError, UsageError
from .worktrees import Git, _rmtree

_POOLS: dict[Path, ClonePool] = {}  # by the repository's git dir


@dataclass
class _Record:
    """What the harness handed out: the commit, the index its own checkout wrote, the stat
    keys of every entry below the top but ``.git`` and the modes of the folders, recorded
    before the clock moved past the harness's writes (``trusted`` false: it did not move,
    and the tree is never reset, only deleted). ``agents``: files whose recorded key is the
    one an agent's write gave them (recorded at a snapshot, :meth:`ClonePool.moved`): their
    bytes and modes are the agent's, not a checkout's (a mode git does not record, bytes git
    converts on add, an extended attribute), so the reset deletes them whatever their key.
    ``xattrs``: the extended attributes (ACLs among them) of the folders that had any when
    the harness handed the tree out; a folder with others then is deleted at the reset."""

    sha: str
    index: bytes
    files: dict[str, treestat.Stat]
    dirs: dict[str, int]
    top_mode: int
    trusted: bool
    agents: frozenset[str] = frozenset()
    xattrs: dict[str, dict[str, bytes]] | None = None  # folder ("" the top) → its xattrs


@dataclass
class Changes:
    """One walk of a handed-out tree against its record: ``index`` (the bytes of the index
    git wrote for the recorded commit), ``changed`` (sorted paths of that index whose file
    is gone or has another stat key: written to, re-moded, replaced), ``added`` (sorted
    paths of files the index does not hold, ignored ones included, and of folders holding
    no file, these ending in "/"), and the walk itself (``seen``: path → stat key,
    ``dirs``: folder → mode). Every other file of the index holds what it held then."""

    index: bytes
    changed: list[str]
    added: list[str]
    seen: dict[str, treestat.Stat]
    dirs: dict[str, int]


def open_pool(repo: Git, limit: int = 4) -> ClonePool:
    """The pool for ``repo`` in this process, opened (made) if there is none. Close it with
    :meth:`ClonePool.close`."""
    pool = active(repo)
    if pool is None:
        pool = _POOLS[repo.git_dir] = ClonePool(repo, limit)
    return pool


def active(repo: Git) -> ClonePool | None:
    """The open pool for ``repo`` if this process opened one, else None."""
    pool = _POOLS.get(repo.git_dir)
    return pool if pool is not None and pool.pid == os.getpid() else None


def give_back(repo: Git, path: Path) -> bool:
    """Hand ``path`` back to ``repo``'s open pool if it came from there; True if taken (the
    path is then gone), False otherwise (the caller deletes it as before)."""
    pool = active(repo)
    return pool.give(path) if pool is not None else False


# git's own shortcuts that would let it skip looking at a file, off whatever the user's
# global configuration says
_LOOK = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
         "-c", "core.ignoreStat=false", "-c", "core.trustctime=true",
         "-c", "core.checkStat=default")


class ClonePool:
    """Idle trees of one repository and the records of those handed out (see the module
    docstring). ``counts``: how many trees were made new (``fresh``), reset and handed out
    again (``reused``), or found wrong at a reset and deleted (``discarded``)."""

    def __init__(self, repo: Git, limit: int = 4):
        self.repo, self.limit, self.pid = repo, limit, os.getpid()
        self.home = Path(tempfile.mkdtemp())  # idle trees, named neutrally
        self.idle: list[tuple[Path, _Record]] = []
        self.out: dict[Path, _Record] = {}
        self.counts = {"fresh": 0, "reused": 0, "discarded": 0}

    # -- handing out ---------------------------------------------------------------------

    def clone_at(self, sha: str, dest: Path) -> Path:
        """:func:`andon.worktrees.clone_at`'s result at ``dest`` (a clone detached at
        ``sha``, its objects borrowed through alternates), from a kept tree when one can be
        reset, else a new clone. GitError if git fails on a new clone."""
        return self._clone_at(self.repo.resolve(sha), Path(dest).resolve())

    def _clone_at(self, sha: str, dest: Path,
                  prepare: Callable[[Path, list[str]], list[str]] | None = None) -> Path:
        def new_git(tmp: Path) -> Path:
            return worktrees.clone_at(self.repo, sha, tmp, checkout=False) / ".git"

        def checkout(tree: Path) -> None:
            self.repo.git(*_LOOK, "checkout", "--quiet", "--force", "--detach", sha, cwd=tree)

        return self._hand_out(sha, dest, new_git, checkout, "(detached)",
                              lambda: worktrees.clone_at(self.repo, sha, dest), prepare)

    def add_worktree(self, path: Path, branch: str, start: str) -> Path:
        """:func:`andon.worktrees.add_worktree`'s result (history "full"): a single-branch
        clone of the new branch ``branch`` at ``start``, from a kept tree when one can be
        reset. UsageError if ``path`` exists; GitError if the branch exists."""
        path = worktrees._unresolved_last(path)
        if path.exists() or path.is_symlink():
            raise UsageError(f"worktree path already exists: {path}")
        sha = self.repo.resolve(start)
        self.repo.set_ref(f"refs/heads/{branch}", sha, "0" * 40)  # must not exist yet

        def new_git(tmp: Path) -> Path:
            return worktrees.add_worktree(self.repo, tmp, branch, sha, checkout=False,
                                          new_branch=False) / ".git"

        def checkout(tree: Path) -> None:
            self.repo.git(*_LOOK, "read-tree", "--reset", "-u", "HEAD", cwd=tree)

        return self._hand_out(sha, path, new_git, checkout, branch,
                              lambda: worktrees.add_worktree(self.repo, path, branch, sha,
                                                             new_branch=False))

    def export(self, sha: str, dest: Path, keep: Callable[[str], bool]
               ) -> tuple[dict[str, treestat.Stat], bool] | None:
        """``sha``'s files that ``keep`` accepts at ``dest`` with no ``.git`` (a kept tree
        reset, or a new clone, then its ``.git`` and the other files deleted), with the stat
        key of each file there and whether the clock moved past the harness's writes in
        time (else the keys prove nothing); None when the commit records a submodule (the
        caller exports another way). GitError if git fails on a new clone."""
        sha, dest = self.repo.resolve(sha), Path(dest).resolve()

        def strip(tree: Path, paths: list[str]) -> list[str]:
            _rmtree(tree / ".git")
            removed = [rel for rel in paths if not keep(rel)]
            for rel in removed:
                os.unlink(tree / rel)
            return removed

        self._clone_at(sha, dest, strip)
        record = self.out.get(dest)
        if record is None:  # a submodule: made new and not kept
            _rmtree(dest)
            return None
        return dict(record.files), record.trusted

    def changes(self, path: Path, sha: str) -> Changes | None:
        """What changed in a tree this pool handed out (and has not taken back) since it held
        commit ``sha`` — since it was handed out, or since :meth:`moved` — by one ``lstat``
        walk (:class:`Changes`). None when the pool cannot say (not its tree, another
        commit, keys not trusted)."""
        path = worktrees._unresolved_last(Path(path))
        record = self.out.get(path)
        if record is None or record.sha != sha or not record.trusted or path.is_symlink() \
                or not path.is_dir():  # replaced by a link: never walked through
            return None
        files, dirs = treestat.walk(path, skip_top=frozenset({".git"}))
        needed = {rel.rsplit("/", i)[0] for rel in files for i in range(1, rel.count("/") + 1)}
        return Changes(record.index,
                       sorted(p for p, k in record.files.items() if files.get(p) != k),
                       sorted([p for p in files if p not in record.files]
                              + [d + "/" for d in dirs if d not in needed]), files, dirs)

    def moved(self, path: Path, sha: str, index: bytes, seen: Changes) -> None:
        """The tree at ``path`` now holds commit ``sha`` — the snapshot of what was there
        when ``seen`` was walked (:meth:`changes`), read by git into ``index`` — so later
        :meth:`changes` and the reset start from there. Harness-side only: the walk came
        before git read the files, so a file written since has another key and counts as
        changed."""
        path = worktrees._unresolved_last(Path(path))
        old = self.out.get(path)
        if old is None:
            return
        paths = set(_listing(self.repo, sha)[0])
        files = {p: k for p, k in seen.seen.items() if p in paths}
        # what the harness did not write stays the agent's: a file with another key than
        # the harness recorded goes at the reset, a folder keeps the mode the harness saw
        # (one the agent made or re-moded then has another, and goes), and so does the top
        agents = old.agents | {p for p, k in files.items() if old.files.get(p) != k}
        if _attributes_differ(self.repo, old.sha, sha):  # the harness's files were written
            agents |= set(files)                         # under other attributes: all go
        needed = {rel.rsplit("/", i)[0] for rel in files for i in range(1, rel.count("/") + 1)}
        dirs = {d: old.dirs.get(d, -1) for d in seen.dirs if d in needed}
        xattrs = {d: x for d, x in (old.xattrs or {}).items() if d == "" or d in needed}
        self.out[path] = _Record(sha, index, files, dirs, old.top_mode,
                                 treestat.past_tick(path), frozenset(agents & paths), xattrs)

    def give(self, path: Path) -> bool:
        """Take back ``path`` if this pool handed it out: it is moved into the pool (kept
        for a later reset; deleted when it is no longer a real folder, when ``limit`` trees
        are idle, when its keys could not be trusted, or when a process still works in
        it). True if taken (the path is gone); False if this pool never handed it out."""
        path = worktrees._unresolved_last(Path(path))
        record = self.out.pop(path, None)
        if record is None:
            return False
        if path.is_symlink() or not path.is_dir() or len(self.idle) >= self.limit \
                or not record.trusted or _held(path.resolve()):
            if path.exists() or path.is_symlink():
                _rmtree(path)
            return True
        kept = Path(tempfile.mkdtemp(dir=self.home)) / "tree"
        try:
            os.rename(path, kept)
        except OSError:  # another filesystem: not kept
            _rmtree(path)
            return True
        self.idle.append((kept, record))
        return True

    def close(self) -> None:
        """Delete every idle tree and the pool's folder; trees still handed out are left
        where they are (their holders delete them). The pool is forgotten."""
        if _POOLS.get(self.repo.git_dir) is self:
            del _POOLS[self.repo.git_dir]
        for kept, _ in self.idle:
            _rmtree(kept)
        self.idle.clear()
        shutil.rmtree(self.home, ignore_errors=True)

    # -- inside --------------------------------------------------------------------------

    def _hand_out(self, sha: str, dest: Path, new_git: Callable[[Path], Path],
                  checkout: Callable[[Path], None], head: str, fresh: Callable[[], Path],
                  prepare: Callable[[Path, list[str]], list[str]] | None = None) -> Path:
        paths, gitlink = _listing(self.repo, sha)
        if gitlink:  # submodules: a new clone, never kept
            return fresh()
        unchanged: dict[str, treestat.Stat] | None = None
        while self.idle:
            # the one last given back: usually the nearest commit, so the fewest writes
            kept, record = self.idle.pop()
            unchanged = self._reset(kept, record, sha, dest, new_git, checkout, head, paths)
            if unchanged is not None:
                self.counts["reused"] += 1
                break
            self.counts["discarded"] += 1
            for gone in (kept, dest):
                if gone.exists() or gone.is_symlink():
                    self._discard(gone)
        else:
            fresh()
            self.counts["fresh"] += 1
        index = (dest / ".git" / "index").read_bytes()
        removed = prepare(dest, paths) if prepare is not None else []
        self.out[dest] = _record(dest, sha, index) if unchanged is None else \
            _record_known(dest, sha, index, paths, set(removed), unchanged, set(record.dirs))
        return dest

    def _discard(self, tree: Path) -> None:
        """Delete a tree found wrong at a reset; what cannot be deleted (an immutable file, a
        mount) is moved out of the way, beside it, so that a new clone can take its path
        (before the pool, such a leftover stayed in a gate's temporary folder as well)."""
        try:
            _rmtree(tree)
        except OSError:  # rmtree stopped at the first refusal: all the rest goes first
            shutil.rmtree(tree, ignore_errors=True)
            if tree.exists() or tree.is_symlink():
                os.rename(tree, Path(tempfile.mkdtemp(dir=tree.parent)) / "left")

    def _reset(self, kept: Path, record: _Record, sha: str, dest: Path,
               new_git: Callable[[Path], Path], checkout: Callable[[Path], None],
               head: str, paths: list[str]) -> dict[str, treestat.Stat] | None:
        """Steps 1-4 of the module docstring. Returns the files git had no reason to write
        (their keys unchanged since the record, their blob the same in both commits) with
        their keys; None when anything is not as it must be."""
        try:
            differ = _differ(self.repo, record.sha, sha)
            # another .gitattributes: a file git has no reason to write (same blob, same
            # key) may be written otherwise by a new clone (ident, eol, filter): not reused
            if _attributes_in(differ):
                return None
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.rename(kept, dest)
            if os.lstat(dest).st_mode != record.top_mode \
                    or _xattrs(dest) != (record.xattrs or {}).get("", {}):
                return None
            if (dest / ".git").exists() or (dest / ".git").is_symlink():
                _rmtree(dest / ".git")
            kept_files = _prune(dest, record)
            # made beside the tree, so that moving its .git in is a rename
            with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
                os.rename(new_git(Path(tmp) / "g"), dest / ".git")
            (dest / ".git" / "index").write_bytes(record.index)
            checkout(dest)
            if not self._clean(dest, sha, head):
                return None
            # a kept folder's times are now, as a new clone's (no note an earlier use left
            # there); a folder that refuses (immutable, append-only) is not a new clone's
            for rel in ("", *_parents(paths)):
                os.utime(dest / rel)
            for rel in differ:
                kept_files.pop(rel, None)
            return kept_files
        except (AndonError, OSError):
            return None

    def _clean(self, tree: Path, sha: str, head: str) -> bool:
        """git's word that ``tree`` holds exactly ``sha`` with ``HEAD`` on branch ``head``
        (or "(detached)") and nothing untracked or ignored: one ``git status``."""
        out = self.repo.git(*_LOOK, "status", "--porcelain=v2", "-z", "--branch", "--ignored",
                            "--untracked-files=all", cwd=tree).split("\0")
        lines = [x for x in out if x]
        return (all(x.startswith("# ") for x in lines) and f"# branch.oid {sha}" in lines
                and f"# branch.head {head}" in lines)


def _record(tree: Path, sha: str, index: bytes) -> _Record:
    """The record of ``tree`` as handed out now: every entry's key, empty folders deleted (a
    new clone has none), then the clock waited out past the harness's writes (nobody else
    writes here until this returns, so the keys are the ones handed out)."""
    files, dirs = treestat.walk(tree, skip_top=frozenset({".git"}))
    needed = {rel.rsplit("/", i)[0] for rel in files for i in range(1, rel.count("/") + 1)}
    for rel in sorted(set(dirs) - needed, key=len, reverse=True):
        shutil.rmtree(tree / rel, ignore_errors=True)
        dirs.pop(rel)
    xattrs = _folder_xattrs(tree, dirs)
    trusted = treestat.past_tick(tree)
    return _Record(sha, index, files, dirs, os.lstat(tree).st_mode, trusted, xattrs=xattrs)


def _prune(tree: Path, record: _Record) -> dict[str, treestat.Stat]:
    """Delete, below ``tree``, every entry whose stat key is not the recorded one and every
    folder not recorded with the same mode (what is missing, git writes again). Returns the
    files kept, with their keys."""
    kept: dict[str, treestat.Stat] = {}
    stack = [("", str(tree))]
    while stack:
        prefix, where = stack.pop()
        with os.scandir(where) as it:
            for e in it:
                rel = prefix + e.name
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if record.dirs.get(rel) == st.st_mode \
                            and _xattrs(e.path) == (record.xattrs or {}).get(rel, {}):
                        stack.append((rel + "/", e.path))
                    else:
                        _rmtree(Path(e.path))
                elif rel not in record.agents and record.files.get(rel) == (
                        key := treestat.key(st)):
                    kept[rel] = key
                else:
                    os.unlink(e.path)
    return kept


def _held(tree: Path) -> bool:
    """Whether a process other than this one has its working folder or root, an open file
    or a mapped file under ``tree`` (Linux ``/proc``; False where there is none): a helper
    that outlived its stage. A kept tree is renamed, and such a process follows it into its
    next use; a deleted tree takes nothing of its writes anywhere."""
    top = str(tree)
    below = top + "/"
    me = os.getpid()
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return False
    for pid in pids:
        if pid == me:
            continue
        base = f"/proc/{pid}"
        links = []
        for name in ("cwd", "root"):
            try:
                links.append(os.readlink(f"{base}/{name}"))
            except OSError:
                pass
        try:
            for fd in os.listdir(f"{base}/fd"):
                try:
                    links.append(os.readlink(f"{base}/fd/{fd}"))
                except OSError:
                    pass
        except OSError:
            pass
        if any(link == top or link.startswith(below) for link in links):
            return True
        try:
            with open(f"{base}/maps", "rb") as f:
                if os.fsencode(below) in f.read():
                    return True
        except OSError:
            pass
    return False


def _differ(repo: Git, a: str, b: str) -> list[str]:
    """The paths whose entry differs between commits ``a`` and ``b``."""
    out = repo._run(("diff-tree", "-r", "-z", "--name-only", "--no-renames", a, b),
                    None, None, True).stdout
    return [os.fsdecode(raw) for raw in out.split(b"\0") if raw]


def _attributes_in(paths: Iterable[str]) -> bool:
    return any(p.rsplit("/", 1)[-1] == ".gitattributes" for p in paths)


def _attributes_differ(repo: Git, a: str, b: str) -> bool:
    """Whether a ``.gitattributes`` differs between commits ``a`` and ``b``."""
    return _attributes_in(_differ(repo, a, b))


def _parents(paths: Iterable[str]) -> set[str]:
    """Every folder (relative) that holds one of ``paths``."""
    return {rel.rsplit("/", i)[0] for rel in paths for i in range(1, rel.count("/") + 1)}


def _record_known(tree: Path, sha: str, index: bytes, paths: list[str], removed: set[str],
                  unchanged: dict[str, treestat.Stat], before: set[str]) -> _Record:
    """:func:`_record` without a walk, after a reset: ``paths`` (the commit's files) less
    ``removed`` are there; those in ``unchanged`` were not written (their keys are known),
    the others git wrote (one ``lstat`` each: work proportional to what changed). Folders
    of ``before`` (the old record's) or of ``removed`` that no file needs now are deleted,
    as a new clone has no empty folder. Should git have rewritten a file counted here as
    unchanged, its key is another than the one recorded: it counts as changed later (read
    again, deleted at the next reset), never the other way round."""
    files = {p: unchanged.get(p) or treestat.key(os.lstat(tree / p))
             for p in paths if p not in removed}
    needed = _parents(files)
    for rel in sorted((before | _parents(removed)) - needed, key=len, reverse=True):
        shutil.rmtree(tree / rel, ignore_errors=True)
    dirs = {d: os.lstat(tree / d).st_mode for d in needed}
    xattrs = _folder_xattrs(tree, dirs)
    trusted = treestat.past_tick(tree)
    return _Record(sha, index, files, dirs, os.lstat(tree).st_mode, trusted, xattrs=xattrs)


def _xattrs(path: str | Path) -> dict[str, bytes]:
    """The extended attributes of ``path`` (not followed), {} where there are none or the
    filesystem has none."""
    try:
        return {n: os.getxattr(path, n, follow_symlinks=False)
                for n in os.listxattr(path, follow_symlinks=False)}
    except OSError:
        return {}


def _folder_xattrs(tree: Path, dirs: Iterable[str]) -> dict[str, dict[str, bytes]]:
    """The folders of ``tree`` ("" the top) that have extended attributes → those."""
    return {d: x for d in ("", *dirs) if (x := _xattrs(tree / d))}


def _listing(repo: Git, sha: str) -> tuple[list[str], bool]:
    """The paths of ``sha``'s files and links, and whether it records a submodule."""
    listing = repo._run(("ls-tree", "-r", "-z", "--full-tree", sha), None, None, True).stdout
    paths, gitlink = [], False
    for rec in listing.split(b"\0"):
        if rec:
            meta, _, raw = rec.partition(b"\t")
            gitlink = gitlink or meta.startswith(b"160000 ")
            paths.append(os.fsdecode(raw))
    return paths, gitlink
