"""An attempt's worktree, made while red runs beside it (issue 18: time to verdict).

Red runs before any agent and judges a commit, so its runs need only a checkout of that
commit: a clone of its own (``gates/red.py``, a shared object store in the harness's temp
dir) does, while the worktree is written. On a repository of 6,031 files
(benchmarks/overhead.py) the worktree's clone took 0.5-1.6 s and red's runs 0.3-0.5 s: the
agent starts after the longer of the two instead of their sum.

The worktree is made by a forked process (:mod:`andon.forked`), started before red's first
run, not by a thread: after each of its runs the harness sweeps every child of this process
that started during the run (``contain/procgroup.kill_leftovers``), which would have been
the thread's git — killed mid-clone, leaving the agent a half-written worktree. The forked
process is older than every run, so the sweep leaves it alone, and its git processes are its
own children.

The worktree is made first, in this process, when red is not the first thing to run (a
candidate reviewed again) or ``[test] setup`` is set (red then runs in the worktree, so the
agent starts on a tree already set up).

Each made worktree is an event of the attempt, ``worktree-made``: ``{"path", "made": "pool"
| "clone", "seconds"}`` (wall seconds to write it, in the process that wrote it), with
``"pool_refused"`` (why) when a waiting tree could not be used, so that the evidence says
whether an agent started in a tree another attempt used, reset to the commit
(worktree_pool.py). It is recorded when the attempt waits for its worktree, which every
attempt that reaches its agent does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from . import fault_injection, forked
from .errors import AndonError
from .gates.base import GateContext


class WorktreeFailed(AndonError):
    """The forked process could not make the worktree; the message is its error
    (e.g. ``GitError: …`` with git's own words), ``traceback`` its traceback."""

    def __init__(self, error: str, traceback: str | None):
        super().__init__(f"the worktree could not be made: {error}")
        self.traceback = traceback


class WorktreeBuild:
    """``make()`` (which writes the worktree and returns its path and how it was written:
    ``Repo.make_worktree``), run in a forked process when ``beside_red``, else at once;
    ``ctx.worktree_ready`` says whether it is done. Once made, the ``worktree-made`` event of
    attempt ``attempt_id`` goes to ``ctx.store`` (none without a store). A context manager:
    leaving it waits for the process, so nothing cleans up a worktree still being written."""

    def __init__(self, make: Callable[[], tuple[Path, dict[str, str]]], ctx: GateContext,
                 beside_red: bool, attempt_id: int | None = None):
        self.ctx, self.attempt_id = ctx, attempt_id
        self._child: forked.Child | None = None
        if beside_red:
            self._child = forked.start(lambda: _timed(make))
            ctx.worktree_ready = False
        else:
            self._told(_timed(make))
            fault_injection.point("after-worktree")

    def wait(self) -> None:
        """Return once the worktree is made; WorktreeFailed when making it failed. Later
        calls return at once."""
        if self._child is None:
            return
        ended = forked.collect(self._child)
        self._child = None  # only once collected: an interrupt above leaves it to __exit__
        if "error" in ended:
            raise WorktreeFailed(ended["error"], ended.get("traceback"))
        self._told(ended["value"])
        self.ctx.worktree_ready = True
        fault_injection.point("after-worktree")

    def __enter__(self) -> WorktreeBuild:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # leaving on an error (an interrupt in wait() too): the process is waited for before
        # anyone removes the worktree (killed, its git would write on into the path), and the
        # first error is the one told
        if self._child is not None:
            forked.collect(self._child)
            self._child = None

    def _told(self, made: dict) -> None:
        if self.ctx.store is not None:
            self.ctx.store.event("worktree-made", self.ctx.packet.id, self.attempt_id, made)


def _timed(make: Callable[[], tuple[Path, dict[str, str]]]) -> dict:
    began = time.monotonic()
    path, how = make()
    return {"path": str(path), **how, "seconds": round(time.monotonic() - began, 3)}
