"""Attacks on the pool of clones (clone_pool.py, issue 18): what an agent, or the code under
test the gates run, leaves in a tree so that the next use of the tree (the next hermetic run,
the next attempt's worktree, the review export) is not a new clone of its commit. Each test
drives the pool as the harness does (``clone_at``/``give``, ``Repo.add_worktree`` /
``remove_worktree``) on real repositories in tmp dirs, and compares the reset tree with a new
clone made without the pool.

The ``defended`` cases pass; the others show a leak (or a reset that does not fall back to a
new clone) and fail until the pool handles them.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
import threading
import unicodedata
from pathlib import Path

import pytest
from test_clone_pool import _files, _git_state, _repo

from andon import clone_pool

from helpers import MUL_TEST, config_toml, git, make_project, packet_md, runner_for, write


def _outside(tmp_path: Path) -> Path:
    """A folder outside every tree, with a file the attacks point at (must survive)."""
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "keep.txt").write_text("not the pool's to delete\n")
    return out


def _xattrs(p: Path) -> dict[str, bytes]:
    try:
        return {n: os.getxattr(p, n, follow_symlinks=False)
                for n in sorted(os.listxattr(p, follow_symlinks=False))}
    except OSError:
        return {}


def _state(tree: Path) -> dict[str, tuple]:
    """:func:`_files` plus what it leaves out: every folder's mode, and the extended
    attributes (ACLs included) of every entry, the top folder's too."""
    out: dict[str, tuple] = {k: (*v, _xattrs(tree / k)) for k, v in _files(tree).items()}
    for k in list(out):
        if out[k][0] == "dir":
            out[k] = (oct(os.lstat(tree / k).st_mode), b"", out[k][2])
    out["."] = (oct(os.lstat(tree).st_mode), b"", _xattrs(tree))
    return out


def _same_size_other_bytes(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[:-2] + b"7\n")


# -- defended: every one of these is deleted or undone by the reset -------------------------

def _hardlink_out(tree: Path, out: Path) -> None:  # link count and ctime change, nothing else
    os.link(tree / "src/p0/m00.py", out / "hl")


def _hardlink_in(tree: Path, out: Path) -> None:  # a tracked file replaced by a link to another
    (tree / "src/p0/m03.py").unlink()
    os.link(tree / "src/p0/m06.py", tree / "src/p0/m03.py")


def _mode_git_ignores(tree: Path, out: Path) -> None:  # 0644 -> 0664: git status sees nothing
    (tree / "src/p2/m02.py").chmod(0o664)


def _utime_back(tree: Path, out: Path) -> None:  # same size, mtime and atime put back
    p = tree / "src/p2/m05.py"
    st = os.stat(p)
    _same_size_other_bytes(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _file_to_symlink(tree: Path, out: Path) -> None:
    (tree / "run.sh").unlink()
    (tree / "run.sh").symlink_to(out / "keep.txt")


def _dir_to_symlink(tree: Path, out: Path) -> None:  # the delete must not follow it
    shutil.rmtree(tree / "src/p1")
    (tree / "src/p1").symlink_to(out, target_is_directory=True)


def _file_to_fifo(tree: Path, out: Path) -> None:
    (tree / "src/p0/m09.py").unlink()
    os.mkfifo(tree / "src/p0/m09.py")


def _file_to_dir(tree: Path, out: Path) -> None:
    (tree / "src/p0/m12.py").unlink()
    (tree / "src/p0/m12.py").mkdir()
    (tree / "src/p0/m12.py/__init__.py").write_text("X = 'from a folder'\n")


def _crafted_pyc(tree: Path, out: Path) -> None:
    """A pyc whose header matches the source's mtime and size: Python would import it."""
    import importlib.util
    src = tree / "src/p0/m00.py"
    st = os.stat(src)
    code = compile("X = 'from the stale pyc'\n", str(src), "exec")
    import marshal
    pyc = (importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF,
                                                      st.st_size & 0xFFFFFFFF)
           + marshal.dumps(code))
    cache = tree / "src/p0/__pycache__"
    cache.mkdir()
    (cache / f"m00.{__import__('sys').implementation.cache_tag}.pyc").write_bytes(pyc)


def _ignored_plants(tree: Path, out: Path) -> None:
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__/conftest.py").write_text("raise SystemExit\n")
    (tree / "conftest.py").write_text("import pytest\n")  # untracked
    (tree / "x.log").write_text("ignored\n")
    (tree / "evil.pth").write_text("import os\n")
    (tree / "pkg.egg-info").mkdir()
    (tree / "pkg.egg-info/PKG-INFO").write_text("Name: pkg\n")
    (tree / "pkg.egg-link").write_text(str(out) + "\n")
    (tree / ".pytest_cache/v/cache").mkdir(parents=True)
    (tree / ".pytest_cache/v/cache/lastfailed").write_text("{}\n")


def _readonly_dir_with_stray(tree: Path, out: Path) -> None:
    (tree / "src/p2/stray.py").write_text("S = 1\n")
    (tree / "src/p2").chmod(0o555)


def _readonly_dir_mode_restored(tree: Path, out: Path) -> None:  # the folder's mode as recorded
    (tree / "src/p2/stray.py").write_text("S = 1\n")
    mode = stat.S_IMODE(os.stat(tree / "src/p2").st_mode)
    (tree / "src/p2").chmod(0o555)
    (tree / "src/p2").chmod(mode)


def _sticky_setgid(tree: Path, out: Path) -> None:
    (tree / "src/p0").chmod(0o3755)
    (tree / "docs").chmod(0o1777)


def _dot_git_file(tree: Path, out: Path) -> None:  # a gitdir: pointer at the user's repo
    shutil.rmtree(tree / ".git")
    (tree / ".git").write_text(f"gitdir: {out.parent / 'user' / '.git'}\n")


def _dot_git_symlink(tree: Path, out: Path) -> None:  # must be unlinked, never followed
    shutil.rmtree(tree / ".git")
    (tree / ".git").symlink_to(out.parent / "user" / ".git", target_is_directory=True)


def _dot_git_alternates(tree: Path, out: Path) -> None:
    (tree / ".git/objects/info/alternates").write_text(str(out) + "\n")
    (tree / ".git/info").mkdir(exist_ok=True)
    (tree / ".git/info/exclude").write_text("*\n")
    git(tree, "update-index", "--skip-worktree", "src/p0/m00.py")
    _same_size_other_bytes(tree / "src/p0/m00.py")


def _nested_repos(tree: Path, out: Path) -> None:
    (tree / "src/p0/.git").mkdir()
    (tree / "src/p0/.git/HEAD").write_text("ref: refs/heads/main\n")
    (tree / ".gitmodules").write_text('[submodule "x"]\n\tpath = x\n\turl = /\n')


def _odd_names(tree: Path, out: Path) -> None:
    (tree / "src/p0/new\nline.py").write_text("N = 1\n")
    (tree / unicodedata.normalize("NFD", "src/p0/é.py")).write_text("E = 1\n")
    (tree / "SRC").mkdir()  # case
    (tree / "SRC/p0").mkdir()


DEFENDED = {f.__name__.lstrip("_"): f for f in (
    _hardlink_out, _hardlink_in, _mode_git_ignores, _utime_back, _file_to_symlink,
    _dir_to_symlink, _file_to_fifo, _file_to_dir, _crafted_pyc, _ignored_plants,
    _readonly_dir_with_stray, _readonly_dir_mode_restored, _sticky_setgid, _dot_git_file,
    _dot_git_symlink, _dot_git_alternates, _nested_repos, _odd_names)}


@pytest.mark.parametrize("again", ["same", "other"])
@pytest.mark.parametrize("attack", sorted(DEFENDED))
def test_defended_a_reset_tree_is_a_new_clone_after(tmp_path, attack, again):
    repo, first, second = _repo(tmp_path)
    out = _outside(tmp_path)
    user_git = sorted(p.name for p in (repo.root / ".git").iterdir())
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        DEFENDED[attack](a, out)
        assert pool.give(a)
        want = first if again == "same" else second
        b = pool.clone_at(want, tmp_path / "b" / "repo")
        print(attack, again, pool.counts)  # reused (reset) or discarded (a new clone)
        new = repo.clone_at(want, tmp_path / "new" / "repo")
        assert _state(b) == _state(new)
        assert _git_state(b) == _git_state(new)
        assert (out / "keep.txt").read_text() == "not the pool's to delete\n"
        assert sorted(p.name for p in (repo.root / ".git").iterdir()) == user_git
    finally:
        for p in tmp_path.rglob("*"):  # undo read-only folders so tmp_path can go
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        pool.close()


# -- leaks --------------------------------------------------------------------------------

_UNDEFINED_ID = 0xFFFFFFFF


def _default_acl(perms: tuple[int, int, int]) -> bytes:
    """The ``system.posix_acl_default`` value (version 2) user::u, group::g, other::o."""
    entries = ((0x01, perms[0]), (0x04, perms[1]), (0x20, perms[2]))  # USER_OBJ GROUP_OBJ OTHER
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, _UNDEFINED_ID)
                                           for t, p in entries)


def _acl_supported(where: Path) -> bool:
    probe = where / "acl-probe"
    probe.mkdir()
    try:
        os.setxattr(probe, "system.posix_acl_default", _default_acl((7, 7, 7)))
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()


def test_a_default_acl_left_on_a_folder_changes_the_modes_of_the_next_clones_files(tmp_path):
    """Code under test sets a default ACL on a tracked folder (its mode does not change: the
    pool keeps the folder). Every file git writes there at the next reset, and every file the
    next run's code creates there, gets its mode from the ACL, not from the umask: 0666 where
    a new clone has 0644 (or 0444 with an ACL u::r, and so on). git status does not compare
    those bits, so the reset is confirmed."""
    if not _acl_supported(tmp_path):
        pytest.skip("no POSIX ACLs on this filesystem")
    repo, first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        os.setxattr(a / "src/p0", "system.posix_acl_default", _default_acl((7, 7, 7)))
        assert pool.give(a)
        b = pool.clone_at(second, tmp_path / "b" / "repo")  # src/p0/m00.py differs: written
        assert pool.counts["reused"] == 1
        new = repo.clone_at(second, tmp_path / "new" / "repo")
        made = {}
        for tree in (b, new):  # what the next run's code would create there
            fd = os.open(tree / "src/p0/created.txt", os.O_CREAT | os.O_WRONLY, 0o666)
            os.close(fd)
            made[tree] = oct(stat.S_IMODE(os.stat(tree / "src/p0/created.txt").st_mode))
        assert made[b] == made[new], made
        assert _files(b) == _files(new)
    finally:
        pool.close()


def test_folder_metadata_carries_a_hidden_test_from_a_gate_clone_to_the_next_agent(tmp_path):
    """The hermetic gate copies the packet's hidden tests into its fresh clone, and the
    agent's code runs there. It stores a hidden test in a tracked folder's extended
    attribute and in a folder's timestamps (folders are compared by mode only). The clone
    goes back to the pool and is reset as the next attempt's worktree: the agent reads the
    hidden test out of its own worktree. A new clone's folders have neither."""
    repo, first, _second = _repo(tmp_path)
    hidden = b"def test_hidden():\n    assert mul(7, 6) == 42\n"
    pool = clone_pool.open_pool(repo)
    try:
        gate = pool.clone_at(first, tmp_path / "gate" / "repo")
        (gate / "tests").mkdir()
        (gate / "tests/test_hidden.py").write_bytes(hidden)  # copy_hidden
        # --- the code under test, in the gate's run ---
        secret = (gate / "tests/test_hidden.py").read_bytes()
        os.setxattr(gate / "src", "user.note", secret)
        word = int.from_bytes(secret[:8], "big")  # 8 bytes per folder timestamp pair
        os.utime(gate / "docs/deep", ns=(word, word))
        # --- the gate ends ---
        assert pool.give(gate)
        wt = repo.add_worktree(tmp_path / "wt" / "P1-2", "andon/P1/2", first)
        assert pool.counts["reused"] == 1
        # --- the next attempt's agent, in its worktree ---
        seen = {}
        try:
            seen["xattr"] = os.getxattr(wt / "src", "user.note")
        except OSError:
            pass
        got = os.stat(wt / "docs/deep").st_mtime_ns
        if got == int.from_bytes(secret[:8], "big"):
            seen["mtime"] = got.to_bytes(8, "big")
        assert seen == {}, f"the agent read the hidden test out of its worktree: {seen}"
    finally:
        pool.close()


def test_a_git_fifo_left_in_a_tree_does_not_hang_the_next_hand_out(tmp_path):
    """An agent (or the code under test) replaces the tree's .git by a named pipe. The reset
    deletes .git with shutil.rmtree, which opens its argument before looking at it: opening
    a pipe for reading blocks until someone writes, so the next clone_at never returns (the
    run hangs; before the pool, a whole tree was deleted, and rmtree unlinks a pipe inside a
    folder without opening it)."""
    repo, first, _second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        shutil.rmtree(a / ".git")
        os.mkfifo(a / ".git")
        assert pool.give(a)
        box: dict = {}
        dest = tmp_path / "b" / "repo"

        def hand_out() -> None:
            try:
                box["tree"] = pool.clone_at(first, dest)
            except BaseException as e:  # noqa: BLE001 - reported below
                box["error"] = e
        t = threading.Thread(target=hand_out, daemon=True)
        t.start()
        t.join(20)
        hung = t.is_alive()
        if hung:  # let it go: a writer opens the pipe (it moved to dest by now)
            fd = os.open(dest / ".git", os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
            t.join(20)
        assert not hung, "clone_at blocked on the pipe left as .git"
        assert "error" not in box, box
        assert git(box["tree"], "status", "--porcelain", "--ignored", "-uall") == ""
    finally:
        pool.close()


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_an_immutable_leftover_falls_back_to_a_new_clone(tmp_path):
    """Code under test running as root marks a file it left immutable (chattr +i). The reset
    cannot delete it, which the module promises to answer with a new clone ("a failure while
    resetting a kept tree is never raised"); instead the deletion of the discarded tree
    raises PermissionError out of the next clone_at — into whichever packet's gate asks for
    a clone next."""
    repo, first, _second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        (a / "debug.log").write_text("left by a test\n")
        (a / "tests").mkdir()
        (a / "tests/test_hidden.py").write_text("a hidden test, copied in by the gate\n")
        if not _chattr("+i", a / "debug.log"):
            pytest.skip("chattr +i not permitted here")
        assert pool.give(a)
        dest = tmp_path / "b" / "repo"
        try:
            b = pool.clone_at(first, dest)
        except OSError as e:
            pytest.fail(f"clone_at raised instead of making a new clone: {e!r}")
        assert not (b / "debug.log").exists()
        assert git(b, "status", "--porcelain", "--ignored", "-uall") == ""
        # what was set aside holds nothing but what could not be deleted
        left = [p for p in (tmp_path / "b").rglob("*") if p.is_file() and b not in p.parents]
        assert [p.name for p in left] == ["debug.log"], left
    finally:
        for p in tmp_path.rglob("debug.log"):
            _chattr("-i", p)
        pool.close()


# -- the record moved to the agent's snapshot takes the agent's worktree as the baseline -----

def test_modes_an_agent_gave_its_worktree_survive_into_the_next_clone(tmp_path):
    """After the snapshot, the pool's record of the agent's worktree is the walk of that
    worktree (``moved``): the keys it holds then, modes included, become what the reset
    compares with. Modes git does not record (a file's 0666, a folder's 0777 or setgid) are
    in the commit as 100644 and a folder, and a file's extended attribute not at all, so
    the tree handed out next — a gate clone of a later packet, or another agent's worktree —
    keeps the agent's modes and attributes, where a new clone has 0644 and 0755 and none.
    git status does not compare them."""
    repo, first, _second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", first)
        (wt / "src/p0/m00.py").write_text("X = 'the agent was here'\n")
        (wt / "src/p0/m03.py").chmod(0o666)   # unchanged bytes, world-writable
        (wt / "src/p2").chmod(0o2777)         # a folder anyone can write, setgid
        os.setxattr(wt / "src/p0/m06.py", "user.note", b"from attempt 1")  # bytes unchanged
        cand = repo.snapshot(wt, first, "the agent's work")
        repo.remove_worktree(wt)
        b = pool.clone_at(cand, tmp_path / "gate" / "repo")  # the next gate clone
        assert pool.counts["reused"] == 1
        new = repo.clone_at(cand, tmp_path / "new" / "repo")
        diff = {k: (v, _state(new).get(k)) for k, v in _state(b).items()
                if _state(new).get(k) != v}
        assert diff == {}, diff
    finally:
        pool.close()


def test_bytes_git_converts_on_add_survive_as_the_agents_in_the_next_clone(tmp_path):
    """A file whose checkout git converts (``ident`` here; ``eol``/``text`` the same with
    line endings) is stored by the snapshot as git's clean form: the agent's ``$Id: ... $``
    becomes ``$Id$``, the blob of the base, so the candidate does not even change it. The
    pool's record takes the agent's file as it was (its key), so the reset keeps it, and git
    status, trusting the index the snapshot wrote for it, confirms the tree: the next tree
    holds ``$Id: cheat $`` where a new clone holds ``$Id: <blob> $``. Code under test that
    reads the string behaves otherwise in the pooled clone than in a new one."""
    root = tmp_path / "user"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitattributes").write_text("flag.py ident\n")
    (root / "flag.py").write_text('ID = "$Id$"\n')
    (root / "other.py").write_text("Y = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    from andon.workspace import Repo
    repo = Repo(root)
    base = git(root, "rev-parse", "HEAD").strip()
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", base)
        (wt / "flag.py").write_text('ID = "$Id: cheat $"\n')
        (wt / "other.py").write_text("Y = 2\n")  # the visible work
        cand = repo.snapshot(wt, base, "the agent's work")
        assert git(root, "show", f"{cand}:flag.py") == 'ID = "$Id$"\n'
        repo.remove_worktree(wt)
        b = pool.clone_at(cand, tmp_path / "gate" / "repo")  # e.g. the next packet's gate
        assert pool.counts["reused"] == 1
        new = repo.clone_at(cand, tmp_path / "new" / "repo")
        assert (b / "flag.py").read_text() == (new / "flag.py").read_text()
    finally:
        pool.close()


def test_an_immutable_tracked_folder_does_not_survive_the_reset(tmp_path):
    """Code under test running as root marks a tracked folder immutable (chattr +i: not in
    its mode, not an extended attribute). If the next commit changes nothing in it, git's
    checkout has no reason to write there and status is clean, so the reset hands the tree
    out with a folder in which nothing can be created: the next run's tests (and Python's
    __pycache__) cannot write where a new clone lets them."""
    repo, first, _second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        if not _chattr("+i", a / "docs/deep"):
            pytest.skip("chattr +i not permitted here")
        assert pool.give(a)
        try:
            b = pool.clone_at(first, tmp_path / "b" / "repo")
        except OSError as e:
            pytest.fail(f"clone_at raised instead of making a new clone: {e!r}")
        (b / "docs/deep/made-by-a-test.txt").write_text("a test may write here\n")
    finally:
        for p in tmp_path.rglob("deep"):
            _chattr("-i", p)
        pool.close()


@pytest.mark.parametrize("attr", ["ident", "text eol=crlf"])
def test_an_attribute_the_next_commit_adds_is_applied_to_a_file_the_reset_keeps(tmp_path, attr):
    """The candidate adds a .gitattributes line (``ident``, ``eol=crlf``) for a file it does
    not change, in a folder it may write (``src/.gitattributes``). A new clone of the
    candidate writes that file converted (``$Id: <blob> $``, CRLF); the reset keeps it as the
    older commit's checkout wrote it (its key and blob are unchanged, so git has no reason
    to write it, and status trusts the index): code whose behaviour depends on those bytes
    passes the hermetic runs in the pooled clone and not in the person's checkout."""
    root = tmp_path / "user"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src/flag.py").write_text('ID = "$Id$"\nLINES = 2\n')
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "src/.gitattributes").write_text(f"flag.py {attr}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the candidate: an attribute only")
    cand = git(root, "rev-parse", "HEAD").strip()
    from andon.workspace import Repo
    repo = Repo(root)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(base, tmp_path / "a" / "repo")  # e.g. the red gate, at the base
        assert pool.give(a)
        b = pool.clone_at(cand, tmp_path / "b" / "repo")  # the hermetic run of the candidate
        new = repo.clone_at(cand, tmp_path / "new" / "repo")
        assert (new / "src/flag.py").read_bytes() != b'ID = "$Id$"\nLINES = 2\n'
        assert (b / "src/flag.py").read_bytes() == (new / "src/flag.py").read_bytes()
    finally:
        pool.close()


def test_an_attribute_the_agent_adds_is_applied_to_a_file_it_did_not_touch(tmp_path):
    """As above, but the attribute comes with the agent's snapshot: the worktree's files the
    agent did not touch were written under the base's attributes, yet the pool's record
    after the snapshot says the tree is a checkout of the candidate. A later clone of the
    candidate (or of any commit with the same .gitattributes) keeps the unconverted file."""
    root = tmp_path / "user"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src/flag.py").write_text('ID = "$Id$"\n')
    (root / "src/ops.py").write_text("Y = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    from andon.workspace import Repo
    repo = Repo(root)
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", base)
        (wt / "src/.gitattributes").write_text("flag.py ident\n")
        (wt / "src/ops.py").write_text("Y = 2\n")
        cand = repo.snapshot(wt, base, "the agent's work")
        repo.remove_worktree(wt)
        b = pool.clone_at(cand, tmp_path / "gate" / "repo")
        assert pool.counts["reused"] == 1
        new = repo.clone_at(cand, tmp_path / "new" / "repo")
        assert (b / "src/flag.py").read_bytes() == (new / "src/flag.py").read_bytes()
    finally:
        pool.close()


def test_a_reset_worktree_does_not_tell_which_files_another_attempt_changed(tmp_path):
    """A gate clone of another attempt's candidate is reset to the next agent's base: git
    writes only the files that differ between the two commits, so those (and only those)
    are newer than the worktree's new .git; the others keep their older times and inodes
    (documented). The next agent lists, by mtime alone, the files of its base that the
    earlier candidate changed (here src/p2/m05.py; a file only the candidate had leaves no
    trace, since the folders' times are set to now). A new clone's files all have the
    checkout's times. Not fixed: it would take a utime of every kept file (and the inodes
    would still tell)."""
    repo, first, _second = _repo(tmp_path)
    root = repo.root
    git(root, "checkout", "-q", "-b", "attempt1", first)
    (root / "src/p2/m05.py").write_text("X = 'attempt 1 edited this'\n")
    (root / "src/p2/answer_is_here.py").write_text("A = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attempt 1's candidate")
    cand1 = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "main")
    pool = clone_pool.open_pool(repo)
    try:
        gate = pool.clone_at(cand1, tmp_path / "gate" / "repo")  # attempt 1's hermetic run
        assert pool.give(gate)
        import time
        time.sleep(0.05)
        wt = repo.add_worktree(tmp_path / "wt" / "P1-2", "andon/P1/2", first)
        assert pool.counts["reused"] == 1
        marker = os.stat(wt / ".git" / "HEAD").st_mtime_ns - 10_000_000
        newer = sorted(k for k in _files(wt)
                       if not (wt / k).is_dir() and os.lstat(wt / k).st_mtime_ns >= marker)
        total = sum(1 for k in _files(wt) if not (wt / k).is_dir())
        assert len(newer) in (0, total), f"the agent can see what attempt 1 changed: {newer}"
    finally:
        pool.close()


def test_andon_run_a_candidate_right_only_under_the_base_checkout_fails_hermetic(tmp_path):
    """Through ``andon run``: the base has ``src/calc/version.py`` holding ``$Id$``. P1 is
    honest (its gates leave trees in the pool). P2's agent adds ``src/calc/.gitattributes``
    (``version.py ident``, inside its allowed paths) and a ``mul2`` that is right only while
    version.py reads ``$Id$`` — as in its worktree and in a clone reset from P1's trees, not
    in a new clone (``$Id: <blob> $``) nor in the person's checkout after the merge. The
    hermetic gate must fail P2."""
    counts: list[dict] = []
    real_close = clone_pool.ClonePool.close

    def close(self):
        counts.append(dict(self.counts))
        real_close(self)
    md1 = packet_md("P1", "multiply", "calc.ops.mul multiplies.", max_attempts=1,
                    allowed_paths=["src/calc/**"])
    md2 = packet_md("P2", "multiply2", "calc.ops.mul2 multiplies.", max_attempts=1,
                    allowed_paths=["src/calc/**"], requires=["P1"])
    mul2_test = MUL_TEST.replace("import mul", "import mul2").replace("mul(", "mul2(")
    root = make_project(tmp_path / "repo", {
        "P1": (md1, {"tests/test_mul_p1.py": MUL_TEST}),
        "P2": (md2, {"tests/test_mul2_p2.py": mul2_test})},
        files={"src/calc/version.py": 'VERSION = "$Id$"\n'},
        config=config_toml(red_runs=1, hermetic_runs=2, add={"test": "jobs = 1\n"}))

    def p1(ctx):
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a * b\n", append=True)

    def p2(ctx):
        write(ctx, "src/calc/.gitattributes", "version.py ident\n")
        write(ctx, "src/calc/ops.py", "\n\ndef mul2(a, b):\n"
              "    from calc.version import VERSION\n"
              "    return a * b if VERSION == '$' + 'Id$' else -1\n", append=True)

    runner = runner_for(root, {"P1": p1, "P2": p2})
    import unittest.mock
    with unittest.mock.patch.object(clone_pool.ClonePool, "close", close):
        report = runner.run()
    assert counts and counts[-1]["reused"] >= 3, counts
    att = runner.store.attempts("P2")[0]
    rows = {g["gate"]: g["status"] for g in runner.store.gate_results(att["id"])}
    assert report.merged == ["P1"], (report.merged, rows)
    assert rows.get("hermetic") == "fail", rows


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="no /proc")
def test_a_process_left_running_in_a_tree_does_not_follow_it_into_the_next_use(tmp_path):
    """A helper that outlived its stage (procgroup's sweep is bounded: a chain that outruns
    it is counted as left, tests/test_leftover_processes.py) has its working folder in the
    tree. Before the pool the tree was deleted and its writes went nowhere; a kept tree is
    renamed, and a working folder follows a rename: the helper writes conftest.py into the
    next hermetic clone after the reset has checked it. A tree some process still holds
    (working folder, root, open file, mapping) must not be kept."""
    repo, first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    helper = None
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        helper = subprocess.Popen(["sh", "-c", "sleep 2; echo 'raise SystemExit' > conftest.py"],
                                  cwd=a, start_new_session=True, stderr=subprocess.DEVNULL)
        assert pool.give(a)
        b = pool.clone_at(second, tmp_path / "b" / "repo")
        helper.wait(timeout=30)
        assert not (b / "conftest.py").exists(), "the helper wrote into the next clone"
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
        pool.close()
