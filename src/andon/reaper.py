"""Trees andon is done with, deleted off the critical path.

An attempt leaves up to three trees of the project behind — its worktree, the clone its suite
and hermetic runs shared, its review export — and deleting one is an ``unlink`` per file
(18,000 per packet at 6,000 files; about 0.3-0.5 s of a 2-core machine, issue 18), made so far
between a packet's verdict and what follows it. :func:`discard` takes a tree away at once and
leaves the deletion to one background thread of the process; :func:`drain` waits until every
tree discarded so far is deleted and returns what could not be. ``Runner.run`` drains before
it returns, a forked child (``forked.start``) before it sends its result, and an ``atexit``
hook before any other process ends: a finished run leaves nothing behind. A killed one
leaves what it had not deleted yet; the next run's recovery sweeps the worktree root of
such trash (:func:`sweep`: the folder's name holds the pid of the process that made it).

``aside=True`` first renames the tree into a new folder ``.andon-trash-*`` beside it (one
``rename``, same filesystem), so that its path is free for a new tree at once: an attempt's
worktree path is used again when a run resumes. Without it the tree is deleted where it is
(a ``mkdtemp`` folder, whose path nobody uses again). The trash folders live where the trees
did: in the worktree root, which the agent sandbox hides, or in the temp dir.

The thread runs no process (the harness's containment assumes one thread starts them,
``contain/procgroup``); only :func:`drain`, in the caller's thread, may. A forked child has
no copy of the thread: it starts its own on its first discard, and the parent's queue stays
the parent's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path

from .contain.procgroup import alive

TRASH = ".andon-trash-"  # + the pid of the process that set the tree aside, "-", random


class _Queue:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.todo: deque[Path] = deque()
        self.unfinished = 0  # queued or being deleted
        self.failed: list[tuple[Path, str]] = []
        self.thread: threading.Thread | None = None


_queue = _Queue()


def _new_queue_in_child() -> None:
    global _queue
    _queue = _Queue()


os.register_at_fork(after_in_child=_new_queue_in_child)


def discard(path: Path, aside: bool = False, into: Path | None = None) -> None:
    """Have the tree (or file, or symbolic link: never followed) at ``path`` deleted in the
    background; return at once. With ``aside`` the path is free when this returns (the tree
    was renamed into ``.andon-trash-*`` beside it, or in ``into``, a folder on the same
    filesystem), unless its folder refuses that: then it is deleted where it is. Nothing at
    ``path`` is fine. Raises nothing for a tree that cannot be deleted: :func:`drain` says
    it."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return
    if aside:
        trash = None
        try:
            trash = Path(tempfile.mkdtemp(prefix=f"{TRASH}{os.getpid()}-",
                                          dir=into or path.parent))
            os.rename(path, trash / "tree")
            path = trash
        except OSError:  # deleted where it is, then
            if trash is not None:
                trash.rmdir()
    q = _queue
    with q.cond:
        q.todo.append(path)
        q.unfinished += 1
        if q.thread is None:
            q.thread = threading.Thread(target=_work, args=(q,), name="andon-reaper",
                                        daemon=True)
            q.thread.start()
        q.cond.notify()


def sweep(folder: Path) -> int:
    """Discard what processes that are gone set aside in ``folder`` and never deleted (a run
    killed while its thread worked): every ``.andon-trash-<pid>-*`` whose process no longer
    exists. Returns how many. Nothing there (or no ``folder``) is 0."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    swept = 0
    for name in names:
        pid = name[len(TRASH):].partition("-")[0]
        if name.startswith(TRASH) and pid.isdigit() and not alive(int(pid)):
            discard(Path(folder) / name)
            swept += 1
    return swept


def drain() -> list[str]:
    """Block until every tree this process discarded so far is deleted. A tree the thread
    could not delete is tried once more here with ``chmod -R u+rwx`` and ``rm -rf``, which
    walk a tree of any depth (an agent can nest folders deeper than Python's recursion
    limit, where ``shutil.rmtree`` gives up). Returns one line per tree still there
    ("<path>: <first error>"), each said once."""
    q = _queue
    with q.cond:
        while q.unfinished:
            q.cond.wait()
        failed, q.failed = q.failed, []
    problems = []
    for path, error in failed:
        for argv in (["chmod", "-R", "u+rwx", "--", str(path)], ["rm", "-rf", "--", str(path)]):
            subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if path.exists() or path.is_symlink():
            problems.append(f"{path}: {error}")
    return problems


def delete_tree(path: Path) -> None:
    """Delete ``path`` now, even where the agent took away permissions inside it (each
    folder on the way is given back its owner's rwx). A symbolic link is unlinked, never
    followed. OSError for what cannot be deleted even so (an immutable file)."""
    def retry(func, p, _exc):
        parent = os.path.dirname(p)
        if not os.path.islink(parent):  # chmod follows links: never out of the tree
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, stat.S_IRWXU)
            shutil.rmtree(p, onerror=retry)
        else:
            os.unlink(p)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)


def _work(q: _Queue) -> None:
    while True:
        with q.cond:
            while not q.todo:
                q.cond.wait()
            path = q.todo.popleft()
        try:
            delete_tree(path)
        except Exception as exc:  # noqa: BLE001 - the thread must outlive any one tree
            # (a folder nested deeper than the recursion limit is a RecursionError)
            with q.cond:
                q.failed.append((path, f"{type(exc).__name__}: {exc}"))
        finally:
            with q.cond:
                q.unfinished -= 1
                q.cond.notify_all()


atexit.register(drain)
