"""An attempt's worktree, made while red runs beside it (issue 18: time to verdict).

Red runs before any agent and judges a commit, so its runs need only a checkout of that
commit: a clone of its own (``gates/red.py``, a shared object store in the harness's temp
dir) does, while git writes the worktree in a thread. On a repository of 6,031 files
(benchmarks/overhead.py) the worktree's clone took 0.5-1.6 s and red's runs 0.3-0.5 s: the
agent starts after the longer of the two instead of their sum.

The worktree is made first, in the attempt's own thread, when red is not the first thing to
run (a candidate reviewed again) or ``[test] setup`` is set (red then runs in the worktree,
so the agent starts on a tree already set up).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import TracebackType

from . import fault_injection
from .gates.base import GateContext


class WorktreeBuild:
    """``make()`` (which writes the worktree and returns its path), run in a thread when
    ``beside_red``, else at once; ``ctx.worktree_ready`` says whether it is done. A context
    manager: leaving it waits for the thread, so nothing cleans up a half-made worktree."""

    def __init__(self, make: Callable[[], Path], ctx: GateContext, beside_red: bool):
        self.ctx = ctx
        self._pool: ThreadPoolExecutor | None = None
        self._making: Future | None = None
        if beside_red:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="andon-worktree")
            self._making = self._pool.submit(make)
            ctx.worktree_ready = False
        else:
            make()
            fault_injection.point("after-worktree")

    def wait(self) -> None:
        """Return once the worktree is made; raises what making it raised (GitError,
        UsageError: see ``Repo.add_worktree``). Later calls return at once."""
        if self._making is not None and not self.ctx.worktree_ready:
            self._making.result()
            self.ctx.worktree_ready = True
            fault_injection.point("after-worktree")

    def __enter__(self) -> WorktreeBuild:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # on an error the thread's own outcome is not raised: the first error is the one told
        if self._making is not None:
            wait([self._making])
        if self._pool is not None:
            self._pool.shutdown()
