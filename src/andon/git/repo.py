"""Git for the harness: worktrees, planting, snapshots, squash-merges, hermetic clones.

Plain ``git`` subprocesses. The one rule: never touch the user's working tree, index or current
branch. Everything here goes through plumbing (``commit-tree``, ``merge-tree``, ``update-ref``),
a temporary index file, or a separate clone. An attempt's worktree is a repository of its own
(a single-branch clone), so nothing in it leads back to the user's other branches or objects.
Harness commits are made as ``andon <andon@localhost>`` so they work on machines with no git
identity configured.

Raises GitError (a git command failed), UsageError (not a repository, a path escaping the
worktree, moving the user's checked-out branch), RefMoved and MergeConflict (defined here),
SnapshotError (from :mod:`andon.worktrees`, which holds the worktree and snapshot half).
Reading objects (diffs, blobs, what is asked of git only once per sha) is in
:mod:`andon.git.objects`, whose :class:`~andon.git.objects.ObjectReads` Repo inherits.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from andon import worktrees
from andon.errors import AndonError, GitError, InvalidArgument, UsageError
from andon.git import hazards, watch
from andon.git.objects import BATCH_HEADER, Change, Known, ObjectReads
from andon.git.refs import full_name, head_name, loose_sha
from andon.treewalk import file_marker, manifest
from andon.worktrees import SnapshotError

__all__ = ["BATCH_HEADER", "IDENTITY", "ZERO_SHA", "Change", "MergeConflict", "RefMoved",
           "Repo", "SnapshotError", "commit_message", "file_marker", "manifest"]

ZERO_SHA = "0" * 40
# git's own defaults, pinned: a config that sets -1 (wait for ever) on a leftover lock hangs
_LOCK_WAITS = ("-c", "core.filesRefLockTimeout=100", "-c", "core.packedRefsTimeout=1000")
# a full SHA-1 as git prints it (andon works on SHA-1 repositories: ZERO_SHA)
_FULL_SHA = re.compile("[0-9a-f]{40}")
IDENTITY = {"GIT_AUTHOR_NAME": "andon", "GIT_AUTHOR_EMAIL": "andon@localhost",
            "GIT_COMMITTER_NAME": "andon", "GIT_COMMITTER_EMAIL": "andon@localhost"}
# Variables that would point git at some other repository or index than the one we name
# (e.g. when andon is itself started from inside a git hook).
LOCATING_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                  "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
                  "GIT_PREFIX")
_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")


class RefMoved(AndonError):
    """A ref was not at the value the caller expected, so it was left alone."""


class MergeConflict(AndonError):
    """A squash-merge conflicts. ``paths`` lists the conflicted repo-relative paths."""

    def __init__(self, paths: list[str], detail: str = ""):
        self.paths = paths
        super().__init__(f"merge conflict in: {', '.join(paths)}" + (detail and f"\n{detail}"))


def commit_message(subject: str, body: str, trailers: Mapping[str, str]) -> str:
    """Subject line, optional body, then a ``Key: value`` trailer block git recognises.

    Raises InvalidArgument for an empty or multi-line subject, a malformed key or a multi-line
    value.
    """
    subject = subject.strip()
    if not subject or "\n" in subject:
        raise InvalidArgument(f"subject must be one non-empty line, got {subject!r}")
    parts = [subject]
    if body.strip():
        parts.append(body.strip("\n"))
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key):
            raise InvalidArgument(f"trailer key must match {_TRAILER_KEY.pattern}, got {key!r}")
        if "\n" in str(value) or not str(value).strip():
            raise InvalidArgument(f"trailer {key} must be one non-empty line, got {value!r}")
        lines.append(f"{key}: {str(value).strip()}")
    if lines:
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _refusal(root: Path, stderr: str) -> str:
    """What to tell a person when git will not work in ``root``: the kind of problem, git's
    own words (which carry git's remedy, e.g. ``safe.directory``) and what to do."""
    said = stderr.strip()
    if "not a git repository" in said:
        return (f"not inside a git work tree: {root} (git: {said.splitlines()[0]}); run andon "
                "in your repository's checkout or name it with -C PATH")
    if "must be run in a work tree" in said:
        return (f"{root} is a bare repository or a .git folder, not a work tree; andon needs "
                f"a checkout (git: {said.splitlines()[0]})")
    return f"git refused to work in {root}:\n{said}"


def git_env() -> dict[str, str]:
    """The environment of every git command andon runs: this process's, without the
    variables that point git at another repository (LOCATING_VARS), with andon's identity,
    no prompts, the C locale, and nothing read from outside the repository that could make
    git show other bytes than a sha names."""
    full = os.environ.copy()
    for name in LOCATING_VARS:
        full.pop(name, None)
    # GIT_OPTIONAL_LOCKS=0 stops read-only commands from refreshing the user's index.
    full.update(IDENTITY, GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    # Attributes from outside the tree (the user's core.attributesFile, by default
    # $XDG_CONFIG_HOME/git/attributes, and the system's), which an agent without the
    # sandbox can write, are never read: a conversion there would make every checkout
    # differ from the blob the gates read. The tree's own .gitattributes are scope's.
    full.update(GIT_ATTR_NOSYSTEM="1")
    # A sha names its own object, whatever refs/replace/* or .git/info/grafts (which an
    # agent without the sandbox can write in the user's repository) say: otherwise the
    # gates could read one tree and the merge commit another under the candidate's name.
    full.update(GIT_NO_REPLACE_OBJECTS="1", GIT_GRAFT_FILE=os.devnull)
    return full


class Repo(ObjectReads):
    """A git repository, addressed by its top level. Raises UsageError if ``root`` does not
    exist, is not inside a work tree, git refuses it (dubious ownership: git's message and
    remedy are kept), or (unless ``require_commit`` is false) the repository has no commits
    yet."""

    def __init__(self, root: Path, require_commit: bool = True):
        root = Path(root).resolve()
        if not root.is_dir():
            raise UsageError(f"{root} does not exist or is not a directory")
        if found := hazards.in_work_tree(root):  # before git is asked: it would hang
            raise UsageError(hazards.describe(found, root))
        try:
            top, common, own, head, objects = self._locate(root)
        except GitError as exc:
            raise UsageError(_refusal(root, exc.stderr)) from exc
        except OSError as exc:
            raise UsageError(f"cannot run git in {root}: {exc}") from exc
        self.root = Path(top)
        self.git_dir = Path(common)
        self._head_file = Path(own) / "HEAD"  # the top level's own (a linked worktree's too)
        self.known = Known()  # answers about full shas, which never change (objects.py)
        # andon makes SHA-1 names (ZERO_SHA); in a SHA-256 repository 40 hex digits name
        # nothing by themselves, and git is asked about each
        self.hex_digits = 64 if objects == "sha256" else 40
        if require_commit and head is None:
            raise UsageError(f"repository at {self.root} has no commits yet: commit your "
                             "project first (`git add -A && git commit -m 'first commit'`), "
                             "then run andon again")

    def _locate(self, root: Path) -> tuple[str, str, str, str | None, str]:
        """(the top level, the common git dir, the top level's own git dir, HEAD's commit or
        None, the object format: "sha1" or "sha256") of the work tree ``root`` is in: one
        git process (rev-parse answers a line each, and exits 1 without HEAD's when HEAD
        names no commit yet). GitError when git refuses."""
        argv = ("rev-parse", "--show-toplevel", "--path-format=absolute", "--git-common-dir",
                "--git-dir", "--show-object-format", "--verify", "--quiet", "--end-of-options",
                "HEAD")
        proc = self._run(argv, root, None, False)
        lines = os.fsdecode(proc.stdout).split("\n")
        if proc.returncode in (0, 1) and len(lines) == 6 - proc.returncode:
            return lines[0], lines[1], lines[2], lines[4] or None, lines[3]
        if proc.returncode not in (0, 1):
            raise GitError(["git", *argv], proc.returncode, proc.stderr.decode(errors="replace"))
        # a line break in a path: asked one at a time, as git spells each
        return (self.git("rev-parse", "--show-toplevel", cwd=root).removesuffix("\n"),
                self.git("rev-parse", "--path-format=absolute", "--git-common-dir",
                         cwd=root).removesuffix("\n"),
                self.git("rev-parse", "--absolute-git-dir", cwd=root).removesuffix("\n"),
                self.git("rev-parse", "--verify", "--quiet", "--end-of-options", "HEAD",
                         cwd=root, check=False).strip() or None,
                self.git("rev-parse", "--show-object-format", cwd=root).strip())

    def check_refs_writable(self, ref: str) -> None:
        """UsageError with git's own message (which names the lock file and says to remove
        it) when git cannot update refs here — a lock left by a crashed git process, a
        read-only ``.git``. Writes nothing: deleting a ref that does not exist takes the
        packed-refs lock, and ``ref`` (when it exists) is "moved" to where it already is."""
        probes: list[tuple[str, ...]] = [("update-ref", "-d", "refs/andon/lock-probe")]
        sha = self.rev_parse(ref)
        if sha is not None:
            probes.append(("update-ref", ref, sha, sha))
        for args in probes:
            proc = self._run(args, None, None, check=False)
            if proc.returncode != 0:
                raise UsageError(f"git cannot update refs in {self.git_dir}, so andon stopped "
                                 "before anything ran:\n"
                                 + proc.stderr.decode(errors="replace").strip())

    def _run(self, args: tuple[str, ...], cwd: Path | None, input: bytes | None,
             check: bool, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        full = {**git_env(), **(env or {})}
        argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
                "-c", "core.attributesFile=/dev/null", *_LOCK_WAITS, *args]
        where = cwd if cwd is not None else getattr(self, "root", None)
        proc = watch.run(argv, where, input, full, getattr(self, "git_dir", None))
        if check and proc.returncode != 0:
            raise GitError(argv, proc.returncode, proc.stderr.decode(errors="replace"))
        return proc

    def git(self, *args: str, cwd: Path | None = None, input: bytes | None = None,
            check: bool = True) -> str:
        """Run git (in ``cwd``, default the top level); return stdout text. GitError on failure."""
        return os.fsdecode(self._run(args, cwd, input, check).stdout)

    def succeeds(self, *args: str, cwd: Path | None = None) -> bool:
        """True if git ``args`` exits 0 (its output is dropped)."""
        return self._run(args, cwd, None, check=False).returncode == 0

    def _sha(self, rev: str) -> str:
        """``rev`` as a full sha; GitError if it does not resolve. Passing shas onwards keeps a
        rev that starts with '-' from being read as an option."""
        sha = self.rev_parse(rev)
        if sha is None:
            raise GitError(["git", "rev-parse", rev], 128, f"unknown revision {rev!r}")
        return sha

    def resolve(self, rev: str) -> str:
        """Full sha of ``rev``; GitError if it does not resolve."""
        return self._sha(rev)

    def rev_parse(self, rev: str) -> str | None:
        """Full sha of ``rev``, or None if it does not resolve. A full ref name
        (``refs/...``, refs.full_name) names exactly that ref: git's guesses past it
        (``refs/tags/refs/heads/x`` for a missing ``refs/heads/x``) are never taken."""
        if self.hex_digits == 40 and _FULL_SHA.fullmatch(rev):
            # git's own answer for a full sha, which it never looks up (``--verify`` checks
            # the form, not the object store): the shas andon passes around cost no process
            return rev
        if (known := self.known.peeled(rev)) is not None:  # "<sha>^{tree}": asked before
            return known
        if full_name(rev):
            return self._exact_ref(rev)
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False)
        if out.strip():
            self.known.learn(rev, out.strip())
        return out.strip() or None

    def _exact_ref(self, ref: str) -> str | None:
        """The sha the ref named ``ref`` (a full name) points to, None without it: its loose
        file's, else git's listing of it — as refs_snapshot lists refs. A ref below it
        (``ref/x``) is listed too and passed over."""
        if (loose := loose_sha(self.git_dir, ref, self.hex_digits)) is not None:
            return loose or None
        return self._refs(ref).get(ref)

    def checked_out(self) -> str:
        """The full name of the branch checked out at the top level ("" when HEAD is
        detached), read now: the user may switch branches at any time. Read from the HEAD
        file itself, which git replaces whole (a lock file renamed over it), when it is a
        plain file of the files backend ("ref: <name>" or a sha); git is asked otherwise (a
        symbolic link, reftable's "refs/heads/.invalid" placeholder)."""
        if (name := head_name(self._head_file)) is not None:
            return name
        return self.git("symbolic-ref", "--quiet", "HEAD", check=False).rstrip("\n")

    def set_ref(self, ref: str, new: str, expected_old: str | None) -> None:
        """Move ``ref`` to ``new`` atomically if it is now at ``expected_old`` (ZERO_SHA: must not
        exist; None: no check). RefMoved if it is elsewhere. UsageError for the branch checked out
        in the user's work tree, since moving it would make their tree look dirty."""
        if not ref.startswith("refs/"):
            # update-ref would happily create .git/<ref> for a short name.
            raise UsageError(f"ref must be a full name such as refs/heads/x, got {ref!r}")
        if ref == self.checked_out():
            raise UsageError(f"refusing to move {ref}: it is checked out in {self.root}")
        # --no-deref: a branch an agent made a symbolic ref moves itself, never its target
        # (the user's checked-out branch)
        args = ["update-ref", "--no-deref", "-m", "andon", ref, self._sha(new)]
        if expected_old is not None:
            args.append(expected_old)
        proc = self._run(tuple(args), None, None, check=False)
        if proc.returncode != 0:
            now = self.rev_parse(ref) or ZERO_SHA
            if expected_old is not None and now != expected_old:
                raise RefMoved(f"{ref} is at {now}, expected {expected_old}")
            raise GitError(["git", *args], proc.returncode, proc.stderr.decode(errors="replace"))

    def refs_snapshot(self) -> dict[str, str]:
        """Every ref under refs/ (name -> sha), to spot an agent that moved or made refs."""
        return self._refs()

    def _refs(self, *patterns: str) -> dict[str, str]:
        """Name -> sha of the refs ``git for-each-ref`` lists for ``patterns`` (none: all)."""
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *patterns)
        # lines end at "\n" only: a ref name may hold U+2028 or NEL, where splitlines breaks
        return {name: sha for sha, _, name in (line.partition(" ") for line in out.split("\n")
                                               if line)}

    def restore_refs(self, before: dict[str, str], owned: tuple[str, ...] = ()) -> list[str]:
        """Compared with ``before`` (a :meth:`refs_snapshot`), put back every ref andon owns —
        under ``refs/heads/andon/`` or ``refs/andon/``, or named in ``owned`` (the integration
        branch) — that was moved or deleted, and delete new ones there (a branch
        ``andon/<id>/<n+1>`` would collide with a later attempt). Other refs are the user's:
        they may commit, fetch or switch branches while a stage runs, so those are left alone.
        Worktrees are separate repositories, so only an agent reaching this repository by
        absolute path moves andon's refs. Returns the refs it put right; one it cannot put
        right is still returned (and left as it is)."""
        def ours(ref: str) -> bool:
            return ref.startswith(("refs/heads/andon/", "refs/andon/")) or ref in owned

        after = self.refs_snapshot()
        made = [r for r in after if r not in before and ours(r)]
        for r in made:  # first: a new andon/x/y can block restoring a deleted andon/x
            self.git("update-ref", "--no-deref", "-d", r, check=False)
        moved = [r for r, sha in before.items() if ours(r) and after.get(r) != sha]
        for r in moved:  # not set_ref: that refuses a checked-out branch; we restore it
            self.git("update-ref", "--no-deref", "-m", "andon: restore a ref the agent moved",
                     r, before[r], check=False)
        return moved + made

    def find_commit_with_trailers(self, ref: str, trailers: Mapping[str, str],
                                  since: str | None = None) -> str | None:
        """Newest commit reachable from ``ref`` (and not from ``since``) carrying every given
        trailer with exactly that value; None if there is none or ``ref`` does not resolve."""
        tip = self.rev_parse(ref)
        if tip is None:
            return None
        args = ["log", "-z", "--format=%H%n%(trailers:only,unfold)", tip]
        if since is not None:
            args.append("^" + self._sha(since))
        for record in self.git(*args).split("\0"):
            sha, _, block = record.strip("\n").partition("\n")
            found: dict[str, set[str]] = {}
            for line in block.splitlines():
                key, sep, value = line.partition(":")
                if sep:  # git matches trailer keys case-insensitively
                    found.setdefault(key.strip().lower(), set()).add(value.strip())
            if sha and all(str(v).strip() in found.get(k.lower(), ()) for k, v in trailers.items()):
                return sha
        return None

    # -- worktrees and snapshots: see andon.worktrees, where each is documented ----------

    def add_worktree(self, path: Path, branch: str, start: str, history: str = "full") -> Path:
        """:func:`andon.worktrees.add_worktree`: a single-branch clone for an agent."""
        return worktrees.add_worktree(self, path, branch, start, history)

    def make_worktree(self, path: Path, branch: str, start: str, history: str = "full"
                      ) -> tuple[Path, dict[str, str]]:
        """:func:`andon.worktrees.make_worktree`: the worktree and how it was written."""
        return worktrees.make_worktree(self, path, branch, start, history)

    def remove_worktree(self, path: Path, reuse: bool = False) -> None:
        """:func:`andon.worktrees.remove_worktree`, whatever state the agent left it in;
        with ``reuse`` the tree may wait for the next attempt (worktree_pool.py)."""
        worktrees.remove_worktree(self, path, reuse)

    def list_worktrees(self) -> list[Path]:
        """Every linked worktree git knows of, the main one first."""
        return worktrees.list_worktrees(self)

    def plant(self, base: str, files: Mapping[str, tuple[bytes, bool]], message: str) -> str:
        """:func:`andon.worktrees.plant`: a child of ``base`` adding ``files``; its sha."""
        return worktrees.plant(self, base, files, message)

    def snapshot(self, worktree: Path, parent: str, message: str) -> str:
        """:func:`andon.worktrees.snapshot`: everything in ``worktree`` as a child of
        ``parent``; SnapshotError when it cannot be read."""
        return worktrees.snapshot(self, worktree, parent, message)

    def export(self, rev: str, dest: Path, keep: Callable[[str], bool] = lambda p: True
               ) -> dict[str, str]:
        """:func:`andon.worktrees.export`: the files of ``rev`` into ``dest``, no ``.git``."""
        return worktrees.export(self, rev, dest, keep)

    def pack_loose(self, at_least: int = worktrees.LOOSE_LIMIT) -> int:
        """:func:`andon.worktrees.pack_loose`: loose objects into one pack when there are
        many; how many there were."""
        return worktrees.pack_loose(self, at_least)

    def clone_at(self, rev: str, dest: Path) -> Path:
        """:func:`andon.worktrees.clone_at`: a fresh clone at ``dest``, detached at ``rev``."""
        return worktrees.clone_at(self, rev, dest)

    def squash(self, onto: str, base: str, head: str, message: str) -> str:
        """Commit, with ``onto`` as the only parent, the tree of merging base..head into ``onto``.
        No checkout, no ref moves. MergeConflict listing the conflicted paths if it does not apply.
        """
        onto, base, head = self._sha(onto), self._sha(base), self._sha(head)
        if onto == base:  # nothing to merge with: base..head onto base is head's tree
            return self.commit_tree(self._sha(f"{head}^{{tree}}"), onto, message)
        # git 2.39 has `merge-tree --write-tree` but not `--merge-base` (added in 2.40). Two
        # throwaway commits whose only parent is `base` force `base` to be the merge base even
        # when `onto` does not descend from it. They stay unreferenced and gc collects them.
        sides = [self.git("commit-tree", f"{c}^{{tree}}", "-p", base, "-m", "andon: merge side")
                 .strip() for c in (onto, head)]
        argv = ("merge-tree", "--write-tree", "-z", "--name-only", *sides)
        proc = self._run(argv, None, None, check=False)
        # -z --name-only output: <tree> NUL <conflicted path> NUL ... NUL NUL <messages ...>
        fields = os.fsdecode(proc.stdout).split("\0")
        if proc.returncode == 1:
            end = fields.index("", 1)
            raise MergeConflict(list(dict.fromkeys(fields[1:end])),
                                " ".join(f for f in fields[end + 1:] if f))
        if proc.returncode != 0:
            raise GitError(["git", *argv], proc.returncode, proc.stderr.decode(errors="replace"))
        return self.commit_tree(fields[0], onto, message)
