"""guard.fingerprint's git configuration markers: ``.git/config`` and the user's global
config (with what it includes), read in one ``git config --list`` by scope and origin; a
risky entry written anywhere git reads them changes the marker, a name or an email does not,
and an unreadable file still gives a marker (its bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from andon.contain.guard import GLOBAL_CONFIG, fingerprint
from andon.git.repo import Repo

from helpers import git, make_project


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Repo:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return Repo(make_project(tmp_path / "project"))


def markers(repo: Repo) -> tuple[str, str]:
    found = fingerprint(repo, repo.root / "andon.toml", repo.root / "packets")
    return found[".git/config"], found[GLOBAL_CONFIG]


def add(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(text)


def test_a_risky_entry_in_the_repositorys_config_is_seen_a_name_is_not(repo):
    start = markers(repo)
    git(repo.root, "config", "user.name", "Someone Else")
    assert markers(repo) == start
    git(repo.root, "config", "filter.lfs.smudge", "sh -c 'echo PWNED'")
    local, global_ = markers(repo)
    assert local != start[0] and global_ == start[1]


def test_every_file_of_the_users_global_config_is_watched(repo, tmp_path):
    home = tmp_path / "home"
    seen = [markers(repo)]
    add(home / ".gitconfig", "[user]\n\tname = Me\n")
    assert markers(repo) == seen[-1]
    for path, text in [
            (home / ".gitconfig", "[core]\n\tfsmonitor = /bin/true\n"),
            (home / ".config" / "git" / "config", "[filter \"x\"]\n\tclean = cat\n"),
            (home / ".gitconfig", "[include]\n\tpath = more.conf\n"),
            (home / "more.conf", "[core]\n\tpager = evil\n")]:
        add(path, text)
        seen.append(markers(repo))
        assert seen[-1][1] != seen[-2][1] and seen[-1][0] == seen[0][0], path


def test_a_linked_worktrees_repository_config_is_the_common_one(repo, tmp_path):
    git(repo.root, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    linked = Repo(tmp_path / "linked")
    start = markers(linked)
    git(repo.root, "config", "core.sshCommand", "evil")
    assert markers(linked)[0] != start[0]


def test_an_unreadable_config_still_has_a_marker_that_changes(repo, tmp_path):
    start = markers(repo)
    add(tmp_path / "home" / ".gitconfig", "[core\n")  # git refuses to read it
    broken = markers(repo)
    assert broken[1] != start[1] and "" not in broken
    add(tmp_path / "home" / ".gitconfig", "garbage\n")
    assert markers(repo)[1] != broken[1]
