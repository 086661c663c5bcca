"""The runs of an experiment on a pool of processes: up to ``concurrency`` at once, one
forked process per run (:mod:`andon.forked`), started in the plan's order.

Only the caller writes the store: each run's record comes back through its process's pipe
and is yielded on the caller's thread. Before each fork the caller closes its SQLite
connection and reopens it after (``before_fork`` / ``after_fork``): no connection crosses a
fork. ``may_start()`` is asked before each start (the total budget): runs in flight finish
even when it turns false. When the caller stops early (an exception, Ctrl-C, closing the
generator) the runs in flight are killed and handed to ``abandoned(key)``; they have no
record and run again on resume.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, TypeVar

from .. import forked

K = TypeVar("K")


def run_pool(keys: Iterable[K], work: Callable[[K], dict[str, Any]], concurrency: int,
             may_start: Callable[[], bool], *,
             before_fork: Callable[[K], None] = lambda key: None,
             after_fork: Callable[[], None] = lambda: None,
             abandoned: Callable[[K], None] = lambda key: None
             ) -> Iterator[tuple[K, dict[str, Any]]]:
    """Run ``work(key)`` for each of ``keys``, each in a child process, up to
    ``concurrency`` at once; yield ``(key, ended)`` as each ends, where ``ended`` is
    :func:`andon.forked.collect`'s dict: ``{"value": work's record}`` or ``{"error": …}``
    (``work`` raised, or its process died)."""
    pending = iter(keys)
    running: dict[int, tuple[forked.Child, K]] = {}
    try:
        while True:
            while len(running) < concurrency and may_start():
                key = next(pending, None)
                if key is None:
                    break
                before_fork(key)
                try:
                    child = forked.start(partial(work, key), close=list(running))
                finally:
                    after_fork()
                running[child.fd] = (child, key)
            if not running:
                return
            ready, _, _ = select.select(list(running), [], [])
            for fd in ready:
                child, key = running.pop(fd)
                yield key, forked.collect(child)
    finally:
        for child, key in running.values():
            forked.kill(child)
            abandoned(key)
