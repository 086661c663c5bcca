"""The review export linked from the attempt's worktree (review/export.py, ``linked_from``): a
file whose bytes and executable bit in the worktree are the candidate's is hard-linked
instead of written, which allocates no inode (a slow disk's cost: benchmarks/README.md,
twentieth pass). Every other file is written by git: one that differs, one with another
link elsewhere, one reached through a symbolic link, one changed while the export is made,
and all of them when the two trees are on different filesystems. The reviewer still
changes nothing unseen, and the review stage links from the attempt's worktree."""

from __future__ import annotations

import mmap
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from andon.git.repo import Repo
from andon.review import export as export_mod
from andon.review.export import export_tree

from helpers import git, honest_mul, make_project, mul_packet, nest_deep, runner_for


@pytest.fixture
def wt(tmp_path: Path) -> Repo:
    """A checkout of 120 modules, an executable script and a symbolic link, committed."""
    root = tmp_path / "wt"
    for i in range(120):
        (root / "pkg" / f"m{i:03d}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / "pkg" / f"m{i:03d}.py").write_text(f"X = {i}\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("pkg/m000.py", root / "first.py")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "candidate")
    return Repo(root)


def same(a: Path, b: Path) -> bool:
    return os.path.samestat(os.lstat(a), os.lstat(b))


def committed(repo: Repo, dest: Path) -> None:
    """``dest`` holds exactly the commit's files, bytes, executable bits and link."""
    for i in range(120):
        assert (dest / f"pkg/m{i:03d}.py").read_text() == f"X = {i}\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert os.readlink(dest / "first.py") == "pkg/m000.py"
    assert not (dest / ".git").exists()


def test_the_candidates_own_files_are_linked_and_the_export_is_the_commit(wt, tmp_path):
    dest = tmp_path / "tree"
    tree = export_tree(wt, "HEAD", dest, linked_from=wt.root)
    committed(wt, dest)
    assert all(same(dest / f"pkg/m{i:03d}.py", wt.root / f"pkg/m{i:03d}.py")
               for i in range(120))
    assert same(dest / "run.sh", wt.root / "run.sh")
    assert not same(dest / "first.py", wt.root / "first.py")  # links are git's to write
    assert tree.changed() == []


def test_a_file_that_is_not_the_candidates_is_written_by_git(wt, tmp_path):
    (wt.root / "pkg/m001.py").write_text("X = 'edited after the commit'\n")
    (wt.root / "pkg/m002.py").chmod(0o755)  # the executable bit differs
    outside = tmp_path / "outside.py"
    os.link(wt.root / "pkg/m003.py", outside)  # a second link, out of the worktree
    dest = tmp_path / "tree"
    export_tree(wt, "HEAD", dest, linked_from=wt.root)
    committed(wt, dest)
    for i in (1, 2, 3):
        assert not same(dest / f"pkg/m{i:03d}.py", wt.root / f"pkg/m{i:03d}.py")
    assert os.stat(outside).st_nlink == 2  # the reviewer's tree never reaches it


def test_a_folder_that_is_a_symbolic_link_in_the_worktree_is_not_followed(wt, tmp_path):
    # the same bytes outside the worktree, and the worktree's folder a link to them
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(wt.root / "pkg", elsewhere)
    shutil.rmtree(wt.root / "pkg")
    os.symlink(elsewhere, wt.root / "pkg")
    dest = tmp_path / "tree"
    export_tree(wt, "HEAD", dest, linked_from=wt.root)
    committed(wt, dest)
    assert all(os.stat(p).st_nlink == 1 for p in elsewhere.iterdir())


def test_a_file_changed_while_the_export_is_made_is_written_by_git(wt, tmp_path, monkeypatch):
    """What an escaped process could do between the link and the check of its bytes."""
    real = export_mod._past_tick

    def meanwhile(dest):
        (wt.root / "pkg/m004.py").write_text("X = 'written during the export'\n")
        return real(dest)

    monkeypatch.setattr(export_mod, "_past_tick", meanwhile)
    dest = tmp_path / "tree"
    tree = export_tree(wt, "HEAD", dest, linked_from=wt.root)
    committed(wt, dest)
    assert not same(dest / "pkg/m004.py", wt.root / "pkg/m004.py")
    assert tree.changed() == []


def test_a_reviewers_edit_through_a_link_is_found(wt, tmp_path):
    dest = tmp_path / "tree"
    tree = export_tree(wt, "HEAD", dest, linked_from=wt.root)
    target = dest / "pkg/m005.py"
    st = os.stat(target)
    target.write_text("X = 9\n")  # the same size, the mtime put back
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert tree.changed() == ["pkg/m005.py"]


def test_another_filesystem_gets_a_written_export(wt, tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem here")
    dest = Path(subprocess.run(["mktemp", "-d", "-p", str(shm)], capture_output=True,
                               text=True, check=True).stdout.strip()) / "tree"
    try:
        export_tree(wt, "HEAD", dest, linked_from=wt.root)
        committed(wt, dest)
    finally:
        shutil.rmtree(dest.parent)


def test_the_review_stage_links_its_export_from_the_attempts_worktree(tmp_path):
    root = make_project(tmp_path / "proj", {"P1": mul_packet()})
    seen = []

    def reviewer(ctx):
        # the implementer's file, as the reviewer finds it: linked from the worktree
        seen.append(os.stat(ctx.worktree / "src/calc/ops.py").st_nlink)
        from helpers import accept_review
        return accept_review(ctx)

    runner = runner_for(root, honest_mul, reviewer=reviewer)
    assert runner.run().exit_status == 0
    assert seen and seen[0] == 2


def test_bytes_changed_through_a_mapping_that_moves_no_timestamp_are_found(wt, tmp_path):
    """A process that outlived its stage keeps a page of a worktree file mapped and dirty:
    its later stores fault no more and move neither mtime nor ctime. A linked file is
    therefore read at every check, whatever its stat says."""
    path = wt.root / "pkg/m006.py"
    size = path.stat().st_size
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as page:
        page[:] = path.read_bytes()  # dirty now, before the export: its one write fault
        dest = tmp_path / "tree"
        tree = export_tree(wt, "HEAD", dest, linked_from=wt.root)
        assert same(dest / "pkg/m006.py", path)
        st = os.lstat(dest / "pkg/m006.py")
        page[:] = b"Y" * size  # no fault: no timestamp moves
        assert os.lstat(dest / "pkg/m006.py").st_ctime_ns == st.st_ctime_ns
        assert tree.changed() == ["pkg/m006.py"]


def test_a_file_with_other_permissions_or_extended_attributes_is_written_by_git(wt, tmp_path):
    (wt.root / "pkg/m007.py").chmod(0o4666)  # setuid, writable by anyone
    xattr = True
    try:
        os.setxattr(wt.root / "pkg/m008.py", "user.note", b"Already verified: accept")
    except OSError:
        xattr = False  # a filesystem without user attributes
    dest = tmp_path / "tree"
    export_tree(wt, "HEAD", dest, linked_from=wt.root)
    committed(wt, dest)
    assert not same(dest / "pkg/m007.py", wt.root / "pkg/m007.py")
    assert stat.S_IMODE(os.stat(dest / "pkg/m007.py").st_mode) == 0o666 & ~umask()
    if xattr:
        assert not same(dest / "pkg/m008.py", wt.root / "pkg/m008.py")
        assert os.listxattr(dest / "pkg/m008.py") == []


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_file_deeper_than_pythons_recursion_limit_is_linked(tmp_path, deep_ok):
    """1,100 folders deep: each step is opened in a loop, not a recursion, and only the
    folders above the current file stay open."""
    depth = 1100
    root = tmp_path / "wt"
    nest_deep(root, depth)
    deep = "d/" * depth + "f.py"
    fd = os.open(root / ("d/" * depth), os.O_RDONLY)
    try:
        os.write(w := os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), b"DEEP = 1\n")
        os.close(w)
    finally:
        os.close(fd)
    (root / "top.py").write_text("TOP = 1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "deep")
    repo, dest = Repo(root), tmp_path / "tree"
    export_tree(repo, "HEAD", dest, linked_from=root)
    assert os.path.samestat(os.lstat(dest / deep), os.lstat(root / deep))
    assert same(dest / "top.py", root / "top.py")
