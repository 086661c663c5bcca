"""Trees deleted off the critical path (issue 18): ``reaper.discard`` takes a tree away at once,
one background thread deletes it, ``reaper.drain`` waits for that; ``andon run`` and a forked
worker drain before they end, so nothing is left behind."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from andon import forked, reaper
from andon.git.repo import Repo

from helpers import FAST, NEST_DEEP_PY, andon, config_toml, make_project, mul_packet, nest_deep


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree(root, files=20):
    """A tree with a nested folder the agent made unreadable and unwritable."""
    for i in range(files):
        write(root / f"src/m{i}.py", f"x = {i}\n")
    locked = write(root / "locked/deep/x.txt", "x\n").parent
    locked.chmod(0)
    locked.parent.chmod(0o500)
    return root


@pytest.fixture
def held(monkeypatch):
    """The reaper's deletions wait until the test lets them go (no sleeps: an Event)."""
    go = threading.Event()
    started = threading.Event()
    real = reaper.delete_tree

    def slow(path):
        started.set()
        assert go.wait(30), "the test never released the reaper"
        real(path)
    monkeypatch.setattr(reaper, "delete_tree", slow)
    yield go, started, real
    go.set()
    reaper.drain()


def test_a_discarded_tree_is_gone_from_its_path_at_once_and_deleted_in_the_background(
        tmp_path, held):
    go, started, _ = held
    t = tree(tmp_path / "wt")
    reaper.discard(t, aside=True)
    # the path is free at once, while the deletion has not finished (it is held)
    assert not t.exists()
    assert started.wait(30)
    trash = [p for p in tmp_path.iterdir() if p.name.startswith(".andon-trash-")]
    assert len(trash) == 1 and (trash[0] / "tree/src/m0.py").exists()
    t.mkdir()  # a new tree can take the path before the old one is deleted
    go.set()
    assert reaper.drain() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wt"]


def test_a_tree_discarded_in_place_is_deleted_by_drain_even_where_permissions_were_taken(
        tmp_path):
    t = tree(tmp_path / "clone")
    reaper.discard(t)
    assert reaper.drain() == []
    assert not t.exists() and list(tmp_path.iterdir()) == []


def test_a_link_left_in_place_of_a_tree_is_removed_never_what_it_points_to(tmp_path):
    victim = write(tmp_path / "victim/precious.txt", "keep me\n").parent
    link = tmp_path / "wt"
    link.symlink_to(victim)
    reaper.discard(link, aside=True)
    assert reaper.drain() == []
    assert not link.is_symlink() and (victim / "precious.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


def test_a_tree_the_thread_could_not_delete_is_finished_by_drain(tmp_path, monkeypatch):
    real = reaper.delete_tree
    bad = tree(tmp_path / "bad")
    good = tree(tmp_path / "good")

    def refuse(path):
        if path == bad:
            raise PermissionError(13, "Operation not permitted", str(path / "x"))
        real(path)
    monkeypatch.setattr(reaper, "delete_tree", refuse)
    reaper.discard(bad)
    reaper.discard(good)
    assert reaper.drain() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_what_cannot_be_deleted_at_all_is_said_once_and_the_reaper_goes_on(tmp_path):
    bad = tree(tmp_path / "bad")
    stuck = bad / "src/m0.py"
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is refused on this filesystem")
    try:
        reaper.discard(bad)
        reaper.discard(good := tree(tmp_path / "good"))
        problems = reaper.drain()
        assert len(problems) == 1 and problems[0].startswith(f"{bad}: PermissionError")
        assert not good.exists() and stuck.exists()
        assert reaper.drain() == []  # said once
        reaper.discard(again := tree(tmp_path / "again"))  # the thread is still there
        assert reaper.drain() == [] and not again.exists()
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
        reaper.delete_tree(bad)


def test_a_tree_nested_deeper_than_the_recursion_limit_is_deleted_too(tmp_path, deep_ok):
    """An agent (or the code under test) can nest folders 3,000 deep with relative mkdirs;
    shutil.rmtree recurses and gives up (RecursionError): drain finishes it with rm -rf."""
    t = tree(tmp_path / "wt")
    nest_deep(t)
    with pytest.raises(RecursionError):
        reaper.delete_tree(t)  # what the thread meets
    reaper.discard(t, aside=True)
    assert reaper.drain() == []
    assert list(tmp_path.iterdir()) == []


def test_a_tree_whose_folder_refuses_the_trash_is_deleted_where_it_is(tmp_path, monkeypatch):
    t = tree(tmp_path / "wt")

    def refuse(*a, **kw):
        raise PermissionError(13, "Permission denied", str(tmp_path))
    monkeypatch.setattr(reaper.tempfile, "mkdtemp", refuse)
    reaper.discard(t, aside=True)
    monkeypatch.undo()
    assert reaper.drain() == []
    assert list(tmp_path.iterdir()) == []


def test_nothing_there_is_fine(tmp_path):
    reaper.discard(tmp_path / "never-made", aside=True)
    reaper.discard(tmp_path / "never-made")
    assert reaper.drain() == [] and list(tmp_path.iterdir()) == []


def test_a_forked_child_deletes_what_it_discarded_before_it_ends(tmp_path, held):
    """The child has no copy of the parent's thread; its result is not sent before its
    trees are deleted (forked.start drains), and the parent's held deletion is its own."""
    go, started, real = held
    mine = tree(tmp_path / "parent-tree")
    reaper.discard(mine)
    assert started.wait(30)
    theirs = tree(tmp_path / "child-tree")

    def in_child():
        reaper.delete_tree = real  # the child's copy of the held Event is never set
        reaper.discard(theirs, aside=True)
        return "ok"
    child = forked.start(in_child)
    assert forked.collect(child) == {"value": "ok"}
    assert not theirs.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["parent-tree"]  # the child's trash: gone
    go.set()
    assert reaper.drain() == [] and list(tmp_path.iterdir()) == []


def test_a_process_that_exits_deletes_what_it_discarded_first(tmp_path):
    t = tree(tmp_path / "t", files=200)
    code = ("import sys; from pathlib import Path; from andon import reaper; "
            "reaper.discard(Path(sys.argv[1]), aside=True)")
    subprocess.run([sys.executable, "-c", code, str(t)], check=True)
    assert list(tmp_path.iterdir()) == []


def test_remove_worktree_frees_the_path_for_a_new_worktree_at_once(tmp_path, held):
    go, _, _ = held
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")}, config=FAST)
    repo = Repo(root)
    wt = repo.add_worktree(tmp_path / "wts/P1-1", "andon/P1/1", "main")
    write(wt / "notes.txt", "left by the agent\n")
    repo.remove_worktree(wt)
    again = repo.add_worktree(tmp_path / "wts/P1-1", "andon/P1/2", "main")
    assert not (again / "notes.txt").exists()
    go.set()
    assert reaper.drain() == []
    # the new worktree and the harness's index of it (worktrees.index_of), nothing else
    assert sorted(p.name for p in (tmp_path / "wts").iterdir()) == [".P1-1.index", "P1-1"]


def test_andon_run_leaves_no_trash_beside_its_worktrees(tmp_path):
    wts = tmp_path / "wts"
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1,
                                           hermetic_random_order=False, worktree_root=wts))
    agent = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr
    show = json.loads(andon(root, "show", "P1", "--json").stdout)
    assert show["packet"]["state"] == "done"
    assert not wts.exists(), sorted(p.name for p in wts.iterdir())  # removed when empty


def test_delete_tree_restores_permissions_it_needs_only_inside_the_tree(tmp_path):
    t = tree(tmp_path / "t")
    outside = write(tmp_path / "outside.txt", "x\n")
    outside.chmod(0o400)
    reaper.delete_tree(t)
    assert not t.exists()
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o400


def test_an_agent_that_leaves_a_tree_too_deep_for_python_is_merged_and_nothing_is_left(
        tmp_path, deep_ok):
    """Through ``andon run``: the agent's honest change is merged, its ignored 3,000-deep
    folder is deleted with the worktree, and the worktree root is gone (empty) at the end."""
    wts = tmp_path / "wts"
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")},
                        files={".gitignore": "__pycache__/\n*.pyc\nbuild/\n"},
                        config=config_toml(red_runs=1, hermetic_runs=1,
                                           hermetic_random_order=False, worktree_root=wts))
    (tmp_path / "deep.py").write_text(NEST_DEEP_PY + "\n\nnest_deep('build')\n")
    agent = (f"{sys.executable} {tmp_path / 'deep.py'} && "
             "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py")
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr
    show = json.loads(andon(root, "show", "P1", "--json").stdout)
    assert show["packet"]["state"] == "done", r.stdout
    assert "could not delete" not in r.stdout + r.stderr
    assert not wts.exists(), sorted(p.name for p in wts.iterdir())


def test_sweep_discards_the_trash_of_processes_that_are_gone_and_keeps_the_living(tmp_path):
    """A run killed while its thread deleted leaves .andon-trash-<pid>-*; the next run's
    recovery sweeps the worktree root of it (tests/test_e2e_resume.py: kill at after-gates)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tree(tmp_path / f"{reaper.TRASH}{gone}-abc123" / "tree")
    mine = tree(tmp_path / f"{reaper.TRASH}{os.getpid()}-def456" / "tree")
    other = tree(tmp_path / ".andon-trash-notapid" / "tree")
    worktree = tree(tmp_path / "P1-1")
    assert reaper.sweep(tmp_path) == 1
    assert reaper.drain() == []
    assert not dead.parent.exists()
    assert mine.exists() and other.exists() and worktree.exists()
    assert reaper.sweep(tmp_path / "nothing-here") == 0
    for t in (mine, other, worktree):
        reaper.delete_tree(t.parent if t.parent != tmp_path else t)
