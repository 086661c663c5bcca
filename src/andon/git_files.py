"""Files in a git directory that would make git wait for ever, found without running git.

git opens ``HEAD``, ``config``, ``packed-refs``, each loose ref and each reflog as regular
files, with no timeout: a FIFO there blocks the git command in open(2) until some process
writes to it, and a link to ``/dev/zero`` is read without end. Every git command reads
``HEAD`` and ``config`` (``HEAD`` is how git recognises a repository); ``for-each-ref`` and a
clone read every ref. An agent that is not sandboxed can make such a file in the user's
``.git`` by absolute path, and andon's next git command would hang with no evidence shown.

So this module looks, with ``lstat``/``stat`` only (it opens no file it checks), at what git
reads in a git directory: the files above, ``index``, ``commondir``, ``gitdir``, ``shallow``,
``FETCH_HEAD``, ``ORIG_HEAD``, ``MERGE_HEAD``, ``config.worktree``,
``objects/info/alternates``, ``info/``'s top level, everything below ``refs/`` and ``logs/``,
and the same in each linked worktree's folder under ``worktrees/``. A path is *blocking*
when what it leads to (links followed) is neither a regular file nor a folder: a FIFO, a
socket, a character or block device. A folder is not descended into through a link (links
may loop; git does not follow one below ``refs/`` either). ``objects/`` itself is not
walked: git reads objects by name, never by listing them, and a repository holds millions.

Used when a :class:`~andon.workspace.Repo` is made (every command: it refuses, naming the
paths, before git is asked anything) and after every agent stage (attempt.py: the stage's
``scope`` failure names them, and andon runs no git command in the repository after it).
"""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

# How long a git command runs before the repository is looked at for a blocking file, and
# again each time this passes: nearly every git command andon runs ends well before
WATCH_S = 2.0
_TOP = ("HEAD", "config", "config.worktree", "packed-refs", "index", "commondir", "gitdir",
        "shallow", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "objects/info/alternates")
_DEEP = ("refs", "logs", "info")
# read by git in every folder of a work tree it walks (``add --all``, ``status``)
_IN_TREE = frozenset((".gitignore", ".gitattributes", ".gitmodules"))


def blocking(*git_dirs: Path, extra: Iterable[Path] = ()) -> list[tuple[Path, str]]:
    """(path, what it is) for each blocking path (see the module docstring) in the git
    directories ``git_dirs`` (a repository's own and its common one: the same folder for a
    plain repository) and in ``extra`` files (the user's global git config); sorted, each
    path once. ``what`` reads as ``"a FIFO"``, ``"a link to a FIFO"``, ``"a socket"``, ...
    Missing and unreadable paths are skipped: git fails on them, it does not wait."""
    found: dict[Path, str] = {}
    for git_dir in dict.fromkeys(Path(d) for d in git_dirs):
        for d in (git_dir, *_worktree_dirs(git_dir)):
            for name in _TOP:
                _check(d / name, found)
            for name in _DEEP:
                _walk(d / name, found)
    for f in extra:
        _check(Path(f), found)
    return sorted(found.items())


def in_work_tree(root: Path) -> list[tuple[Path, str]]:
    """:func:`blocking` for the work tree at ``root`` (or above it) and the user's global
    git config, before git is asked anything: its git directories are read from the files
    as git finds them (``.git`` a folder, or a file ``gitdir: <path>`` — a linked worktree, a
    submodule — whose folder's ``commondir`` names the common one), so that a blocking
    ``HEAD`` cannot stop the search. A ``.git`` that is itself blocking is named. Nothing
    found when there is no ``.git`` to read (git itself then says what is wrong)."""
    dirs: tuple[Path, ...] = ()
    for d in (root, *root.parents):
        dot = d / ".git"
        if not os.path.lexists(dot):
            continue
        found: dict[Path, str] = {}
        _check(dot, found)
        if found:
            return sorted(found.items())
        if dot.is_dir():
            dirs = (dot,)
        else:
            try:
                line = _read_small(dot)
            except (OSError, ValueError):
                break
            if line.startswith("gitdir:"):
                own = (d / line[len("gitdir:"):].strip()).resolve()
                try:
                    dirs = (own, (own / _read_small(own / "commondir").strip()).resolve())
                except (OSError, ValueError):
                    dirs = (own,)
        break
    return blocking(*dirs, extra=user_config_files())


def run(argv: list[str], cwd: Path | None, input: bytes | None, env: Mapping[str, str],
        git_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Run the git command ``argv`` in ``cwd`` (None: this process's), with stdout and
    stderr captured as bytes and ``input`` to its stdin (None: stdin is this process's), as
    ``subprocess.run`` does, but never for ever: once it has run ``WATCH_S`` seconds, and each
    ``WATCH_S`` after, what it reads is looked at — the work tree at ``cwd``
    (:func:`in_work_tree`), the ``.gitignore`` files and the like of ``env``'s
    ``GIT_WORK_TREE`` or of ``cwd`` (:func:`in_files`), ``env``'s ``GIT_DIR`` and ``git_dir``
    (the repository's), each with its common directory — and when one now holds a file git
    would wait on, the command
    and everything it started (its own session: a clone's ``upload-pack``) are killed and
    GitError names the file. A command that is merely slow runs to its end. Raises OSError
    when git cannot be started."""
    from .errors import GitError

    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), start_new_session=True,
                            stdin=subprocess.PIPE if input is not None else None,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        send = input
        while True:
            try:
                out, err = proc.communicate(send, timeout=WATCH_S)
                break
            except subprocess.TimeoutExpired:
                send = None  # sent already: a retry carries on reading
                where = Path(cwd) if cwd is not None else Path.cwd()
                if found := _read_by(where, env.get("GIT_WORK_TREE"), env.get("GIT_DIR"),
                                     git_dir):
                    _kill(proc)
                    raise GitError(argv, -signal.SIGKILL, describe(found, where)) from None
    except BaseException:
        _kill(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _read_by(cwd: Path, work_tree: str | None, *git_dirs: str | Path | None
             ) -> list[tuple[Path, str]]:
    """:func:`in_work_tree` of ``cwd``, :func:`in_files` of ``work_tree`` (else ``cwd``)
    and :func:`blocking` of each of ``git_dirs`` given and of the common directory its
    ``commondir`` names."""
    found = dict(in_work_tree(cwd))
    found.update(in_files(Path(work_tree) if work_tree else cwd))
    for d in (Path(g) for g in git_dirs if g):
        try:
            common = (d / _read_small(d / "commondir").strip()).resolve()
        except (OSError, ValueError):
            common = d
        found.update(blocking(d, common))
    return sorted(found.items())


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def user_config_files() -> list[Path]:
    """The files git reads as the user's global config: ``$GIT_CONFIG_GLOBAL`` when set, else
    ``$XDG_CONFIG_HOME/git/config`` (default ``~/.config/git/config``) and ``~/.gitconfig``
    (git-config(1), FILES). Listed whether they exist or not."""
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        return [Path(os.environ["GIT_CONFIG_GLOBAL"])]
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [xdg / "git" / "config", home / ".gitconfig"]


def in_files(top: Path) -> list[tuple[Path, str]]:
    """(path, what it is) for each ``.gitignore``, ``.gitattributes`` or ``.gitmodules``
    below the work tree ``top`` that is blocking, as :func:`blocking`; no ``.git`` folder
    and no linked folder is descended into. Sorted."""
    found: dict[Path, str] = {}
    stack = [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            if e.name in _IN_TREE:
                _check(Path(e.path), found)
            elif e.name != ".git" and e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
    return sorted(found.items())


def describe(found: list[tuple[Path, str]], root: Path, advice: bool = True) -> str:
    """One sentence per blocking path, named relative to ``root`` when below it, and
    (``advice``) the command that removes it (andon removes nothing of the user's)."""
    listed = "; ".join(f"{shown(p, root)} is {what}" for p, what in found)
    said = f"git would wait for ever on what it reads as a plain file: {listed}"
    if not advice:
        return said
    return (f"{said}. Remove it (rm " + " ".join(shlex.quote(str(p)) for p, _ in found)
            + "): until then andon runs no git command in this repository")


def shown(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` ("/"-separated) when below it, else as it is."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _worktree_dirs(git_dir: Path) -> list[Path]:
    try:
        with os.scandir(git_dir / "worktrees") as it:
            return [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _check(path: Path, found: dict[Path, str]) -> None:
    try:
        st = os.lstat(path)
        link = stat.S_ISLNK(st.st_mode)
        if link:
            st = os.stat(path)
    except (OSError, ValueError):
        return
    what = _kind(st.st_mode)
    if what is not None:
        found[path] = f"a link to {what}" if link else what


def _walk(top: Path, found: dict[Path, str]) -> None:
    stack = [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            # d_type answers without a stat call for all but links (and file systems that
            # do not fill it in, which is_dir/is_file then stat)
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
            elif not e.is_file(follow_symlinks=False):
                _check(Path(e.path), found)


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _read_small(path: Path) -> str:
    # a .git file or commondir: opened without blocking and read only if it is a regular file
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            raise OSError(f"{path} is not a small regular file")
        return os.read(fd, 4096).decode("utf-8", "surrogateescape")
    finally:
        os.close(fd)
