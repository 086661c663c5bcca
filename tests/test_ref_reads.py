"""Branches read by their full names, exactly, and a loose ref read from its file (issue 18:
a harness run asked git for the same few refs a dozen times, one process each).

A short name is git's to guess: ``git rev-parse main`` takes a tag ``main`` before the
branch ``main``, and even a full name is guessed past when it names nothing (a tag
``refs/heads/x`` stands in for a missing branch ``x``). The branch an attempt starts from is
a branch, so it is asked for as ``refs/heads/<name>``, and a full name names that ref or
nothing. A full name of a branch or of andon's own refs that git keeps as a loose file is
read from that file; anything else (packed, symbolic, a link, a name git would refuse,
another ref storage, another object format) is git's answer, and each case here is compared
with it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import andon.git.repo
from andon.advice import base_drift
from andon.baseline import integration_head
from andon.config import load_config
from andon.errors import UsageError
from andon.git.refs import head_name
from andon.git.repo import Repo

from helpers import git, make_project


def commit(root: Path, message: str) -> str:
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def commit_a_file(root: Path, message: str) -> str:
    """A commit that changes a file (the drift notice counts only those)."""
    (root / "new.txt").write_text(message + "\n")
    git(root, "add", "new.txt")
    return commit(root, message)


def set_andon(root: Path, key: str, value: str) -> None:
    """``[andon] key = "value"`` in the project's andon.toml, in place of any such line."""
    toml = root / "andon.toml"
    text = re.sub(rf"(?m)^{key} = .*$", "", toml.read_text())
    toml.write_text(text.replace("[andon]\n", f'[andon]\n{key} = "{value}"\n'))


def git_says(root: Path, rev: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", rev],
                         cwd=root, capture_output=True, text=True, check=False).stdout.strip()
    return out or None


@pytest.fixture
def project(tmp_path):
    """A project on ``main`` with a tag ``main`` one commit behind the branch."""
    root = make_project(tmp_path / "repo")
    git(root, "tag", "main")
    commit(root, "after the tag")
    return root


def test_the_checked_out_branch_is_the_base_not_a_tag_of_the_same_name(project):
    branch = git(project, "rev-parse", "refs/heads/main").strip()
    assert git_says(project, "main") != branch  # git's guess takes the tag
    assert integration_head(Repo(project), load_config(project)) == branch


def test_a_configured_base_branch_is_the_branch_not_a_tag_of_the_same_name(project):
    git(project, "checkout", "-q", "-b", "other")
    commit(project, "on other")
    set_andon(project, "base_branch", "main")
    config = load_config(project)
    assert config.andon.base_branch == "main"
    assert integration_head(Repo(project), config) == \
        git(project, "rev-parse", "refs/heads/main").strip()


def test_a_base_branch_that_names_no_local_branch_is_still_resolved_as_given(project):
    # e.g. a remote-tracking branch: git's own reading of the name, as before
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD~1")
    set_andon(project, "base_branch", "origin/main")
    assert integration_head(Repo(project), load_config(project)) == \
        git(project, "rev-parse", "HEAD~1").strip()


def test_drift_is_measured_from_the_branch_not_a_tag_of_the_same_name(project):
    repo, config = Repo(project), load_config(project)
    git(project, "update-ref", f"refs/heads/{config.andon.integration_branch}",
        "refs/heads/main")
    # the integration branch holds everything the branch main has: no drift, whatever
    # the tag main (one commit behind) would say the other way round
    assert base_drift(repo, config) is None
    commit_a_file(project, "new on main")
    drift = base_drift(repo, config)
    assert drift is not None and drift["commits"] == 1


def _loose(root, ref, text):
    path = root / ".git" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _cases():
    """(name, how the repository is set up, the ref asked for)"""
    def packed_only(root):
        git(root, "update-ref", "refs/heads/andon/packed", "HEAD~1")
        git(root, "pack-refs", "--all")

    def packed_then_loose(root):
        packed_only(root)
        git(root, "update-ref", "refs/heads/andon/packed", "HEAD")

    def symbolic(root):
        git(root, "symbolic-ref", "refs/heads/andon/sym", "refs/heads/main")

    def old_symlink(root):
        (root / ".git/refs/heads/andon").mkdir(parents=True, exist_ok=True)
        os.symlink("../main", root / ".git/refs/heads/andon/link")

    def link_outside(root):
        (root / ".git/refs/heads/andon").mkdir(parents=True, exist_ok=True)
        outside = root.parent / "outside-ref"
        outside.write_text(git(root, "rev-parse", "HEAD~1"))
        os.symlink(outside, root / ".git/refs/heads/andon/far")

    def garbage(root):
        _loose(root, "refs/heads/andon/bad", "not a sha\n")

    def no_newline(root):
        _loose(root, "refs/andon/plain", git(root, "rev-parse", "HEAD~1").strip())

    def spaces(root):
        _loose(root, "refs/andon/spaced", git(root, "rev-parse", "HEAD~1").strip() + "  \n")

    def upper(root):
        _loose(root, "refs/andon/upper", git(root, "rev-parse", "HEAD~1").strip().upper()
               + "\n")

    return [
        ("loose", None, "refs/heads/main"),
        ("andon's own", lambda r: git(r, "update-ref", "refs/andon/x", "HEAD~1"),
         "refs/andon/x"),
        ("missing", None, "refs/heads/andon/none"),
        ("packed only", packed_only, "refs/heads/andon/packed"),
        ("missing, some packed", packed_only, "refs/heads/andon/none"),
        ("under a ref", None, "refs/heads/main/x"),
        ("loose over packed", packed_then_loose, "refs/heads/andon/packed"),
        ("symbolic", symbolic, "refs/heads/andon/sym"),
        ("symlink to a ref", old_symlink, "refs/heads/andon/link"),
        ("symlink outside", link_outside, "refs/heads/andon/far"),
        ("not a sha", garbage, "refs/heads/andon/bad"),
        ("no newline", no_newline, "refs/andon/plain"),
        ("trailing spaces", spaces, "refs/andon/spaced"),
        ("upper case", upper, "refs/andon/upper"),
        ("dot dot", None, "refs/heads/../../HEAD"),
        ("a lock file", lambda r: _loose(r, "refs/heads/x.lock",
                                         git(r, "rev-parse", "HEAD~1")), "refs/heads/x.lock"),
        ("a dot component", lambda r: _loose(r, "refs/heads/.x",
                                             git(r, "rev-parse", "HEAD~1")), "refs/heads/.x"),
        ("a tag", None, "refs/tags/main"),
        ("a sha of no object", lambda r: _loose(r, "refs/andon/ghost", "12" * 20 + "\n"),
         "refs/andon/ghost"),
        ("a folder", lambda r: (r / ".git/refs/andon/dir").mkdir(parents=True),
         "refs/andon/dir"),
    ]


@pytest.mark.parametrize("setup,ref", [c[1:] for c in _cases()], ids=[c[0] for c in _cases()])
def test_a_full_ref_name_is_answered_as_git_answers_it(project, setup, ref):
    if setup:
        setup(project)
    assert Repo(project).rev_parse(ref) == git_says(project, ref)


def test_a_loose_branch_costs_no_git_process(project, monkeypatch):
    repo, config = Repo(project), load_config(project)
    git(project, "update-ref", "refs/heads/andon/other", "HEAD~1")
    main, other = git_says(project, "refs/heads/main"), git_says(project, "HEAD~1")
    calls = []
    real = subprocess.run

    def counted(argv, *a, **k):
        calls.append(argv)
        return real(argv, *a, **k)
    monkeypatch.setattr(andon.git.repo.subprocess, "run", counted)
    assert integration_head(repo, config) == main  # no integration branch yet: main's
    assert repo.rev_parse("refs/heads/andon/other") == other
    assert calls == [], [c[6:] for c in calls]


@pytest.mark.parametrize("packed", [False, True], ids=["loose refs", "packed-refs"])
def test_a_missing_branch_is_missing_whatever_ref_git_would_guess_for_it(project, packed):
    # an agent reaching the user's repository plants refs/tags/refs/heads/andon/integration:
    # git rev-parse of the missing branch's full name would answer with it
    git(project, "update-ref", "refs/tags/refs/heads/andon/integration", "HEAD~1")
    git(project, "update-ref", "refs/heads/refs/heads/andon/x", "HEAD~1")
    if packed:
        git(project, "pack-refs", "--all")
    assert git_says(project, "refs/heads/andon/integration") is not None
    repo = Repo(project)
    assert repo.rev_parse("refs/heads/andon/integration") is None
    assert repo.rev_parse("refs/heads/andon/x") is None
    assert integration_head(repo, load_config(project)) == git_says(project, "refs/heads/main")


def test_the_integration_branch_of_the_drift_notice_is_never_a_tag(project):
    repo, config = Repo(project), load_config(project)
    git(project, "tag", config.andon.integration_branch)
    commit_a_file(project, "new on main")
    assert base_drift(repo, config) is None  # no integration branch yet: nothing to compare


def test_a_sha1_name_in_a_sha256_repository_is_what_git_makes_of_it(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    git(root, "init", "-q", "--object-format=sha256", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "a")
    head = git(root, "rev-parse", "HEAD").strip()
    assert len(head) == 64
    _loose(root, "refs/heads/andon/integration", head[:40] + "\n")  # a broken ref to git
    repo = Repo(root)
    for rev in ("refs/heads/andon/integration", head[:40], "refs/heads/main"):
        assert repo.rev_parse(rev) == git_says(root, rev), rev
    (root / "andon.toml").write_text("")
    assert integration_head(repo, load_config(root)) == head


def test_a_branch_whose_name_ends_in_a_no_break_space_is_the_one_checked_out(project):
    git(project, "update-ref", "refs/heads/feature", "HEAD~1")
    git(project, "checkout", "-q", "-b", "feature\u00a0", "HEAD")
    commit(project, "on the other feature")
    repo = Repo(project)
    assert repo.checked_out() == "refs/heads/feature\u00a0"
    assert integration_head(repo, load_config(project)) == git_says(project, "HEAD")


@pytest.mark.parametrize("name", ["andon/intégration", "andon/it#1", "andon/a!b", "andon/a'b"])
def test_an_integration_branch_of_any_valid_name_is_never_guessed(project, name):
    set_andon(project, "integration_branch", name)
    git(project, "update-ref", f"refs/tags/refs/heads/{name}", "HEAD~1")
    assert git_says(project, f"refs/heads/{name}") is not None  # git's guess: the tag
    repo, config = Repo(project), load_config(project)
    assert repo.rev_parse(f"refs/heads/{name}") is None
    assert integration_head(repo, config) == git_says(project, "refs/heads/main")


def test_a_base_branch_given_by_its_full_name_is_that_ref(project):
    git(project, "update-ref", "refs/heads/refs/heads/main", "HEAD~1")  # git allows it
    set_andon(project, "base_branch", "refs/heads/main")
    assert integration_head(Repo(project), load_config(project)) == \
        git(project, "rev-parse", "refs/heads/main").strip()


def test_a_checked_out_branch_that_names_no_commit_is_no_base_for_either(project):
    config = load_config(project)
    git(project, "update-ref", f"refs/heads/{config.andon.integration_branch}", "HEAD")
    commit_a_file(project, "on the tag's side")
    git(project, "tag", "-f", "main", "HEAD")  # a tag main the integration branch lacks
    git(project, "update-ref", "-d", "refs/heads/main")  # HEAD still names the branch
    repo = Repo(project, require_commit=False)
    assert base_drift(repo, config) is None  # not counted from the tag main
    git(project, "update-ref", "-d", f"refs/heads/{config.andon.integration_branch}")
    with pytest.raises(UsageError, match="base branch 'main'"):
        integration_head(repo, config)


@pytest.mark.parametrize("body", [b"ref: refs/heads/main\0x\n", b"refs/heads/main\n",
                                  b"ref: refs/heads/ma..in\n", b"ref: refs/heads/ma\x01in\n",
                                  b"ref: refs/../config\n", b"ref: refs/heads/main/\n"],
                         ids=["nul", "no prefix", "dot dot", "control", "outside", "slash"])
def test_a_head_file_git_would_refuse_is_read_as_git_reads_it(project, body):
    head = project / ".git" / "HEAD"
    head.write_bytes(body)
    said = subprocess.run(["git", "symbolic-ref", "--quiet", "HEAD"], cwd=project,
                          capture_output=True, check=False).stdout.decode().rstrip("\n")
    assert head_name(head) is None  # git's answer, then: a broken HEAD names nothing
    assert said in ("", "refs/heads/main")


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"], ids=["LS", "PS", "NEL"])
def test_a_ref_whose_name_holds_a_unicode_line_break_is_found(project, sep):
    name = f"refs/heads/f{sep}x"
    git(project, "update-ref", name, "HEAD~1")
    git(project, "pack-refs", "--all")  # not read from a loose file: git's listing
    repo = Repo(project)
    assert repo.rev_parse(name) == git_says(project, name)
    assert repo.refs_snapshot()[name] == git_says(project, name)


def test_a_short_base_branch_is_a_ref_never_a_file_git_would_also_read(project):
    # a file at $GIT_DIR/origin/main is what git rev-parse origin/main reads first; no
    # listing shows it, so no check of refs sees it planted
    set_andon(project, "base_branch", "origin/main")
    (project / ".git" / "origin").mkdir()
    (project / ".git" / "origin" / "main").write_text(git(project, "rev-parse", "HEAD~1"))
    repo, config = Repo(project), load_config(project)
    with pytest.raises(UsageError, match="base branch 'origin/main'"):
        integration_head(repo, config)
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    assert integration_head(repo, config) == git_says(project, "HEAD")


def test_a_base_branch_naming_an_annotated_tag_is_its_commit(project):
    git(project, "tag", "-a", "-m", "release", "v1", "HEAD~1")
    set_andon(project, "base_branch", "v1")
    assert integration_head(Repo(project), load_config(project)) == \
        git_says(project, "v1^{commit}")


def test_a_symbolic_integration_branch_is_moved_itself_never_the_users_branch(project):
    main = git_says(project, "refs/heads/main")
    git(project, "update-ref", "refs/heads/andon/integration", main)
    repo = Repo(project)
    before = repo.refs_snapshot()
    # an agent, by absolute path: the same sha, so nothing to restore
    git(project, "symbolic-ref", "refs/heads/andon/integration", "refs/heads/main")
    assert repo.restore_refs(before, ("refs/heads/andon/integration",)) == []
    repo.set_ref("refs/heads/andon/integration", git_says(project, "HEAD~1"), main)
    assert git_says(project, "refs/heads/main") == main
    assert git_says(project, "refs/heads/andon/integration") == git_says(project, "HEAD~1")
