"""A ref read from the file git keeps it in, without a git process (issue 18: a harness run
asked git for the same few refs a dozen times, a process each).

git's files backend keeps each ref it has not packed as ``<git dir>/<full name>``, holding
the object name and a line break, and such a loose file wins over ``packed-refs``.
:func:`loose_sha` answers only for exactly that case, and says None — "ask git" — for every
other: a packed or missing ref, a symbolic one, a link, a name git would refuse, a file of
another shape, a repository of another ref storage (reftable keeps ``refs/heads`` as a file,
and its tables in ``reftable/``). Only branches and andon's own refs are read: neither is
ever kept per worktree. What the file holds is what git would answer (``rev-parse --verify``
does not look the object up either); an agent that writes the file could equally run
``git update-ref``, and scope's ref check compares what git lists.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

# the characters check-ref-format allows, less a few it allows that no branch andon reads
# needs; the rules on components are checked apart
_NAME = re.compile(r"refs/(?:heads|andon)/[A-Za-z0-9._/+,=@-]+")
_LINE = re.compile(rb"[0-9a-f]{40}\n")


def loose_sha(git_dir: Path, ref: str) -> str | None:
    """The sha the loose ref file of ``ref`` (a full name under ``refs/heads/`` or
    ``refs/andon/``) holds in the repository whose common git dir is ``git_dir``; ``""``
    when there is no such ref (no loose file, and no ``packed-refs`` at all); None when git
    must be asked (see the module docstring). Never raises."""
    if not _NAME.fullmatch(ref) or not _well_formed(ref):
        return None
    try:
        if (git_dir / "reftable").exists():
            return None
        fd = os.open(git_dir / ref, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        # the loose file first: `git pack-refs` writes packed-refs before it deletes a
        # loose file, so a ref that was not loose a moment ago is in packed-refs now
        return "" if not os.path.lexists(git_dir / "packed-refs") else None
    except OSError:  # a link, a folder on the way that is a file
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 42)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data[:40].decode() if _LINE.fullmatch(data) else None


def _well_formed(ref: str) -> bool:
    """git check-ref-format's rules on the parts of a name (``_NAME`` has the characters)."""
    if ref.endswith(("/", ".")) or ".." in ref or "@{" in ref:
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock")
               for part in ref.split("/"))
