"""Reading refs: a ref by its exact full name, read from the file git keeps it in without a
git process where that is safe, HEAD's branch, and the commit a base branch names (issue 18:
a harness run asked git for the same few refs a dozen times, a process each).

``git rev-parse refs/heads/x`` is not exact: when there is no such ref, git goes on guessing
(``refs/tags/refs/heads/x``, ``refs/heads/refs/heads/x``, ...), so a tag could stand in for
a missing branch. :func:`full_name` says which names andon asks for exactly (``Repo.rev_parse``
asks ``git for-each-ref``, as ``Repo.refs_snapshot`` lists refs, for those).

git's files backend keeps each ref it has not packed as ``<git dir>/<full name>``, holding
the object name and a line break, and such a loose file wins over ``packed-refs``.
:func:`loose_sha` answers only for exactly that case, and says None — "ask git" — for every
other: a packed or missing ref, a symbolic one, a link, a name git would refuse, a file of
another shape (a SHA-1 name in a SHA-256 repository is a broken ref to git), a repository of
another ref storage (reftable keeps ``refs/heads`` as a file, and its tables in
``reftable/``). Only branches and andon's own refs are read: neither is ever kept per
worktree. What the file holds is what git would answer (it does not look the object up
either); an agent that writes the file could equally run ``git update-ref``, and scope's ref
check compares what git lists. :func:`head_name` reads the HEAD file the same way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

from .. import plain_file

# a character git check-ref-format refuses anywhere in a name: the control characters, space,
# ~ ^ : ? * [ \ (so for-each-ref never reads a valid name as a pattern); the rules on the
# parts are checked apart
_REFUSED = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_READ = ("refs/heads/", "refs/andon/")


def full_name(rev: str) -> bool:
    """Whether ``rev`` is a full ref name (``refs/...``, well formed as git check-ref-format
    wants it, any other character allowed): one andon asks for exactly."""
    return rev.startswith("refs/") and _REFUSED.search(rev) is None and _well_formed(rev)


def loose_sha(git_dir: Path, ref: str, hex_digits: int = 40) -> str | None:
    """The sha the loose ref file of ``ref`` (a full name under ``refs/heads/`` or
    ``refs/andon/``) holds in the repository whose common git dir is ``git_dir`` and whose
    object names have ``hex_digits`` digits (40: SHA-1, 64: SHA-256); ``""`` when there is
    no such ref (no loose file, and no ``packed-refs`` at all); None when git must be asked
    (see the module docstring). Never raises."""
    if not ref.startswith(_READ) or not full_name(ref):
        return None
    try:
        if (git_dir / "reftable").exists():
            return None
        # a link, a FIFO, a device, a folder or a file longer than a sha's line: git is asked
        data = plain_file.read(git_dir / ref, hex_digits + 1)
    except FileNotFoundError:
        # the loose file first: `git pack-refs` writes packed-refs before it deletes a
        # loose file, so a ref that was not loose a moment ago is in packed-refs now
        return "" if not os.path.lexists(git_dir / "packed-refs") else None
    except OSError:  # not a plain file (plain_file.NotPlain), a folder on the way that is a file
        return None
    if re.fullmatch(rb"[0-9a-f]{%d}\n" % hex_digits, data) is None:
        return None
    return data[:hex_digits].decode()


def head_name(head_file: Path) -> str | None:
    """What the HEAD file ``head_file`` (a top level's own, which git replaces whole: a lock
    file renamed over it) says: the full name of the branch checked out, ``""`` when HEAD is
    detached (a SHA-1 name), None when git must be asked (a link, reftable's
    ``refs/heads/.invalid`` placeholder, a name git refuses, another shape). Never raises."""
    try:
        if head_file.is_symlink():
            return None
        # git drops trailing ASCII whitespace (its own isspace: str.rstrip() would also take
        # a no-break space a branch name may end with); "ref:" never has two spaces
        body = head_file.read_text(encoding="utf-8").rstrip(" \t\n\r")
    except (OSError, UnicodeDecodeError):
        return None
    if re.fullmatch("[0-9a-f]{40}", body):
        return ""
    name = body.removeprefix("ref: ")
    if body.startswith("ref: ") and full_name(name) and name != "refs/heads/.invalid":
        return name
    return None  # git's answer for anything else: a name it refuses leaves HEAD broken


def _well_formed(ref: str) -> bool:
    """git check-ref-format's rules on the parts of a name (``_REFUSED`` has the characters)."""
    if ref.endswith(("/", ".")) or ".." in ref or "@{" in ref:
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock")
               for part in ref.split("/"))


class Refs(Protocol):
    """What :func:`base_commit` asks of a repository (repo.Repo, which uses this module)."""

    def checked_out(self) -> str: ...

    def rev_parse(self, rev: str) -> str | None: ...


# where a short base_branch is looked for, in this order (git's own guess also reads a file
# $GIT_DIR/<name>, which is no ref any listing shows, and takes a tag before a branch)
_BASE_REFS = ("refs/heads/{}", "refs/remotes/{}", "refs/tags/{}", "refs/remotes/{}/HEAD")


def base_commit(repo: Refs, base_branch: str | None) -> tuple[str, str | None]:
    """(the base branch as a person names it, its commit or None).

    ``base_branch`` (``[andon] base_branch``): a full name (``refs/...``) is exactly that
    ref; ``HEAD`` is HEAD; another name that could be a ref's is the first of
    ``refs/heads/<name>``, ``refs/remotes/<name>``, ``refs/tags/<name>`` (an annotated tag
    peeled to its commit) and ``refs/remotes/<name>/HEAD`` that exists, else nothing; only
    what cannot be a ref's name (``main~2``, a sha) is git's to read. Without it: the branch
    checked out in ``repo`` now, by its full name, or HEAD when it is detached. Raises
    GitError as Repo.rev_parse does."""
    if not base_branch:
        ref = repo.checked_out() or "HEAD"
        return ref.removeprefix("refs/heads/"), repo.rev_parse(ref)
    if base_branch == "HEAD" or full_name(base_branch):
        found, sha = base_branch, repo.rev_parse(base_branch)
    elif full_name("refs/" + base_branch):
        for form in _BASE_REFS:  # each asked once: the first that resolves
            found = form.format(base_branch)
            if sha := repo.rev_parse(found):
                break
    else:
        return base_branch, repo.rev_parse(base_branch)
    if sha and found.startswith("refs/tags/"):
        sha = repo.rev_parse(f"{sha}^{{commit}}")  # an annotated tag names a tag object
    return base_branch, sha
