"""One runner per repository, and what a killed runner leaves behind.

The lock is an flock on ``.andon/run.lock``, released by the kernel even after SIGKILL; the
file holds the runner's pid for the message a second runner gives. :func:`recover` runs when
a runner starts: attempts in flight are marked ``interrupted`` (not counted against the
packet), the agents they left running ended, their worktrees and branches removed, and the
packets put back to ``ready``; a packet caught in ``merging`` is merged — or found already
merged by its trailers — exactly once, by the runner's own merge (passed in).

Several runners share one store (PostgreSQL, ``andon worker``): a packet whose claim has a
live lease (store/claims.py) is another runner's and is left alone, whatever its state; one
whose lease expired is reclaimed by the store (its attempt ``interrupted``, not counted: the
worker died, the agent did not fail) and only its local leftovers, if any, are cleaned here.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from . import lifecycle, plain_file, pool_leases, reaper
from .contain.procgroup import kill_leftover_group, kill_working_under
from .errors import StoreError
from .git.repo import Repo
from .packet import Packet
from .store import StoreProtocol, now


def lock(state: Path, root: Path) -> IO[str]:
    """Hold ``<state>/run.lock`` for this process until the returned file is closed.

    Raises:
        StoreError: another runner holds the lock of the repository at ``root``.
    """
    path = state / "run.lock"
    f = open(path, "a+")  # noqa: SIM115 - held open (and locked) until the run ends
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        raise StoreError(f"another `andon run` is working on {root} "
                         f"(pid {f.read().strip() or '?'}); wait for it to finish") from None
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    return f


def recover(repo: Repo, store: StoreProtocol, packets: dict[str, Packet],
            worktree_path: Callable[[str, int], Path],
            merge: Callable[[Packet, dict, set[str]], str],
            red_ids: Callable[[int], set[str]], echo: Callable[[str], None],
            worktree_root: Path | None = None) -> None:
    """Put the store and the repository back in order after a killed runner (see the module
    docstring). ``packets``: the packets of this run by id; ``worktree_path(id, n)``: where
    attempt ``n`` of a packet has its worktree; ``merge(packet, attempt, red_ids)``: the
    runner's merge of a passed attempt; ``worktree_root``: where the trees a killed runner
    had set aside for deletion are swept (:func:`andon.reaper.sweep`)."""
    repo.git("worktree", "prune")
    if worktree_root is not None:
        reaper.sweep(worktree_root)
    pool_leases.release_dead_local(store)  # a killed runner of this host: no need to wait
    reclaimed = set(store.reclaim_expired())
    live = {lease["packet_id"]: lease["worker"] for lease in store.leases()
            if lease["expires_at"] > now()}
    for row in store.packets():
        attempts = store.attempts(row["id"])
        last = attempts[-1] if attempts else None
        if row["id"] in live:
            # another runner's claim, renewed in time: its attempt (or merge) is under way
            if row["state"] in (*lifecycle.IN_FLIGHT, "merging"):
                echo(f"{row['id']}: {row['state']} by worker {live[row['id']]} (live "
                     "lease); left to it")
            continue
        if row["id"] in reclaimed and last and last["state"] == "interrupted":
            # the store took it back from a dead worker; what it left on this machine goes
            wt = worktree_path(last["packet_id"], last["n"])
            if wt.exists():
                discard(repo, store, last, wt, last["reason"] or "interrupted", echo)
            echo(f"{row['id']}: the lease of attempt {last['n']} expired; it is "
                 "interrupted (not counted), the packet is ready again")
        elif row["state"] in lifecycle.IN_FLIGHT and last:
            discard(repo, store, last, worktree_path(last["packet_id"], last["n"]),
                    f"interrupted: the runner stopped while {row['state']}", echo)
            store.transition(row["id"], "ready", "recovered", last["id"])
            echo(f"{row['id']}: attempt {last['n']} was interrupted; it does not "
                 "count, the packet is ready again")
        elif row["state"] == "merging" and last and row["id"] in packets:
            echo(f"{row['id']}: finishing the merge of attempt {last['n']}")
            store.event("merge-resumed", row["id"], last["id"], {"n": last["n"]})
            merge(packets[row["id"]], last, red_ids(last["id"]))
        for a in attempts:  # attempts created just before a crash, never claimed
            if a["state"] == "running" and row["state"] not in lifecycle.IN_FLIGHT:
                discard(repo, store, a, worktree_path(a["packet_id"], a["n"]),
                        "interrupted before it started", echo)


def discard(repo: Repo, store: StoreProtocol, a: dict, wt: Path, why: str,
            echo: Callable[[str], None]) -> None:
    """End what attempt ``a`` left running, remove its worktree ``wt`` and branch, and mark it
    ``interrupted`` (not counted) with ``why``."""
    # every stage's pid file, a reviewer's later asks (in <stage>-askN/) included
    ended: set[int] = set()
    for pid_file in Path(a["evidence_dir"] or "/nonexistent").rglob("*.pid"):
        # an agent the killed runner left behind must not go on writing (or spending)
        try:  # in the evidence, which the agent may write: never waited on (plain_file.py)
            pid, _, where = plain_file.read_text(pid_file, 4096).partition("\n")
        except OSError:
            continue
        if pid.strip().isdigit() and kill_leftover_group(int(pid), where.strip() or str(wt)):
            ended.add(int(pid))
            echo(f"{a['packet_id']}: ended the agent left running by the killed "
                 f"runner (process group {pid.strip()})")
        pid_file.unlink()
    # ...and one it started but had no time to record: whatever still works in the worktree
    for pgid in kill_working_under(str(wt.resolve()), frozenset(ended)):
        echo(f"{a['packet_id']}: ended a process left working in the interrupted "
             f"attempt's worktree (process group {pgid})")
    repo.remove_worktree(wt)
    branch = f"refs/heads/andon/{a['packet_id']}/{a['n']}"
    if repo.rev_parse(branch):
        repo.git("update-ref", "-d", branch)
    store.update_attempt(a["id"], state="interrupted", counted=0, reason=why,
                         ended_at=now())
