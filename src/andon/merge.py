"""Squash-merge a passed attempt onto the integration branch, once and only once.

No checkout of the integration branch: ``git merge-tree --write-tree`` makes the merged tree,
``commit-tree`` the squash commit (message names the packet; trailers ``Andon-Packet`` and
``Andon-Attempt``), ``update-ref`` moves the branch only if it still points where we read it.
If the integration branch moved since the attempt started, the merged commit runs the full
suite in a fresh clone before the ref moves. Merges take a lock (an flock on
``.git/andon-merge.lock``), one at a time across the workers of ``andon run --workers N``:
the compare-and-swap on the ref alone keeps the branch green too, but two merges racing
would each run the merged-result suite and the loser would throw its run away. After a
crash, the trailers tell whether the merge already happened, so it never happens twice.
"""

from __future__ import annotations

import fcntl
import os
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from . import fault_injection as crash
from . import plain_file
from .config import Config
from .gates.base import Finding, GateResult, fenced, fresh_clone, planted_tests, run_project_suite
from .gates.suite import judge, summarise
from .git.repo import MergeConflict, RefMoved, Repo, commit_message
from .packet import Packet


@dataclass
class MergeOutcome:
    merged_sha: str | None   # the commit now on the integration branch, or None
    check: GateResult | None  # the merged-result suite run, when the branch had moved
    passed_ids: set[str]      # tests that passed on the merged tree, when known
    moved_to: str | None = None  # what this merge set the branch to (None: found merged)


def merge_attempt(repo: Repo, config: Config, packet: Packet, attempt: dict,
                  red_ids: set[str], baseline_of, evidence_dir: Path,
                  passed: Sequence[str] = ()) -> MergeOutcome:
    """Merge ``attempt`` (a store row with base/candidate shas) and return what happened.

    ``baseline_of(commit_sha) -> set[str]`` gives PASS_TO_PASS ids for a commit's tree;
    ``passed`` names the gates and reviews the attempt passed, for the commit message. Returns
    ``merged_sha=None`` with a failing ``check`` when the merged result is not green or
    conflicts. Never moves a ref unless the merged commit is known to pass.
    """
    remote = getattr(repo, "remote", None)  # remote.py: merges of several machines
    if remote is not None and attempt.get("candidate_sha"):
        remote.push_attempt(repo, packet.id, attempt["n"], attempt["candidate_sha"])
    with merge_lock(repo, shared=True) as lock:
        out = _merge(repo, config, packet, attempt, red_ids, baseline_of, evidence_dir,
                     passed)
        if out.merged_sha:
            # the ledger holds what the merge set, read from no ref: a ref moved meanwhile
            # (another worker's agent) must differ from it, or restore_refs would bless it
            record_merge(lock, out.moved_to or repo.resolve(
                f"refs/heads/{config.andon.integration_branch}"))
        return out


def _merge(repo: Repo, config: Config, packet: Packet, attempt: dict, red_ids: set[str],
           baseline_of, evidence_dir: Path, passed: Sequence[str]) -> MergeOutcome:
    ref = f"refs/heads/{config.andon.integration_branch}"
    trailers = {"Andon-Packet": packet.id, "Andon-Attempt": str(attempt["n"])}
    message = squash_message(packet, attempt["n"], passed)
    while True:
        onto = repo.rev_parse(ref)
        assert onto, f"{ref} vanished"
        # the head just read, not the ref again: what is searched is what is merged onto
        done = repo.find_commit_with_trailers(onto, trailers, since=attempt["base_sha"])
        if done:
            return MergeOutcome(done, None, set())
        try:
            commit = repo.squash(onto, attempt["base_sha"], attempt["candidate_sha"], message)
        except MergeConflict as exc:
            return MergeOutcome(None, GateResult(
                "merge", "fail", f"conflicts with the integration branch: {exc}", "code",
                [Finding("merge-conflict", str(exc))]), set())
        check, kept = None, set[str]()
        if onto != attempt["base_sha"]:
            check, kept = _check_merged(repo, config, packet, commit, onto, red_ids,
                                          baseline_of, evidence_dir)
            if check.status != "pass":
                return MergeOutcome(None, check, set())
        crash.point("before-update-ref")
        try:
            remote = getattr(repo, "remote", None)
            if remote is not None:  # the remote's branch first, as a compare-and-swap
                remote.push(repo, commit, onto)
            repo.set_ref(ref, commit, onto)
        except RefMoved:
            continue  # someone else merged first: merge again onto the new head
        crash.point("after-update-ref")
        return MergeOutcome(commit, check, kept, moved_to=commit)


@contextmanager
def merge_lock(repo: Repo, shared: bool = False) -> Iterator[IO[str]]:
    """Hold ``.git/andon-merge.lock`` (an flock: between processes and threads alike, and
    released by the kernel when its holder dies, kill -9 included) for one merge. The file
    is also the ledger: the sha a merge last set the integration branch to
    (:func:`record_merge`, :func:`ledger_value`; pool_refs.py reads it). ``shared`` (a
    merge) on a repository with a ``remote`` (remote.py) also holds the lock of every
    machine's merges and fetches the remote's branch, recorded in the ledger."""
    # in .git, which an agent without the sandbox can reach: a link there is not written
    # through, a FIFO not waited on (plain_file.own)
    with os.fdopen(plain_file.own(repo.git_dir / "andon-merge.lock"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        remote = getattr(repo, "remote", None) if shared else None
        if remote is None:
            yield f
            return
        with remote.merging(repo) as sha:
            if sha:
                record_merge(f, sha)
            yield f


def record_merge(lock: IO[str], sha: str) -> None:
    """Write ``sha`` (where the integration branch now is) into the held merge lock file."""
    lock.seek(0)
    lock.truncate(0)
    lock.write(sha)
    lock.flush()


def ledger_value(lock: IO[str]) -> str | None:
    """The sha last written by :func:`record_merge` into the held lock file, or None."""
    lock.seek(0)
    return lock.read().strip() or None


def squash_message(packet: Packet, n: int, passed: Sequence[str] = ()) -> str:
    """The squash commit's message: the packet's ``title`` (else ``<id> <slug>``) as the
    subject — the goal describes the bug, which reads wrong as the name of its fix — then
    the goal, the attempt and the checks it passed, then the ``Andon-Packet`` and
    ``Andon-Attempt`` trailers the crash recovery looks for."""
    subject = " ".join((packet.title or f"{packet.id} {packet.slug}").split())
    subject = textwrap.shorten(subject, 72, placeholder=" …")
    checks = ", ".join(passed) if passed else "the harness's gates"
    goal = textwrap.fill(" ".join(packet.goal.split()), 72)
    return commit_message(subject, f"{goal}\n\nSquash of attempt {n} of packet {packet.id} "
                          f"({packet.slug}); passed: {checks}.",
                          {"Andon-Packet": packet.id, "Andon-Attempt": str(n)})


def _check_merged(repo: Repo, config: Config, packet: Packet, commit: str, onto: str,
                  red_ids: set[str], baseline_of, evidence_dir: Path) -> tuple[GateResult, set]:
    # A temporary ref keeps the dangling squash commit reachable for the clone.
    tmp_ref = f"refs/andon/merge-check/{packet.id}"
    repo.set_ref(tmp_ref, commit, None)
    try:
        with fresh_clone(repo, commit, "merge") as cwd:
            r = run_project_suite(config, cwd, evidence_dir, "merge-check",
                                  readonly=fenced(repo))
    finally:
        repo.git("update-ref", "-d", tmp_ref)
    findings = judge(r, planted_tests(packet), red_ids, baseline_of(onto))
    if findings:
        return GateResult("merge", "fail", summarise(findings, "merged onto the moved "
                          "integration branch"), "code", findings, [r]), set()
    return GateResult("merge", "pass", "the merged result passes the full suite",
                      runs=[r]), r.ids_with("passed")
