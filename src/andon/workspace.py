"""Git for the harness: worktrees, planting, snapshots, diffs, squash-merges, hermetic clones.

Plain ``git`` subprocesses. The one rule: never touch the user's working tree, index or current
branch. Everything here goes through plumbing (``commit-tree``, ``merge-tree``, ``update-ref``),
a temporary index file, or a separate clone. An attempt's worktree is a repository of its own
(a single-branch clone), so nothing in it leads back to the user's other branches or objects.
Harness commits are made as ``andon <andon@localhost>`` so they work on machines with no git
identity configured.

Raises GitError (a git command failed), UsageError (not a repository, a path escaping the
worktree, moving the user's checked-out branch), RefMoved and MergeConflict (defined here).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from andon import submodules
from andon.errors import AndonError, GitError, InvalidArgument, UsageError

ZERO_SHA = "0" * 40
IDENTITY = {"GIT_AUTHOR_NAME": "andon", "GIT_AUTHOR_EMAIL": "andon@localhost",
            "GIT_COMMITTER_NAME": "andon", "GIT_COMMITTER_EMAIL": "andon@localhost"}
# Variables that would point git at some other repository or index than the one we name
# (e.g. when andon is itself started from inside a git hook).
_LOCATING_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                  "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
                  "GIT_PREFIX")
_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")


class RefMoved(AndonError):
    """A ref was not at the value the caller expected, so it was left alone."""


class SnapshotError(AndonError):
    """The worktree could not be read into a commit: gone, replaced by a link, or holding
    something git refuses (a nested repository without commits). What the agent left, not
    a harness fault; ``path`` is the repo-relative path git named, when it named one."""

    def __init__(self, message: str, path: str | None = None):
        self.path = path
        super().__init__(message)


class MergeConflict(AndonError):
    """A squash-merge conflicts. ``paths`` lists the conflicted repo-relative paths."""

    def __init__(self, paths: list[str], detail: str = ""):
        self.paths = paths
        super().__init__(f"merge conflict in: {', '.join(paths)}" + (detail and f"\n{detail}"))


@dataclass(frozen=True)
class Change:
    """One path changed between two commits; a rename shows as a D and an A."""

    path: str      # repo-relative POSIX path
    status: str    # "A" | "M" | "D" | "T" (type change)
    old_mode: str  # "000000" when added
    new_mode: str  # "000000" when deleted; "120000" symlink, "160000" submodule


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


class Repo:
    """A git repository, addressed by its top level. Raises UsageError if ``root`` does not
    exist, is not inside a work tree, git refuses it (dubious ownership: git's message and
    remedy are kept), or (unless ``require_commit`` is false) the repository has no commits
    yet."""

    def __init__(self, root: Path, require_commit: bool = True):
        root = Path(root).resolve()
        if not root.is_dir():
            raise UsageError(f"{root} does not exist or is not a directory")
        try:
            top = self.git("rev-parse", "--show-toplevel", cwd=root).strip()
            common = self.git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=root)
        except GitError as exc:
            raise UsageError(_refusal(root, exc.stderr)) from exc
        except OSError as exc:
            raise UsageError(f"cannot run git in {root}: {exc}") from exc
        self.root = Path(top)
        self.git_dir = Path(common.strip())
        if require_commit and self.rev_parse("HEAD") is None:
            raise UsageError(f"repository at {self.root} has no commits yet: commit your "
                             "project first (`git add -A && git commit -m 'first commit'`), "
                             "then run andon again")

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
        full = os.environ.copy()
        for name in _LOCATING_VARS:
            full.pop(name, None)
        # GIT_OPTIONAL_LOCKS=0 stops read-only commands from refreshing the user's index.
        full.update(IDENTITY, GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
        full.update(env or {})
        argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", *args]
        where = cwd if cwd is not None else getattr(self, "root", None)
        proc = subprocess.run(argv, cwd=where, input=input, capture_output=True, env=full)
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
        """Full sha of ``rev``, or None if it does not resolve."""
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False)
        return out.strip() or None

    def current_branch(self) -> str | None:
        """Short name of the branch checked out at the top level, None when HEAD is detached."""
        return self.git("symbolic-ref", "--quiet", "--short", "HEAD", check=False).strip() or None

    def set_ref(self, ref: str, new: str, expected_old: str | None) -> None:
        """Move ``ref`` to ``new`` atomically if it is now at ``expected_old`` (ZERO_SHA: must not
        exist; None: no check). RefMoved if it is elsewhere. UsageError for the branch checked out
        in the user's work tree, since moving it would make their tree look dirty."""
        if not ref.startswith("refs/"):
            # update-ref would happily create .git/<ref> for a short name.
            raise UsageError(f"ref must be a full name such as refs/heads/x, got {ref!r}")
        if ref == self.git("symbolic-ref", "--quiet", "HEAD", check=False).strip():
            raise UsageError(f"refusing to move {ref}: it is checked out in {self.root}")
        args = ["update-ref", "-m", "andon", ref, self._sha(new)]
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
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)")
        return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines())}

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
            self.git("update-ref", "-d", r, check=False)
        moved = [r for r, sha in before.items() if ours(r) and after.get(r) != sha]
        for r in moved:  # not set_ref: that refuses a checked-out branch; we restore it
            self.git("update-ref", "-m", "andon: restore a ref the agent moved", r, before[r],
                     check=False)
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

    def add_worktree(self, path: Path, branch: str, start: str, history: str = "full") -> Path:
        """Create branch ``branch`` at ``start`` and give it a worktree at ``path`` that is a
        repository of its own: a single-branch clone of ``branch`` with no remote, no
        alternates, no tags and no other refs, so nothing in it leads to other branches, later
        commits or the repository's object store (catalogue kind 17, mining git history).
        ``history`` is "full" (every ancestor of ``start``: ``git log`` and blame work) or
        "shallow" (only ``start``; faster on very large repositories). The reflog, which
        names the repository it was cloned from, is removed. The user's
        ``user.name``/``user.email`` are copied (a stand-in when there are none) so an agent
        can commit. Submodules are checked out at the commits ``start`` records, from the
        user's checkout (:mod:`andon.submodules`). GitError if the branch
        exists; UsageError if ``path`` exists or ``history`` is unknown."""
        if history not in ("full", "shallow"):
            raise UsageError(f"history must be 'full' or 'shallow', got {history!r}")
        path = _unresolved_last(path)
        if path.exists() or path.is_symlink():  # a dangling link would send the clone away
            raise UsageError(f"worktree path already exists: {path}")
        ref = f"refs/heads/{branch}"
        self.set_ref(ref, start, ZERO_SHA)
        # --no-local makes git send a pack of what ``branch`` reaches instead of hard-linking
        # or borrowing the whole object store; a file:// URL is needed for --depth.
        depth = ("--depth", "1") if history == "shallow" else ()
        self.git("clone", "--quiet", "--no-local", "--single-branch", "--no-tags", *depth,
                 "--branch", branch, self.git_dir.as_uri(), str(path))
        self.git("remote", "remove", "origin", cwd=path)
        # "clone: from <the user's repository>" (absent with core.logAllRefUpdates=false)
        shutil.rmtree(path / ".git" / "logs", ignore_errors=True)
        # the user's identity if they have one, else a stand-in, so an agent's commit works
        for key, fallback in (("user.name", "agent"), ("user.email", "agent@andon.localhost")):
            value = self.git("config", "--get", key, check=False).strip() or fallback
            self.git("config", key, value, cwd=path)
        submodules.populate(self, path, self._sha(start))
        return path

    def remove_worktree(self, path: Path) -> None:
        """Remove the worktree at ``path`` whatever state the agent left it in (a directory
        already gone is fine), then prune git's records of linked worktrees. The caller names
        only paths it created. UsageError for the top level or a path inside or around it."""
        path = _unresolved_last(path)
        if path == self.root or self.root.is_relative_to(path) or path.is_relative_to(self.root):
            raise UsageError(f"refusing to remove {path}: it is or holds the main work tree")
        if path in self.list_worktrees():  # a linked worktree from an older andon
            self.git("worktree", "remove", "--force", "--force", str(path), check=False)
        if path.exists() or path.is_symlink():
            _rmtree(path)
        self.git("worktree", "prune")

    def list_worktrees(self) -> list[Path]:
        """Every linked worktree git knows of, the main one first."""
        out = self.git("worktree", "list", "--porcelain", "-z")
        return [Path(f[len("worktree "):]) for f in out.split("\0") if f.startswith("worktree ")]

    def plant(self, base: str, files: Mapping[str, tuple[bytes, bool]], message: str) -> str:
        """A commit, child of ``base``, adding each file (relative path → (bytes, executable))
        even if .gitignore matches it, made with plumbing: no worktree, no ref moves. Returns
        its sha, or ``base`` when every file is already there identically.
        UsageError for a path that is absolute, has '..' or '.git', or runs through a file or
        symlink of ``base``."""
        base = self._sha(base)
        entries = []
        for rel, source in files.items():
            parts = PurePosixPath(rel).parts
            if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or ".git" in parts:
                raise UsageError(f"planted path must be relative inside the worktree, got {rel!r}")
            for i in range(1, len(parts) + 1):  # a link or file on the way would be replaced
                kind = self.git("cat-file", "-t", f"{base}:{'/'.join(parts[:i])}",
                                check=False).strip()
                if i < len(parts) and kind and kind != "tree":
                    raise UsageError(f"planted path {rel!r} runs through "
                                     f"{'/'.join(parts[:i])!r}, which is not a directory")
                if i == len(parts) and kind == "tree":
                    raise UsageError(f"planted path {rel!r} is a directory in the base")
            data, executable = source
            blob = self.git("hash-object", "-w", "--no-filters", "--stdin", input=data).strip()
            mode = "100755" if executable else "100644"
            entries.append(f"{mode} {blob}\t{'/'.join(parts)}\0")
        with tempfile.TemporaryDirectory(prefix="andon-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._run(("read-tree", base), None, None, True, env)
            self._run(("update-index", "--add", "-z", "--index-info"), None,
                      "".join(entries).encode(), True, env)
            tree = self._run(("write-tree",), None, None, True, env).stdout.decode().strip()
        if tree == self.git("rev-parse", f"{base}^{{tree}}").strip():
            return base
        return self.git("commit-tree", tree, "-p", base, "-F", "-",
                        input=message.encode()).strip()

    def snapshot(self, worktree: Path, parent: str, message: str) -> str:
        """Commit everything on disk in ``worktree`` (tracked and untracked, .gitignore
        respected; files tracked in ``parent`` kept even if .gitignore matches them) as a new
        commit whose only parent is ``parent``, whatever the agent did to the worktree's HEAD,
        branch, index, config or ``.git`` itself: the files are read into this repository's
        object store through a temporary index, and git never runs in the agent's repository
        (its config could name commands to run). Always a new commit, even if the tree equals
        the parent's. SnapshotError if ``worktree`` is gone, a symbolic link, inside the main
        work tree, or holds something git refuses to add."""
        worktree = _unresolved_last(worktree)
        if worktree.is_symlink():
            raise SnapshotError(f"the worktree {worktree} was replaced by a symbolic link")
        if not worktree.is_dir():
            raise SnapshotError(f"the worktree {worktree} is no longer a directory")
        if worktree.is_relative_to(self.root):
            raise SnapshotError(f"{worktree} is inside the main work tree, not a worktree")
        parent = self._sha(parent)
        with tempfile.TemporaryDirectory(prefix="andon-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"),
                   "GIT_WORK_TREE": str(worktree), "GIT_DIR": str(self.git_dir)}
            self._run(("read-tree", parent), worktree, None, True, env)
            # the user's sparse-checkout rules are about their checkout, not the agent's
            proc = self._run(("-c", "core.sparseCheckout=false", "-c", "index.sparse=false",
                              "add", "--all", "--", "."), worktree, None, False, env)
            if proc.returncode != 0:
                err = proc.stderr.decode(errors="replace").strip()
                named = re.search(r"'([^']+?)/?'", err)
                raise SnapshotError(f"git could not read the worktree: {err}",
                                    named.group(1) if named else None)
            tree = self._run(("write-tree",), worktree, None, True, env).stdout.decode().strip()
        return self.git("commit-tree", tree, "-p", parent, "-F", "-",
                        input=message.encode()).strip()

    def squash(self, onto: str, base: str, head: str, message: str) -> str:
        """Commit, with ``onto`` as the only parent, the tree of merging base..head into ``onto``.
        No checkout, no ref moves. MergeConflict listing the conflicted paths if it does not apply.
        """
        onto, base, head = self._sha(onto), self._sha(base), self._sha(head)
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
        return self.git("commit-tree", fields[0], "-p", onto, "-F", "-",
                        input=message.encode()).strip()

    def changes(self, base: str, head: str) -> list[Change]:
        """Every path that differs between ``base`` and ``head``, in git's order."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", self._sha(base),
                       self._sha(head))
        fields = out.split("\0")
        result = []
        # -z output is ":<old mode> <new mode> <old sha> <new sha> <status>" NUL "<path>" NUL ...
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            old_mode, new_mode, _, _, status = meta.lstrip(":").split(" ")
            result.append(Change(path=path, status=status, old_mode=old_mode, new_mode=new_mode))
        return result

    def file_bytes(self, rev: str, path: str) -> bytes | None:
        """Content of the blob at ``path`` in ``rev`` (a symlink's target for a symlink); None
        if the path is absent there or is not a file."""
        sha = self.rev_parse(f"{self._sha(rev)}:{path}")
        if sha is None or self.git("cat-file", "-t", sha).strip() != "blob":
            return None
        return self._run(("cat-file", "blob", sha), None, None, check=True).stdout

    def diff(self, base: str, head: str, paths: tuple[str, ...] | list[str] = (),
             unified: int | None = None, renames: bool = True) -> str:
        """The patch base..head (optionally only ``paths``, with ``unified`` lines of context),
        always as text with ``a/``/``b/`` prefixes and no colour, whatever the repository's
        config or attributes say: a ``-diff`` or ``binary`` attribute, an external diff or a
        textconv filter must never hide lines from a gate, a reviewer or a person."""
        args = ["diff", "--text", "--no-textconv", "--no-ext-diff", "--no-color",
                "--src-prefix=a/", "--dst-prefix=b/", "--no-relative"]
        if unified is not None:
            args.append(f"-U{unified}")
        if not renames:
            args.append("--no-renames")
        return self.git(*args, self._sha(base), self._sha(head), "--", *paths)

    def diff_stat(self, base: str, head: str) -> str:
        """Human-readable ``--stat`` summary of base..head."""
        return self.git("diff-tree", "-r", "--stat", "--text", "--no-color", self._sha(base),
                        self._sha(head))

    def export(self, rev: str, dest: Path, keep: Callable[[str], bool] = lambda p: True
               ) -> dict[str, str]:
        """Write the files of ``rev`` whose paths ``keep`` accepts into ``dest`` (created;
        no ``.git``, so nothing there leads back to the repository's history), and return
        their manifest (see :func:`manifest`)."""
        dest.mkdir(parents=True)
        data = self._run(("archive", "--format=tar", rev), None, None, True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = [m for m in tar.getmembers() if m.isdir() or keep(m.name)]
            tar.extractall(dest, members=members, filter="data")
        return manifest(dest)

    def clone_at(self, rev: str, dest: Path) -> Path:
        """A fresh clone at ``dest`` checked out detached at ``rev``: only committed content, no
        untracked or ignored files from any worktree. ``rev`` may be on any branch or dangling.
        Submodules are checked out at the commits ``rev`` records (:mod:`andon.submodules`)."""
        sha, dest = self._sha(rev), Path(dest).resolve()
        # --shared borrows the source's object store through objects/info/alternates instead of
        # copying it (--no-hardlinks copies every object: slow on big repos). It also makes every
        # object readable, so a sha that no ref reaches (a snapshot not yet on a branch) checks
        # out without a fetch. The clone is short-lived, so the source pruning objects under it
        # is not a practical risk (gc keeps unreachable objects for two weeks by default).
        self.git("clone", "--quiet", "--no-checkout", "--shared", str(self.git_dir), str(dest))
        self.git("checkout", "--quiet", "--detach", sha, cwd=dest)
        submodules.populate(self, dest, sha)
        return dest


def _unresolved_last(path: Path) -> Path:
    """``path`` with its parent resolved but not its last component, so that a worktree the
    agent replaced by a symbolic link is seen as the link, never as what it points to."""
    path = Path(path)
    return path.parent.resolve() / path.name


def _rmtree(path: Path) -> None:
    """Delete ``path`` even where the agent took away permissions inside it."""
    def retry(func, p, _exc):
        parent = os.path.dirname(p)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, stat.S_IRWXU)
            shutil.rmtree(p, onerror=retry)
        else:
            os.unlink(p)
    if path.is_symlink() or path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path, onerror=retry)


def manifest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (not following links) → :func:`file_marker`, so any change
    an agent makes shows up."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        marker = file_marker(path)
        if marker is not None:
            out[path.relative_to(root).as_posix()] = marker
    return out


def file_marker(path: Path) -> str | None:
    """sha256 of a file's bytes with its executable bit, ``link:<target>`` for a symlink
    (never followed), None for a directory or nothing there."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_file():
        mode = "x" if os.access(path, os.X_OK) else "-"
        return mode + hashlib.sha256(path.read_bytes()).hexdigest()
    return None
