"""Files in a git directory that would make git wait for ever, found without running git.

git opens ``HEAD``, ``config``, ``packed-refs``, each loose ref and each reflog as regular
files, with no timeout: a FIFO there blocks the git command in open(2) until some process
opens the other end, and a link to ``/dev/zero`` is read without end. Every git command reads
``HEAD`` and ``config`` (``HEAD`` is how git recognises a repository); ``for-each-ref`` and a
clone read every ref. An agent that is not sandboxed can make such a file in the user's
``.git`` by absolute path, and andon's next git command would hang with no evidence shown.

This module looks, with ``lstat``/``stat`` only (it opens no file it checks), where git reads
in a git directory: the files above, ``index``, ``commondir``, ``gitdir``, ``shallow``,
``FETCH_HEAD``, ``ORIG_HEAD``, ``MERGE_HEAD``, ``config.worktree``,
``objects/info/alternates``, everything below ``refs/``, ``logs/`` and ``info/``, the same in
each linked worktree's folder under ``worktrees/``, and the user's global git config. A path
is *blocking* when what it leads to (links followed) is a FIFO or a character or block
device other than ``/dev/null`` (which reads as empty); a socket is not (open(2) fails at
once). git follows a link to a folder below ``refs/``, so the walk does too, and a link back
into a folder the walk is in (git would list it without end) is blocking as well.

That list is where an agent most simply leaves such a file, and where this module can name it
before any git command: when a :class:`~andon.git.repo.Repo` is made (every command refuses,
naming it), after every agent stage and every gate that ran code (an ``outside-worktree``
failure), and in an agent's worktree before its snapshot (:func:`in_files`). It is not every
file git may open (a config include, an excludes file, a pack index): watch.py catches a
git command that blocks on any other.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path

from .. import plain_file

DEV_NULL = os.makedev(1, 3)  # st_rdev of /dev/null: reads as empty, never blocks
_TOP = ("HEAD", "config", "config.worktree", "packed-refs", "index", "commondir", "gitdir",
        "shallow", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "objects/info/alternates")
_DEEP = ("refs", "logs", "info")
# read by git in every folder of a work tree it walks (``add --all``, ``status``)
_IN_TREE = frozenset((".gitignore", ".gitattributes", ".gitmodules"))


def blocking(*git_dirs: Path, extra: Iterable[Path] = ()) -> list[tuple[Path, str]]:
    """(path, what it is) for each blocking path (see the module docstring) in the git
    directories ``git_dirs`` (a repository's own and its common one: the same folder for a
    plain repository) and in ``extra`` files (the user's global git config); sorted, each
    path once. ``what`` reads as ``"a FIFO"``, ``"a link to a FIFO"``, ``"a character
    device"``, ``"a link that loops"``.
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
                dirs = (own, common_dir(own))
        break
    return blocking(*dirs, extra=user_config_files())


def common_dir(git_dir: Path) -> Path:
    """The common directory ``git_dir``'s ``commondir`` file names (a linked worktree's),
    else ``git_dir`` itself; read without blocking."""
    try:
        return (git_dir / _read_small(git_dir / "commondir").strip()).resolve()
    except (OSError, ValueError):
        return git_dir


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
    below the work tree ``top``, and each nested repository's ``.git`` and ``.git/HEAD``,
    that is blocking, as :func:`blocking`; no ``.git`` folder and no linked folder is
    descended into (git follows neither as it walks a work tree). Sorted."""
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
            elif e.name == ".git":  # git reads a nested repository's HEAD to tell it is one
                _check(Path(e.path), found)
                _check(Path(e.path) / "HEAD", found)
            elif e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
    return sorted(found.items())


def describe(found: list[tuple[Path, str]], root: Path, advice: bool = True) -> str:
    """One sentence per blocking path, named relative to ``root`` when below it, and
    (``advice``) the command that removes it (andon removes nothing of the user's)."""
    listed = "; ".join(f"{shown(p, root)} is {what}" for p, what in found)
    said = f"git would wait for ever on what it reads as a plain file: {listed}"
    # a device itself is never the thing to remove: what leads git to it is (a link, an
    # include)
    removable = [p for p, _ in found if not str(p).startswith(("/dev/", "/proc/"))]
    if not advice:
        return said
    if not removable:
        return f"{said}. Remove what leads git to it (a link, a config include), run andon again"
    return (f"{said}. Remove it (rm " + " ".join(shlex.quote(str(p)) for p in removable)
            + ") and run andon again")


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
    what = _kind(st)
    if what is not None:
        found[path] = f"a link to {what}" if link else what


def _walk(top: Path, found: dict[Path, str]) -> None:
    # folders by their real path: a link to one the walk is below (or has walked) loops
    stack = [(top, frozenset[str]())]
    while stack:
        where, above = stack.pop()
        try:
            real = os.path.realpath(where)
            with os.scandir(where) as it:
                entries = list(it)
        except (OSError, ValueError):
            continue
        inside = above | {real}
        for e in entries:
            # d_type answers without a stat call for all but links (and file systems that
            # do not fill it in, which is_dir/is_file then stat)
            if e.is_dir(follow_symlinks=False):
                stack.append((Path(e.path), inside))
            elif e.is_symlink() and e.is_dir():
                if os.path.realpath(e.path) in inside:
                    found[Path(e.path)] = "a link that loops"
                else:
                    stack.append((Path(e.path), inside))
            elif not e.is_file(follow_symlinks=False):
                _check(Path(e.path), found)


def _kind(st: os.stat_result) -> str | None:
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO"
    if stat.S_ISCHR(st.st_mode) and st.st_rdev != DEV_NULL:
        return "a character device"
    if stat.S_ISBLK(st.st_mode):
        return "a block device"
    return None  # a file, a folder, /dev/null; a socket: open(2) fails at once


def _read_small(path: Path) -> str:
    # a .git file or commondir: read only if it is a small regular file (git follows a link)
    return plain_file.read(path, 4096, follow=True).decode("utf-8", "surrogateescape")
