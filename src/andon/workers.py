"""Several attempts at once on one machine: ``andon run --workers N`` (``[run] workers``).

One dispatcher (the process that called :meth:`Runner.run`) claims packets; each claimed
attempt is carried out by a worker process forked for it, in its own worktree as with one
worker. Processes, not threads, because the harness's containment assumes one thread starts
processes: after an agent stage it kills every child of the process started since the agent
that it did not start itself (``contain/procgroup.kill_leftovers``, the subreaper sweep), and
in a threaded pool that would be another worker's git or pytest. A forked worker also needs
nothing pickled (scripted agents are Python callables), has its own SQLite connection (WAL;
no connection is open across the fork: ``Store.reopen``), and a worker that crashes takes no
other worker with it: its attempt is recovered as ``interrupted`` (not counted), the others
finish, and the run ends with :class:`WorkerError`. Each worker asks the kernel to SIGKILL
it when the dispatcher dies (``PR_SET_PDEATHSIG``), so a ``kill -9`` of the runner ends the
pool at once, and the run lock (an flock the workers inherit) is free only when none is left.

Claims go through :func:`claim_next`: the store leases the next ready packet whose
``requires`` are ``done`` and that nobody holds (store/claims.py, on SQLite and PostgreSQL
alike), the dispatcher renews its workers' leases while they work and gives each back when
its worker ends (pool_leases.py), so other runners on a shared store never take them. With
nothing to claim, the pool waits while another runner holds a live lease (:func:`_idle`):
its packet comes back if it dies, and a merge it left half done is finished here. A
blocked packet halts the line: nothing new is claimed, the attempts running finish and are
recorded. Merges are serialised by the lock in merge.py (an flock on
``.git/andon-merge.lock``), and a merge onto a branch that moved since the attempt's base
runs the suite on the exact merged commit first, so the integration branch is green at
every commit.

Ctrl-C (SIGINT) once: no new claims, the running attempts finish (workers ignore SIGINT and
lead process groups of their own: forked.py);
twice: the workers are killed, their attempts marked ``interrupted`` (packets ``ready``), a
merge under way left to the next run's recovery, and ``KeyboardInterrupt`` goes up.
"""

from __future__ import annotations

import contextlib
import copy
import os
import select
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from . import fault_injection, forked, lifecycle, pool_leases, recovery
from .advice import halt_message
from .baseline import Baseline
from .config import Config
from .errors import AndonError
from .exits import EXIT_HALTED, EXIT_INTERRUPTED
from .git.repo import Repo
from .merge import merge_lock, record_merge
from .packet import Packet
from .pool_refs import PoolRepo
from .store import StoreProtocol, now


class Line(Protocol):
    """What the pool needs of the runner (runner.py's ``Runner``, which imports this module:
    named here as a protocol so that the import goes one way)."""
    repo: Repo
    config: Config
    store: StoreProtocol
    baseline: Baseline
    packets: dict[str, Packet]
    ref: str
    evidence_root: Path
    workers: int
    worker: str | None
    lease_s: float
    echo: Callable[[str], None]

    def _halted(self) -> dict | None: ...
    def _inputs_unchanged(self) -> None: ...
    def _claim(self, packet: Packet) -> tuple[dict, dict, list[str], Any]: ...
    def _work(self, packet: Packet, a: dict, carry: dict, stages: list[str],
              first: Any) -> str: ...
    def _worktree_path(self, packet_id: str, n: int) -> Path: ...
    def _recover(self) -> None: ...


class Report(Protocol):
    """The fields of runner.py's ``RunReport`` the pool fills in."""
    exit_status: int
    merged: list[str]
    halted_by: str | None
    message: str





class WorkerError(AndonError):
    """A worker process died or raised during its attempt (the attempt is recovered as
    interrupted; the other workers finished first)."""


@dataclass
class Job:
    """One claimed attempt in a worker's hands: the worker's name, the packet, the attempt's
    store row, the worker process's pid."""
    worker: str
    packet: Packet
    attempt: dict[str, Any]
    pid: int = 0


def worker_names(n: int) -> list[str]:
    """``w1`` … ``wN``: the names the board and the claim events use."""
    return [f"w{i}" for i in range(1, n + 1)]


def claim_next(runner: Line, only: list[str] | None, busy: set[str],
               worker: str) -> tuple[Packet, tuple] | None:
    """Claim the next packet for ``worker``: the first by id that is claimable, in ``only``
    (if given), not in ``busy`` (packet ids a worker holds), with no live lease, and whose
    ``requires`` are all ``done``. The store leases it to this dispatcher's ``worker``
    (:meth:`Claims.claim`: one transaction, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so
    two claimers — of this runner or of any other on the same store — never take the same
    packet; then its attempt starts. Returns (packet, what :meth:`Runner._claim` returns),
    or None when nothing can start now."""
    store = runner.store
    among = [pid for pid in sorted(runner.packets)
             if pid not in busy and (not only or pid in only)]
    got = store.claim(pool_leases.holder(worker), runner.lease_s, among=among)
    if got is None:
        return None
    p = runner.packets[got["id"]]
    runner.worker = worker
    try:
        return p, runner._claim(p)
    except BaseException:
        store.release(pool_leases.holder(worker), p.id)
        raise
    finally:
        runner.worker = None


def drain(runner: Line, only: list[str] | None, report: Report) -> Report:
    """Work the queue with ``runner.workers`` worker processes until it is empty, a packet
    blocks, or only waiting work is left (the same ends as the one-worker loop). Called by
    :meth:`Runner.run` with its lock held and its checks done; fills in ``report``.

    Raises:
        KeyboardInterrupt: Ctrl-C twice (see the module docstring).
        WorkerError: a worker died or raised; the others finished first.
        AndonError: a claim failed (e.g. andon's inputs changed); the others finished first.
    """
    names = worker_names(runner.workers)
    jobs: dict[int, Job] = {}   # read end of the worker's result pipe → its job
    error: Exception | None = None
    stopping, sigints, why = False, 0, "drained"
    idle = Idle()  # what _idle already did and said in this drain
    store = runner.store
    store.event("pool-started", data={"workers": len(names), "pid": os.getpid()})
    with merge_lock(runner.repo) as lock:  # where the branch is: what pool_refs judges by
        record_merge(lock, runner.repo.resolve(runner.ref))
    wake_r, wake_w = os.pipe()
    previous = _on_sigint(wake_w)
    try:
        while True:
            if not stopping and error is None:
                halted = runner._halted()
                if halted:
                    stopping, why = True, "halted"
                    report.exit_status, report.halted_by = EXIT_HALTED, halted["id"]
                    report.message = halt_message(store, halted, only)
                    if jobs:
                        runner.echo(f"{halted['id']} is blocked: the line halts; no new "
                                    f"attempt starts, {len(jobs)} running finish first")
            if not stopping and error is None:
                for name in names:
                    if any(j.worker == name for j in jobs.values()):
                        continue
                    busy = {j.packet.id for j in jobs.values()}
                    try:
                        runner._inputs_unchanged()
                        got = claim_next(runner, only, busy, name)
                    except AndonError as exc:  # raised once the running attempts end
                        error, why = exc, "claim error"
                        break
                    if got is None:
                        break
                    packet, claimed = got
                    job = Job(name, packet, claimed[0])
                    job.pid, fd = _fork(runner, job, claimed, (wake_r, wake_w))
                    jobs[fd] = job
            if not jobs:
                pause = None if stopping or error is not None else _idle(runner, idle)
                if pause is None:
                    break
                if pause and select.select([wake_r], [], [], pause)[0]:
                    os.read(wake_r, 64)  # Ctrl-C while waiting: nothing of ours runs
                    sigints, stopping, why = sigints + 1, True, "interrupted"
                continue
            # wake every third of the lease to renew the leases of the live workers
            ready, _, _ = select.select([wake_r, *jobs], [], [], runner.lease_s / 3)
            if not ready:
                _renew(runner, jobs)
                continue
            if wake_r in ready:
                os.read(wake_r, 64)
                sigints += 1
                if sigints == 1:
                    stopping, why = True, "interrupted"
                    runner.echo(f"Ctrl-C: no new claims; {len(jobs)} running attempt(s) "
                                "finish first (Ctrl-C again to interrupt them)")
                    continue
                why = "interrupted twice"
                _interrupt(runner, jobs)
                raise KeyboardInterrupt
            for fd in (fd for fd in ready if fd in jobs):
                job = jobs.pop(fd)
                ended = _reap(fd, job)
                if "state" not in ended:
                    _recover(runner, job)  # before its lease goes: nobody else takes it
                store.release(pool_leases.holder(job.worker), job.packet.id)
                if "state" in ended:
                    if ended["state"] == "done":
                        report.merged.append(job.packet.id)
                    continue
                runner.echo(f"{job.worker}: {job.packet.id}: {ended['error']}; no new "
                            "claims, the running attempts finish")
                if error is None:
                    error, why = WorkerError(f"worker {job.worker} on {job.packet.id}: "
                                             f"{ended['error']}"), "worker error"
        if sigints and report.exit_status == 0:
            report.exit_status = EXIT_INTERRUPTED
            report.message = ("interrupted: the running attempts finished and are recorded; "
                              "`andon run` works the rest")
        if error is not None:
            raise error
        return report
    finally:
        _restore_sigint(previous)
        os.close(wake_r)
        os.close(wake_w)
        store.event("pool-stopped", data={"workers": len(names), "why": why})


@dataclass
class Idle:
    """What :func:`_idle` did in one drain: merges handed to recovery, the last wait said."""
    finished: set[str] = field(default_factory=set)  # each once: never retried in a loop
    said: str = ""


def _idle(runner: Line, idle: Idle) -> float | None:
    """Nothing to claim and no worker of ours busy: is there anything to wait for?

    Another runner (another machine's ``andon worker``) may hold packets: one that dies
    stops renewing, and its packet must come back to the queue after its lease, or a
    packet that ``requires`` it may become claimable. So while another runner holds a live
    lease this returns the seconds to wait (until the first lease lapses, at most a third
    of ``lease_s``). A packet left in ``merging`` by a runner whose lease lapsed (a machine
    that died mid-merge) is finished by recovery's merge (found already merged by its
    trailers, or merged: once); then 0. None: nothing to wait for, the drain ends."""
    store = runner.store
    store.reclaim_expired()
    at = now()
    live = [x for x in store.leases()
            if x["expires_at"] > at and not pool_leases.mine(x["worker"])]
    held = {x["packet_id"] for x in live}
    orphans = {r["id"] for r in store.packets() if r["state"] == "merging"
               and r["id"] not in held and r["id"] in runner.packets} - idle.finished
    if orphans:
        idle.finished |= orphans
        runner._recover()
        return 0.0
    if not live:
        return None
    said = " ".join(sorted(f"{x['packet_id']}@{x['worker']}" for x in live))
    if idle.said != said:
        idle.said = said
        runner.echo("waiting for packets other runners hold: " + ", ".join(
            f"{x['packet_id']} ({x['worker']}, lease until {x['expires_at']})" for x in live))
    first = min(datetime.fromisoformat(x["expires_at"]) for x in live)
    left = (first - datetime.fromisoformat(at)).total_seconds()
    return min(max(left, 0.05), runner.lease_s / 3)


def _renew(runner: Line, jobs: dict[int, Job]) -> None:
    """Renew the lease of every live worker's packet; a lease already lost (the store was
    out for longer than the lease, and another runner took the packet back) ends that
    worker: its attempt is another's now, and must record nothing more."""
    for job in list(jobs.values()):
        if runner.store.renew(pool_leases.holder(job.worker), job.packet.id, runner.lease_s):
            continue
        runner.echo(f"{job.worker}: {job.packet.id}: lost its lease (the store was "
                    "unreachable for longer than it); the attempt is stopped")
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.pid, signal.SIGKILL)


def _fork(runner: Line, job: Job, claimed: tuple, close: tuple[int, ...]) -> tuple[int, int]:
    """Start the worker process of ``job`` (``forked.start``: SIGINT ignored, killed with
    the runner, so the run lock every worker inherited is free exactly when none is left);
    (its pid, the read end of its result pipe)."""
    parent = os.getpid()

    def attempt() -> str:
        fault_injection.runner_pid = parent  # a crash point kills the runner, not one worker
        return _work(runner, job, claimed)

    pool_leases.close_for_fork(runner.store)  # no store connection crosses the fork
    try:
        child = forked.start(attempt, close)
    finally:
        pool_leases.after_fork(runner.store)
    return child.pid, child.fd


def _work(runner: Line, job: Job, claimed: tuple) -> str:
    """In the worker process: the rest of the attempt on its own store connection (the
    parent's is never touched after the fork); the packet's new state."""
    store = pool_leases.reopen(runner.store)
    mine = copy.copy(runner)
    mine.store, mine.worker = store, job.worker
    mine.repo = PoolRepo(runner.repo.root, job.packet.id)  # the ref check, for a pool
    remote = getattr(runner.repo, "remote", None)
    mine.repo.remote = remote  # type: ignore[attr-defined]  # remote.py, several machines
    mine.echo = lambda s: runner.echo(f"[{job.worker}] {s}")
    mine.baseline = Baseline(runner.repo, runner.config, store, runner.evidence_root,
                             mine.echo, runner.baseline.exclude)
    mine.baseline.env = runner.baseline.env  # the environment the run's keys name
    mine.baseline.join_run(runner.baseline)  # what holds for this run only
    try:
        return mine._work(job.packet, *claimed)
    finally:
        if remote is not None:  # every attempt on the remote, failed ones too
            a = store.attempt(job.attempt["id"])
            if a and a.get("candidate_sha"):
                remote.push_attempt(mine.repo, job.packet.id, a["n"], a["candidate_sha"])
        store.close()


def _reap(fd: int, job: Job) -> dict[str, Any]:
    """Read the worker's result (``{"state": …}`` or ``{"error", "traceback"}``) and reap
    it; a worker that died without one (a signal, an exit) gets an ``error``."""
    ended = forked.collect(forked.Child(job.pid, fd))
    if "value" in ended:
        return {"state": ended["value"]}
    return {**ended, "error": ended["error"].replace("the process died",
                                                     "the worker process died")}


def _interrupt(runner: Line, jobs: dict[int, Job]) -> None:
    """Ctrl-C twice: SIGKILL every worker, reap it, and recover its attempt."""
    for job in jobs.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.pid, signal.SIGKILL)
    for fd, job in jobs.items():
        os.close(fd)
        os.waitpid(job.pid, 0)
        _recover(runner, job)
        runner.store.release(pool_leases.holder(job.worker), job.packet.id)


def _recover(runner: Line, job: Job) -> None:
    """The attempt of a worker that is gone, as :func:`andon.recovery.recover` would treat
    it: in flight, its agents and the processes in its worktree are ended, worktree and
    branch removed, marked ``interrupted`` (not counted), the packet ``ready``. A packet in
    ``merging`` is left for the next run's recovery, which finishes the merge exactly once."""
    store = runner.store
    row = store.packet(job.packet.id)
    if not row or row["state"] not in lifecycle.IN_FLIGHT:
        return
    a = store.attempt(job.attempt["id"])
    recovery.discard(runner.repo, store, a, runner._worktree_path(a["packet_id"], a["n"]),
                     f"interrupted: the run was stopped while {row['state']}", runner.echo)
    store.transition(job.packet.id, "ready", "recovered", a["id"],
                     {"worker": job.worker, "why": "interrupted"})
    runner.echo(f"{job.packet.id}: attempt {a['n']} interrupted; it does not count, "
                "the packet is ready again")


def _on_sigint(wake: int) -> Any:
    """While the pool runs, SIGINT writes a byte to the pipe ``wake`` the dispatcher
    selects on; the previous handler, or None when not on the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda signum, frame: os.write(wake, b"i"))


def _restore_sigint(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
