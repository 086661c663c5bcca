"""The review stage's export (review/export.py) against real git repositories: the kept files
with their bytes, modes and links and nothing else; every change a reviewer can make is found
— including an edit that keeps the size and puts the mtime back — while an untouched tree is
checked without reading a single file, and a file only touched is not a change."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from andon.errors import UsageError
from andon.git.repo import Repo
from andon.review import export as export_mod
from andon.review.export import blob_id, export_tree

from helpers import nest_deep

ENV = {**os.environ, "GIT_AUTHOR_NAME": "U", "GIT_AUTHOR_EMAIL": "u@example.com",
       "GIT_COMMITTER_NAME": "U", "GIT_COMMITTER_EMAIL": "u@example.com"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True, env=ENV).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    """A repository with 200 modules, a test folder, an executable script, a symbolic link
    and a file the user's checkout has changed (not committed: must not be exported)."""
    root = tmp_path_factory.mktemp("exp") / "proj"
    for i in range(200):
        f = root / "src" / "pkg" / f"m{i:03d}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"X = {i}\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_m.py").write_text("def test_m():\n    assert True\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("src/pkg/m000.py", root / "first.py")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (root / "src" / "pkg" / "m001.py").write_text("DIRTY = 1\n")
    return Repo(root)


def test_the_export_holds_the_kept_files_of_the_commit_and_nothing_else(repo, tmp_path):
    """Bytes of the commit (not the dirty checkout), the executable bit, the link as a link,
    no .git, and a path ``keep`` refuses is absent."""
    dest = tmp_path / "tree"
    tree = export_tree(repo, "HEAD", dest, keep=lambda p: not p.startswith("tests/"))
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")
                   if not p.is_dir() or p.is_symlink())
    assert files == sorted(["run.sh", "first.py"] + [f"src/pkg/m{i:03d}.py" for i in range(200)])
    assert (dest / "src/pkg/m001.py").read_text() == "X = 1\n"
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "first.py", os.X_OK)
    assert os.readlink(dest / "first.py") == "src/pkg/m000.py"
    assert not (dest / ".git").exists() and not (dest / "tests").exists()
    assert tree.changed() == []


def test_an_existing_destination_is_refused(repo, tmp_path):
    (tmp_path / "tree").mkdir()
    with pytest.raises(UsageError, match="already exists"):
        export_tree(repo, "HEAD", tmp_path / "tree")


def _same_size_edit_mtime_restored(d: Path) -> str:
    f = d / "src/pkg/m005.py"
    st = f.stat()
    f.write_text("X = 9\n")  # same size as "X = 5\n"
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    return "src/pkg/m005.py"


def _replace_by_rename(d: Path) -> str:
    (d / "other").write_text("X = 7\n")  # "X = 7\n" is m007's exact content, not m006's
    os.replace(d / "other", d / "src/pkg/m006.py")
    return "src/pkg/m006.py"


REVIEWER_CHANGES = {
    "edits": lambda d: (d / "src/pkg/m003.py").write_text("X = 'changed'\n") and
    "src/pkg/m003.py",
    "adds": lambda d: (d / "NOTES.md").write_text("fine\n") and "NOTES.md",
    "deletes": lambda d: (d / "src/pkg/m004.py").unlink() or "src/pkg/m004.py",
    "same-size-edit-mtime-restored": _same_size_edit_mtime_restored,
    "replaces-by-rename": _replace_by_rename,
    "makes-executable": lambda d: (d / "src/pkg/m008.py").chmod(0o755) or "src/pkg/m008.py",
    "retargets-the-link": lambda d: ((d / "first.py").unlink(),
                                     os.symlink("src/pkg/m009.py", d / "first.py")) and
    "first.py",
    "file-becomes-link": lambda d: ((d / "run.sh").unlink(),
                                    os.symlink("src/pkg/m000.py", d / "run.sh")) and "run.sh",
    "adds-in-a-new-folder": lambda d: ((d / "new").mkdir(),
                                       (d / "new/x.py").write_text("#")) and "new/x.py",
}


@pytest.mark.parametrize("case", REVIEWER_CHANGES)
def test_every_change_a_reviewer_makes_is_found(repo, tmp_path, case):
    """Right after the export (no pause: the recorded ctime is the defence, not time), each
    kind of change is reported by path, and only that path."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    path = REVIEWER_CHANGES[case](tmp_path / "tree")
    assert tree.changed() == [path]


def test_a_file_only_touched_is_not_a_change(repo, tmp_path):
    """An honest reviewer's tool that rewrites a file with the same bytes or touches it (new
    mtime and ctime): read, found equal to its blob, not reported."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    (tmp_path / "tree/src/pkg/m010.py").touch()
    (tmp_path / "tree/src/pkg/m011.py").write_text("X = 11\n")
    assert tree.changed() == []


def test_an_untouched_export_is_checked_without_reading_a_file(repo, tmp_path, monkeypatch):
    """The check after the reviewer is proportional to what changed: an untouched tree of
    203 entries is checked without reading (hashing) one; one edit reads one file."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    assert tree.trusted_stat
    read: list[Path] = []
    real = export_mod._git_entry
    monkeypatch.setattr(export_mod, "_git_entry",
                        lambda p, alg: read.append(p) or real(p, alg))
    assert tree.changed() == [] and read == []
    (tmp_path / "tree/src/pkg/m012.py").write_text("X = 120\n")
    assert tree.changed() == ["src/pkg/m012.py"]
    assert read == [str(tmp_path / "tree/src/pkg/m012.py")]


def _swap_after_lstat(monkeypatch, target: Path, swap) -> None:
    """``swap()`` runs right after the first ``lstat`` of ``target``: a reviewer's process
    that changes the entry between the check's look at it and its read."""
    real, done = os.lstat, []

    def lstat(path, *args, **kwargs):
        st = real(path, *args, **kwargs)
        if os.fspath(path) == str(target) and not done:
            done.append(True)
            swap()
        return st
    monkeypatch.setattr(export_mod.os, "lstat", lstat)


def test_a_link_removed_between_its_stat_and_its_read_is_a_change_not_a_crash(
        repo, tmp_path, monkeypatch):
    """The check after the reviewer reads a symbolic link whose stat changed; a link gone
    by then is reported as changed (it was an OSError out of the whole check)."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    link = tmp_path / "tree/first.py"
    os.utime(link, (0, 0), follow_symlinks=False)  # its stat moved: read at the check
    _swap_after_lstat(monkeypatch, link, lambda: os.unlink(link))
    assert tree.changed() == ["first.py"]


def test_a_file_swapped_for_a_link_to_the_same_bytes_after_its_stat_is_a_change(
        repo, tmp_path, monkeypatch):
    """A file replaced, between the check's stat and its read, by a symbolic link to a
    file with the very same bytes: the read does not follow the link (git would record a
    link there), so the swap is reported."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    f = tmp_path / "tree/src/pkg/m013.py"
    same = tmp_path / "same.py"
    same.write_bytes(f.read_bytes())
    f.touch()  # its stat moved: read at the check

    def swap():
        os.unlink(f)
        os.symlink(same, f)
    _swap_after_lstat(monkeypatch, f, swap)
    assert tree.changed() == ["src/pkg/m013.py"]


def test_without_a_clock_tick_every_file_is_read(repo, tmp_path, monkeypatch):
    """A filesystem whose clock does not move in time (coarse timestamps): stat cannot be
    trusted, so the check reads every file — slower, never blind."""
    monkeypatch.setattr(export_mod, "_past_tick", lambda dest: False)
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    assert not tree.trusted_stat
    _same_size_edit_mtime_restored(tmp_path / "tree")
    assert tree.changed() == ["src/pkg/m005.py"]


def test_blob_id_is_gits():
    """The id compared with is git's own for the same bytes."""
    proc = subprocess.run(["git", "hash-object", "--stdin"], input=b"X = 1\n",
                          capture_output=True, check=True)
    assert blob_id(b"X = 1\n") == proc.stdout.decode().strip()


def test_a_file_whose_path_is_longer_than_the_system_allows_is_a_change_not_a_crash(
        repo, tmp_path, deep_ok):
    """A reviewer nests folders until their path nearly fills PATH_MAX, then names a file
    past it (made through a folder descriptor): ``lstat`` of it fails, which used to escape
    as OSError and fail the review as a harness error. It is reported by path."""
    tree = export_tree(repo, "HEAD", tmp_path / "tree")
    top = tmp_path / "tree" / "deep"
    depth = (4000 - len(str(top))) // 2
    nest_deep(top, depth)
    folder = Path(top, *["d"] * depth)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.close(os.open("f" * 200, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    assert tree.changed() == ["deep/" + "d/" * depth + "f" * 200]
