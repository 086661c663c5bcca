"""The trees andon writes whole (an attempt's worktree, a gate's clone, the review export) are
written by git's parallel checkout, a worker per core (``checkout.workers=0``): on this
machine's disk a new file can cost 200 µs of the kernel's time after many deletions, and
two cores halve that wait (benchmarks/README.md, twentieth pass). Seen in git's own trace:
``checkout--worker`` processes, and the same files as a serial checkout's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from andon.git.repo import Repo
from andon.review.export import export_tree
from andon.worktrees import clone_at

from helpers import git

# git's default checkout.thresholdForParallelism: fewer files are written serially
FILES = 150


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Repo:
    root = tmp_path / "repo"
    for n in range(FILES):
        (root / f"pkg{n % 5}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{n % 5}" / f"mod{n}.py").write_text(f"X = {n}\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "files")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: git's parallel checkout starts no worker")
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace"))
    return Repo(root)


def workers(tmp_path: Path) -> int:
    trace = (tmp_path / "trace").read_text()
    os.unlink(tmp_path / "trace")
    return sum("checkout--worker" in line and "run_command" in line
               for line in trace.splitlines())


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.py")}


def test_the_worktree_is_written_by_parallel_checkout(repo, tmp_path):
    wt = repo.add_worktree(tmp_path / "wt", "andon/P1/1", "main")
    assert workers(tmp_path) >= 2
    assert files(wt) == files(repo.root)


def test_a_gates_clone_is_written_by_parallel_checkout(repo, tmp_path):
    clone = clone_at(repo, "main", tmp_path / "clone")
    assert workers(tmp_path) >= 2
    assert files(clone) == files(repo.root)


def test_the_review_export_is_written_by_parallel_checkout(repo, tmp_path):
    export_tree(repo, "main", tmp_path / "export")
    assert workers(tmp_path) >= 2
    assert files(tmp_path / "export") == files(repo.root)
