"""Compiled code known by its first bytes, whatever the file is called.

A name tells the import system what an extension module is (scope's ``EXTENSION_SUFFIXES``),
but ``ctypes.CDLL`` loads a shared library and a subprocess runs an executable under any
name (``data.bin``, ``libfast``): the content decides. ``heads`` reads the first bytes of the
changed files only, streaming each blob past without holding it; ``native_format`` names
the format those bytes start.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import GitError
from ..git import watch
from ..git.repo import BATCH_HEADER, Repo, git_env

HEAD_BYTES = 64  # every magic below, and the start of a PE's DOS header
_CHUNK = 1 << 16
# magic numbers, both byte orders where the format has two
_MAGIC = (
    (b"\x7fELF", "ELF shared library or executable"),
    (b"\xfe\xed\xfa\xce", "Mach-O library or executable"),
    (b"\xce\xfa\xed\xfe", "Mach-O library or executable"),
    (b"\xfe\xed\xfa\xcf", "Mach-O library or executable"),
    (b"\xcf\xfa\xed\xfe", "Mach-O library or executable"),
    # the universal (fat) Mach-O magic is also a Java class file's: compiled code either way
    (b"\xca\xfe\xba\xbe", "Mach-O universal binary or Java class file"),
    (b"\xca\xfe\xba\xbf", "Mach-O universal binary (64-bit)"),
)


def native_format(head: bytes) -> str | None:
    """The compiled-code format the bytes ``head`` (a file's first ``HEAD_BYTES``) start, as
    words for a message; None for anything else. "MZ" counts as a PE file only with a NUL
    byte in ``head``: its DOS header has them, a text file that starts with MZ has none."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    if head.startswith(b"MZ") and b"\0" in head[:HEAD_BYTES]:
        return "PE (Windows DLL or executable)"
    return None


def heads(repo: Repo, rev: str, paths: Sequence[str],
          size: int = HEAD_BYTES) -> dict[str, bytes]:
    """``{path: its first size bytes}`` for each of ``paths``, which must be files (blobs) in
    ``rev``. One ``git cat-file --batch`` process; the rest of each blob is read in chunks
    and dropped, so memory stays bounded whatever the agent committed. GitError when git
    fails or does not answer with a blob."""
    if not paths:
        return {}
    sha = repo.resolve(rev)
    argv = ["git", "cat-file", "--batch", "-z"]
    found: dict[str, bytes] = {}
    # watched: the agent may have left a FIFO where a blob it wrote would be stored, which
    # git takes for the object and opens (git/watch.py)
    with watch.streaming(argv, repo.root, git_env(), repo.git_dir) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for p in paths:
                # one name at a time: git answers before it reads the next, so neither pipe
                # fills while the other waits
                proc.stdin.write(os.fsencode(f"{sha}:{p}") + b"\0")
                proc.stdin.flush()
                header = BATCH_HEADER.fullmatch(proc.stdout.readline().rstrip(b"\n"))
                if header is None or header[2] != b"blob":
                    raise GitError(argv, proc.poll() or 0, f"no blob {p!r} in {rev}")
                left = int(header[3]) + 1  # the content, then a newline
                found[p] = proc.stdout.read(min(size, left - 1))
                left -= len(found[p])
                while left > 0:
                    chunk = proc.stdout.read(min(left, _CHUNK))
                    if not chunk:
                        raise GitError(argv, proc.poll() or 0, f"{p!r} ended early")
                    left -= len(chunk)
        except OSError as exc:  # git went away mid-answer: a broken pipe
            raise GitError(argv, proc.wait(), str(exc)) from exc
    return found
