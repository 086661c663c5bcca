"""Submodules in andon's clones: checked out at the commit the base records, offline.

A project whose tests import a submodule cannot run in a clone without it. andon copies each
submodule (and theirs, recursively) from the user's own checkout — ``.git/modules/<name>``,
or a submodule folder with its own ``.git`` — never from the URL in ``.gitmodules``: gates
run without network, and what is tested must be what the user has. A submodule that is not
there (a checkout made without ``--recurse-submodules``) is refused before anything runs,
naming it and the git command that fetches it.

The copy is a ``file://`` clone (objects copied, never hard-linked into the user's store);
afterwards its remote and reflogs are removed and the superproject's config names the URL
from ``.gitmodules``, so nothing in an agent's worktree leads back to the user's repository.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import UsageError
from .objects import Entry


class Repo(Protocol):
    """What this module uses of a :class:`andon.git.repo.Repo`, which calls it: named here,
    so that the two modules do not import each other."""

    root: Path
    git_dir: Path

    def git(self, *args: str, cwd: Path | None = None, input: bytes | None = None,
            check: bool = True) -> str: ...

    def succeeds(self, *args: str, cwd: Path | None = None) -> bool: ...

    def entries(self, rev: str) -> tuple[Entry, ...]: ...

_FILE_OK = ("-c", "protocol.file.allow=always")


@dataclass(frozen=True)
class Submodule:
    name: str     # the name in .gitmodules (also the folder under .git/modules)
    path: str     # repo-relative path of the gitlink
    sha: str      # the commit the superproject records
    url: str      # the URL .gitmodules names (never fetched from)


def recorded(repo: Repo, rev: str, git_dir: Path | None = None) -> list[Submodule]:
    """The submodules commit ``rev`` records: every ``.gitmodules`` entry whose path is a
    gitlink in ``rev``'s tree ([] when there is no ``.gitmodules``). ``git_dir`` reads
    another repository's objects (a submodule's, for the nested ones)."""
    where = ("--git-dir", str(git_dir)) if git_dir else ()
    blob = f"{rev}:.gitmodules"
    # this repository's own commits: its listing of rev, kept per sha (every clone of the
    # same commit asks, and the gates list the candidate anyway)
    tree = None if git_dir else {e.path: e for e in repo.entries(rev)}
    if not (repo.succeeds(*where, "cat-file", "-e", blob) if tree is None
            else ".gitmodules" in tree):
        return []
    listed = repo.git(*where, "config", "--blob", blob, "-z", "--get-regexp",
                      r"^submodule\..*\.path$", check=False)
    found = []
    for entry in filter(None, listed.split("\0")):
        key, _, path = entry.partition("\n")
        name = key[len("submodule."):-len(".path")]
        link = tree.get(path) if tree is not None else None
        if link is not None:
            meta = [link.mode, link.kind, link.sha]
        else:  # another repository's, or not an entry as spelt: git reads the pathspec
            out = repo.git(*where, "ls-tree", "-z", rev, "--", path, check=False)
            meta = out.split("\t", 1)[0].split()
        if len(meta) == 3 and meta[0] == "160000":
            url = repo.git(*where, "config", "--blob", blob, "--get",
                           f"submodule.{name}.url", check=False).strip()
            found.append(Submodule(name, path, meta[2], url))
    return found


def _source(repo: Repo, super_git_dir: Path, sub: Submodule, top: bool) -> Path | None:
    """Where the user's checkout keeps ``sub``'s objects, if anywhere. A name that would
    lead out of ``modules/`` (``..``, absolute) is refused, as git itself does."""
    parts = Path(sub.name).parts
    if not parts or Path(sub.name).is_absolute() or ".." in parts:
        return None
    candidates = [super_git_dir / "modules" / sub.name]
    if top:  # an old-style submodule keeps its .git folder inside its own path
        candidates.append(repo.root / sub.path / ".git")
    return next((c for c in candidates if c.is_dir()), None)


def _has_commit(repo: Repo, git_dir: Path, sha: str) -> bool:
    return repo.succeeds("--git-dir", str(git_dir), "cat-file", "-e", f"{sha}^{{commit}}")


def _walk(repo: Repo, rev: str, git_dir: Path | None, prefix: str, missing: list[str],
          found: list[tuple[str, Submodule, Path]]) -> None:
    for sub in recorded(repo, rev, git_dir):
        where = prefix + sub.path
        src = _source(repo, git_dir or repo.git_dir, sub, top=git_dir is None)
        if src is None:
            missing.append(f"{where} (not initialised in this checkout)")
        elif not _has_commit(repo, src, sub.sha):
            missing.append(f"{where} (its recorded commit {sub.sha[:10]} is not in {src})")
        else:
            found.append((where, sub, src))
            _walk(repo, sub.sha, src, where + "/", missing, found)


def check_available(repo: Repo, rev: str) -> None:
    """UsageError naming every submodule (recursively) of ``rev`` that the user's checkout
    cannot supply offline, and the command that fetches them. Nothing when all are there."""
    missing: list[str] = []
    _walk(repo, rev, None, "", missing, [])
    if missing:
        raise UsageError(
            "this repository has submodules andon cannot check out: " + "; ".join(missing)
            + ". andon copies submodules from your checkout (.git/modules), never from the "
            f"network: run `git submodule update --init --recursive` in {repo.root}, then run "
            "again")


def populate(repo: Repo, clone: Path, rev: str, git_dir: Path | None = None) -> None:
    """Check out, in ``clone`` (a clone of ``repo`` at ``rev``), every submodule ``rev``
    records at its recorded commit, recursively, from the user's checkout. UsageError (see
    :func:`check_available`) when one is not there."""
    subs = recorded(repo, rev, git_dir)
    if not subs:
        return
    if git_dir is None:
        check_available(repo, rev)  # every missing one named at once, with the remedy
    for sub in subs:
        src = _source(repo, git_dir or repo.git_dir, sub, top=git_dir is None)
        if src is None:  # checked above for the top level and everything under it
            raise UsageError(f"submodule {sub.path} is not in your checkout")
        repo.git("config", f"submodule.{sub.name}.url", src.as_uri(), cwd=clone)
    # --checkout: the recorded commit, whatever `update = ...` .gitmodules asks for
    repo.git(*_FILE_OK, "submodule", "--quiet", "update", "--init", "--checkout", "--",
             *(s.path for s in subs), cwd=clone)
    for sub in subs:
        here = clone / sub.path
        repo.git("remote", "remove", "origin", cwd=here, check=False)
        own = Path(repo.git("rev-parse", "--absolute-git-dir", cwd=here).strip())
        shutil.rmtree(own / "logs", ignore_errors=True)
        # the URL .gitmodules names, not the user's folder the objects came from
        repo.git("config", f"submodule.{sub.name}.url", sub.url or sub.path, cwd=clone)
        src = _source(repo, git_dir or repo.git_dir, sub, top=git_dir is None)
        populate(repo, here, sub.sha, src)
