"""Reading git's objects: diffs, blobs, listings — and what can be asked only once.

A full sha names the same object for ever: git's objects are content-addressed. So what
git answers about one — a commit's tree, the paths two commits differ in, the entries of a
commit's tree — is kept by the :class:`Known` of the :class:`andon.git.repo.Repo` that
asked, and never asked again (issue 18: an attempt asked git for the same diff five
times). Nothing named by a ref, ``HEAD`` or any other name is kept: a ref moves (an agent
can move one between two stages, a person any time), so it is resolved every time and only
the sha it names is looked up here. A negative answer (no such object) is never kept
either: the object may arrive later.

:class:`ObjectReads` holds the reading methods :class:`andon.git.repo.Repo` offers; it is
a mixin so that repo.py keeps the refs, merges and worktrees.

Raises GitError (a git command failed).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# `git cat-file --batch` found an object: its id, type and size in bytes
BATCH_HEADER = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64}) ([a-z]+) ([0-9]+)")
# a full sha peeled to its tree or commit, as andon asks rev-parse for them
_PEELED = re.compile(r"([0-9a-f]{40})\^\{(tree|commit)\}")


@dataclass(frozen=True)
class Change:
    """One path changed between two commits; a rename shows as a D and an A."""

    path: str      # repo-relative POSIX path
    status: str    # "A" | "M" | "D" | "T" (type change)
    old_mode: str  # "000000" when added
    new_mode: str  # "000000" when deleted; "120000" symlink, "160000" submodule


@dataclass(frozen=True)
class Entry:
    """One entry of a recursive tree listing (``git ls-tree -r``): a file, a symbolic link
    (kind ``blob``, mode 120000) or a submodule (kind ``commit``, mode 160000)."""

    mode: str
    kind: str
    sha: str
    path: str      # repo-relative POSIX path


class Known:
    """What git said about full shas (see the module docstring), for one repository. The
    peeled answers are small and kept all (a run asks about a few per attempt); diffs and
    listings, which grow with the tree, only for the last ``keep`` commits asked about."""

    def __init__(self, keep: int = 8):
        self._peeled: dict[str, str] = {}  # "<sha>^{tree}" / "<sha>^{commit}" -> sha
        self._big: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._keep = keep

    def peeled(self, rev: str) -> str | None:
        """The sha ``rev`` ("<full sha>^{tree}" or "^{commit}") was found to name, or None
        when not known (or ``rev`` is of another form)."""
        return self._peeled.get(rev)

    def learn(self, rev: str, sha: str) -> None:
        """Keep git's answer ``sha`` to ``rev``, when ``rev`` is of a form kept."""
        if _PEELED.fullmatch(rev):
            self._peeled[rev] = sha

    def commit(self, commit: str, tree: str) -> None:
        """``commit`` (a commit andon just made) has the tree ``tree``."""
        self._peeled[f"{commit}^{{commit}}"] = commit
        self._peeled[f"{commit}^{{tree}}"] = tree

    def get(self, key: tuple[str, ...]) -> Any:
        """A kept diff or listing, or None."""
        if key in self._big:
            self._big.move_to_end(key)
        return self._big.get(key)

    def put(self, key: tuple[str, ...], value: Any) -> None:
        self._big[key] = value
        while len(self._big) > self._keep:
            self._big.popitem(last=False)


class ObjectReads:
    """Reading objects, for :class:`andon.git.repo.Repo` (which supplies ``_run`` and
    ``_sha`` and makes ``known``)."""

    known: Known

    def _run(self, args: tuple[str, ...], cwd: Path | None, input: bytes | None,
             check: bool, env: Mapping[str, str] | None = None
             ) -> subprocess.CompletedProcess:
        raise NotImplementedError

    def _sha(self, rev: str) -> str:
        raise NotImplementedError

    def _text(self, *args: str) -> str:
        return os.fsdecode(self._run(args, None, None, True).stdout)

    def commit_tree(self, tree: str, parent: str, message: str) -> str:
        """A new commit of ``tree`` with the one parent ``parent`` (both shas) and
        ``message``; its sha. No ref moves. Its tree is known from then on."""
        sha = os.fsdecode(self._run(("commit-tree", tree, "-p", parent, "-F", "-"), None,
                                    message.encode(), True).stdout).strip()
        self.known.commit(sha, tree)
        return sha

    def changes(self, base: str, head: str) -> list[Change]:
        """Every path that differs between ``base`` and ``head``, in git's order (asked of git
        once per pair of shas)."""
        key = ("changes", self._sha(base), self._sha(head))
        kept = self.known.get(key)
        if kept is None:
            kept = tuple(_changes(self._text("diff-tree", "-r", "-z", "--no-renames", "--raw",
                                             key[1], key[2])))
            self.known.put(key, kept)
        return list(kept)

    def entries(self, rev: str) -> tuple[Entry, ...]:
        """Every file, symbolic link and submodule in the tree of ``rev``, in git's order
        (``git ls-tree -r --full-tree``; asked of git once per sha). GitError if ``rev``
        names no tree."""
        key = ("entries", self._sha(rev))
        kept = self.known.get(key)
        if kept is None:
            out = self._run(("ls-tree", "-r", "-z", "--full-tree", key[1]), None, None,
                            True).stdout
            kept = tuple(_entry(record) for record in out.split(b"\0") if record)
            self.known.put(key, kept)
        return kept

    def file_bytes(self, rev: str, path: str) -> bytes | None:
        """Content of the blob at ``path`` in ``rev`` (a symlink's target for a symlink); None
        if the path is absent there or is not a file."""
        spec = os.fsencode(f"{self._sha(rev)}:{path}")  # any bytes a name can hold
        if b"\0" in spec:  # no path in git holds one; on stdin it would end the name early
            return None
        # One process, not three. -z (git 2.38): the name ends at NUL, so a newline or a
        # carriage return in it is read as given (line input strips a CR before the LF).
        # Answer: "<id> <type> <size>\n<bytes>\n", or the name and " missing".
        out = self._run(("cat-file", "--batch", "-z"), None, spec + b"\0", True).stdout
        header, _, rest = out.partition(b"\n")
        found = BATCH_HEADER.fullmatch(header)  # never an echoed name: "<id>:" starts it
        if found is None or found[2] != b"blob":
            return None
        return rest[:int(found[3])]

    def files(self, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], bytes | None]:
        """:meth:`file_bytes` of each (rev, path) in ``wanted``, from one git process for all
        of them (a path holding a line break is asked alone: git echoes a missing name, which
        would shift the answers). Every blob is held in memory at once."""
        found = {(rev, p): self.file_bytes(rev, p) for rev, p in wanted if "\n" in p or "\0" in p}
        shas = {rev: self._sha(rev) for rev in dict.fromkeys(rev for rev, _ in wanted)}
        asked = list(dict.fromkeys((shas[rev], p, (rev, p)) for rev, p in wanted
                                   if (rev, p) not in found))
        if not asked:
            return found
        names = b"".join(os.fsencode(f"{sha}:{p}") + b"\0" for sha, p, _ in asked)
        out = self._run(("cat-file", "--batch", "-z"), None, names, True).stdout
        at = 0
        for _, _, key in asked:  # "<id> <type> <size>\n<bytes>\n", or "<name> missing\n"
            end = out.index(b"\n", at)
            hit = BATCH_HEADER.fullmatch(out[at:end])
            size = int(hit[3]) if hit is not None else -1
            found[key] = out[end + 1:end + 1 + size] if hit is not None and hit[2] == b"blob" \
                else None
            at = end + 1 + (size + 1 if hit is not None else 0)
        return found

    def blobs(self, rev: str, paths: list[str]) -> set[str]:
        """Those of ``paths`` that are files (blobs, symlinks included) in ``rev``: one git
        process for all of them. GitError if ``rev`` does not resolve."""
        return {p for p, kind in self.kinds(rev, paths).items() if kind == "blob"}

    def kinds(self, rev: str, paths: list[str]) -> dict[str, str]:
        """Each of ``paths`` → what it is in ``rev`` ("blob", "tree", "commit" for a
        submodule), "" where there is nothing: one git process for all of them. GitError
        if ``rev`` does not resolve."""
        sha = self._sha(rev)
        # a missing name is echoed in the answer: one holding a newline would shift the lines
        alone = [p for p in paths if "\n" in p or "\0" in p]
        found = {p: self._kind(sha, p) for p in alone}
        asked = [p for p in paths if p not in found]
        if asked:
            names = b"".join(os.fsencode(f"{sha}:{p}") + b"\0" for p in asked)
            out = self._run(("cat-file", "--batch-check", "-z"), None, names, True).stdout
            for p, line in zip(asked, out.split(b"\n"), strict=False):
                hit = BATCH_HEADER.fullmatch(line)
                found[p] = hit[2].decode() if hit is not None else ""
        return found

    def _kind(self, sha: str, path: str) -> str:
        """:meth:`kinds` for one path that cannot go on a line of its own."""
        if "\0" in path:  # no path in git holds one
            return ""
        return os.fsdecode(self._run(("cat-file", "-t", f"{sha}:{path}"), None, None,
                                     False).stdout).strip()

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
        return self._text(*args, self._sha(base), self._sha(head), "--", *paths)

    def diff_stat(self, base: str, head: str) -> str:
        """Human-readable ``--stat`` summary of base..head."""
        return self._text("diff-tree", "-r", "--stat", "--text", "--no-color", self._sha(base),
                          self._sha(head))


def _changes(out: str) -> list[Change]:
    """``diff-tree -r -z --raw`` output as changes."""
    fields = out.split("\0")
    result = []
    # -z output is ":<old mode> <new mode> <old sha> <new sha> <status>" NUL "<path>" NUL ...
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        old_mode, new_mode, _, _, status = meta.lstrip(":").split(" ")
        result.append(Change(path=path, status=status, old_mode=old_mode, new_mode=new_mode))
    return result

def _entry(record: bytes) -> Entry:
    """One ``ls-tree -z`` record: "<mode> <kind> <sha>" TAB "<path>"."""
    meta, _, raw = record.partition(b"\t")
    mode, kind, sha = meta.decode().split()
    return Entry(mode, kind, sha, os.fsdecode(raw))
