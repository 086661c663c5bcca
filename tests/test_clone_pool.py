"""The pool of clones (clone_pool.py, issue 18): a tree handed out again is reset to the commit
asked for, and nothing anyone left in it — ignored files, caches, a file edited with its size
and mtime put back, a deleted or re-moded file, refs, hooks, config, objects — survives into
the next use. Real git repositories in tmp dirs; the reset tree is compared with a new clone
of the same commit made without the pool.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from andon import clone_pool, treestat
from andon.review.export import export_tree
from andon.workspace import Repo

from helpers import MUL_TEST, config_toml, git, make_project, packet_md, runner_for, write


def _repo(tmp_path: Path) -> tuple[Repo, str, str]:
    root = tmp_path / "user"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text("*.log\n__pycache__/\n")
    for i in range(30):
        (root / "src" / f"p{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / "src" / f"p{i % 3}" / f"m{i:02d}.py").write_text(f"X = {i}\n")
    (root / "run.sh").write_text("echo\n")
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "deep" / "a.md").write_text("only file of its folders\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    first = git(root, "rev-parse", "HEAD").strip()
    (root / "src/p0/m00.py").write_text("X = 'changed'\n")
    (root / "src/p1/m01.py").unlink()
    (root / "src/new").mkdir()
    (root / "src/new/n.py").write_text("N = 1\n")
    (root / "docs" / "deep" / "a.md").unlink()  # its folders go with it
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two")
    git(root, "tag", "v2")
    git(root, "branch", "side", first)
    return Repo(root), first, git(root, "rev-parse", "HEAD").strip()


def _files(tree: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry below ``tree`` but .git: kind and mode bits, and its bytes or link."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = Path(dirpath).relative_to(tree)
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames:
            out[(rel / name).as_posix()] = ("dir", b"")
        for name in filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
            out[(rel / name).as_posix()] = (oct(st.st_mode), data)
    return out


def _git_state(tree: Path) -> dict[str, str]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True,
                              check=True).stdout
    hooks = sorted(p.name for p in (tree / ".git" / "hooks").iterdir())
    return {"refs": run("for-each-ref", "--format=%(refname) %(objectname)"),
            "head": run("rev-parse", "HEAD"), "status": run("status", "--porcelain",
                                                            "--ignored", "-uall"),
            "config": run("config", "--local", "--list"), "hooks": " ".join(hooks),
            "objects": str(sorted(p.name for p in (tree / ".git/objects").iterdir()))}


def _dirty(tree: Path) -> None:
    """What code under test or an agent might leave: every kind the reset must undo."""
    (tree / "debug.log").write_text("ignored\n")
    (tree / "src/p0/__pycache__").mkdir()
    (tree / "src/p0/__pycache__/m00.cpython-311.pyc").write_bytes(b"stale")
    (tree / "untracked.py").write_text("U = 1\n")
    (tree / "empty" / "deeper").mkdir(parents=True)
    edited = tree / "src/p2/m02.py"  # same size, mtime put back: only the ctime tells
    st = os.stat(edited)
    edited.write_text("X = 9\n")
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
    (tree / "src/p0/m03.py").unlink()
    (tree / "run.sh").chmod(0o755)
    (tree / "src/p1/m04.py").unlink()
    (tree / "src/p1/m04.py").symlink_to("/etc/passwd")
    nested = tree / "vendor" / "repo"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    git(tree, "update-ref", "refs/heads/loot", "HEAD")
    git(tree, "tag", "stash-of-answers")
    git(tree, "config", "core.fsmonitor", "true")
    hook = tree / ".git/hooks/post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tree.parent / 'HOOK-RAN'}\n")
    hook.chmod(0o755)
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=tree, input=b"secret",
                          capture_output=True, check=True)
    assert blob.returncode == 0


@pytest.mark.parametrize("again", ["same", "later", "earlier"])
def test_a_gate_clone_used_again_is_a_new_clone_of_the_commit(tmp_path, again):
    repo, first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(second if again == "earlier" else first, tmp_path / "a" / "repo")
        _dirty(a)
        assert pool.give(a) and not a.exists()
        want = second if again == "later" else first
        b = pool.clone_at(want, tmp_path / "b" / "repo")
        assert pool.counts == {"fresh": 1, "reused": 1, "discarded": 0}
        new = repo.clone_at(want, tmp_path / "new" / "repo")  # no pool: a new clone
        assert _files(b) == _files(new)
        state, fresh = _git_state(b), _git_state(new)
        assert state == fresh, (state, fresh)
        assert state["status"] == "" and "loot" not in state["refs"]
        assert not (tmp_path / "a" / "HOOK-RAN").exists()
        assert not (tmp_path / "b" / "HOOK-RAN").exists()
    finally:
        pool.close()


def test_an_agent_worktree_used_again_holds_only_its_base_history(tmp_path):
    repo, first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", second)
        _dirty(wt)
        (wt / "src/p0/m00.py").write_text("agent work\n")
        git(wt, "commit", "-qam", "the agent's commit")
        repo.remove_worktree(wt)
        assert not wt.exists()
        wt2 = repo.add_worktree(tmp_path / "wt" / "P2-1", "andon/P2/1", first)
        assert pool.counts["reused"] == 1
        log = git(wt2, "log", "--all", "--format=%H").split()
        assert log == [first]  # not the later commit, not the agent's, not side's
        refs = git(wt2, "for-each-ref", "--format=%(refname)").split()
        assert refs == ["refs/heads/andon/P2/1"]
        assert git(wt2, "symbolic-ref", "HEAD").strip() == "refs/heads/andon/P2/1"
        assert git(wt2, "status", "--porcelain", "--ignored", "-uall") == ""
        assert not (wt2 / ".git" / "logs").exists()
        assert not (wt2 / ".git/objects/info/alternates").exists()
        fresh = Repo(repo.root).clone_at(first, tmp_path / "ref")
        assert _files(wt2) == _files(fresh)
        assert git(wt2, "config", "user.email").strip()  # an agent can commit
        # the agent's objects went with the old .git
        probe = subprocess.run(["git", "cat-file", "-e", second], cwd=wt2, capture_output=True)
        assert probe.returncode != 0
    finally:
        pool.close()


def test_a_tree_whose_stat_cannot_be_trusted_is_never_used_again(tmp_path, monkeypatch):
    repo, first, _ = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        monkeypatch.setattr(treestat, "past_tick", lambda dest, wait_s=0: False)
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        assert pool.give(a) and not a.exists() and pool.idle == []
        pool.clone_at(first, tmp_path / "b" / "repo")
        assert pool.counts == {"fresh": 2, "reused": 0, "discarded": 0}
    finally:
        pool.close()


def test_a_reset_git_does_not_confirm_is_discarded_and_a_new_clone_made(tmp_path, monkeypatch):
    repo, first, _ = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        pool.give(a)
        monkeypatch.setattr(clone_pool.ClonePool, "_clean", lambda self, *a: False)
        b = pool.clone_at(first, tmp_path / "b" / "repo")
        assert pool.counts == {"fresh": 2, "reused": 0, "discarded": 1}
        monkeypatch.undo()
        assert git(b, "status", "--porcelain", "--ignored", "-uall") == ""
    finally:
        pool.close()


def test_only_the_process_that_opened_a_pool_uses_it(tmp_path):
    repo, _first, _ = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        assert clone_pool.active(repo) is pool
        pool.pid = -1  # as seen from a forked worker
        assert clone_pool.active(repo) is None
        assert not clone_pool.give_back(repo, tmp_path / "anything")
    finally:
        pool.close()
    assert clone_pool.active(repo) is None


def test_a_path_the_pool_did_not_hand_out_is_not_taken(tmp_path):
    repo, first, _ = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        other = repo.clone_at(first, tmp_path / "other")
        assert not pool.give(other) and other.exists()
        a = pool.clone_at(first, tmp_path / "a" / "repo")
        link = tmp_path / "a" / "repo"
        os.rename(a, tmp_path / "a" / "moved")
        link.symlink_to(repo.root)  # replaced by a link to the user's checkout
        assert pool.give(link) and not link.is_symlink() and pool.idle == []
        assert (repo.root / ".git").is_dir()  # the link was removed, not what it points to
    finally:
        pool.close()


def test_close_deletes_the_idle_trees(tmp_path):
    repo, first, _ = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    a = pool.clone_at(first, tmp_path / "a" / "repo")
    (a / "src/p0").chmod(0o500)  # a folder the tests made read-only
    pool.give(a)
    home = pool.home
    pool.close()
    assert not home.exists()


def test_a_review_export_from_the_pool_hides_tests_checks_changes_and_is_reset(tmp_path):
    repo, _first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at(second, tmp_path / "a" / "repo")
        _dirty(a)
        pool.give(a)
        dest = tmp_path / "review" / "tree"
        tree = export_tree(repo, second, dest, keep=lambda p: not p.startswith("src/p1/"))
        assert pool.counts["reused"] == 1
        assert not (dest / ".git").exists() and not (dest / "src/p1").exists()
        assert not (dest / "debug.log").exists() and (dest / "src/new/n.py").exists()
        assert tree.trusted_stat and tree.changed() == []
        edited = dest / "src/p2/m02.py"
        st = os.stat(edited)
        edited.write_text("X = 8\n")
        os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert tree.changed() == ["src/p2/m02.py"]
        assert clone_pool.give_back(repo, dest)
        b = pool.clone_at(second, tmp_path / "b" / "repo")
        assert pool.counts["reused"] == 2
        assert _files(b) == _files(repo.clone_at(second, tmp_path / "new" / "repo"))
    finally:
        pool.close()


def test_a_commit_with_a_submodule_is_never_pooled(tmp_path):
    repo, _first, _ = _repo(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "s.txt").write_text("s\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "s")
    git(repo.root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub),
        "lib")
    git(repo.root, "commit", "-qm", "with a submodule")
    pool = clone_pool.open_pool(repo)
    try:
        a = pool.clone_at("HEAD", tmp_path / "a" / "repo")
        assert (a / "lib" / "s.txt").exists()
        assert not pool.give(a)  # not the pool's: the caller deletes it as before
        tree = export_tree(repo, "HEAD", tmp_path / "export")  # git's checkout-index, as before
        assert (tmp_path / "export" / "src/p0/m00.py").exists() and tree.changed() == []
        assert not (tmp_path / "export" / "lib" / "s.txt").exists()  # gitlinks left out
        assert not clone_pool.give_back(repo, tmp_path / "export")
        assert pool.counts["fresh"] == 1 and pool.idle == []
    finally:
        pool.close()


# -- through the runner: the guarantees the hermetic gate gives still hold ---------------------

LEAVES = '''\
from pathlib import Path


def test_zz_leaves_a_file():
    (Path(__file__).parents[1] / "src/calc/_factor.txt").write_text("1\\n")
'''



def test_a_file_an_earlier_packets_tests_left_in_a_pooled_clone_is_gone(tmp_path, monkeypatch):
    """P1's tests write an ignored file into every tree they run in; P2's mul2 reads it.
    P2's agent finds no trace of P1's runs in its (reused) worktree, writes the file there
    itself, and the hermetic gate still fails P2: its clone, reused from P1's, was reset."""
    counts: list[dict] = []
    real_close = clone_pool.ClonePool.close
    monkeypatch.setattr(clone_pool.ClonePool, "close",
                        lambda self: (counts.append(dict(self.counts)), real_close(self)))
    md1 = packet_md("P1", "multiply", "calc.ops.mul multiplies.", max_attempts=1,
                    allowed_paths=["src/calc/**", "tests/test_zz_leaves.py"])
    md2 = packet_md("P2", "multiply2", "calc.ops.mul2 multiplies.", max_attempts=1,
                    allowed_paths=["src/calc/**"], requires=["P1"])
    mul2_test = MUL_TEST.replace("import mul", "import mul2").replace("mul(", "mul2(")
    root = make_project(tmp_path / "repo", {
        "P1": (md1, {"tests/test_mul_p1.py": MUL_TEST}),
        "P2": (md2, {"tests/test_mul2_p2.py": mul2_test})},
        config=config_toml(red_runs=1, hermetic_runs=2, add={"test": "jobs = 1\n"}))
    seen: list[list[str]] = []

    def p1(ctx):
        write(ctx, "src/calc/.gitignore", "_factor.txt\n")
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a * b\n", append=True)
        write(ctx, "tests/test_zz_leaves.py", LEAVES)

    def p2(ctx):
        seen.append(sorted(str(p.relative_to(ctx.worktree)) for p in ctx.worktree.rglob("*")
                           if "_factor" in p.name or "__pycache__" in p.parts
                           or ".pytest_cache" in p.parts))
        write(ctx, "src/calc/_factor.txt", "1\n")
        write(ctx, "src/calc/ops.py", "\n\ndef mul2(a, b):\n    import pathlib\n"
              "    f = pathlib.Path(__file__).with_name('_factor.txt')\n"
              "    return a * b * int(f.read_text())\n", append=True)

    runner = runner_for(root, {"P1": p1, "P2": p2})
    report = runner.run()
    assert report.merged == ["P1"]
    assert counts and counts[-1]["reused"] >= 3, counts
    assert seen == [[]]
    att = runner.store.attempts("P2")[0]
    rows = {g["gate"]: g for g in runner.store.gate_results(att["id"])}
    assert rows["suite"]["status"] == "pass"  # in the worktree, where the agent wrote it
    assert rows["hermetic"]["status"] == "fail"
    assert {f["kind"] for f in rows["hermetic"]["evidence"]["findings"]} == {"fail-to-pass"}


def test_a_snapshot_of_a_pooled_worktree_reads_what_changed_and_misses_nothing(tmp_path):
    """The seeded snapshot (git trusts the stat data of files whose lstat key is unchanged)
    makes the same tree as hashing every file, for every kind of change an agent makes —
    including a same-size edit with its mtime put back within the same second, which git's
    own stat check (second-resolution ctime) does not see."""
    from andon import worktrees
    repo, _first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", second)
        edited = wt / "src/p2/m02.py"
        st = os.stat(edited)
        edited.write_text("X = 9\n")
        os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
        (wt / "src/p0/m03.py").unlink()
        (wt / "run.sh").chmod(0o755)
        (wt / "src/p1/m04.py").unlink()
        (wt / "src/p1/m04.py").mkdir()
        (wt / "src/p1/m04.py/inner.py").write_text("I = 1\n")
        (wt / "src/p0/m06.py").unlink()
        (wt / "src/p0/m06.py").symlink_to("m09.py")
        (wt / "brand_new.py").write_text("B = 1\n")
        (wt / "debug.log").write_text("ignored\n")
        seen = pool.changes(wt, second)
        assert "src/p2/m02.py" in seen.changed and "src/p0/m03.py" in seen.changed
        assert seen.added == ["brand_new.py", "debug.log", "src/p1/m04.py/inner.py"]
        seeded = repo.snapshot(wt, second, "seeded")
        full = worktrees.snapshot(repo, wt, second, "every file hashed")
        assert repo.resolve(f"{seeded}^{{tree}}") == repo.resolve(f"{full}^{{tree}}")
        assert repo.git("show", f"{seeded}:src/p2/m02.py") == "X = 9\n"
        assert "debug.log" not in repo.git("ls-tree", "-r", "--name-only", seeded)
        # from the snapshot on, the pool reports against it: only the ignored file differs
        after = pool.changes(wt, seeded)
        assert after.changed == [] and after.added == ["debug.log"]
        (wt / "brand_new.py").write_text("B = 2\n")
        (wt / "src/p0/fresh").mkdir()
        assert pool.changes(wt, seeded).changed == ["brand_new.py"]
        assert pool.changes(wt, seeded).added == ["debug.log", "src/p0/fresh/"]
    finally:
        pool.close()


@pytest.mark.parametrize("change", ["none", "ignored", "edited", "empty-folder", "nested-git",
                                    "deleted", "link"])
def test_strays_from_the_pools_walk_agree_with_gits(tmp_path, change):
    """After a snapshot, joint.strays answered from the pool's walk (known=) finds a
    difference exactly when git's listing and hashing of every file does."""
    from andon.gates.joint import strays
    repo, _first, second = _repo(tmp_path)
    pool = clone_pool.open_pool(repo)
    try:
        wt = repo.add_worktree(tmp_path / "wt" / "P1-1", "andon/P1/1", second)
        (wt / "src/p0/m00.py").write_text("X = 'agent'\n")
        sha = repo.snapshot(wt, second, "candidate")
        if change == "ignored":
            (wt / "src/p0/__pycache__").mkdir()
            (wt / "src/p0/__pycache__/m.pyc").write_bytes(b"x")
        elif change == "edited":
            edited = wt / "src/p2/m02.py"
            st = os.stat(edited)
            edited.write_text("X = 7\n")
            os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif change == "empty-folder":
            (wt / "src/nothing").mkdir()
        elif change == "nested-git":
            (wt / "src/p1/.git").mkdir()
        elif change == "deleted":
            (wt / "run.sh").unlink()
        elif change == "link":
            (wt / "src/p2/m05.py").unlink()
            (wt / "src/p2/m05.py").symlink_to("m02.py")
        seen = pool.changes(wt, sha)
        by_pool = strays(repo, wt, sha, known=seen.changed + seen.added)
        by_git = strays(repo, wt, sha)
        assert bool(by_pool) == bool(by_git) == (change != "none"), (by_pool, by_git)
    finally:
        pool.close()
