"""Worktrees used again: a finished attempt's tree, reset to the next attempt's start (issue 18).

Writing an attempt's worktree creates an inode per file, and throwing it away frees them. On
ext4 without a journal (the root filesystem of the virtual machines andon is tested on), the
kernel will not hand out an inode freed in the last minute or more and checks every such one
on its way to a free one (``recently_deleted`` in fs/ext4/ialloc.c): right after a worktree
of 6,000 files was deleted, writing the next one took 1.1-1.9 s instead of 0.25 s, 70 % of
it in that check (``perf``; benchmarks/README.md, twenty-third pass). A tree used again
allocates and frees almost nothing.

Nothing in a used tree is trusted: an agent worked there, and the code it wrote ran there.
:func:`reset` makes it what a fresh clone of the new branch would be:

- its ``.git`` is set aside whole and replaced by the ``.git`` of a fresh ``--no-checkout``
  clone (the clone ``worktrees.add_worktree`` makes, less its checkout);
- every entry is ``lstat``-ed from folders opened without following a link, and kept only
  when the new commit holds it as exactly what git would write: a folder or a regular file
  (never a link: git writes those again) with the blob's size and no more disk than that
  size needs (no space allocated past its end), one link, and the permissions, owner,
  group, extended attributes (ACLs, security labels) and settable inode flags (``chattr``)
  that a file or folder made in the same place now gets — one of each is made beside the
  tree and read (:func:`_expected`), so the umask, a setgid root, a default ACL or a label
  are what they are for a fresh clone; a folder also no larger than its names need (ext4
  never shrinks one). Anything else goes, a folder whole, and what is kept gets the
  current time (the last occupant's times could carry a message to the next);
- git reads the commit into a new index and hashes every file left (``update-index
  --refresh``: no stat data to trust); ``git status --ignored`` may then name only tracked
  files that differ or are missing, and git writes those.

A tree is not used again, and the fresh clone is made as before, when a checkout's bytes may
differ from the blobs (a ``.gitattributes`` in the commit, ``core.autocrlf``/``core.eol``,
an ``includeIf`` in git's settings, a ``.git/info/attributes`` from ``init.templateDir``),
when the commit has submodules, when the last occupant left more entries than the commit has
files (removing them one by one would cost more than a clone), or when any step fails.
``[andon] keep_worktrees`` keeps every tree where it is, as before.

What a kept file still shows of its past: its inode number and birth time, and the order in
which a folder lists its names — what only writing every file again would change.

The limit: a process the last occupant left running with a descriptor open in the tree can
still write there after the reset — as one can into a fresh worktree, whose path is
predictable; the harness kills what an agent leaves behind (``contain/procgroup``), and
under the agent sandbox the worktree root is hidden.

Only trees of :data:`MIN_FILES` files or more, on a disk (not a tmpfs, where creating and
deleting files costs little), wait in the worktree root, as
``.andon-pool-*`` (at most :data:`CAP`); a run empties the pool when it ends (:func:`flush`),
and a tree a killed run left there is used or emptied by the next.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import stat
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import plain_file, reaper, treewalk
from .errors import AndonError
from .mounts import filesystem_type

POOL = ".andon-pool-"
CAP = 4  # trees waiting in one worktree root; more are deleted as before
# Below this many files a fresh clone costs about what a reset does on any disk: a reset runs
# seven git processes to a clone's two (~9 ms more here), and writing 200 files costs 5-8 ms
# where creating one takes 25-40 µs, 0.1 s after deletions on ext4 without a journal
MIN_FILES = 200
IN_MEMORY = ("tmpfs", "ramfs")  # filesystems where trees are not kept (put)
SPARE_ENTRIES = 1000  # entries a folder may hold beyond its commit's before it goes whole

_FS_IOC_GETFLAGS = 0x80086601
# Every inode flag a process can set (chattr's letters s u c S i a d A m E j t D T V C x P F;
# linux/fs.h): each changes what the next agent can do with the entry or with what it
# creates inside (a folder's flags pass to new files), and none is on what git writes. The
# flags the filesystem sets itself (extents, inline data, a folder's hashed index) are fine.
_SET_BY_CHATTR = 0x6293CCFF


class NotReusable(AndonError):
    """This tree cannot become the new worktree; the message says why. The caller makes a
    fresh clone."""


def put(path: Path) -> bool:
    """Move the finished worktree at ``path`` into the pool beside it (one ``rename``: the
    path is free at once). False when it is not an andon clone (no ``.git`` folder), holds
    fewer than :data:`MIN_FILES` files, is in memory (a tmpfs: there a fresh clone of 6,000
    files took 0.16 s against a reset's 0.27 s, for the same CPU), or the pool is full: the
    caller removes it as before."""
    try:
        dot_git = os.lstat(path / ".git")
        if not stat.S_ISDIR(os.lstat(path).st_mode) or not stat.S_ISDIR(dot_git.st_mode):
            return False
        if _files(path / ".git" / "index") < MIN_FILES or len(_waiting(path.parent)) >= CAP \
                or filesystem_type(path.parent) in IN_MEMORY:
            return False
        os.rename(path, tempfile.mkdtemp(prefix=POOL, dir=path.parent) + "/tree")
    except OSError:
        return False
    return True


def _files(index: Path) -> int:
    """The entry count in the header of git's index file (0 when unreadable): the tree's
    size as the last occupant left it, a hint for whether to keep it and never trusted
    for anything else (the reset checks every entry)."""
    try:
        with plain_file.open_regular(index) as f:
            head = f.read(12)
    except OSError:  # none, or not a regular file (plain_file.NotPlain)
        return 0
    return struct.unpack(">I", head[8:12])[0] if head[:4] == b"DIRC" and len(head) == 12 else 0


def take(root: Path) -> Path | None:
    """Claim a tree waiting in ``root``'s pool: it is renamed into a folder of this process's
    (``.andon-trash-<pid>-*``, which the next run's sweep deletes if this process dies) and
    that path returned, or None when none could be claimed (another process took it first)."""
    for folder in _waiting(root)[:2 * CAP]:  # names planted by the thousand cost no time
        # a name planted there may be a link to a folder elsewhere that holds a "tree":
        # nothing is reached through a link
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        staging = Path(tempfile.mkdtemp(prefix=f"{reaper.TRASH}{os.getpid()}-", dir=root))
        try:
            if os.fstat(fd).st_uid != os.geteuid():
                raise OSError("not ours")
            os.rename("tree", staging / "tree", src_dir_fd=fd)
        except OSError:
            staging.rmdir()
            continue
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            folder.rmdir()
        return staging / "tree"
    return None


def flush(root: Path) -> int:
    """Delete (in the background) every tree waiting in ``root``'s pool; how many."""
    waiting = _waiting(root)
    for folder in waiting:
        reaper.discard(folder, aside=True)
    return len(waiting)


def _waiting(root: Path) -> list[Path]:
    try:
        return [root / n for n in sorted(os.listdir(root)) if n.startswith(POOL)]
    except OSError:
        return []


def reuse(git: Callable[..., str], path: Path, start: str,
          clone: Callable[[Path], Path]) -> tuple[bool, str | None]:
    """Make the worktree ``path`` from a tree waiting in the pool beside it, reset to
    ``start`` (:func:`reset`) with the ``.git`` that ``clone(folder)`` makes (a fresh clone
    of the branch without its checkout; returns its ``.git``). Returns (True, None) when it
    did; (False, None) when no tree waits, and (False, why) when the one taken could not be
    used: then nothing is left at ``path``, and the caller clones afresh."""
    tree = take(path.parent)
    if tree is None:
        return False, None
    try:
        new_git_dir = clone(Path(tempfile.mkdtemp(dir=tree.parent)) / "clone")
        reset(git, tree, new_git_dir, start)
        os.rename(tree, path)
        return True, None
    except (AndonError, OSError) as exc:
        return False, str(exc) or type(exc).__name__
    finally:
        reaper.discard(tree.parent)  # what the reset set aside, or the whole tree


def reset(git: Callable[..., str], tree: Path, new_git_dir: Path, start: str) -> None:
    """Make ``tree`` a checkout of ``start`` that equals a fresh clone's (module doc):
    ``new_git_dir`` (a fresh ``--no-checkout`` clone's ``.git``, on the same filesystem)
    replaces its ``.git``. ``tree``'s folder stands where the worktree's will (what a new
    entry gets there is read from one made beside it). ``git(*args, cwd=..., check=...,
    input=...)`` runs git and returns its output (``Repo.git``). NotReusable when a
    condition of the module doc does not hold; GitError or OSError when a step fails.
    Either way the caller discards ``tree``."""
    want = _expected(tree.parent)
    if _meta(os.fspath(tree), None, True) != want["dir"]:
        raise NotReusable("the tree's own folder is not as git makes one")
    reaper.discard(tree / ".git", aside=True, into=tree.parent)
    os.rename(new_git_dir, tree / ".git")
    files = _blobs(git, tree, start)
    _keep_only(tree, files, want, tree.parent)
    os.utime(tree)
    git("read-tree", start, cwd=tree)
    git("update-index", "-q", "--refresh", cwd=tree, check=False)  # 1: some need writing
    stale = []
    for entry in filter(None, git("status", "--porcelain=v1", "-z", "--ignored=matching",
                                  "--untracked-files=all", "--no-renames", cwd=tree
                                  ).split("\0")):
        if entry[:2] not in (" M", " D", " T"):  # only a tracked file's bytes may differ
            raise NotReusable(f"the reset tree still differs from {start[:10]}: {entry!r}")
        stale.append(entry[3:])
    if stale:
        git("checkout-index", "-q", "-f", "-u", "-z", "--stdin", cwd=tree,
            input=b"".join(os.fsencode(p) + b"\0" for p in stale))


def _blobs(git: Callable[..., str], tree: Path, start: str) -> dict[str, tuple[str, int]]:
    """Repo-relative path → (git mode, size in bytes) of every entry of ``start``;
    NotReusable for what makes a checkout's bytes or layout more than the blobs (attributes,
    submodules)."""
    # andon's git reads no attributes file outside the repository (core.attributesFile is
    # /dev/null for each of its commands: git.repo.Repo._run)
    # (an includeIf may hold either and match the worktree's path but not this one's)
    listed = git("config", "-z", "--get-regexp", r"^(core\.(autocrlf|eol)$|includeif\.)",
                 cwd=tree, check=False)
    for entry in filter(None, listed.split("\0")):
        key, _, value = entry.partition("\n")
        if not (key == "core.autocrlf" and value.lower() in ("false", "input", "no", "off")):
            raise NotReusable(f"git's {key} may make a checkout differ from the blobs")
    # what init.templateDir put there is in every clone's .git
    with contextlib.suppress(FileNotFoundError):
        if os.stat(tree / ".git" / "info" / "attributes").st_size:
            raise NotReusable("the clone's .git/info/attributes may convert what it checks out")
    files: dict[str, tuple[str, int]] = {}
    for line in filter(None, git("ls-tree", "-r", "-l", "-z", "--full-tree", start,
                                 cwd=tree).split("\0")):
        meta, _, path = line.partition("\t")
        mode, _kind, _oid, size = meta.split()
        if mode == "160000":
            raise NotReusable("the commit has submodules")
        if path == ".gitattributes" or path.endswith("/.gitattributes"):
            raise NotReusable("the commit has a .gitattributes")
        files[path] = (mode, int(size))
    return files


def _keep_only(tree: Path, files: dict[str, tuple[str, int]], want: dict[str, tuple],
               outside: Path) -> None:
    """Remove from ``tree`` (its ``.git`` aside) every entry a fresh checkout of ``files``
    would not have exactly so (module doc); a folder removed goes to ``outside`` first.
    Every name is reached from a folder opened without following a link (a folder swapped
    for a link while this runs leads nowhere else), and the walk keeps its own stack.
    NotReusable past ``len(files) + SPARE_ENTRIES`` removals: a fresh clone costs less."""
    folders = {p.rpartition("/")[0] for p in files}
    for f in list(folders):
        while f:
            f = f.rpartition("/")[0]
            folders.add(f)
    children: collections.Counter[str] = collections.Counter()
    dirents: collections.Counter[str] = collections.Counter()  # ext4's bytes for the names
    for p in (*files, *folders):
        if p:
            parent, _, name = p.rpartition("/")
            children[parent] += 1
            dirents[parent] += (8 + len(os.fsencode(name)) + 3) // 4 * 4
    budget = len(files) + SPARE_ENTRIES
    opened = treewalk.Folders(tree)
    try:
        stack = [""]
        while stack:
            rel = stack.pop()
            at = opened.fd(rel)
            if at is None:
                raise NotReusable(f"{rel or 'the tree'} is no longer a folder")
            with os.scandir(at) as it:
                names = [e.name for e in itertools.islice(it, children[rel] + SPARE_ENTRIES + 1)]
            if len(names) > children[rel] + SPARE_ENTRIES:
                # thousands of leftovers: the folder goes whole, git writes its files again
                # (one by one they cost seconds, and the folder would stay as large)
                if not rel:
                    raise NotReusable("the tree holds thousands of entries its commit does not")
                parent, _, name = rel.rpartition("/")
                up = opened.fd(parent)
                if up is None:
                    raise NotReusable(f"{parent or 'the tree'} is no longer a folder")
                _remove(name, up, os.stat(name, dir_fd=up, follow_symlinks=False), outside)
                continue
            for name in names:
                path = f"{rel}/{name}" if rel else name
                if path == ".git":
                    continue
                st = os.stat(name, dir_fd=at, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    # a folder grown by names since deleted stays that large on ext4
                    keep = path in folders and st.st_size <= 8192 + 4 * dirents[path] \
                        and _meta(name, at, True) == want["dir"]
                    if keep:
                        stack.append(path)
                else:
                    keep = _as_git_writes(name, at, st, files.get(path), want)
                if not keep:
                    budget -= 1
                    if budget < 0:
                        raise NotReusable("more leftovers than the commit has files")
                    _remove(name, at, st, outside)
                else:  # its times are now, as a checkout's: the last occupant's say nothing
                    os.utime(name, dir_fd=at, follow_symlinks=False)
    finally:
        opened.close()


def _as_git_writes(name: str, at: int, st: os.stat_result, blob: tuple[str, int] | None,
                   want: dict[str, tuple]) -> bool:
    """Whether entry ``name`` of the folder ``at`` is what git writes for ``blob`` ((mode,
    size); None: nothing) as far as metadata tell: git then hashes it. A link is never kept
    (git writes one in no time, and a link's group, links and attributes are the last
    occupant's); nor a file of another size than the blob's (a sparse file of terabytes
    costs its maker nothing and git hours to hash), nor one holding more disk than its size
    needs (space allocated past its end would stay taken under the next agent's tests)."""
    if blob is None or blob[0] not in want:
        return False
    block = max(st.st_blksize, 4096)
    return (stat.S_ISREG(st.st_mode) and st.st_size == blob[1] and st.st_nlink == 1
            and st.st_blocks * 512 <= (st.st_size + block - 1) // block * block + block
            and _meta(name, at, False) == want[blob[0]])


def _expected(where: Path) -> dict[str, tuple]:
    """What a new entry gets in ``where`` (:func:`_meta`), as git makes it: "dir" for a
    folder (``mkdir`` 0777), "100644" and "100755" for a file (``open`` with 0666 or 0777),
    each read from one made there now and removed. So the umask, a setgid root's group and
    bit, a default ACL, a security label and a flag the root passes on are what they are
    for a fresh clone."""
    probe = Path(tempfile.mkdtemp(dir=where))
    out: dict[str, tuple] = {}
    try:
        os.mkdir(probe / "dir", 0o777)
        for kind, perms in (("dir", 0), ("100644", 0o666), ("100755", 0o777)):
            if perms:
                os.close(os.open(probe / kind, os.O_WRONLY | os.O_CREAT | os.O_EXCL, perms))
            meta = _meta(os.fspath(probe / kind), None, kind == "dir")
            if meta is None:
                raise NotReusable("a new file's metadata cannot be read here")
            out[kind] = meta
    finally:
        reaper.delete_tree(probe)
    return out


def _meta(name: str, at: int | None, folder: bool) -> tuple | None:
    """(permissions, owner, group, extended attributes with their values, the inode flags
    a process can set) of the folder or regular file ``name`` (in the folder ``at``; None:
    a path), opened without following a link; None when it cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | (os.O_DIRECTORY if folder else 0), dir_fd=at)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        xattrs = tuple(sorted((x, os.getxattr(fd, x)) for x in os.listxattr(fd)))
        try:
            flags = struct.unpack("i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, b"\0" * 4))[0]
        except OSError:  # a filesystem without inode flags
            flags = 0
        return (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, xattrs, flags & _SET_BY_CHATTR)
    except OSError:
        return None
    finally:
        os.close(fd)


def _remove(name: str, at: int, st: os.stat_result, outside: Path) -> None:
    try:
        if stat.S_ISDIR(st.st_mode):
            # out of the tree at once, deleted in the background whatever the agent did to
            # its permissions (reaper.delete_tree)
            trash = Path(tempfile.mkdtemp(prefix=f"{reaper.TRASH}{os.getpid()}-", dir=outside))
            os.rename(name, trash / "tree", src_dir_fd=at)
            reaper.discard(trash)
        else:
            os.unlink(name, dir_fd=at)
    except OSError as e:
        raise NotReusable(f"{name} cannot be removed: {e.strerror}") from e
