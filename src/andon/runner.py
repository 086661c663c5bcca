"""The loop: claim → attempt → decide → merge, with retry policy, halting and resume.

One runner per repository at a time, and on start it recovers what a killed runner left
(``recovery.py``). The integration branch, its preflight and the tests each attempt is held
to are ``baseline.py``; where a retry starts and what it is told, ``retry.py``; what the end
of an attempt does to its packet (merge, needs work, blocked: the retry policy),
``outcome.py``. This module decides what runs next and carries out one attempt; with
``workers`` > 1 (``andon run --workers N``) the pool in ``workers.py`` claims and carries out
several at once through the same :meth:`Runner._claim` and :meth:`Runner._work`."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from . import fault_injection, lifecycle, outcome, reaper, recovery, retry, workers
from .advice import base_drift, drift_notice, halt_message, halting_packet
from .agents import Agent
from .attempt import Attempt
from .baseline import Baseline
from .config import CONFIG_NAME, Config
from .contain import envprint, guard
from .errors import AndonError, PacketError, UsageError
from .exits import EXIT_HALTED, EXIT_OK, EXIT_PREFLIGHT
from .gates.base import GateResult
from .gates.hermetic import committed_hidden, committed_hidden_problem
from .git import submodules
from .git.repo import Repo
from .packet import Packet, load_packets, tests_problem
from .plan import drafts
from .pool_leases import lease_s
from .state import state_dir
from .store import Store, StoreProtocol, chain, now
from .tempdir import private_folder
from .worktree_pool import flush as flush_worktree_pool

ZERO = "0" * 40



@dataclass
class RunReport:
    exit_status: int = EXIT_OK
    merged: list[str] = field(default_factory=list)
    halted_by: str | None = None
    message: str = ""
    preflight: GateResult | None = None


class Runner:
    """Drain the queue of one repository. ``agent_for(packet, stage)`` picks the agent."""

    def __init__(self, repo: Repo, config: Config, store: StoreProtocol,
                 agent_for: Callable[[Packet, str], Agent],
                 echo: Callable[[str], None] = lambda s: None, keep_worktrees: bool = False,
                 workers: int | None = None):
        self.repo, self.config, self.store = repo, config, store
        # how many attempts at once (workers.py); 1 is the loop below, exactly as before
        self.workers = workers or config.run.workers
        self.worker: str | None = None  # the pool's name for this runner's worker
        self.lease_s = lease_s()  # how long a claim holds without renewal
        self.agent_for, self.echo = agent_for, echo
        self.keep = keep_worktrees or config.andon.keep_worktrees
        self.ref = f"refs/heads/{config.andon.integration_branch}"
        self.evidence_root = state_dir(repo) / "evidence"
        root = config.andon.worktree_root
        # A neutral default name, one folder per repository directly in the temp dir: the
        # code under test runs in these worktrees and sees the path (a cwd naming andon would
        # tell it that it is being judged), and run() removes it when it ends empty.
        self.worktree_root = Path(root) if root else Path(tempfile.gettempdir()) / (
            "wt-" + hashlib.sha1(str(repo.root).encode()).hexdigest()[:12])
        self.baseline = Baseline(repo, config, store, self.evidence_root, echo,
                                 (repo.root, self.worktree_root))
        self.packets: dict[str, Packet] = {}
        self.run_started: str | None = None   # set by run(): the scope of [budgets.run]
        self.env: envprint.Watch | None = None  # set by run(): the tests' interpreter

    # -- the loop -----------------------------------------------------------------------

    def run(self, only: list[str] | None = None) -> RunReport:
        """Run until the queue is empty, a packet blocks, or only waiting work is left.

        Raises:
            PacketError / ConfigError: invalid input; nothing in the store has changed.
            StoreError: another runner holds this repository.
            UsageError: the default worktree root is a link or another user's folder.
        """
        if not self.config.andon.worktree_root and not private_folder(self.worktree_root):
            raise UsageError(f"{self.worktree_root} (where the agents' worktrees go) is not a "
                             "folder only you can enter: another user made it first, or it "
                             "is a link; remove it, or set [andon] worktree_root")
        lock = self._lock()
        try:
            packets = load_packets(self.repo.root / self.config.andon.packets_dir,
                                   self.repo.root, drafts_ok=True)
            unknown = sorted(set(only or []) - {p.id for p in packets})
            if unknown:
                raise UsageError(f"--only names unknown packet(s): {', '.join(unknown)}; "
                                 f"known: {', '.join(p.id for p in packets)}")
            self.packets = {p.id: p for p in packets}
            untested = []
            # an undefined tier is bad input: refuse before anything runs (drafts never run)
            for p in (q for q in packets if q.status != "draft"):
                problem = tests_problem(p, self.config.stages_of(p.stages, p.tier))
                row = self.store.packet(p.id)
                if problem and not (row and row["state"] == "done"):  # done: never runs again
                    untested.append(problem)
            if untested:  # a packet no test decides would merge any change
                raise PacketError(untested)
            if not packets:  # nothing to claim: no preflight suite run for nothing
                return RunReport(message=f"no packets in {self.config.andon.packets_dir}/: "
                                         "nothing to run (write one: docs/packets.md)")
            self.extra = self._read_from_checkout()
            self.inputs = self._watch()
            report = RunReport()
            self.run_started = now()
            head = self.baseline.head()
            # a hidden test committed where agents work: refused before any claim (andon check)
            leaked = [committed_hidden_problem(self.repo.root / rel, rel) for p in packets
                      if (not only or p.id in only)
                      and (self.store.packet(p.id) or {}).get("state") != "done"
                      for rel in committed_hidden(self.repo, head, p)]
            if leaked:
                raise PacketError(leaked)
            # git problems the user can fix, said in git's words before anything is claimed
            self.repo.check_refs_writable(self.ref)
            submodules.check_available(self.repo, head)
            self.repo.pack_loose()  # clones read packs, not thousands of loose files (issue 18)
            if self.workers == 1 and type(self.store) is Store and not self._halted() and \
                    lifecycle.may_claim(self.store.packets(), packets, only):
                self.baseline.start_servers()  # up while the preflight runs
            self.baseline.forget_old_runs()
            pf = self.baseline.preflight(head)
            # a run-level event when it fails, and on the first pass after a failure: the
            # board tells "stopped at preflight" from "nothing ran"; a passing run that
            # changes nothing else adds nothing
            prev = self.store.events(kind="preflight")
            if pf.status != "pass" or (prev and prev[-1]["data"]["status"] != "pass"):
                self.store.event("preflight", data={"status": pf.status, "head": head,
                                                    "summary": pf.summary})
            if pf.status != "pass":
                report.exit_status, report.preflight = EXIT_PREFLIGHT, pf
                report.message = f"preflight failed: {pf.summary}"
                return report
            # where the tests' interpreter looks, outside every worktree: once per run, after
            # preflight has seen the test command work; the walk the preflight's cache key
            # took when nothing has run since, and the keys name this one from now on
            cached = pf.details.get("cached") and self.baseline.env is not None
            self.env = self.baseline.env if cached else self.baseline.rewatch()
            self._sync(packets)
            if not self.repo.rev_parse(self.ref):
                self.repo.set_ref(self.ref, head, ZERO)
                self.store.event("integration-branch-created", data={"sha": head})
            chain.check_tail(self.store.chain_rows(chain.TAIL))  # before carried candidates
            self._recover()
            for gone in self.store.packets():
                if gone["state"] == "blocked" and gone["id"] not in self.packets:
                    self.echo(f"{gone['id']}: blocked, but no longer in "
                              f"{self.config.andon.packets_dir}/: it does not stop the line")
            drift = base_drift(self.repo, self.config)
            if drift:
                self.echo(drift_notice(drift))
            # a shared store (PostgreSQL) may have other runners: claims must be leased
            if self.workers > 1 or type(self.store) is not Store:
                workers.drain(self, only, report)
                return report
            while True:
                halted = self._halted()
                if halted:
                    report.exit_status, report.halted_by = EXIT_HALTED, halted["id"]
                    report.message = halt_message(self.store, halted, only)
                    return report
                packet = self._next(only)
                if packet is None:
                    changed = guard.changes(self.inputs, self._watch())
                    if changed:  # nothing left to plant now, but the next run would read them
                        report.message = (
                            "note: andon's inputs changed during this run: "
                            + ", ".join(f"{p} ({how})" for p, how in changed)
                            + "; the next run reads them. If you did not make these changes, "
                            "an agent did: look at `git status` first.")
                        self.echo(report.message)
                    return report
                self._inputs_unchanged()
                if self._attempt(packet) == "done":
                    report.merged.append(packet.id)
        finally:
            self.baseline.forget_run()
            flush_worktree_pool(self.worktree_root)
            for left in reaper.drain():  # the trees this run discarded, deleted by now
                self.echo(f"note: andon could not delete {left}")
            lock.close()
            with contextlib.suppress(OSError):  # only when empty: kept worktrees stay
                self.worktree_root.rmdir()

    def _watch(self) -> dict[str, str]:
        return guard.fingerprint(self.repo, self.repo.root / CONFIG_NAME,
                                 self.repo.root / self.config.andon.packets_dir, self.extra)

    def _read_from_checkout(self) -> tuple[Path, ...]:
        """guard.read_from_checkout for the agents of every packet's stages."""
        commands = []
        for p in self.packets.values():
            for stage in self.config.stages_of(p.stages, p.tier):
                try:
                    commands.append(self.agent_for(p, stage).command)
                except (AndonError, LookupError):
                    pass  # an agent that cannot be built fails with its error when it runs
        agent = self.config.agent
        return guard.read_from_checkout(self.repo.root, (agent.prompt_dir, agent.prompt_template),
                                        commands)

    def _inputs_unchanged(self) -> None:
        """UsageError (nothing claimed) if andon.toml, anything in the packets folder or the
        git hooks/config changed since this run started: what would be planted or obeyed is
        no longer what was checked."""
        changed = guard.changes(self.inputs, self._watch())
        # a packet written meanwhile is not read by this run: named when the run ends
        fresh = guard.new_packets(changed, self.inputs, self.config.andon.packets_dir.strip("/"))
        changed = [c for c in changed if c[0] not in fresh]
        if changed:
            raise UsageError(
                "andon's inputs changed since this run started: "
                + ", ".join(f"{p} ({how})" for p, how in changed)
                + ". If an agent did it, its attempt was rejected with an outside-worktree "
                "finding (`andon show`). Look at the change (`git status`, `git diff`), keep or "
                "undo it, then run again.")

    def _lock(self) -> IO[str]:
        return recovery.lock(state_dir(self.repo), self.repo.root)

    def _sync(self, packets: list[Packet]) -> None:
        for p in packets:
            self.store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                                     p.model_dump(mode="json", by_alias=True))
            row = self.store.packet(p.id)
            assert row is not None  # upserted just above
            if drafts.keep_out(self.store, p, row["state"], self.echo):
                continue
            stale = self._stale_reason(p)
            if stale and row["state"] in ("ready", "needs_work"):
                self.store.transition(p.id, "stale", "spec-changed", data={"why": stale})
                self.echo(f"{p.id}: stale: {stale}")
            elif not stale and row["state"] == "stale":
                self.store.transition(p.id, "ready", "spec-pin-updated")

    def _stale_reason(self, p: Packet) -> str | None:
        if not (p.spec_path and p.spec_commit):
            return None
        if not self.repo.rev_parse(f"{p.spec_commit}^{{commit}}"):
            return f"spec_commit {p.spec_commit} is not a commit in this repository"
        head = self.baseline.head()
        diff = self.repo.diff(p.spec_commit, head, [p.spec_path])
        return f"{p.spec_path} changed since {p.spec_commit[:10]}:\n{diff}" if diff else None

    def _halted(self) -> dict | None:
        """The blocked packet that stops the line (advice.halting_packet)."""
        return halting_packet(self.store.packets(), self.packets)

    def _next(self, only: list[str] | None) -> Packet | None:
        states = {p["id"]: p["state"] for p in self.store.packets()}
        for pid in sorted(self.packets):
            p = self.packets[pid]
            if only and pid not in only:
                continue
            if states.get(pid) in lifecycle.CLAIMABLE and all(
                    states.get(r) == "done" for r in p.requires):
                return p
        return None

    # -- one attempt --------------------------------------------------------------------

    def _attempt(self, packet: Packet) -> str:
        return self._work(packet, *self._claim(packet))

    def _claim(self, packet: Packet) -> tuple[dict, dict, list[str], Agent]:
        """Start attempt n of ``packet``: its row created and the packet ``running`` in one
        transaction (the claim event names the pool's worker, if any); returns (the attempt
        row, what it carries over from a retry, its stages, its first stage's agent)."""
        stages = self.config.stages_of(packet.stages, packet.tier)
        round_ = sum(1 for e in self.store.events(packet.id) if e["kind"] == "unblocked")
        carry = retry.carry_over(self.store, packet, round_, self.echo)
        first = self.agent_for(packet, carry.get("start_stage") or stages[0])
        with self.store.tx():
            a = self.store.new_attempt(packet.id, first.name, round_)
            self.store.transition(packet.id, "running", "claimed", a["id"],
                                  {"n": a["n"], "packet_sha": packet.content_sha}
                                  | ({"worker": self.worker} if self.worker else {}))
        return a, carry, stages, first

    def _work(self, packet: Packet, a: dict, carry: dict, stages: list[str],
              first: Agent) -> str:
        """Carry out the claimed attempt ``a`` (see :meth:`_claim`): worktree, stages, gates,
        and what its end does to the packet; the packet's new state."""
        fault_injection.point("after-claim")
        n = a["n"]
        ev = self.evidence_root / packet.id / str(n)
        ev.mkdir(parents=True, exist_ok=True)
        wt = self._worktree_path(packet.id, n)
        base = carry.get("base_sha") or self.repo.resolve(self.ref)
        try:  # PASS_TO_PASS: what passes on the base itself (preflighted when unknown)
            held_to = self.baseline.passing(base)
        except UsageError:
            if "base_sha" not in carry:
                raise
            # the base a retry carried over (its plant and atdd commits with it) no longer
            # passes its own suite (an upgrade since, a flaky test): start afresh from the head
            self.echo(f"{packet.id}: {base[:10]}, the base of the attempt this one carries "
                      f"on from, no longer passes its own suite: attempt {n} starts afresh "
                      f"from {self.config.andon.integration_branch}")
            carry, base = {}, self.repo.resolve(self.ref)
            first = self.agent_for(packet, stages[0])
            held_to = self.baseline.passing(base)
        self.store.update_attempt(a["id"], **{**carry, "branch": f"andon/{packet.id}/{n}",
                                              "worktree": str(wt), "base_sha": base,
                                              "evidence_dir": str(ev)})
        a = self.store.attempt(a["id"])
        self.echo(f"{packet.id} attempt {n}: stages {' → '.join(stages)}; {first.name} agent "
                  f"in {wt}")
        try:
            result = Attempt(
                self.repo, self.config, self.store, packet, a,
                lambda stage: self.agent_for(packet, stage),
                held_to,
                retry.previous_failure(self.store, packet.id, self.packets.get(packet.id)),
                wt, ev,
                lambda g: self.echo(f"  {g.gate}: {g.status}: {g.summary}"),
                lambda state, kind: self.store.transition(packet.id, state, kind, a["id"]),
                say=self.echo,
                run_started=self.run_started,
                watch=self._watch,
                env=self.env,
                env_digest=self.baseline.digest(),
            ).run()
        finally:
            if not self.keep:
                self.repo.remove_worktree(wt, reuse=True)
        fault_injection.point("after-gates")
        failure = result.failure
        if failure is not None:
            self.store.update_attempt(a["id"], route_stage=result.route_stage)
            return self._fail(packet, a, failure)
        if packet.gate == "human":
            self.store.update_attempt(a["id"], state="passed", ended_at=now())
            self.store.transition(packet.id, "awaiting_human", "gates-passed", a["id"])
            self.echo(f"{packet.id}: every check passed; awaiting a person: `andon show "
                      f"{packet.id}`, then `andon approve {packet.id}` or `andon reject "
                      f"{packet.id} --why ...`")
            return "awaiting_human"
        self.store.update_attempt(a["id"], state="passed")
        self.store.transition(packet.id, "merging", "gates-passed", a["id"])
        return self._merge(packet, self.store.attempt(a["id"]), result.red_ids)

    # -- human gates --------------------------------------------------------------------

    def approve(self, packet_id: str, who: str) -> str:
        """A person approves a packet in ``awaiting_human``: merge it now.

        Raises:
            UsageError: no such packet, or it is not awaiting a person.
            StoreError: the newest events do not chain (the record was changed outside andon).
        """
        with self._lock():
            chain.check_tail(self.store.chain_rows(chain.TAIL))
            a = outcome.awaiting(self.store, packet_id)
            self.packets = {p.id: p for p in load_packets(
                self.repo.root / self.config.andon.packets_dir, self.repo.root, True)}
            self.store.transition(packet_id, "merging", "approved", a["id"], {"by": who})
            red = outcome.red_ids(self.store, a["id"])
            try:
                return self._merge(self.packets[packet_id], self.store.attempt(a["id"]), red)
            finally:
                self.baseline.forget_run()

    def reject(self, packet_id: str, who: str, why: str) -> str:
        """A person rejects a packet in ``awaiting_human``: back to ``needs_work`` with the
        reason as evidence for the next attempt's prompt."""
        with self._lock():  # closing the lock file releases the lock
            return outcome.reject(self.store, packet_id, who, why)

    def _merge(self, packet: Packet, a: dict, red_ids: set[str]) -> str:
        return outcome.merge(self.repo, self.config, self.store, packet, a, red_ids,
                             self.baseline, self.echo)

    def _fail(self, packet: Packet, a: dict, failure: GateResult) -> str:
        return outcome.fail(self.store, packet, a, failure, self.echo)

    def _worktree_path(self, packet_id: str, n: int) -> Path:
        return self.worktree_root / f"{packet_id}-{n}"

    # -- resume -------------------------------------------------------------------------

    def _recover(self) -> None:
        recovery.recover(self.repo, self.store, self.packets, self._worktree_path, self._merge,
                         lambda i: outcome.red_ids(self.store, i), self.echo, self.worktree_root)
