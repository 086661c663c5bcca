"""Reading a file that the agent, or the code under test, may have put something else in place of.

Everything an agent wrote is hostile input, and so is everything a test run leaves: its JUnit
report, its output, a mutation tool's result files. A plain ``open`` follows a link and
waits: a FIFO in the file's place blocks the reader until some process opens the other end,
a link to ``/dev/zero`` or ``/dev/urandom`` reads without end (andon would hang, fill its
memory, or fill the disk copying it), and a link to a file elsewhere (``~/.ssh/id_rsa``)
would put that file's bytes in the evidence.

:func:`read` opens without following a link (``O_NOFOLLOW``) and without waiting
(``O_NONBLOCK``: opening a FIFO for reading returns at once), and reads a regular file only,
at most ``limit`` bytes; anything else raises :class:`NotPlain`, which says what was there.
Once open, the file is the one checked: a swap after the check changes nothing read. The
other way round, :func:`create` and :func:`write` make the files andon writes where such a
process can write too (an attempt's evidence): what stands there is removed, never written
through.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import AndonError


class NotPlain(AndonError, OSError):
    """``path`` is not a regular file andon reads: ``what`` says what is there instead, as
    words for a message ("a link", "a FIFO", "a character device", "a folder", "larger than
    1048576 bytes"). Also an OSError, so that code which treats an unreadable file as
    missing does so for this one too."""

    def __init__(self, path: Path | str, what: str):
        self.path, self.what = Path(path), what
        super().__init__(f"{path} is {what}, not a regular file andon reads"
                         if not what.startswith("larger") else f"{path} is {what}")


def kind(mode: int) -> str:
    """What a ``st_mode`` is, as words: "a regular file", "a link", "a FIFO", …"""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a link"),
                        (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a file"


def open_regular(path: Path | str, follow: bool = False) -> BinaryIO:
    """The regular file at ``path``, open for reading in binary (a file object to use in a
    ``with`` block), for a reader that streams it (lines of a JSONL file, a tail).
    ``follow``: a link is followed to a regular file (for a file of the user's own, such as
    andon.toml or a packet, which a person may keep as a link), never to anything else.

    Raises:
        FileNotFoundError: nothing is there.
        NotPlain: a link (unless ``follow``), a FIFO, a device, a folder, a socket.
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        # ELOOP: a link (not followed, or one that loops); ENXIO: a socket
        if exc.errno in (errno.ELOOP, errno.ENXIO) and os.path.lexists(path):
            try:
                mode = (os.stat if follow else os.lstat)(path).st_mode
            except OSError:  # a loop: the link itself
                mode = os.lstat(path).st_mode
            raise NotPlain(path, _what(path, mode)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotPlain(path, _what(path, mode))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")  # O_NONBLOCK changes nothing for a regular file


def read(path: Path | str, limit: int | None = None, follow: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them (None: all).

    Raises:
        FileNotFoundError: nothing is there.
        NotPlain: a link (unless ``follow``: see :func:`open_regular`), a FIFO, a device, a
            folder, a socket; or more than ``limit`` bytes.
        OSError: it cannot be read.
    """
    with open_regular(path, follow) as f:
        if limit is not None and os.fstat(f.fileno()).st_size > limit:
            raise NotPlain(path, f"larger than {limit} bytes")
        # read to the end, not to st_size: the file may have grown since the fstat
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise NotPlain(path, f"larger than {limit} bytes")
    return data


def tail(path: Path | str, n: int) -> str:
    """The last ``n`` bytes of the regular file at ``path``, decoded as UTF-8 (undecodable
    bytes replaced); raises as :func:`open_regular`."""
    with open_regular(path) as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - n))
        return f.read(n).decode("utf-8", errors="replace")


def read_text(path: Path | str, limit: int | None = None, follow: bool = False) -> str:
    """:func:`read`, decoded as UTF-8 with undecodable bytes replaced (U+FFFD)."""
    return read(path, limit, follow).decode("utf-8", errors="replace")


def create(path: Path | str, readable: bool = False) -> BinaryIO:
    """A new, empty file at ``path``, open for writing in binary (and reading, with
    ``readable``: "w+b"), for a file andon writes in a folder hostile code can write too (an
    attempt's evidence). Whatever stands at ``path`` is removed first, never followed: a
    link there (to a file of the user's, which a plain open would write over) or a FIFO
    (which a plain open would wait on). The file is then made exclusively (``O_EXCL``), so
    one put back in between is an error, not written through.

    Raises:
        IsADirectoryError: a folder stands at ``path``.
        FileExistsError: something was put back between the removal and the creation.
        OSError: the folder cannot be written.
    """
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    flags = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags | (os.O_RDWR if readable else os.O_WRONLY), 0o644)
    return os.fdopen(fd, "w+b" if readable else "wb")


def own(path: Path | str) -> int:
    """A descriptor, open for reading and writing, of andon's own file at ``path`` (a lock,
    a ledger) that must last from run to run: the regular file there, or a new empty one.
    Anything else standing there — a link (to a file of the user's, which would be written
    over), a FIFO (waited on), a device — is removed and the file made anew (``O_EXCL``).

    Raises:
        IsADirectoryError: a folder stands at ``path``.
        FileExistsError: something was put back between the removal and the creation.
        OSError: the folder cannot be written.
    """
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENXIO):
            raise
    else:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
    os.unlink(path)
    return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)


def write(path: Path | str, data: bytes | str) -> None:
    """``data`` (text as UTF-8) as the new file at ``path``, made as :func:`create` does."""
    with create(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _what(path: Path | str, mode: int) -> str:
    # what stands at ``path`` (its target's ``mode``), naming a link on the way
    return f"a link to {kind(mode)}" if os.path.islink(path) and not stat.S_ISLNK(mode) \
        else kind(mode)


def is_file(path: Path | str) -> bool:
    """True when ``path`` itself (a link not followed) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False
