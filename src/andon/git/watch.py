"""Every git command andon runs: started in a session of its own and watched, so that none
waits for ever on a file that is not what git takes it for.

git opens what it reads with a plain open(2). A FIFO anywhere git reads — ``HEAD``, a ref, a
config include, an excludes file, a pack index, a nested repository's ``HEAD``, or one swapped
in and out again between two looks — blocks it until some process opens the other end;
``/dev/zero`` is read without end. hazards.py names such files where they are most simply
left, before git runs; this module catches a git command stuck on one anywhere else.

:func:`run` waits for git as ``subprocess.run`` does; :func:`streaming` hands a caller the
pipes of one it talks to as it runs (``cat-file --batch``), watched from a thread. Once the
command has run ``FIRST_LOOK_S`` seconds, and every ``WATCH_S`` after, each process of its
session is looked at in ``/proc`` (Linux): one blocked opening a FIFO (its ``wchan`` is the
kernel's ``wait_for_partner``), or holding open past its standard streams a character device
other than ``/dev/null`` or a named FIFO (one another process keeps open), at two looks
``RELOOK_S`` apart, stops the command. Its session gets SIGTERM (git then removes its lock
files), SIGKILL after ``GRACE_S``, and :class:`~andon.errors.GitBlocked` names the file: the
path the blocked open(2) was given (``/proc/<pid>/syscall`` and ``/proc/<pid>/mem``, which a
process may read of its own child), else what hazards.py finds. Where ``/proc`` tells
nothing (another system, a hidden ``wchan``), the stat look of hazards.py at what the
command reads decides alone. A command that is merely slow runs to its end. git reading
``/dev/zero`` in a place hazards.py does not look grows by about 2 GB a second until the
first look stops it.
"""

from __future__ import annotations

import os
import platform
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..errors import GitBlocked
from . import hazards

# nearly every git command andon runs has ended before the first look; a slow one (a clone
# of a large repository) is looked at again every WATCH_S
FIRST_LOOK_S, WATCH_S = 0.5, 2.0
GRACE_S = 1.0  # after SIGTERM, before SIGKILL
# git opens /dev/urandom for an instant (a temporary object's name): a device still held by
# the same process at a second look this much later is being read, not sampled
RELOOK_S = 0.1
# what /proc/<pid>/wchan reads for a process blocked opening a FIFO (older and newer kernels)
_FIFO_WAITS = frozenset(("wait_for_partner", "fifo_open"))
# open(2) system calls by number, and the argument that holds the path (x86-64, arm64)
_OPENS = {"x86_64": {2: 0, 257: 1, 437: 1}, "aarch64": {56: 1, 437: 1}}.get(
    platform.machine(), {})
_AT_FDCWD = -100


def run(argv: list[str], cwd: Path | None, input: bytes | None, env: Mapping[str, str],
        git_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Run the git command ``argv`` in ``cwd`` (None: this process's), stdout and stderr
    captured as bytes, ``input`` to its stdin (None: stdin is this process's), as
    ``subprocess.run`` does; ``git_dir`` is the repository's (for the stat look). Raises
    GitBlocked when the command is stopped (see the module docstring), OSError when git
    cannot be started. Whatever ends the wait (Ctrl-C too) ends the command's session."""
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), start_new_session=True,
                            stdin=subprocess.PIPE if input is not None else None,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        send, wait = input, FIRST_LOOK_S
        while True:
            try:
                out, err = proc.communicate(send, timeout=wait)
                break
            except subprocess.TimeoutExpired:
                send, wait = None, WATCH_S  # input sent already: a retry carries on with it
                if found := _stuck(proc.pid, cwd, env, git_dir):
                    where = Path(cwd) if cwd is not None else Path.cwd()
                    raise GitBlocked(argv, found, hazards.describe(found, where)) from None
    except BaseException:  # GitBlocked, Ctrl-C, anything: the command's session ends
        _end(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@contextmanager
def streaming(argv: list[str], cwd: Path | None, env: Mapping[str, str],
              git_dir: Path | None = None) -> Iterator[subprocess.Popen]:
    """The git command ``argv`` started in ``cwd`` with pipes to its stdin and stdout (stderr
    dropped), for a caller that talks to it as it runs (``cat-file --batch``), watched
    as :func:`run` is by a thread of its own. A stuck command's session is ended, so the
    caller's next read sees end of file; on leaving the block, whatever the caller raised
    then gives way to GitBlocked naming the file. Leaving the block ends the session."""
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), start_new_session=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    found: list[tuple[Path, str]] = []
    left = threading.Event()

    def watch() -> None:
        wait = FIRST_LOOK_S
        while not left.wait(wait) and proc.poll() is None:
            wait = WATCH_S
            if stuck := _stuck(proc.pid, cwd, env, git_dir):
                found.extend(stuck)
                _end(proc)
                return

    watcher = threading.Thread(target=watch, name="git_watch", daemon=True)
    watcher.start()
    try:
        yield proc
    except BaseException:
        if not found:
            raise
    finally:
        left.set()
        watcher.join()
        _end(proc)
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:  # what was left unflushed goes nowhere: git has ended
                pass
    if found:
        where = Path(cwd) if cwd is not None else Path.cwd()
        raise GitBlocked(argv, found, hazards.describe(found, where))


def _stuck(session: int, cwd: Path | None, env: Mapping[str, str], git_dir: Path | None
           ) -> list[tuple[Path, str]]:
    """What the command in ``session`` is stuck on, if it is: [(path, what)], else []."""
    told, found = False, {}
    held: dict[tuple[int, int], tuple[Path, str, int]] = {}
    for pid, state in _members(session):
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
        except OSError:
            continue
        # a running process shows no wchan: it is not waiting, and /proc does tell
        told = told or wchan not in ("", "0") or state == b"R"
        if wchan in _FIFO_WAITS:
            opening = _opening(pid)
            found[Path(opening) if opening else Path(f"/proc/{pid}")] = "a FIFO"
        held.update(_held(pid))
    if held:
        time.sleep(RELOOK_S)
        again: dict[tuple[int, int], tuple[Path, str, int]] = {}
        for pid in {pid for pid, _ in held}:
            again.update(_held(pid))
        found.update({path: what for key, (path, what, ino) in held.items()
                      if key in again and again[key][2] == ino})
    if found:
        # the path the open was given names it best; the stat look adds what it knows
        for path, what in _looked(cwd, env, git_dir):
            found.setdefault(path, what)
        return sorted(found.items())
    return [] if told else _looked(cwd, env, git_dir)


def _looked(cwd: Path | None, env: Mapping[str, str], git_dir: Path | None
            ) -> list[tuple[Path, str]]:
    """hazards.py's look at what the command reads: the work tree at ``cwd``, the
    ``.gitignore`` files of ``GIT_WORK_TREE`` (a walk: only when the command has one),
    ``GIT_DIR`` and ``git_dir`` with their common directories."""
    where = Path(cwd) if cwd is not None else Path.cwd()
    found = dict(hazards.in_work_tree(where))
    if env.get("GIT_WORK_TREE"):
        found.update(hazards.in_files(Path(env["GIT_WORK_TREE"])))
    for d in (Path(g) for g in (env.get("GIT_DIR"), git_dir) if g):
        found.update(hazards.blocking(d, hazards.common_dir(d)))
    return sorted(found.items())


def _members(session: int) -> list[tuple[int, bytes]]:
    """(pid, state letter) of each process of ``session``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                # the session is the 4th field after the command name, which may hold ")"
                rest = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(rest) > 3 and rest[3] == str(session).encode():
                out.append((int(name), rest[0]))
    return out


def _opening(pid: int) -> str | None:
    """The path an open(2) ``pid`` is blocked in was given, absolute; None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        arg = _OPENS.get(int(fields[0]))
        if arg is None:
            return None
        dirfd = int(fields[1], 16) & 0xFFFFFFFF if arg == 1 else _AT_FDCWD
        dirfd = dirfd - (1 << 32) if dirfd >= 1 << 31 else dirfd  # an int, sign-extended
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(int(fields[1 + arg], 16))
            path = os.fsdecode(mem.read(4096).split(b"\0", 1)[0])
        if not os.path.isabs(path):
            base = f"/proc/{pid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
            path = os.path.join(os.readlink(base), path)
        # ".." resolved through the folders as they are; the file itself named, not followed
        return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    except (OSError, ValueError, IndexError, OverflowError):
        return None


def _held(pid: int) -> dict[tuple[int, int], tuple[Path, str, int]]:
    """(pid, fd) → (the path it was opened as, what it is, its inode) of what ``pid`` holds
    open past fd 2 that git has no use holding: a character device other than /dev/null
    (read without end: /dev/zero) or a named FIFO (one another process keeps open: git's
    open succeeds, and its read waits). Pipes are unnamed (``pipe:[…]``)."""
    out: dict[tuple[int, int], tuple[Path, str, int]] = {}
    try:
        fds = [int(fd) for fd in os.listdir(f"/proc/{pid}/fd") if int(fd) > 2]
    except (OSError, ValueError):
        return out
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev != hazards.DEV_NULL:
            out[(pid, fd)] = (Path(target), "a character device", st.st_ino)
        elif stat.S_ISFIFO(st.st_mode) and target.startswith("/"):
            out[(pid, fd)] = (Path(target), "a FIFO", st.st_ino)
    return out


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's session (git removes its lock files), then SIGKILL to
    whatever of it is left after GRACE_S (its leader may have gone first); reaped. Once
    the leader is reaped and nothing of its session is left, its id may be another's: no
    signal then."""
    if proc.returncode is not None and not _members(proc.pid):
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(GRACE_S)
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass  # none of the session is left
    proc.wait()
