"""git.repo.Repo against real git repositories made in tmp_path.

Every test that runs an operation against a repository with a "user" in it also checks that
the user's dirty working tree, index and checked-out branch are exactly as they were.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from andon.errors import GitError, UsageError
from andon.git.repo import (
    ZERO_SHA,
    Change,
    MergeConflict,
    RefMoved,
    Repo,
    SnapshotError,
    commit_message,
    file_marker,
    manifest,
)
from andon.worktrees import loose_objects

from helpers import nest_deep

USER = {"GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com",
        "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.com"}


@pytest.fixture(autouse=True)
def no_git_config(tmp_path, monkeypatch):
    """No global/system config and no identity in the environment: Repo must bring its own."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in [*USER, "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"]:
        monkeypatch.delenv(var, raising=False)


def sh(cwd: Path, *args: str, input: bytes | None = None) -> str:
    """git as the user or an agent would run it (their identity, their hooks)."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True,
                          env={**os.environ, **USER})
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def blobs(files: dict[str, Path]) -> dict[str, tuple[bytes, bool]]:
    """What Repo.plant takes: each file's bytes and executable bit."""
    return {rel: (p.read_bytes(), os.access(p, os.X_OK)) for rel, p in files.items()}


def make_repo(path: Path) -> Path:
    """A repo on `main` with two commits: README.md, src/app.py, .gitignore ignoring *.log."""
    path.mkdir(parents=True)
    sh(path, "init", "-q", "-b", "main")
    write(path / "README.md", "hello\n")
    write(path / "src/app.py", "print(1)\n")
    write(path / ".gitignore", "*.log\n")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "initial")
    write(path / "src/app.py", "print(1)\nprint(2)\n")
    sh(path, "commit", "-qam", "second")
    return path


def make_user_dirty(path: Path) -> None:
    """The user is on branch `feature` with unstaged, staged, untracked and ignored changes."""
    sh(path, "checkout", "-qb", "feature")
    write(path / "src/app.py", "print('staged')\n")
    sh(path, "add", "src/app.py")
    write(path / "src/app.py", "print('staged then edited')\n")
    write(path / "README.md", "hello, edited but not staged\n")
    write(path / "notes.txt", "untracked\n")
    write(path / "debug.log", "ignored\n")


def user_state(path: Path) -> tuple:
    files = {}
    for p in sorted(path.rglob("*")):
        if ".git" not in p.relative_to(path).parts and p.is_file():
            files[str(p.relative_to(path))] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    return (sh(path, "--no-optional-locks", "status", "--porcelain=v2", "--branch",
               "--untracked-files=all", "--ignored"),
            sh(path, "rev-parse", "HEAD"), sh(path, "symbolic-ref", "HEAD"),
            sh(path, "ls-files", "--stage"), files)


@pytest.fixture
def user(tmp_path):
    """(Repo, path, state-before) for a repository whose user has a dirty tree on `feature`."""
    path = make_repo(tmp_path / "repo")
    make_user_dirty(path)
    return Repo(path), path, user_state(path)


def parents(repo: Repo, sha: str) -> list[str]:
    return repo.git("rev-list", "--parents", "-n1", sha).split()[1:]


def changed(repo: Repo, base: str, head: str) -> set[tuple[str, str]]:
    return {(c.status, c.path) for c in repo.changes(base, head)}


# -- Repo basics ------------------------------------------------------------------------


def test_repo_rejects_non_repositories_and_repositories_without_commits(tmp_path):
    with pytest.raises(UsageError, match="not inside a git work tree"):
        Repo(tmp_path / "home")
    (tmp_path / "empty").mkdir()
    sh(tmp_path / "empty", "init", "-q")
    with pytest.raises(UsageError, match="no commits"):
        Repo(tmp_path / "empty")


def test_repo_is_located_whatever_its_path_holds(tmp_path):
    """Top level, git dir and HEAD come from one rev-parse, a line each: a path with a line
    break or a trailing space is still read as git spells it (asked again one by one)."""
    for name in ("with\nbreak", "trailing "):
        path = make_repo(tmp_path / name)
        repo = Repo(path)
        assert repo.root == path.resolve() and repo.git_dir == path.resolve() / ".git"
    (tmp_path / "odd\nempty").mkdir()
    sh(tmp_path / "odd\nempty", "init", "-q")
    with pytest.raises(UsageError, match="no commits"):
        Repo(tmp_path / "odd\nempty")
    assert Repo(tmp_path / "odd\nempty", require_commit=False).root.name == "odd\nempty"


def test_repo_finds_top_level_and_common_git_dir(user, tmp_path):
    repo, path, before = user
    assert Repo(path / "src").root == path.resolve()
    assert repo.git_dir == (path / ".git").resolve()
    sh(path, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), "main")
    wt = (tmp_path / "wt").resolve()
    assert Repo(wt).root == wt and Repo(wt).git_dir == repo.git_dir
    assert repo.checked_out() == "refs/heads/feature"
    assert Repo(wt).checked_out() == ""
    assert repo.rev_parse("main") == sh(path, "rev-parse", "main").strip()
    assert repo.rev_parse("no-such-branch") is None
    assert repo.rev_parse("--all") is None  # a rev is never read as an option
    assert user_state(path) == before


def test_rev_parse_of_a_full_sha_answers_as_git_does_without_running_git(user, monkeypatch):
    """A full sha is its own answer: ``git rev-parse --verify`` returns any 40-hex name as
    is (lower-cased, present in the object store or not), so andon does not start git for
    the shas it passes around (about 35 git processes per packet, issue 12's benchmark)."""
    repo, path, before = user
    head = sh(path, "rev-parse", "main").strip()
    absent = "0123456789abcdef" * 2 + "01234567"
    expected = {rev: sh(path, "rev-parse", "--verify", "--quiet", rev).strip()
                for rev in (head, head.upper(), absent)}
    calls = []
    run = Repo._run
    monkeypatch.setattr(Repo, "_run", lambda self, args, *rest, **kw: (
        calls.append(args), run(self, args, *rest, **kw))[1])
    assert repo.rev_parse(head) == expected[head] == head
    assert repo.resolve(absent) == expected[absent] == absent
    assert calls == []
    # anything else still asks git: a short sha, an upper-case sha, a name
    assert repo.rev_parse(head.upper()) == expected[head.upper()] == head
    assert repo.rev_parse(head[:12]) == head
    assert repo.rev_parse("main") == head
    assert len(calls) == 3
    assert user_state(path) == before


def test_git_error_carries_argv_and_status(user):
    repo, _, _ = user
    with pytest.raises(GitError) as info:
        repo.git("cat-file", "-t", "no-such-object")
    assert info.value.returncode != 0 and "cat-file" in info.value.argv


# -- the golden rule ------------------------------------------------------------------


def test_no_operation_touches_the_users_tree_index_or_branch(user, tmp_path):
    repo, path, before = user
    base = repo.rev_parse("main")
    steps = []

    def check(step):
        steps.append(step)
        assert user_state(path) == before, f"user state changed by {step}"

    test_file = write(tmp_path / "p/t.py", "def test(): pass\n")
    planted = repo.plant(base, blobs({"tests/test_b01.py": test_file}), "plant B01")
    check("plant")
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", planted)
    check("add_worktree")
    write(wt / "src/app.py", "print('agent')\n")
    write(wt / "new.txt", "agent file\n")
    snap = repo.snapshot(wt, planted, "snapshot")
    check("snapshot")
    assert changed(repo, planted, snap) == {("M", "src/app.py"), ("A", "new.txt")}
    repo.diff_stat(base, snap), repo.file_bytes(snap, "new.txt"), repo.refs_snapshot()
    check("changes/diff_stat/file_bytes/refs_snapshot")
    merged = repo.squash(base, base, snap, commit_message("B01", "", {"Andon-Packet": "B01"}))
    check("squash")
    repo.set_ref("refs/heads/andon/integration", merged, ZERO_SHA)
    check("set_ref")
    assert repo.find_commit_with_trailers("andon/integration", {"Andon-Packet": "B01"}) == merged
    check("find_commit_with_trailers")
    clone = repo.clone_at(merged, tmp_path / "clone")
    assert (clone / "new.txt").read_text() == "agent file\n"
    check("clone_at")
    repo.list_worktrees()
    check("list_worktrees")
    repo.remove_worktree(wt)
    check("remove_worktree")
    assert len(steps) == 10


# -- plant ----------------------------------------------------------------------------


def test_plant_copies_bytes_and_exec_bit_and_commits_only_planted_paths(user, tmp_path):
    repo, path, before = user
    base = repo.rev_parse("main")
    refs = repo.refs_snapshot()
    script = write(tmp_path / "p/run.sh", b"#!/bin/sh\necho \xc3\xa9\n")
    script.chmod(0o755)
    files = {"tests/test_a.py": write(tmp_path / "p/a.py", "def test_a(): assert 0\n"),
             "scripts/run.sh": script,
             "logs/keep.log": write(tmp_path / "p/keep.log", "ignored name, planted anyway\n"),
             "tests/test_[ab].py": write(tmp_path / "p/glob.py", "a name, not a pattern\n"),
             "src/app.py": write(tmp_path / "p/app.py", "print('planted over')\n")}
    sha = repo.plant(base, blobs(files), "plant B01")
    assert parents(repo, sha) == [base]
    assert repo.refs_snapshot() == refs  # plumbing only: no ref moved or made
    assert repo.git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", sha) == \
        "andon <andon@localhost>|andon <andon@localhost>|plant B01\n"
    assert {(c.path, c.status, c.new_mode) for c in repo.changes(base, sha)} == {
        ("tests/test_a.py", "A", "100644"), ("scripts/run.sh", "A", "100755"),
        ("logs/keep.log", "A", "100644"), ("tests/test_[ab].py", "A", "100644"),
        ("src/app.py", "M", "100644")}
    assert repo.file_bytes(sha, "scripts/run.sh") == script.read_bytes()
    assert repo.file_bytes(sha, "README.md") == b"hello\n"  # the rest of base is kept
    assert repo.plant(sha, blobs(files), "again") == sha  # identical files: nothing new to commit
    assert user_state(path) == before


@pytest.mark.parametrize("rel", ["../escape.py", "/abs/x.py", ".git/hooks/pre-commit",
                                 "link/x.py", "README.md/x.py", "src"])
def test_plant_refuses_paths_outside_the_tree_or_through_files(user, tmp_path, rel):
    repo, path, before = user
    outside = tmp_path / "outside"
    outside.mkdir()
    base = attempt_commit(repo, tmp_path, "main", {})
    tree = repo.git("mktree", input=(repo.git("ls-tree", f"{base}^{{tree}}") + "120000 blob "
                    + repo.git("hash-object", "-w", "--stdin", input=str(outside).encode())
                    .strip() + "\tlink\n").encode()).strip()
    linked = repo.git("commit-tree", tree, "-p", base, "-m", "link").strip()
    refs = repo.refs_snapshot()
    with pytest.raises(UsageError):
        repo.plant(linked, blobs({rel: write(tmp_path / "p/x.py", "x\n")}), "plant")
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.py").exists()
    assert repo.refs_snapshot() == refs and user_state(path) == before


# -- snapshot -------------------------------------------------------------------------


@pytest.fixture
def attempt(user, tmp_path):
    """A worktree on andon/B01/1 with one planted test: (repo, user path, before, wt, planted)."""
    repo, path, before = user
    planted = repo.plant(repo.rev_parse("main"),
                         blobs({"tests/test_b01.py":
                                write(tmp_path / "p/t.py", "def test(): 1\n")}),
                         "plant")
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", planted)
    return repo, path, before, wt, planted


def test_snapshot_captures_untracked_modified_deleted_but_not_ignored(attempt):
    repo, path, before, wt, planted = attempt
    write(wt / "brand new.txt", "new\n")
    write(wt / "src/app.py", "print('changed')\n")
    (wt / "README.md").unlink()
    write(wt / "build.log", "ignored\n")
    sh(wt, "add", "brand new.txt")  # the worktree's own index must not matter either way
    index_before = sh(wt, "ls-files", "--stage")
    snap = repo.snapshot(wt, planted, "snapshot")
    assert parents(repo, snap) == [planted]
    assert changed(repo, planted, snap) == {("A", "brand new.txt"), ("M", "src/app.py"),
                                           ("D", "README.md")}
    assert repo.file_bytes(snap, "build.log") is None
    assert repo.git("log", "-1", "--format=%an", snap) == "andon\n"
    assert sh(wt, "ls-files", "--stage") == index_before  # worktree index untouched
    assert repo.rev_parse("andon/B01/1") == planted  # snapshot moves no ref
    assert user_state(path) == before


def _set_times_back(path: Path, like: os.stat_result) -> None:
    os.utime(path, ns=(like.st_atime_ns, like.st_mtime_ns))


def _past_the_second_of(path: Path) -> None:
    """Return once a file changed now gets a ctime in a later second than ``path``'s: git
    compares ctimes to the second where it is built without nanoseconds, and a rewrite in
    the same tick as the index's record is the documented limit (worktrees.index_of)."""
    probe = path.parent / ".probe"
    while True:
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns // 10**9 > path.stat().st_ctime_ns // 10**9:
            probe.unlink()
            return


def test_the_reused_index_misses_no_change_an_agent_dresses_as_none(attempt):
    """The snapshot and the strays check start from the harness's own index of the worktree
    (worktrees.index_of: git's record of the clone, taken before any agent ran), so that only
    files whose stat changed are hashed. An agent that rewrites a file to the same size and
    puts its mtime back, or adds a file and sets its folder's time back (what an untracked
    cache would trust), or deletes one, is still seen, and the index never leaves the worktree
    root for the worktree itself."""
    from andon.gates.joint import strays
    from andon.worktrees import index_of
    repo, path, _, wt, planted = attempt
    sh(path, "config", "core.untrackedCache", "true")  # the user's: git reads it for both
    assert index_of(wt).is_file() and index_of(wt).parent == wt.parent
    app, src = wt / "src/app.py", (wt / "src").stat()
    old = app.stat()
    _past_the_second_of(app)
    write(app, app.read_text().replace("1", "9"))  # same size
    _set_times_back(app, old)
    write(wt / "src/new.py", "x = 1\n")
    _set_times_back(wt / "src", src)
    (wt / "README.md").unlink()
    snap = repo.snapshot(wt, planted, "snapshot")
    assert changed(repo, planted, snap) == {("M", "src/app.py"), ("A", "src/new.py"),
                                           ("D", "README.md")}
    assert repo.file_bytes(snap, "src/app.py") == b"print(9)\nprint(2)\n"
    assert strays(repo, wt, snap) == []  # the worktree now holds exactly the snapshot
    # the same again after the snapshot: the code under test rewrites a file in place
    old = app.stat()
    _past_the_second_of(app)
    write(app, app.read_text().replace("9", "7"))
    _set_times_back(app, old)
    src = (wt / "src").stat()
    write(wt / "src/later.py", "y = 2\n")
    _set_times_back(wt / "src", src)
    assert strays(repo, wt, snap) == ["src/app.py", "src/later.py"]
    again = repo.snapshot(wt, snap, "again")
    assert repo.file_bytes(again, "src/app.py") == b"print(7)\nprint(2)\n"
    assert changed(repo, snap, again) == {("M", "src/app.py"), ("A", "src/later.py")}


def test_an_index_of_another_tree_is_read_afresh_and_goes_with_the_worktree(attempt):
    """The index is only a hint: one whose entries are not the parent's tree (stale, or
    written by someone else) is replaced by the parent's before the snapshot reads the
    worktree, so nothing of another tree reaches the commit."""
    from andon.worktrees import index_of
    repo, path, _, wt, planted = attempt
    other = wt.parent / "other-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(other)}
    subprocess.run(["git", "read-tree", "main~1"], cwd=path, env=env, check=True)
    shutil.copy2(other, index_of(wt))
    write(wt / "feature.py", "x = 1\n")
    snap = repo.snapshot(wt, planted, "snapshot")
    assert changed(repo, planted, snap) == {("A", "feature.py")}
    repo.remove_worktree(wt)
    assert not index_of(wt).exists()


def test_snapshot_includes_the_agents_own_commits_with_plant_as_parent(attempt):
    repo, path, before, wt, planted = attempt
    write(wt / "feature.py", "x = 1\n")
    sh(wt, "add", "feature.py")
    sh(wt, "commit", "-qm", "agent commit")
    write(wt / "feature.py", "x = 2\n")  # and an uncommitted edit on top
    snap = repo.snapshot(wt, planted, "snapshot")
    assert parents(repo, snap) == [planted]
    assert repo.file_bytes(snap, "feature.py") == b"x = 2\n"
    assert user_state(path) == before


def test_snapshot_after_agent_switched_branch_captures_the_disk(attempt):
    repo, path, before, wt, planted = attempt
    sh(wt, "checkout", "-qb", "other")
    write(wt / "on_other.py", "y = 1\n")
    sh(wt, "add", "on_other.py")
    sh(wt, "commit", "-qm", "agent on other branch")
    snap = repo.snapshot(wt, planted, "snapshot")
    assert parents(repo, snap) == [planted]
    assert changed(repo, planted, snap) == {("A", "on_other.py")}
    # Checking out an older commit removes the planted test from disk: the snapshot says so.
    sh(wt, "checkout", "-q", "--detach", "andon/B01/1~1")
    assert ("D", "tests/test_b01.py") in changed(repo, planted, repo.snapshot(wt, planted, "s2"))
    assert user_state(path) == before


def test_snapshot_without_changes_is_still_a_new_commit(attempt):
    repo, _, _, wt, planted = attempt
    snap = repo.snapshot(wt, planted, "nothing")
    assert snap != planted and parents(repo, snap) == [planted]
    assert repo.changes(planted, snap) == []


def test_snapshot_keeps_a_tracked_file_that_gitignore_matches(user, tmp_path):
    repo, _, _ = user
    planted = repo.plant("main", blobs({"fixtures/in.log": write(tmp_path / "p/in.log", "x\n")}),
                         "p")
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", planted)
    write(wt / "fixtures/in.log", "changed\n")
    write(wt / "loose.log", "ignored and never committed\n")
    write(wt / "kept.log", "force-added in the agent's own commit\n")
    sh(wt, "add", "--force", "kept.log")
    sh(wt, "commit", "-qm", "the agent force-adds an ignored file")
    # in.log is tracked in the parent, so its change counts; what .gitignore matches and the
    # parent lacks is left out, force-added or not: the agent's repository is never read
    assert changed(repo, planted, repo.snapshot(wt, planted, "s")) == {("M", "fixtures/in.log")}


def test_snapshot_runs_nothing_the_agents_repository_configures(attempt, tmp_path):
    """A partial-clone promisor remote whose upload-pack is a shell command, plus a commit
    pointing at a missing tree: any git command reading that repository would run it."""
    repo, path, before, wt, planted = attempt
    marker = tmp_path / "PWNED"
    missing_tree = "1" * 40
    sh(wt, "config", "extensions.partialClone", "evil")
    sh(wt, "config", "remote.evil.promisor", "true")
    sh(wt, "config", "remote.evil.url", str(tmp_path))
    sh(wt, "config", "remote.evil.uploadpack", f"touch {marker}; git-upload-pack")
    sh(wt, "config", "core.fsmonitor", f"touch {marker}; true")
    (wt / ".git/HEAD").write_text(missing_tree + "\n")  # HEAD at an object it lacks
    write(wt / "feature.py", "x = 1\n")
    snap = repo.snapshot(wt, planted, "s")
    assert changed(repo, planted, snap) == {("A", "feature.py")}
    assert not marker.exists()
    assert user_state(path) == before


def test_snapshot_of_a_worktree_gone_or_replaced_by_a_link_is_a_snapshot_error(attempt, tmp_path):
    repo, path, before, wt, planted = attempt
    victim = write(tmp_path / "victim/precious.txt", "keep me\n").parent
    shutil.rmtree(wt)
    with pytest.raises(SnapshotError, match="no longer a directory"):
        repo.snapshot(wt, planted, "s")
    os.symlink(victim, wt)
    with pytest.raises(SnapshotError, match="symbolic link"):
        repo.snapshot(wt, planted, "s")
    repo.remove_worktree(wt)  # removes the link, never what it points to
    assert not wt.exists() and not wt.is_symlink()
    assert (victim / "precious.txt").read_text() == "keep me\n"
    assert user_state(path) == before


def test_snapshot_of_a_nested_repository_without_commits_is_a_snapshot_error(attempt):
    repo, path, before, wt, planted = attempt
    (wt / "src/nested").mkdir()
    sh(wt / "src/nested", "init", "-q")
    write(wt / "src/nested/x.py", "x\n")
    with pytest.raises(SnapshotError, match="src/nested"):
        repo.snapshot(wt, planted, "s")
    assert user_state(path) == before


def test_snapshot_refuses_a_directory_that_is_not_a_worktree(user, tmp_path):
    repo, path, _ = user
    with pytest.raises(SnapshotError, match="inside the main work tree"):
        repo.snapshot(path / "src", "main", "s")
    with pytest.raises(SnapshotError):
        repo.snapshot(tmp_path / "missing", "main", "s")


# -- changes, file_bytes, diff_stat -----------------------------------------------------


def test_changes_reports_every_kind_of_change(tmp_path):
    path = make_repo(tmp_path / "repo")
    repo = Repo(path)
    write(path / "gone.txt", "bye\n")
    write(path / "old name.txt", "rename me\n")
    write(path / "becomes_link", "file\n")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "more")
    base = repo.rev_parse("HEAD")
    write(path / "README.md", "changed\n")
    (path / "gone.txt").unlink()
    sh(path, "mv", "old name.txt", "new name.txt")
    os.symlink("README.md", path / "link")
    (path / "becomes_link").unlink()
    os.symlink("src/app.py", path / "becomes_link")
    odd = "dir with space/line\nbreak ünï.txt"
    write(path / odd, "odd\n")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "changes")
    got = {c.path: c for c in repo.changes(base, "HEAD")}
    assert got == {
        "README.md": Change("README.md", "M", "100644", "100644"),
        "gone.txt": Change("gone.txt", "D", "100644", "000000"),
        "old name.txt": Change("old name.txt", "D", "100644", "000000"),
        "new name.txt": Change("new name.txt", "A", "000000", "100644"),
        "link": Change("link", "A", "000000", "120000"),
        "becomes_link": Change("becomes_link", "T", "100644", "120000"),
        odd: Change(odd, "A", "000000", "100644"),
    }
    assert repo.changes(base, base) == []
    assert repo.file_bytes("HEAD", odd) == b"odd\n"
    assert repo.file_bytes("HEAD", "link") == b"README.md"  # a symlink's blob is its target
    assert repo.file_bytes("HEAD", "gone.txt") is None
    assert repo.file_bytes("HEAD", "src") is None  # a directory is not a file
    assert repo.file_bytes(base, "gone.txt") == b"bye\n"
    with pytest.raises(GitError):
        repo.file_bytes("no-such-branch", "README.md")
    stat_text = repo.diff_stat(base, "HEAD")
    assert "README.md" in stat_text and "7 files changed" in stat_text


# -- squash ---------------------------------------------------------------------------


def attempt_commit(repo: Repo, tmp_path: Path, base: str, edits: dict[str, str]) -> str:
    """An agent attempt forked at `base` that writes `edits`; returns its snapshot."""
    n = len(list(tmp_path.glob("wt-*")))
    wt = repo.add_worktree(tmp_path / f"wt-{n}", f"andon/x/{n}", base)
    for rel, text in edits.items():
        write(wt / rel, text)
    return repo.snapshot(wt, base, "snapshot")


def test_squash_onto_a_moved_integration_branch(user, tmp_path):
    repo, path, before = user
    base = repo.rev_parse("main")
    moved = attempt_commit(repo, tmp_path, base, {"README.md": "hello from B00\n"})
    head = attempt_commit(repo, tmp_path, base, {"src/app.py": "print('B01')\n", "b01.txt": "1\n"})
    refs = repo.refs_snapshot()
    merged = repo.squash(moved, base, head, "B01\n\nAndon-Packet: B01\n")
    assert parents(repo, merged) == [moved]
    assert repo.file_bytes(merged, "README.md") == b"hello from B00\n"
    assert repo.file_bytes(merged, "src/app.py") == b"print('B01')\n"
    assert repo.file_bytes(merged, "b01.txt") == b"1\n"
    assert repo.git("cat-file", "commit", merged).endswith("\n\nB01\n\nAndon-Packet: B01\n")
    assert repo.git("log", "-1", "--format=%an", merged) == "andon\n"
    assert repo.refs_snapshot() == refs
    assert user_state(path) == before


def test_squash_onto_its_own_base_is_the_three_way_merge_without_it(user, tmp_path):
    """The branch has not moved (onto is base): the squash commit's tree is head's, as the
    merge of base..head into base gives it — added, changed, removed, made executable,
    made a link — without the merge's processes."""
    repo, path, before = user
    base = repo.rev_parse("main")
    wt = repo.add_worktree(tmp_path / "wt", "andon/x/1", base)
    write(wt / "new/file.txt", "new\n")
    write(wt / "src/app.py", "print('changed')\n")
    (wt / "README.md").unlink()
    (wt / ".gitignore").chmod(0o755)
    (wt / "link").symlink_to("src/app.py")
    head = repo.snapshot(wt, base, "snapshot")
    merged = repo.squash(base, base, head, "B01\n")
    sides = [sh(path, "commit-tree", f"{c}^{{tree}}", "-p", base, "-m", "side").strip()
             for c in (base, head)]
    three_way = sh(path, "merge-tree", "--write-tree", *sides).split()[0]
    assert repo.resolve(f"{merged}^{{tree}}") == three_way == repo.resolve(f"{head}^{{tree}}")
    assert parents(repo, merged) == [base]
    assert sh(path, "cat-file", "commit", merged).endswith("\n\nB01\n")
    assert user_state(path) == before


def test_squash_conflict_names_the_path_and_moves_nothing(user, tmp_path):
    repo, path, before = user
    base = repo.rev_parse("main")
    moved = attempt_commit(repo, tmp_path, base, {"README.md": "one\n", "ok.txt": "fine\n"})
    head = attempt_commit(repo, tmp_path, base, {"README.md": "two\n", "ok2.txt": "fine\n"})
    refs = repo.refs_snapshot()
    with pytest.raises(MergeConflict) as info:
        repo.squash(moved, base, head, "B01")
    assert info.value.paths == ["README.md"]
    assert "README.md" in str(info.value)
    assert repo.refs_snapshot() == refs
    assert user_state(path) == before


def test_squash_uses_the_given_base_not_gits_merge_base(user, tmp_path):
    repo, _, _ = user
    root = repo.rev_parse("main~1")
    base = attempt_commit(repo, tmp_path, root, {"f.txt": "1\n2\n"})
    head = attempt_commit(repo, tmp_path, base, {"g.txt": "g\n"})
    # `onto` took base's change and one more line, but is not descended from base: against
    # git's own merge base (root) both sides add f.txt differently and would conflict.
    onto = attempt_commit(repo, tmp_path, root, {"f.txt": "1\n2\n3\n"})
    merged = repo.squash(onto, base, head, "B01")
    assert repo.file_bytes(merged, "f.txt") == b"1\n2\n3\n"
    assert repo.file_bytes(merged, "g.txt") == b"g\n"


# -- refs -----------------------------------------------------------------------------


def test_set_ref_compares_and_swaps(user):
    repo, path, before = user
    first, second = repo.rev_parse("main~1"), repo.rev_parse("main")
    ref = "refs/heads/andon/integration"
    repo.set_ref(ref, first, ZERO_SHA)
    assert repo.rev_parse(ref) == first
    with pytest.raises(RefMoved, match="expected"):
        repo.set_ref(ref, second, ZERO_SHA)  # exists already
    with pytest.raises(RefMoved):
        repo.set_ref(ref, second, second)  # wrong old value
    assert repo.rev_parse(ref) == first
    repo.set_ref(ref, second, first)
    assert repo.rev_parse(ref) == second
    with pytest.raises(RefMoved):
        repo.set_ref("refs/heads/absent", second, first)
    assert repo.rev_parse("refs/heads/absent") is None
    assert user_state(path) == before


def test_set_ref_refuses_short_names_and_the_users_branch(user):
    repo, path, before = user
    with pytest.raises(UsageError, match="full name"):
        repo.set_ref("andon/integration", repo.rev_parse("main"), ZERO_SHA)
    with pytest.raises(UsageError, match="checked out"):
        repo.set_ref("refs/heads/feature", repo.rev_parse("main~1"), None)
    assert not (repo.git_dir / "andon").exists()
    assert user_state(path) == before


def test_the_checked_out_branch_is_read_at_each_move(user, tmp_path):
    """The user switches branches while andon runs: each set_ref reads HEAD again (the file
    git keeps, or git itself for a HEAD that is a symbolic link); a linked worktree's own
    HEAD counts for a Repo made there."""
    repo, path, _ = user
    side = repo.rev_parse("main~1")
    repo.set_ref("refs/heads/main", repo.rev_parse("main"), None)  # on feature: allowed
    sh(path, "stash", "-q")
    sh(path, "checkout", "-q", "main")
    with pytest.raises(UsageError, match="checked out"):
        repo.set_ref("refs/heads/main", side, None)
    sh(path, "checkout", "-q", "--detach")
    repo.set_ref("refs/heads/feature", repo.rev_parse("feature"), None)
    head = repo.git_dir / "HEAD"
    head.unlink()
    head.symlink_to("refs/heads/feature")
    assert repo.checked_out() == "refs/heads/feature" == sh(path, "symbolic-ref", "HEAD").strip()
    with pytest.raises(UsageError, match="checked out"):
        repo.set_ref("refs/heads/feature", side, None)
    head.unlink()
    head.write_text("ref: refs/heads/feature  \n")  # git drops the trailing blanks
    assert repo.checked_out() == "refs/heads/feature" == sh(path, "symbolic-ref", "HEAD").strip()
    sh(path, "worktree", "add", "-q", str(tmp_path / "linked"), "-b", "side", "main")
    linked = Repo(tmp_path / "linked")
    with pytest.raises(UsageError, match="checked out"):
        linked.set_ref("refs/heads/side", side, None)
    linked.set_ref("refs/heads/main", repo.rev_parse("main"), None)


def test_worktree_is_its_own_repository_so_agent_refs_stay_there(user, tmp_path):
    repo, path, before = user
    refs = repo.refs_snapshot()
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", "main")
    assert set(repo.refs_snapshot()) - set(refs) == {"refs/heads/andon/B01/1"}
    assert repo.rev_parse("andon/B01/1") == repo.rev_parse("main")
    sh(wt, "branch", "sneaky")
    # no identity anywhere (this module's fixture clears it): the worktree has a stand-in
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "agent commit"], cwd=wt,
                   check=True, env={k: v for k, v in os.environ.items() if k not in USER})
    assert set(repo.refs_snapshot()) - set(refs) == {"refs/heads/andon/B01/1"}
    assert repo.rev_parse("andon/B01/1") == repo.rev_parse("main")
    assert repo.list_worktrees() == [repo.root]  # not a linked worktree of the user's repo
    with pytest.raises(RefMoved):
        repo.add_worktree(tmp_path / "wt2", "andon/B01/1", "main")  # branch exists
    with pytest.raises(UsageError, match="already exists"):
        repo.add_worktree(wt, "andon/B01/2", "main")
    assert user_state(path) == before


def history_with_answers(repo: Repo, tmp_path: Path) -> dict[str, str]:
    """main~1 is the base; main moved on after it; a side branch and a tag hold "answers";
    a dangling commit too. Returns the shas by name."""
    base = repo.rev_parse("main")
    later = attempt_commit(repo, tmp_path, base, {"later.py": "answer from the future\n"})
    repo.set_ref("refs/heads/main", later, base)
    side = attempt_commit(repo, tmp_path, base, {"src/app.py": "upstream fix\n"})
    repo.set_ref("refs/heads/upstream-fix", side, ZERO_SHA)
    tagged = attempt_commit(repo, tmp_path, base, {"tagged.py": "tagged answer\n"})
    repo.git("tag", "v-answer", tagged)
    dangling = attempt_commit(repo, tmp_path, base, {"dangling.py": "x\n"})
    return {"base": base, "later": later, "side": side, "tagged": tagged, "dangling": dangling}


@pytest.mark.parametrize("history", ["full", "shallow"])
def test_worktree_exposes_only_the_base_history(user, tmp_path, history):
    """Catalogue kind 17: nothing in the agent's worktree leads to other branches, tags,
    later commits, dangling objects or the repository's object store."""
    repo, path, before = user
    shas = history_with_answers(repo, tmp_path)
    wt = repo.add_worktree(tmp_path / "agent", "andon/B01/1", shas["base"], history=history)
    assert sh(wt, "for-each-ref", "--format=%(refname)") == "refs/heads/andon/B01/1\n"
    assert sh(wt, "remote") == "" and sh(wt, "tag") == ""
    assert not (wt / ".git/objects/info/alternates").exists()
    assert (wt / ".git").is_dir()  # not a gitfile pointing into the user's repository
    assert str(repo.git_dir) not in (wt / ".git/config").read_text()
    for name in ("later", "side", "tagged", "dangling"):
        probe = subprocess.run(["git", "cat-file", "-e", shas[name]], cwd=wt,
                               capture_output=True)
        assert probe.returncode != 0, f"{name} commit readable from the worktree"
    all_objects = sh(wt, "cat-file", "--batch-all-objects", "--batch-check")
    assert "upstream fix" not in sh(wt, "log", "--all", "-p")
    for name in ("later", "side", "tagged"):
        assert repo.git("rev-parse", f"{shas[name]}^{{tree}}").strip() not in all_objects
    for f in (wt / ".git").rglob("*"):  # no trace of where it was cloned from (reflog)
        assert not f.is_file() or str(path) not in f.read_text(errors="replace"), f
    log = sh(wt, "log", "--format=%H").split()
    assert log[0] == shas["base"]
    assert len(log) == (1 if history == "shallow" else 2)  # make_repo made two commits
    assert user_state(path) == before


def test_snapshot_ignores_what_the_agent_did_to_its_own_repository(attempt):
    repo, path, before, wt, planted = attempt
    write(wt / "feature.py", "x = 1\n")
    (wt / ".git/info").mkdir(exist_ok=True)
    write(wt / ".git/info/exclude", "feature.py\n")  # hide it from the snapshot? no
    sh(wt, "config", "core.excludesFile", str(write(wt.parent / "ex", "*.py\n")))
    assert {("A", "feature.py")} <= changed(repo, planted, repo.snapshot(wt, planted, "s1"))
    shutil.rmtree(wt / ".git")  # and with no repository at all the files are still read
    snap = repo.snapshot(wt, planted, "s2")
    assert changed(repo, planted, snap) == {("A", "feature.py")}
    assert user_state(path) == before


def test_diff_shows_text_whatever_attributes_and_config_say(user, tmp_path):
    """A ``-diff`` attribute (in .git/info/attributes or the checkout's .gitattributes), an
    external diff, a textconv, no prefixes or colour in config: the diff stays the text."""
    repo, path, _ = user
    base = repo.rev_parse("main")
    head = attempt_commit(repo, tmp_path, base, {"src/app.py": "if args == (3, 4):\n"})
    write(path / ".git/info/attributes", "*.py -diff\n*.py diff=conv\n")
    sh(path, "config", "diff.external", "false")
    sh(path, "config", "diff.conv.textconv", "false")
    sh(path, "config", "diff.noprefix", "true")
    sh(path, "config", "color.ui", "always")
    out = repo.diff(base, head, unified=0)
    assert "+if args == (3, 4):" in out and "Binary" not in out
    assert "+++ b/src/app.py" in out and "\x1b[" not in out
    assert "Bin" not in repo.diff_stat(base, head)


def test_worktree_without_reflogs_and_snapshot_despite_the_users_sparse_checkout(user,
                                                                             tmp_path):
    """The user's config turns reflogs off and their checkout is sparse: neither is about the
    agent's worktree, so the clone works and every file the agent wrote is taken."""
    repo, path, _ = user
    sh(path, "config", "core.logAllRefUpdates", "false")
    sh(path, "sparse-checkout", "set", "src")
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", "main")
    write(wt / "docs/new.md", "outside the user's sparse cone\n")
    assert ("A", "docs/new.md") in changed(repo, "main", repo.snapshot(wt, "main", "s"))


def test_a_dangling_link_at_the_worktree_path_is_refused(user, tmp_path):
    repo, _, _ = user
    (tmp_path / "wt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="already exists"):
        repo.add_worktree(tmp_path / "wt", "andon/B01/1", "main")
    assert not (tmp_path / "elsewhere").exists()


def test_find_commit_with_trailers(user):
    repo, _, _ = user
    tip = repo.rev_parse("main")
    made = {}
    for packet, n in [("B01", "1"), ("B02", "1"), ("B01", "2")]:
        msg = commit_message(f"{packet} attempt {n}", "Body.", {"Andon-Packet": packet,
                                                                 "Andon-Attempt": n})
        tip = made[packet, n] = repo.git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-F", "-",
                                         input=msg.encode()).strip()
    # A trailer-looking line that is not in the trailer block does not count.
    msg = "B09\n\nAndon-Packet: B09\n\nJust prose, not a trailer block.\n"
    tip = repo.git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-F", "-",
                   input=msg.encode()).strip()
    repo.set_ref("refs/heads/andon/integration", tip, ZERO_SHA)
    find = repo.find_commit_with_trailers
    assert find("andon/integration", {"Andon-Packet": "B01"}) == made["B01", "2"]
    assert find("andon/integration", {"andon-packet": "B01", "Andon-Attempt": "1"}) == \
        made["B01", "1"]
    assert find("andon/integration", {"Andon-Packet": "B02"}) == made["B02", "1"]
    assert find("andon/integration", {"Andon-Packet": "B09"}) is None
    assert find("andon/integration", {"Andon-Packet": "B01", "Andon-Attempt": "3"}) is None
    assert find("andon/integration", {"Andon-Packet": "B01", "Andon-Attempt": "1"},
                since=made["B02", "1"]) is None
    assert find("refs/heads/no-such-branch", {"Andon-Packet": "B01"}) is None


def test_commit_message_is_parsed_by_git_as_trailers(user):
    repo, _, _ = user
    msg = commit_message("Add thing", "Why it matters.\n", {"Andon-Packet": "B01",
                                                            "Andon-Attempt": "2"})
    assert msg == "Add thing\n\nWhy it matters.\n\nAndon-Packet: B01\nAndon-Attempt: 2\n"
    assert repo.git("interpret-trailers", "--parse", input=msg.encode()) == \
        "Andon-Packet: B01\nAndon-Attempt: 2\n"
    assert commit_message("Subject", "", {}) == "Subject\n"
    for bad in [("", {}), ("two\nlines", {}), ("ok", {"Bad Key": "v"}), ("ok", {"K": "a\nb"})]:
        with pytest.raises(ValueError):
            commit_message(bad[0], "", bad[1])


# -- clone_at and remove_worktree -------------------------------------------------------


def test_clone_at_contains_only_committed_content(attempt, tmp_path):
    repo, path, before, wt, planted = attempt
    write(wt / "untracked.txt", "not committed\n")
    write(wt / "cache.log", "ignored\n")
    clone = repo.clone_at(planted, tmp_path / "clone")
    assert sh(clone, "rev-parse", "HEAD").strip() == planted
    assert sh(clone, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert (clone / "tests/test_b01.py").exists()
    assert not (clone / "untracked.txt").exists() and not (clone / "cache.log").exists()
    write(clone / "made_in_clone.txt", "x\n")
    assert not (wt / "made_in_clone.txt").exists()
    # A snapshot no ref points to can be cloned too; ignored files still stay behind.
    snap = repo.snapshot(wt, planted, "snapshot")
    clone2 = repo.clone_at(snap, tmp_path / "clone2")
    assert (clone2 / "untracked.txt").read_text() == "not committed\n"
    assert not (clone2 / "cache.log").exists()
    assert user_state(path) == before


def test_clone_at_a_rev_only_on_a_non_default_branch(user, tmp_path):
    repo, path, before = user
    side = attempt_commit(repo, tmp_path, repo.rev_parse("main"), {"side.txt": "side\n"})
    repo.set_ref("refs/heads/side", side, ZERO_SHA)
    clone = repo.clone_at("side", tmp_path / "clone")
    assert sh(clone, "rev-parse", "HEAD").strip() == side
    assert (clone / "side.txt").read_text() == "side\n"
    assert sh(clone, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD\n"  # detached
    assert user_state(path) == before


def test_andons_clones_start_no_housekeeping_and_the_users_repository_is_left_alone(
        user, tmp_path):
    """A commit in the agent's worktree or a gate's clone starts no `git maintenance run
    --auto`: their config says so. The user's repository config is not touched."""
    repo, path, before = user
    config = (path / ".git" / "config").read_bytes()
    for clone in (repo.add_worktree(tmp_path / "wt", "andon/B01/1", "main"),
                  repo.clone_at("main", tmp_path / "gate")):
        assert sh(clone, "config", "maintenance.auto") == "false\n"
        assert sh(clone, "config", "gc.auto") == "0\n"
    assert (path / ".git" / "config").read_bytes() == config
    assert user_state(path) == before


def test_remove_worktree_whatever_the_agent_left(user, tmp_path):
    repo, path, before = user
    gone = repo.add_worktree(tmp_path / "gone", "andon/B01/1", "main")
    shutil.rmtree(gone)
    repo.remove_worktree(gone)
    repo.remove_worktree(gone)  # twice is fine
    dirty = repo.add_worktree(tmp_path / "dirty", "andon/B01/2", "main")
    write(dirty / "src/app.py", "uncommitted\n")
    locked = write(dirty / "locked/deep/x.txt", "x\n").parent
    locked.chmod(0)
    locked.parent.chmod(0o500)
    shutil.rmtree(dirty / ".git")
    repo.remove_worktree(dirty)
    assert not dirty.exists()
    # a linked worktree made by an older andon is removed and pruned
    sh(path, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), "main")
    repo.remove_worktree(tmp_path / "linked")
    assert repo.list_worktrees() == [repo.root] and not (tmp_path / "linked").exists()
    for bad in (path, path / "src", path.parent):
        with pytest.raises(UsageError):
            repo.remove_worktree(bad)
    assert user_state(path) == before


def test_inherited_git_location_variables_are_ignored(user, tmp_path, monkeypatch):
    """As when andon is started from inside a git hook of some other repository."""
    repo, path, before = user
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "elsewhere-index"))
    assert Repo(path / "src").root == path.resolve()
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", "main")
    write(wt / "x.txt", "x\n")
    assert changed(repo, "main", repo.snapshot(wt, "main", "s")) == {("A", "x.txt")}
    assert not (tmp_path / "elsewhere-index").exists()
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert user_state(path) == before


# -- loose objects packed once (issue 18) -------------------------------------------------

def test_pack_loose_packs_many_loose_objects_and_changes_nothing_else(user, tmp_path):
    """600 loose blobs (a commit of 600 files): one incremental pack, no loose object left,
    every ref, object and the user's dirty tree, index and branch exactly as before; the
    agent's worktree clone made afterwards still holds only its branch's history."""
    _, user, _ = user
    for i in range(600):
        write(user / "gen" / f"f{i:03d}.txt", f"file {i}\n")
    sh(user, "add", "gen")
    sh(user, "commit", "-qm", "many files", "--", "gen")
    repo = Repo(user)
    before_state, refs = user_state(user), repo.refs_snapshot()
    objects = sh(user, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    assert repo.pack_loose() >= 600
    assert "count: 0" in sh(user, "count-objects", "-v").splitlines()
    assert user_state(user) == before_state and repo.refs_snapshot() == refs
    assert sh(user, "cat-file", "--batch-all-objects", "--batch-check").splitlines() == objects
    sh(user, "fsck", "--no-progress")
    wt = repo.add_worktree(tmp_path / "wt", "andon/P1/1", "main")
    assert sh(wt, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/andon/P1/1"]
    assert sh(wt, "rev-list", "--all").split() == sh(user, "rev-list", "main").split()


def test_loose_objects_are_counted_as_git_counts_them(user):
    """Without a process, the same count as `git count-objects`: loose objects only, not
    packed ones, nor git's garbage (a temporary object file, a folder not named by two
    hex digits)."""
    _, user, _ = user
    objects = user / ".git" / "objects"

    def git_count() -> int:
        return int(dict(line.split(": ") for line in sh(user, "count-objects", "-v")
                        .splitlines())["count"])

    assert loose_objects(objects) == git_count() > 0
    write(objects / "ab" / "tmp_obj_XyZ", "half written")
    write(objects / "zz" / ("0" * 38), "not an object folder")
    write(objects / "ab" / ("0" * 37), "too short")
    assert loose_objects(objects) == git_count()
    sh(user, "repack", "-d", "-q")
    assert loose_objects(objects) == git_count() == 0
    assert loose_objects(user / "nowhere") == 0


def test_pack_loose_leaves_a_few_loose_objects_alone(user):
    """Below the limit nothing runs: the loose objects stay loose (no pack made)."""
    _, user, _ = user
    repo = Repo(user)
    loose = sh(user, "count-objects", "-v")
    assert repo.pack_loose() == 0
    assert sh(user, "count-objects", "-v") == loose


def test_manifest_of_a_tree_nested_deeper_than_the_recursion_limit_lists_its_files(
        tmp_path, deep_ok):
    """What an agent can write (a packet's plant folder, a worktree) may nest deeper than
    Python's recursion limit: the manifest still lists every file (it used to raise
    RecursionError from ``Path.rglob``)."""
    nest_deep(tmp_path / "t" / "deep", 1500)
    leaf = Path(tmp_path / "t" / "deep", *["d"] * 1500, "f.txt")
    leaf.write_text("x\n")
    (tmp_path / "t" / "top.txt").write_text("y\n")
    got = manifest(tmp_path / "t")
    assert sorted(got) == ["deep/" + "d/" * 1500 + "f.txt", "top.txt"]
    assert got["top.txt"] == file_marker(tmp_path / "t" / "top.txt")


def test_file_bytes_reads_names_that_look_like_gits_answers_and_is_none_for_a_submodule(
        tmp_path):
    """A name shaped like ``cat-file --batch``'s header ("<id> blob <size>") is read as a
    name; an empty file is b""; a submodule's entry (a commit, not a blob) is None."""
    path = make_repo(tmp_path / "repo")
    repo = Repo(path)
    sha = "0" * 40
    tricky = f"{sha} blob 5"
    write(path / tricky, "12345678\n")
    write(path / "empty.txt", "")
    sub = repo.rev_parse("HEAD")
    sh(path, "update-index", "--add", "--cacheinfo", f"160000,{sub},vendor/lib")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "odd names")
    assert repo.file_bytes("HEAD", tricky) == b"12345678\n"
    assert repo.file_bytes("HEAD", f"{sha} blob 3") is None  # absent: "... missing"
    assert repo.file_bytes("HEAD", "empty.txt") == b""
    assert repo.file_bytes("HEAD", "vendor/lib") is None


def test_blobs_names_the_paths_that_are_files_in_one_answer(tmp_path):
    path = make_repo(tmp_path / "repo")
    repo = Repo(path)
    odd = "line\nbreak.py"
    write(path / odd, "x\n")
    os.symlink("README.md", path / "link")
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "more")
    asked = ["README.md", "src", "src/app.py", "nothing.py", odd, "link", f"{'0' * 40} blob 3"]
    assert repo.blobs("HEAD", asked) == {"README.md", "src/app.py", odd, "link"}
    assert repo.blobs("HEAD", []) == set()
    with pytest.raises(GitError):
        repo.blobs("no-such-branch", ["README.md"])


def test_a_worktree_commits_as_the_user_or_as_a_stand_in(tmp_path, monkeypatch):
    """The worktree's config holds the user's name and email exactly as git reads them (a
    later value wins; quotes, '=' and non-ASCII kept), or andon's stand-in without one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no global identity
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    path = make_repo(tmp_path / "repo")
    repo = Repo(path)
    base = repo.rev_parse("main")
    wt = repo.add_worktree(tmp_path / "wt1", "andon/B01/1", base)
    assert sh(wt, "config", "user.name").strip() == "agent"
    assert sh(wt, "config", "user.email").strip() == "agent@andon.localhost"
    name = 'Zoë "Z" O\'Neil = x'
    sh(path, "config", "user.name", "first")
    sh(path, "config", "--add", "user.name", name)
    sh(path, "config", "user.email", "zoe@example.com")
    wt = repo.add_worktree(tmp_path / "wt2", "andon/B01/2", base)
    assert sh(wt, "config", "user.name").strip() == name
    assert sh(wt, "config", "user.email").strip() == "zoe@example.com"


def test_file_bytes_and_blobs_read_the_file_named_with_a_carriage_return_or_any_bytes(tmp_path):
    """``cat-file --batch`` line input strips a CR before the LF: "notes\\r" was read as
    "notes". A name that is not UTF-8 comes in with surrogates (os.fsdecode) and must reach git
    as its bytes, not stop andon with UnicodeEncodeError."""
    path = make_repo(tmp_path / "repo")
    repo = Repo(path)
    names = {"notes": b"plain\n", "notes\r": b"with cr\n", "n\r\r": b"two\n",
             os.fsdecode(b"\xff.txt"): b"not utf-8\n"}
    for name, data in names.items():
        (path / os.fsencode(name).decode("utf-8", "surrogateescape")).write_bytes(data)
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", "names")
    for name, data in names.items():
        assert repo.file_bytes("HEAD", name) == data, name
    assert repo.file_bytes("HEAD", "n\r") is None  # absent: not "n\r\r", not "n"
    assert repo.file_bytes("HEAD", "notes\0x") is None
    asked = [*names, "n\r", "nothing\r", os.fsdecode(b"\xfe")]
    assert repo.blobs("HEAD", asked) == set(names)


def test_an_empty_last_identity_value_means_the_stand_in_as_git_config_get_says(
        tmp_path, monkeypatch):
    home = tmp_path / "global-home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Global\n\temail = g@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    path = make_repo(tmp_path / "repo")
    sh(path, "config", "user.name", "")
    repo = Repo(path)
    wt = repo.add_worktree(tmp_path / "wt", "andon/B01/1", repo.rev_parse("main"))
    assert sh(wt, "config", "user.name").strip() == "agent"
    assert sh(wt, "config", "user.email").strip() == "g@example.com"
