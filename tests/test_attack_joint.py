"""Red team of the joint suite plan (gates/joint.py): worktree states that differ from a fresh
clone of the candidate although ``strays`` must see them. Each one would let the suite gate
skip the worktree run while a test's outcome there differs from its outcome in the clone.

Real git repositories and worktrees; ``strays`` is called as the suite gate calls it, and one
scenario goes through the real Runner.
"""

from __future__ import annotations

import os
from pathlib import Path

from test_joint import BREAKS_IF_PRESENT, project, rows

from andon.gates.joint import strays
from andon.git.repo import Repo

from helpers import git, honest_mul, runner_for, write


def repo_with(tmp_path: Path, files: dict[str, str]) -> tuple[Repo, Path, str]:
    """A repository committing ``files`` and a worktree of its head (the agent's worktree)."""
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    repo = Repo(root)
    head = repo.rev_parse("HEAD")
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(wt), head)
    return repo, wt, head


def clone_bytes(repo: Repo, sha: str, rel: str, dest: Path) -> bytes:
    return (repo.clone_at(sha, dest) / rel).read_bytes()


# -- hiding files from "nothing differs": all still seen (no fix needed) ---------------------

def test_excludes_of_every_kind_do_not_hide_an_untracked_file(tmp_path, monkeypatch):
    """info/exclude, a global core.excludesFile and the worktree's .gitignore: strays reads no
    exclude file at all."""
    gex = tmp_path / "global-excludes"
    gex.write_text("*.dat\n")
    cfg = tmp_path / "gitconfig"
    cfg.write_text(f"[core]\n\texcludesFile = {gex}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    repo, wt, head = repo_with(tmp_path, {"a.py": "a = 1\n"})
    (repo.git_dir / "info").mkdir(exist_ok=True)
    (repo.git_dir / "info" / "exclude").write_text("*.txt\nsecret/\n")
    (wt / ".gitignore").write_text("*.log\n")
    git(wt, "update-index", "--add", ".gitignore")  # staged in the worktree's own index only
    (wt / "x.txt").write_text("x")
    (wt / "y.dat").write_text("y")
    (wt / "z.log").write_text("z")
    (wt / "secret").mkdir()
    (wt / "secret" / "s.py").write_text("s")
    assert strays(repo, wt, head) == [".gitignore", "secret/", "x.txt", "y.dat", "z.log"]


def test_skip_worktree_and_assume_unchanged_in_the_worktree_index_hide_nothing(tmp_path):
    repo, wt, head = repo_with(tmp_path, {"a.py": "a = 1\n", "b.py": "b = 1\n"})
    git(wt, "update-index", "--skip-worktree", "a.py")
    git(wt, "update-index", "--assume-unchanged", "b.py")
    (wt / "a.py").write_text("a = 2\n")
    (wt / "b.py").write_text("b = 2\n")
    assert strays(repo, wt, head) == ["a.py", "b.py"]


def test_a_nested_repository_and_an_unreadable_folder_are_seen(tmp_path):
    repo, wt, head = repo_with(tmp_path, {"a.py": "a = 1\n"})
    (wt / "sub").mkdir()
    git(wt / "sub", "init", "-q")
    (wt / "sub" / "f.py").write_text("x")
    (wt / "hid").mkdir()
    (wt / "hid" / "f.py").write_text("x")
    (wt / "hid").chmod(0)
    try:
        assert strays(repo, wt, head) == ["hid/", "sub/"]
    finally:
        (wt / "hid").chmod(0o755)


# -- found: differences git itself does not report -------------------------------------------

def test_a_file_named_git_inside_a_tracked_folder_is_a_difference(tmp_path):
    """git never lists a path named .git, so a `pkg/.git` the agent leaves is invisible to
    ls-files; a fresh clone cannot have it (git cannot commit it), and code can read it."""
    repo, wt, head = repo_with(tmp_path, {"pkg/a.py": "a = 1\n"})
    (wt / "pkg" / ".git").write_text("x\n")
    assert strays(repo, wt, head) == ["pkg/.git"]


def test_a_folder_named_git_inside_a_tracked_folder_is_a_difference(tmp_path):
    repo, wt, head = repo_with(tmp_path, {"pkg/a.py": "a = 1\n"})
    (wt / "pkg" / ".git").mkdir()
    (wt / "pkg" / ".git" / "data").write_text("x\n")
    assert strays(repo, wt, head) == ["pkg/.git"]


def test_ident_expansion_makes_the_clone_differ_from_an_agent_written_file(tmp_path):
    """`ident` in .gitattributes: the clone's checkout expands `$Id$`, a file the agent wrote
    keeps it; git's clean filter hides that from diff-files."""
    repo, wt, head = repo_with(tmp_path, {".gitattributes": "*.py ident\n",
                                          "a.py": "V = '$Id$'\n"})
    (wt / "a.py").write_text("V = '$Id$'\n")  # as the agent wrote it, not as checked out
    assert clone_bytes(repo, head, "a.py", tmp_path / "c") != (wt / "a.py").read_bytes()
    assert strays(repo, wt, head) == ["a.py (checkout converts: ident)"]


def test_eol_crlf_makes_the_clone_differ_from_an_lf_file(tmp_path):
    repo, wt, head = repo_with(tmp_path, {".gitattributes": "*.txt text eol=crlf\n",
                                          "d.txt": "line\n"})
    (wt / "d.txt").write_bytes(b"line\n")
    assert clone_bytes(repo, head, "d.txt", tmp_path / "c") == b"line\r\n"
    assert strays(repo, wt, head) == ["d.txt (checkout converts: eol)"]


def test_autocrlf_or_eol_in_the_configuration_makes_every_text_file_differ(tmp_path,
                                                                          monkeypatch):
    """core.autocrlf=true or core.eol=crlf, in the repository's config or the user's: a
    clone writes CRLF for every text file. git's last value counts (the repository's after
    the user's), whatever the case it is written in."""
    said = ["(checkout converts: core.autocrlf/core.eol in the configuration)"]
    user = tmp_path / "gitconfig"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    repo, wt, head = repo_with(tmp_path, {"a.py": "a = 1\n"})
    user.write_text("[core]\n\tautocrlf = TRUE\n")
    assert strays(repo, wt, head) == said
    git(repo.root, "config", "core.autocrlf", "false")  # the repository's wins
    assert strays(repo, wt, head) == []
    git(repo.root, "config", "core.eol", "CRLF")
    assert strays(repo, wt, head) == said
    git(repo.root, "config", "--add", "core.eol", "lf")  # a later value wins
    assert strays(repo, wt, head) == []


def test_honest_text_auto_attributes_are_not_a_difference(tmp_path):
    """The common `* text=auto` converts nothing on checkout on Linux (eol is lf): an honest
    project with it keeps the joint plan."""
    repo, wt, head = repo_with(tmp_path, {".gitattributes": "* text=auto\n*.png binary\n",
                                          "a.py": "a = 1\n"})
    assert strays(repo, wt, head) == []


def test_core_filemode_false_in_the_repository_config_does_not_hide_a_mode_change(tmp_path):
    """`git config core.fileMode false` run in the worktree writes the repository's shared
    config, which strays reads: a mode change must still be seen."""
    repo, wt, head = repo_with(tmp_path, {"s.sh": "echo\n"})
    git(wt, "config", "core.fileMode", "false")
    (wt / "s.sh").chmod(0o755)
    assert strays(repo, wt, head) == ["s.sh"]


# -- end to end: the hidden difference keeps the suite run in the worktree -------------------

def test_a_dot_git_file_left_beside_the_code_keeps_the_suite_run_in_the_worktree(tmp_path):
    """The agent leaves `src/calc/.git` (invisible to git) that breaks its own test there: only
    the worktree run can fail it, so the worktree must differ and the suite must run there."""
    root = project(tmp_path, ["tests/test_stale.py"])

    def leaves_dot_git(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/.git", "x\n")
        write(ctx, "tests/test_stale.py", BREAKS_IF_PRESENT.format(name=".git"))

    runner = runner_for(root, leaves_dot_git)
    runner.run()
    suite = rows(runner)["suite"]
    assert suite["evidence"]["worktree_differs"] == ["src/calc/.git"]
    assert (suite["status"], suite["failure_layer"]) == ("fail", "code")
    assert suite["evidence"]["where"] == "the worktree"




def test_a_committed_symlink_leaving_the_tree_is_a_difference(tmp_path):
    """`data.txt -> ../../outside.txt` resolves beside the worktree in one run and beside the
    clone in the other: the same commit, other files. An absolute link or one inside the tree
    reads the same file from both."""
    repo, wt, head = repo_with(tmp_path, {"a.py": "a = 1\n"})
    (repo.root / "pkg").mkdir()
    os.symlink("../../outside.txt", repo.root / "pkg" / "data.txt")
    os.symlink("../a.py", repo.root / "pkg" / "inside.py")
    os.symlink("/etc/hostname", repo.root / "pkg" / "absolute")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "links")
    head = repo.rev_parse("HEAD")
    git(wt, "checkout", "-q", "--detach", head)
    assert strays(repo, wt, head) == ["pkg/data.txt (symbolic link out of the tree)"]
