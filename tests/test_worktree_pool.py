"""A finished attempt's worktree used again for the next (issue 18, worktree_pool.py): the
tree an agent leaves is hostile, and what the next attempt gets must be exactly what a fresh
clone of its branch would be — whatever the last occupant did to files, links, permissions,
extended attributes or ``.git``."""

import ctypes
import errno
import fcntl
import os
import stat
import struct
import time
from pathlib import Path

import pytest

from andon import worktree_pool
from andon.git.repo import Repo
from andon.worktrees import remove_worktree

from helpers import andon, git, honest_mul, make_project, mul_packet, packet_md, runner_for, write

OUTSIDE = "outside.txt"
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602
NOATIME, NODUMP = 0x80, 0x40  # two flags chattr sets that tmpfs keeps too
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def small_trees_too(monkeypatch):
    """These projects have a dozen files, in the suite's tmpfs; the pool keeps only trees of
    MIN_FILES or more, on a disk."""
    monkeypatch.setattr(worktree_pool, "MIN_FILES", 0)
    monkeypatch.setattr(worktree_pool, "IN_MEMORY", ())


def _project(tmp_path: Path, files: dict[str, str] | None = None) -> Repo:
    root = make_project(tmp_path / "repo", files={
        "src/calc/extra.py": "X = 1\n", "docs/guide.md": "# guide\n", "run.sh": "echo hi\n",
        "data.txt": "1\n",
        ".gitignore": "__pycache__/\n*.log\n", **(files or {})})
    os.chmod(root / "run.sh", 0o755)
    os.symlink("guide.md", root / "docs" / "link.md")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "exec bit and a link")
    return Repo(root)


def _flags(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def _state(tree: Path) -> dict[str, tuple]:
    """Every entry below ``tree`` but .git: kind, permissions, owner and group, links,
    xattrs, inode flags, bytes or target, and whether its mtime is in the future."""
    out = {}
    soon = time.time_ns() + 10**9
    for dirpath, dirnames, filenames in os.walk(tree):
        if dirpath == str(tree):
            dirnames.remove(".git")
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            link = stat.S_ISLNK(st.st_mode)
            body = os.readlink(p) if link else \
                Path(p).read_bytes() if stat.S_ISREG(st.st_mode) else None
            out[os.path.relpath(p, tree)] = (
                stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                st.st_nlink, tuple(os.listxattr(p, follow_symlinks=False)),
                None if link else _flags(p), body, st.st_mtime_ns > soon)
    return out


def _git_facts(tree: Path) -> dict[str, str]:
    return {"refs": git(tree, "for-each-ref", "--format=%(refname) %(objectname)"),
            "head": git(tree, "symbolic-ref", "HEAD"),
            "remotes": git(tree, "remote"),
            "status": git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all"),
            "logs": str((tree / ".git" / "logs").exists()),
            "hooks": str(sorted(p.name for p in (tree / ".git" / "hooks").iterdir()
                                if not p.name.endswith(".sample"))),
            "config": git(tree, "config", "--local", "--list")}


def _fresh_and_reused(repo: Repo, tmp_path: Path, spoil, pooled: int = 1
                      ) -> tuple[Path, Path, int]:
    """(a fresh clone of a new branch, the same branch made from a pooled tree that
    ``spoil(tree)`` left, the inode of an untouched file of that tree)."""
    root = tmp_path / "worktrees"
    root.mkdir(exist_ok=True)
    base = repo.resolve("HEAD")
    first = repo.add_worktree(root / "P1-1", "andon/P1/1", base)
    spoil(first)
    inode = os.lstat(first / "src" / "calc" / "__init__.py").st_ino
    remove_worktree(repo, first, reuse=True)
    assert not first.exists() and len(worktree_pool._waiting(root)) == pooled
    reused = repo.add_worktree(root / "P2-1", "andon/P2/1", base)
    fresh = repo.add_worktree(tmp_path / "fresh" / "P2-1", "andon/P2/fresh", base)
    return fresh, reused, inode


def _hostile(tree: Path) -> None:
    outside = tree.parent.parent / OUTSIDE
    outside.write_text("X = 1\n")
    ops = tree / "src" / "calc" / "ops.py"
    st = os.stat(ops)
    ops.write_text(ops.read_text().replace("a + b", "a - b"))  # same size,
    os.utime(ops, ns=(st.st_atime_ns, st.st_mtime_ns))         # mtime put back
    extra = tree / "src" / "calc" / "extra.py"                  # a hard link out, same bytes
    extra.unlink()
    os.link(outside, extra)
    (tree / "docs" / "guide.md").chmod(0o4755)                  # setuid and the exec bit
    (tree / "data.txt").chmod(0o2666)                           # bits git does not track
    os.setxattr(tree / "run.sh", "user.note", b"to the next agent")
    (tree / "docs" / "link.md").unlink()
    os.symlink("/etc/passwd", tree / "docs" / "link.md")        # a link elsewhere
    (tree / "build.log").write_text("ignored\n")                # ignored and untracked
    (tree / "notes.txt").write_text("untracked\n")
    (tree / "src" / "calc" / "__pycache__").mkdir()
    (tree / "src" / "calc" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"forged")
    os.mkfifo(tree / "fifo")
    (tree / "nested").mkdir()
    git(tree / "nested", "init", "-q")
    (tree / "tests").chmod(0o700)
    os.link(tree / "docs" / "link.md", tree.parent.parent / "link-outside",
            follow_symlinks=False)                              # a hard link to the link
    big = tree / "docs" / "guide.md"                            # terabytes git would hash
    os.truncate(big, 1 << 40)
    for f in tree.rglob("*.py"):                                # a message in the mtimes
        os.utime(f, ns=(0, 4102444800 * 10**9 + ord(f.name[0])), follow_symlinks=False)
    _set_flags(tree / "data.txt", NOATIME)
    _set_flags(tree / "docs", NODUMP)                           # a folder's pass on
    if ROOT:                                                    # a group, an xattr of root's
        for p in [tree / "docs", *(tree / "docs").iterdir()]:
            os.chown(p, -1, 4242, follow_symlinks=False)
        os.setxattr(tree / "data.txt", "trusted.note", b"x")
    git(tree, "commit", "-q", "--allow-empty", "-m", "a commit of the last occupant")
    (tree / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    git(tree, "config", "core.fsmonitor", "true")


def _set_flags(path: Path, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        now = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", now | flags))
    except OSError as e:  # only a filesystem without inode flags: nothing to carry over
        if e.errno not in (errno.ENOTTY, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def test_a_pooled_tree_an_agent_spoiled_becomes_exactly_a_fresh_clone(tmp_path):
    repo = _project(tmp_path)
    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, _hostile)
    assert _state(reused) == _state(fresh)
    facts, want = _git_facts(reused), _git_facts(fresh)
    assert facts == {**want, "refs": want["refs"].replace("andon/P2/fresh", "andon/P2/1"),
                     "head": "refs/heads/andon/P2/1\n"}
    assert (tmp_path / OUTSIDE).read_text() == "X = 1\n"  # the hard link's other name
    # the untouched files are the same inodes: the tree was used again, not cloned afresh
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino == inode
    # the last occupant's commit is not in the new object store
    assert git(reused, "rev-list", "--all") == git(fresh, "rev-list", "--all")
    assert git(reused, "count-objects", "-v") == git(fresh, "count-objects", "-v")


# the user's own settings, which every clone reads: autocrlf, the same behind an includeIf
# that matches the worktree's path but not the reset's, and a template's info/attributes
USER_CONFIG = {
    "autocrlf": "[core]\n\tautocrlf = true\n",
    "includeif": '[includeIf "gitdir:**/P2-1/"]\n\tpath = {tmp}/crlf.inc\n',
    "template": "[init]\n\ttemplateDir = {tmp}/template\n",
}


@pytest.mark.parametrize("blocker", ["gitattributes", *USER_CONFIG])
def test_a_checkout_that_may_differ_from_the_blobs_is_cloned_afresh(tmp_path, blocker,
                                                                    monkeypatch):
    repo = _project(tmp_path, {".gitattributes": "*.md text eol=crlf\n"}
                    if blocker == "gitattributes" else None)
    if blocker in USER_CONFIG:
        (tmp_path / "crlf.inc").write_text(USER_CONFIG["autocrlf"])
        (tmp_path / "template" / "info").mkdir(parents=True)
        (tmp_path / "template" / "info" / "attributes").write_text("*.md text eol=crlf\n")
        (tmp_path / "gitconfig").write_text(USER_CONFIG[blocker].format(tmp=tmp_path))
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, lambda tree: None)
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino != inode
    assert _state(reused) == _state(fresh)
    assert not worktree_pool._waiting(tmp_path / "worktrees")


@pytest.mark.skipif(not ROOT, reason="giving a folder another group needs root here")
def test_a_tree_under_a_setgid_worktree_root_is_used_again(tmp_path):
    """git's folders there inherit the root's group and its setgid bit: so must a reset's."""
    repo = _project(tmp_path)
    for folder in ("worktrees", "fresh"):
        (tmp_path / folder).mkdir()
        os.chown(tmp_path / folder, -1, 4242)
        (tmp_path / folder).chmod(0o2775)
    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, lambda tree: None)
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino == inode
    assert _state(reused) == _state(fresh)
    assert os.stat(reused / "src").st_mode & stat.S_ISGID and os.stat(reused).st_gid == 4242


def test_space_allocated_past_a_files_end_does_not_stay(tmp_path):
    repo = _project(tmp_path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]

    def reserve(tree):
        with open(tree / "data.txt", "r+b") as f:  # FALLOC_FL_KEEP_SIZE: the size stays 2
            if libc.fallocate(f.fileno(), 1, 0, 64 << 20) != 0:
                pytest.skip("no fallocate here")
    fresh, reused, _ = _fresh_and_reused(repo, tmp_path, reserve)
    assert os.stat(reused / "data.txt").st_blocks == os.stat(fresh / "data.txt").st_blocks
    assert _state(reused) == _state(fresh)


def test_the_pool_holds_at_most_cap_trees_and_a_run_empties_it(tmp_path):
    repo = _project(tmp_path)
    root = tmp_path / "worktrees"
    base = repo.resolve("HEAD")
    made = [repo.add_worktree(root / f"P{n}-1", f"andon/P{n}/1", base)
            for n in range(worktree_pool.CAP + 1)]
    for wt in made:
        remove_worktree(repo, wt, reuse=True)
        assert not wt.exists()
    assert len(worktree_pool._waiting(root)) == worktree_pool.CAP
    assert worktree_pool.flush(root) == worktree_pool.CAP
    assert not worktree_pool._waiting(root)


def test_a_run_uses_the_last_worktree_again_and_leaves_no_tree_behind(tmp_path):
    sub = packet_md("P2", "subtract", "calc.ops.sub subtracts.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": (sub, {
        "tests/test_sub.py": "from calc.ops import sub\n\n\ndef test_sub():\n"
                             "    assert sub(3, 1) == 2\n"})})
    seen = {}

    def first(ctx):
        seen["inode"] = os.lstat(ctx.worktree / "src" / "calc" / "__init__.py").st_ino
        (ctx.worktree / "src" / "calc" / "__pycache__").mkdir()  # ignored: not in the commit
        (ctx.worktree / "src" / "calc" / "__pycache__" / "x.pyc").write_bytes(b"from P1")
        return honest_mul(ctx)

    def second(ctx):
        seen["again"] = os.lstat(ctx.worktree / "src" / "calc" / "__init__.py").st_ino
        seen["leftover"] = (ctx.worktree / "src" / "calc" / "__pycache__").exists()
        seen["mul"] = "def mul" in (ctx.worktree / "src" / "calc" / "ops.py").read_text()
        write(ctx, "src/calc/ops.py", "\n\ndef sub(a, b):\n    return a - b\n", append=True)
        return "implemented sub"

    runner = runner_for(root, {"P1": first, "P2": second})
    report = runner.run()
    assert report.merged == ["P1", "P2"], [(e["packet_id"], e["kind"], e.get("data"))
                                           for e in runner.store.events()]
    assert seen == {"inode": seen["inode"], "again": seen["inode"], "leftover": False,
                    "mul": True}
    assert not runner.worktree_root.exists() or not os.listdir(runner.worktree_root)
    # the evidence says which attempt started in a tree another one used
    made = [(e["packet_id"], e["attempt_id"], e["data"]["made"], e["data"]["path"])
            for e in runner.store.events(kind="worktree-made")]
    attempts = {p: runner.store.attempts(p)[0] for p in ("P1", "P2")}
    assert made == [(p, attempts[p]["id"], how, attempts[p]["worktree"])
                    for p, how in (("P1", "clone"), ("P2", "pool"))]
    shown = {p: andon(root, "show", p).stdout for p in ("P1", "P2")}
    assert "worktree: a fresh clone, written in" in shown["P1"]
    assert "worktree: a finished attempt's tree, reset to the commit" in shown["P2"]


def test_a_folder_swapped_for_a_link_during_the_reset_removes_nothing_outside(
        tmp_path, monkeypatch):
    """A process of the last occupant still running could swap a folder of the tree for a
    link while the reset walks it: what the reset removes is named from the folder it
    opened, never through the link."""
    repo = _project(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "junk.txt").write_text("the user's\n")
    checked = worktree_pool._as_git_writes

    def swap_then_check(name, at, st, blob, want):
        if name == "junk.txt":
            calc = Path(os.readlink(f"/proc/self/fd/{at}"))
            calc.rename(calc.with_name("calc.moved"))
            calc.symlink_to(victim)
        return checked(name, at, st, blob, want)

    monkeypatch.setattr(worktree_pool, "_as_git_writes", swap_then_check)
    fresh, reused, _ = _fresh_and_reused(
        repo, tmp_path, lambda tree: (tree / "src" / "calc" / "junk.txt").write_text("x\n"))
    assert (victim / "junk.txt").read_text() == "the user's\n"
    assert _state(reused) == _state(fresh)


def test_a_small_tree_is_cloned_afresh_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(worktree_pool, "MIN_FILES", 200)
    repo = _project(tmp_path)
    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, lambda tree: None, pooled=0)
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino != inode
    assert _state(reused) == _state(fresh)


def test_names_planted_in_the_worktree_root_lead_nowhere(tmp_path):
    """Without the sandbox an agent can write in the worktree root: a pool folder that is a
    link to a folder of the user's holding a ``tree``, and the next worktree's harness
    index as a link to a file of the user's. Neither is followed."""
    repo = _project(tmp_path)
    root = tmp_path / "worktrees"
    root.mkdir()
    users = tmp_path / "users-stuff"
    (users / "tree").mkdir(parents=True)
    (users / "tree" / "precious.txt").write_text("mine\n")
    (root / f"{worktree_pool.POOL}planted").symlink_to(users)
    (tmp_path / "notes.txt").write_text("mine too\n")
    (root / ".P2-1.index").symlink_to(tmp_path / "notes.txt")
    made = repo.add_worktree(root / "P2-1", "andon/P2/1", repo.resolve("HEAD"))
    fresh = repo.add_worktree(tmp_path / "fresh" / "P2-1", "andon/P2/fresh",
                              repo.resolve("HEAD"))
    assert (users / "tree" / "precious.txt").read_text() == "mine\n"
    assert (tmp_path / "notes.txt").read_text() == "mine too\n"
    assert _state(made) == _state(fresh)


def test_a_folder_of_thousands_of_leftovers_goes_whole(tmp_path):
    repo = _project(tmp_path)

    def litter(tree):
        for n in range(worktree_pool.SPARE_ENTRIES + 1):
            (tree / "src" / "calc" / f"junk{n}.txt").touch()

    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, litter)
    assert _state(reused) == _state(fresh)
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino != inode  # written again


def test_forked_workers_share_the_pool_and_each_agent_finds_a_clean_tree(tmp_path):
    """``--workers 2``: each attempt runs in a worker process forked for it, which puts its
    tree in the pool on disk for the next worker to take. Every agent finds no leftover of
    the one before, and some found a used tree (the same inode of an untouched file)."""
    ids = ["P1", "P2", "P3", "P4"]
    packets = {p: (packet_md(p, f"f{p}", f"calc.f{p.lower()} returns 1.",
                             allowed_paths=["src/calc/**"]),
                   {f"tests/test_f{p.lower()}.py": f"from calc.f{p.lower()} import f\n\n\n"
                                                   "def test_f():\n    assert f() == 1\n"})
               for p in ids}
    root = make_project(tmp_path / "repo", packets)
    log = tmp_path / "seen"

    def agent(ctx):
        init = os.lstat(ctx.worktree / "src" / "calc" / "__init__.py").st_ino
        leftover = (ctx.worktree / "src" / "calc" / "__pycache__").exists()
        with open(log, "a") as f:  # the agents run in worker processes
            f.write(f"{init} {leftover}\n")
        (ctx.worktree / "src" / "calc" / "__pycache__").mkdir()
        (ctx.worktree / "src" / "calc" / "__pycache__" / "x.pyc").write_bytes(b"left")
        write(ctx, f"src/calc/f{ctx.packet.id.lower()}.py", "def f():\n    return 1\n")
        return "done"

    runner = runner_for(root, agent)
    runner.workers = 2
    assert sorted(runner.run().merged) == ids
    seen = [line.split() for line in log.read_text().splitlines()]
    assert len(seen) == 4 and all(left == "False" for _, left in seen)
    assert len({inode for inode, _ in seen}) < 4  # a tree was used again
    assert not runner.worktree_root.exists() or not os.listdir(runner.worktree_root)


def test_a_tree_in_memory_is_not_kept(tmp_path, monkeypatch):
    """On a tmpfs creating and deleting files costs little, and a reset more than a clone."""
    monkeypatch.setattr(worktree_pool, "filesystem_type", lambda path: "tmpfs")
    monkeypatch.setattr(worktree_pool, "IN_MEMORY", ("tmpfs",))
    repo = _project(tmp_path)
    fresh, reused, inode = _fresh_and_reused(repo, tmp_path, lambda tree: None, pooled=0)
    assert os.lstat(reused / "src" / "calc" / "__init__.py").st_ino != inode
    assert _state(reused) == _state(fresh)


def test_a_waiting_tree_that_cannot_be_used_is_said_to_be_refused_and_why(tmp_path):
    """The worktree's evidence tells a clone made because the waiting tree was refused from
    one made because none waited."""
    repo = _project(tmp_path, {".gitattributes": "*.md text eol=crlf\n"})
    root = tmp_path / "worktrees"
    root.mkdir()
    base = repo.resolve("HEAD")
    first, how = repo.make_worktree(root / "P1-1", "andon/P1/1", base)
    assert how == {"made": "clone"}  # none waited
    remove_worktree(repo, first, reuse=True)
    assert len(worktree_pool._waiting(root)) == 1
    _, how = repo.make_worktree(root / "P2-1", "andon/P2/1", base)
    assert how["made"] == "clone" and ".gitattributes" in how["pool_refused"], how
