"""objects.Known through Repo: what git said about a full sha is asked once; nothing named
by a ref, and no "not found", is ever kept (an agent moves refs between stages; an object
can arrive later)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from andon.gates.native import heads
from andon.git.repo import Repo

USER = {"GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com",
        "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.com"}


def sh(cwd: Path, *args: str) -> str:
    """git as the user or an agent would run it, behind the harness's back."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **USER}).stdout.strip()


def commit(path: Path, rel: str, text: str) -> str:
    (path / rel).parent.mkdir(parents=True, exist_ok=True)
    (path / rel).write_text(text)
    sh(path, "add", "-A")
    sh(path, "commit", "-qm", f"write {rel}")
    return sh(path, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Repo:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    commit(path, "a.txt", "one\n")
    return Repo(path)


@pytest.fixture
def processes(monkeypatch) -> list[tuple[str, ...]]:
    """Every git command Repo runs from now on."""
    seen: list[tuple[str, ...]] = []
    run = Repo._run

    def counted(self, args, *rest, **kw):
        seen.append(args)
        return run(self, args, *rest, **kw)

    monkeypatch.setattr(Repo, "_run", counted)
    return seen


def test_a_ref_moved_behind_the_harness_is_read_again(repo):
    """What a ref names is never kept: moved between two asks (an agent's stage between two
    gates), the second ask sees where it is now — its tree, its commit, its diff."""
    first = repo.resolve("main")
    sh(repo.root, "branch", "side")
    assert repo.changes(first, "side") == []
    tree = repo.resolve("side^{tree}")
    second = commit(repo.root, "b.txt", "two\n")
    sh(repo.root, "branch", "-f", "side", second)
    assert repo.resolve("side") == second != first
    assert repo.resolve("side^{tree}") == sh(repo.root, "rev-parse", "side^{tree}") != tree
    assert repo.resolve("side^{commit}") == second
    assert [(c.status, c.path) for c in repo.changes(first, "side")] == [("A", "b.txt")]


def test_a_listing_follows_the_ref_it_was_asked_by(repo):
    """entries("side") is the listing of the commit side names when asked: moved, the next
    ask lists the new commit (the listing is kept by sha, never by name)."""
    sh(repo.root, "branch", "side")
    assert [e.path for e in repo.entries("side")] == ["a.txt"]
    moved = commit(repo.root, "b.txt", "two\n")
    sh(repo.root, "branch", "-f", "side", moved)
    assert [e.path for e in repo.entries("side")] == ["a.txt", "b.txt"]
    assert [(e.kind, e.mode) for e in repo.entries(moved)] == [("blob", "100644")] * 2


def test_what_a_full_sha_names_is_asked_of_git_once(repo, processes):
    sha = sh(repo.root, "rev-parse", "main")
    new = commit(repo.root, "b.txt", "two\n")
    answers = [(repo.resolve(f"{sha}^{{tree}}"), repo.resolve(f"{new}^{{commit}}"),
                repo.changes(sha, new)) for _ in range(3)]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == sh(repo.root, "rev-parse", f"{sha}^{{tree}}")
    assert [args[0] for args in processes] == ["rev-parse", "rev-parse", "diff-tree"]


def test_a_commit_andon_makes_knows_its_tree(repo, processes):
    """commit_tree's commit: its tree and that it is a commit cost no further process."""
    base = sh(repo.root, "rev-parse", "main")
    tree = sh(repo.root, "mktree", "--missing")  # the empty tree
    made = repo.commit_tree(tree, base, "andon: empty")
    assert repo.resolve(f"{made}^{{tree}}") == tree == sh(repo.root, "rev-parse",
                                                          f"{made}^{{tree}}")
    assert repo.resolve(f"{made}^{{commit}}") == made
    assert [args[0] for args in processes] == ["commit-tree"]


def test_an_annotated_tag_peels_to_its_commit_not_to_itself(repo):
    sh(repo.root, "tag", "-a", "-m", "v1", "v1")
    tag = sh(repo.root, "rev-parse", "v1")
    assert repo.resolve(f"{tag}^{{tree}}") == sh(repo.root, "rev-parse", "main^{tree}")
    for _ in range(2):  # asked, then known: the commit either time
        assert repo.resolve(f"{tag}^{{commit}}") == sh(repo.root, "rev-parse", "main") != tag


def test_an_object_not_found_is_looked_for_again(repo, tmp_path):
    """A negative answer is not kept: a commit fetched later is found."""
    other = tmp_path / "other"
    other.mkdir()
    sh(other, "init", "-q", "-b", "main")
    elsewhere = commit(other, "c.txt", "three\n")
    assert repo.rev_parse(f"{elsewhere}^{{tree}}") is None
    sh(repo.root, "fetch", "-q", str(other), "main")
    assert repo.rev_parse(f"{elsewhere}^{{tree}}") == sh(other, "rev-parse", "main^{tree}")


def test_files_read_many_blobs_as_file_bytes_reads_each(repo, processes):
    """One process for every (rev, path) asked: present, missing, a folder, a link, bytes
    with line breaks, a name with one (asked alone), the same path at two commits."""
    first = sh(repo.root, "rev-parse", "HEAD")
    (repo.root / "bin.dat").write_bytes(b"\x00\n\r\nend\n\n")
    (repo.root / "dir").mkdir()
    (repo.root / "dir/x.txt").write_text("x\n")
    (repo.root / "odd\nname").write_text("odd\n")
    (repo.root / "link").symlink_to("a.txt")
    second = commit(repo.root, "a.txt", "changed\n")
    wanted = [(second, "a.txt"), (first, "a.txt"), (second, "bin.dat"), (first, "bin.dat"),
              (second, "dir"), (second, "odd\nname"), (second, "link"), (second, "dir/x.txt"),
              (second, "a.txt")]
    found = repo.files(wanted)
    assert [args[0] for args in processes] == ["cat-file", "cat-file"]  # the odd name alone
    assert found == {key: repo.file_bytes(*key) for key in wanted}
    assert found[(second, "bin.dat")] == b"\x00\n\r\nend\n\n" and found[(first, "bin.dat")] is None
    assert found[(second, "link")] == b"a.txt" and found[(second, "dir")] is None


def test_replace_refs_and_grafts_an_agent_writes_are_never_followed(repo):
    """An agent without the sandbox can write ``refs/replace/*`` or ``.git/info/grafts`` in
    the user's repository, and git would then show other objects under a sha's name: the
    candidate judged would not be the candidate merged. The harness reads objects by sha
    only, as they are."""
    real = commit(Path(repo.root), "a.txt", "real\n")
    blob = sh(Path(repo.root), "rev-parse", f"{real}:a.txt")
    fake = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo.root, input="fake\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    sh(Path(repo.root), "replace", blob, fake)
    assert sh(Path(repo.root), "show", f"{real}:a.txt") == "fake"  # git itself follows it
    assert repo.file_bytes(real, "a.txt") == b"real\n"
    assert heads(repo, real, ["a.txt"]) == {"a.txt": b"real\n"}  # scope's native check
    parent = sh(Path(repo.root), "rev-parse", f"{real}^")
    (Path(repo.root) / ".git" / "info").mkdir(exist_ok=True)
    (Path(repo.root) / ".git" / "info" / "grafts").write_text(f"{real}\n")  # no parents
    assert sh(Path(repo.root), "rev-list", "--count", real) == "1"
    assert repo.git("rev-list", "--count", real).strip() == "2"
    assert repo.resolve(f"{real}^") == parent
