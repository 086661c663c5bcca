"""The loop: claim → attempt → decide → merge, with retry policy, halting and resume.

One runner per repository at a time (an flock on ``.andon/run.lock``, released by the kernel
even after SIGKILL). On start it recovers what a killed runner left: attempts in flight are
marked ``interrupted`` (not counted against the packet), their worktrees and branches removed,
and the packets put back to ``ready``; a packet caught in ``merging`` is merged — or found
already merged by its trailers — exactly once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import fault_injection, lifecycle, submodules
from .advice import base_drift, drift_notice, halt_message
from .agents import Agent
from .attempt import Attempt
from .config import CONFIG_NAME, STATE_DIR, Config
from .contain import envprint, guard
from .contain.interpreter import python_of
from .contain.procgroup import kill_leftover_group, kill_working_under
from .errors import AndonError, PacketError, StoreError, UsageError
from .gates import preflight
from .gates.base import GateResult
from .gates.cache import baseline_key
from .gates.hermetic import committed_hidden, committed_hidden_problem
from .merge import merge_attempt
from .packet import Packet, load_packets, tests_problem
from .prompt import PreviousFailure, hidden_names, redacted_failure
from .store import Store, now
from .workspace import Repo

ZERO = "0" * 40

# Exit statuses of `andon run`, for scripts.
EXIT_OK, EXIT_HALTED, EXIT_USAGE, EXIT_PREFLIGHT = 0, 1, 2, 3


@dataclass
class RunReport:
    exit_status: int = EXIT_OK
    merged: list[str] = field(default_factory=list)
    halted_by: str | None = None
    message: str = ""
    preflight: GateResult | None = None


def state_dir(repo: Repo) -> Path:
    return repo.root / STATE_DIR


def open_store(repo: Repo) -> Store:
    """The store of this repository (``.andon/andon.db``), kept out of git via
    ``.git/info/exclude`` so that nothing andon writes shows up in ``git status``."""
    d = state_dir(repo)
    d.mkdir(exist_ok=True)
    exclude = repo.git_dir / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if f"/{STATE_DIR}/" not in lines:
        with open(exclude, "a") as f:
            f.write(("\n" if lines and lines[-1] else "") + f"/{STATE_DIR}/\n")
    return Store(d / "andon.db")


class Runner:
    """Drain the queue of one repository. ``agent_for(packet, stage)`` picks the agent."""

    def __init__(self, repo: Repo, config: Config, store: Store,
                 agent_for: Callable[[Packet, str], Agent],
                 echo: Callable[[str], None] = lambda s: None, keep_worktrees: bool = False):
        self.repo, self.config, self.store = repo, config, store
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
        self.packets: dict[str, Packet] = {}
        self.run_started: str | None = None   # set by run(): the scope of [budgets.run]
        self.env: envprint.Watch | None = None  # set by run(): the tests' interpreter

    # -- the loop -----------------------------------------------------------------------

    def run(self, only: list[str] | None = None) -> RunReport:
        """Run until the queue is empty, a packet blocks, or only waiting work is left.

        Raises:
            PacketError / ConfigError: invalid input; nothing in the store has changed.
            StoreError: another runner holds this repository.
        """
        lock = self._lock()
        try:
            packets = load_packets(self.repo.root / self.config.andon.packets_dir,
                                   self.repo.root)
            unknown = sorted(set(only or []) - {p.id for p in packets})
            if unknown:
                raise UsageError(f"--only names unknown packet(s): {', '.join(unknown)}; "
                                 f"known: {', '.join(p.id for p in packets)}")
            self.packets = {p.id: p for p in packets}
            untested = []
            for p in packets:  # an undefined tier is bad input: refuse before anything runs
                problem = tests_problem(p, self.config.stages_of(p.stages, p.tier))
                row = self.store.packet(p.id)
                if problem and not (row and row["state"] == "done"):  # done: never runs again
                    untested.append(problem)
            if untested:  # a packet no test decides would merge any change
                raise PacketError(untested)
            self.extra = self._read_from_checkout()
            self.inputs = self._watch()
            report = RunReport()
            self.run_started = now()
            head = self._integration_head()
            # a hidden test committed where agents work would be in every worktree: refuse
            # before anything is claimed, as `andon check` does (the hermetic gate checks again)
            leaked = [committed_hidden_problem(self.repo.root / rel, rel) for p in packets
                      if (not only or p.id in only)
                      and (self.store.packet(p.id) or {}).get("state") != "done"
                      for rel in committed_hidden(self.repo, head, p)]
            if leaked:
                raise PacketError(leaked)
            # git problems the user can fix, said in git's words before anything is claimed
            self.repo.check_refs_writable(self.ref)
            submodules.check_available(self.repo, head)
            pf = self._preflight(head)
            if pf.status != "pass":
                report.exit_status, report.preflight = EXIT_PREFLIGHT, pf
                report.message = f"preflight failed: {pf.summary}"
                return report
            # where the tests' interpreter looks, outside every worktree: once per run, after
            # preflight has seen the test command work
            self.env = envprint.Watch(envprint.layout(
                python_of(self.config.test_argv()),
                (self.repo.root, self.worktree_root)))
            self._sync(packets)
            if not self.repo.rev_parse(self.ref):
                self.repo.set_ref(self.ref, head, ZERO)
                self.store.event("integration-branch-created", data={"sha": head})
            self._recover()
            for gone in self.store.packets():
                if gone["state"] == "blocked" and gone["id"] not in self.packets:
                    self.echo(f"{gone['id']}: blocked, but no longer in "
                              f"{self.config.andon.packets_dir}/: it does not stop the line")
            drift = base_drift(self.repo, self.config)
            if drift:
                self.echo(drift_notice(drift))
            while True:
                halted = self._halted()
                if halted:
                    report.exit_status, report.halted_by = EXIT_HALTED, halted["id"]
                    report.message = halt_message(self.store, halted)
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
            lock.close()
            try:
                self.worktree_root.rmdir()  # only when empty: kept worktrees stay
            except OSError:
                pass

    def _watch(self) -> dict[str, str]:
        return guard.fingerprint(self.repo, self.repo.root / CONFIG_NAME,
                                 self.repo.root / self.config.andon.packets_dir, self.extra)

    def _read_from_checkout(self) -> tuple[Path, ...]:
        """Prompt templates and agent scripts that live in the checkout: andon reads or runs
        them at every stage, so an agent rewriting them would steer its own reviewer."""
        root, agent = self.repo.root, self.config.agent
        paths = [root / p for p in (agent.prompt_dir, agent.prompt_template) if p]
        for p in self.packets.values():
            for stage in self.config.stages_of(p.stages, p.tier):
                try:
                    command = getattr(self.agent_for(p, stage), "command", None)
                    words = shlex.split(command) if isinstance(command, str) else []
                except (AndonError, LookupError, ValueError):
                    # best effort: an agent that cannot be built (or a command /bin/sh will
                    # not parse) fails with its own error when its packet runs
                    words = []
                for word in words:
                    path = Path(word)
                    if path.is_absolute() and path.is_file() and path.is_relative_to(root):
                        paths.append(path)
        return tuple(dict.fromkeys(paths))

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

    def _lock(self):
        path = state_dir(self.repo) / "run.lock"
        f = open(path, "a+")  # noqa: SIM115 - held open (and locked) until the run ends
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise StoreError(f"another `andon run` is working on {self.repo.root} "
                             f"(pid {f.read().strip() or '?'}); wait for it to finish") from None
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        return f

    def _integration_head(self) -> str:
        head = self.repo.rev_parse(self.ref)
        if head:
            return head
        base = self.config.andon.base_branch or self.repo.current_branch() or "HEAD"
        sha = self.repo.rev_parse(base)
        if not sha:
            have = self.repo.git("for-each-ref", "--format=%(refname:short)",
                                 "refs/heads/").split()
            raise UsageError(f"base branch {base!r} (base_branch in {CONFIG_NAME}) does not "
                             f"resolve to a commit; branches here: {', '.join(have) or 'none'}."
                             " Set base_branch to one of them, or create the branch")
        return sha

    def _preflight(self, sha: str) -> GateResult:
        tree = self.repo.resolve(f"{sha}^{{tree}}")
        key = baseline_key(self.config, tree)  # the tree, the test settings, andon's version
        if self.store.baseline(key) is not None:
            # said, as red says its cache: silence read as "the preflight was skipped"
            self.echo(f"preflight: pass: cached, no test run: the tree of "
                      f"{self.config.andon.integration_branch} ({sha[:10]}) passed before")
            return GateResult("preflight", "pass", f"cached for tree {tree[:10]}")
        self.echo(f"preflight: running the full suite on {self.config.andon.integration_branch}"
                  f" ({sha[:10]})")
        ev = self.evidence_root / "_preflight" / tree[:12]
        ev.mkdir(parents=True, exist_ok=True)
        result = preflight.run(self.repo, self.config, sha, ev)
        self.echo(f"preflight: {result.status}: {result.summary}")
        if result.status == "pass":
            self.store.set_baseline(key, set(result.details["passed_ids"]), result.evidence())
        return result

    def _baseline(self, tree: str) -> set[str]:
        key = baseline_key(self.config, tree)
        known = self.store.baseline(key)
        if known is None:
            sha = self.repo.resolve(self.ref)
            if self._preflight(sha).status != "pass":
                raise UsageError("the integration branch no longer passes its suite")
            known = self.store.baseline(key) or set()
        return known

    def _sync(self, packets: list[Packet]) -> None:
        for p in packets:
            self.store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                                     p.model_dump(mode="json", by_alias=True))
            row = self.store.packet(p.id)
            assert row is not None  # upserted just above
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
        head = self._integration_head()
        diff = self.repo.diff(p.spec_commit, head, [p.spec_path])
        return f"{p.spec_path} changed since {p.spec_commit[:10]}:\n{diff}" if diff else None

    def _halted(self) -> dict | None:
        """The blocked packet that stops the line; a blocked packet whose folder was deleted
        no longer can (there is nothing left to unblock)."""
        return next((p for p in self.store.packets()
                     if p["state"] == "blocked" and p["id"] in self.packets), None)

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
        stages = self.config.stages_of(packet.stages, packet.tier)
        round_ = sum(1 for e in self.store.events(packet.id) if e["kind"] == "unblocked")
        carry = self._carry_over(packet, round_)
        first = self.agent_for(packet, carry.get("start_stage") or stages[0])
        with self.store.tx():
            a = self.store.new_attempt(packet.id, first.name, round_)
            self.store.transition(packet.id, "running", "claimed", a["id"],
                                  {"n": a["n"], "packet_sha": packet.content_sha})
        fault_injection.point("after-claim")
        n = a["n"]
        ev = self.evidence_root / packet.id / str(n)
        ev.mkdir(parents=True, exist_ok=True)
        wt = self._worktree_path(packet.id, n)
        base = carry.get("base_sha") or self.repo.resolve(self.ref)
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
                self._baseline(self.repo.resolve(f"{base}^{{tree}}")),
                self._previous_failure(packet.id), wt, ev,
                lambda g: self.echo(f"  {g.gate}: {g.status}: {g.summary}"),
                lambda state, kind: self.store.transition(packet.id, state, kind, a["id"]),
                say=self.echo,
                run_started=self.run_started,
                watch=self._watch,
                env=self.env,
            ).run()
        finally:
            if not self.keep:
                self.repo.remove_worktree(wt)
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

    def _carry_over(self, packet: Packet, round_: int) -> dict:
        """Where a retry starts. A failure routed back to ``implement`` keeps the previous
        attempt's atdd tests (its base, plant and atdd commits); a broken reviewer
        (``verifier``) keeps its candidate too, so only the review runs again; anything else
        starts afresh from the integration head. Commits are carried only when the packet
        is byte for byte the one that attempt worked on."""
        prev = next((x for x in reversed(self.store.attempts(packet.id))
                     if x["state"] == "failed"), None)
        if not prev or prev["round"] != round_:
            return {}
        claimed = next((e for e in self.store.events(packet.id)
                        if e["kind"] == "claimed" and e["attempt_id"] == prev["id"]), None)
        if not claimed or claimed["data"].get("packet_sha") != packet.content_sha:
            self.echo(f"{packet.id}: the packet changed since attempt {prev['n']}: starting "
                      "afresh")
            return {}
        if prev["route_stage"] == "implement" and prev["atdd_sha"]:
            return {"start_stage": "implement", "base_sha": prev["base_sha"],
                    "plant_sha": prev["plant_sha"], "atdd_sha": prev["atdd_sha"]}
        if prev["failure_layer"] == "verifier" and prev["candidate_sha"]:
            return {"start_stage": prev["route_stage"], "base_sha": prev["base_sha"],
                    "plant_sha": prev["plant_sha"], "atdd_sha": prev["atdd_sha"],
                    "candidate_sha": prev["candidate_sha"]}
        return {"start_stage": prev["route_stage"]} if prev["route_stage"] else {}

    # -- human gates --------------------------------------------------------------------

    def approve(self, packet_id: str, who: str) -> str:
        """A person approves a packet in ``awaiting_human``: merge it now.

        Raises:
            UsageError: no such packet, or it is not awaiting a person.
        """
        lock = self._lock()
        try:
            a = self._awaiting(packet_id)
            self.packets = {p.id: p for p in load_packets(
                self.repo.root / self.config.andon.packets_dir, self.repo.root)}
            self.store.transition(packet_id, "merging", "approved", a["id"], {"by": who})
            red = self._red_ids(a["id"])
            return self._merge(self.packets[packet_id], self.store.attempt(a["id"]), red)
        finally:
            lock.close()

    def reject(self, packet_id: str, who: str, why: str) -> str:
        """A person rejects a packet in ``awaiting_human``: back to ``needs_work`` with the
        reason as evidence for the next attempt's prompt."""
        lock = self._lock()
        try:
            a = self._awaiting(packet_id)
            self.store.add_gate_result(a["id"], "human", "fail", "code", f"rejected by {who}: "
                                       f"{why}", {"findings": [{"kind": "rejected", "message":
                                       why, "path": None, "test_id": None}], "by": who},
                                       now(), 0.0)
            self.store.update_attempt(a["id"], state="failed", reason=f"rejected by {who}: {why}",
                                      route_stage="implement", ended_at=now())
            self.store.transition(packet_id, "needs_work", "rejected", a["id"],
                                  {"by": who, "why": why})
            return "needs_work"
        finally:
            lock.close()

    def _awaiting(self, packet_id: str) -> dict:
        row = self.store.packet(packet_id)
        if row is None:
            raise UsageError(f"no packet {packet_id!r} in the store")
        if row["state"] != "awaiting_human":
            raise UsageError(f"packet {packet_id} is {row['state']}, not awaiting_human")
        return self.store.attempts(packet_id)[-1]

    def _red_ids(self, attempt_id: int) -> set[str]:
        red: set[str] = set()
        for g in self.store.gate_results(attempt_id):
            if g["gate"] == "red":
                red |= set(g["evidence"].get("red_ids", []))
        return red

    def _merge(self, packet: Packet, a: dict, red_ids: set[str]) -> str:
        ev = Path(a["evidence_dir"])
        passed = list(dict.fromkeys(g["gate"] for g in self.store.gate_results(a["id"])
                                    if g["status"] == "pass"))
        out = merge_attempt(self.repo, self.config, packet, a, red_ids, self._baseline, ev,
                            passed)
        if out.check is not None:
            self.store.add_gate_result(a["id"], "merge", out.check.status, out.check.layer,
                                       out.check.summary, out.check.evidence(), now(), 0.0)
        if out.merged_sha is None:
            assert out.check is not None  # merge_attempt: no merge comes with its failing check
            return self._fail(packet, a, out.check)
        tree = self.repo.resolve(f"{out.merged_sha}^{{tree}}")
        kept = out.passed_ids or self._hermetic_passed(a["id"])
        key = baseline_key(self.config, tree)
        if kept and self.store.baseline(key) is None:
            self.store.set_baseline(key, kept, {"from": "merge", "attempt": a["id"]})
        self.store.update_attempt(a["id"], state="merged", merge_sha=out.merged_sha,
                                  ended_at=now())
        self.store.transition(packet.id, "done", "merged", a["id"], {"sha": out.merged_sha})
        self.echo(f"{packet.id}: merged as {out.merged_sha[:10]} onto "
                  f"{self.config.andon.integration_branch}")
        return "done"

    def _hermetic_passed(self, attempt_id: int) -> set[str]:
        # The squash of an unmoved branch has exactly the candidate's tree, which the
        # hermetic gate just ran: its passed ids are the next attempts' baseline.
        for g in self.store.gate_results(attempt_id):
            if g["gate"] == "hermetic" and g["status"] == "pass":
                return set(g["evidence"].get("passed_ids", []))
        return set()

    def _fail(self, packet: Packet, a: dict, failure: GateResult) -> str:
        fp = failure.fingerprint()
        counted = [x for x in self.store.attempts(packet.id)
                   if x["round"] == a["round"] and x["counted"] and x["id"] != a["id"]
                   and x["state"] == "failed"]
        self.store.update_attempt(a["id"], state="failed", fingerprint=fp,
                                  failure_layer=failure.layer, reason=failure.summary,
                                  ended_at=now())
        data = {"gate": failure.gate, "layer": failure.layer, "fingerprint": fp,
                "reason": failure.summary}
        if failure.layer in ("specification", "environment") \
                or failure.gate in ("budget", "harness") \
                or any(f.kind == "outside-worktree" for f in failure.findings):
            why = f"{failure.gate} gate ({failure.layer}): {failure.summary}"
        elif counted and counted[-1]["fingerprint"] == fp:
            why = (f"same failure as attempt {counted[-1]['n']} (fingerprint {fp}): no new "
                   f"evidence — {failure.summary}")
        elif len(counted) + 1 >= packet.max_attempts:
            why = f"attempts exhausted ({packet.max_attempts}): {failure.summary}"
        else:
            self.store.transition(packet.id, "needs_work", "gate-failed", a["id"], data)
            self.echo(f"{packet.id}: needs work: {failure.gate}: {failure.summary}")
            return "needs_work"
        self.store.update_attempt(a["id"], reason=why)
        self.store.transition(packet.id, "blocked", "blocked", a["id"], {**data, "why": why})
        self.echo(f"{packet.id}: BLOCKED: {why}")
        return "blocked"

    def _previous_failure(self, packet_id: str) -> PreviousFailure | None:
        for x in reversed(self.store.attempts(packet_id)):
            if x["state"] != "failed":
                continue
            g = next((g for g in self.store.gate_results(x["id"])
                      if g["status"] in ("fail", "error")), None)
            if g is None:
                return None
            # what the next agent reads: nothing that names a hidden test (prompt.py)
            packet = self.packets.get(packet_id)
            blobs = {k: v[0] for k, v in packet.hidden_blobs().items()} if packet else {}
            return redacted_failure(x["n"], g["gate"], g["failure_layer"] or "?",
                                    g["summary"], g["evidence"], blobs, hidden_names(blobs))
        return None

    def _worktree_path(self, packet_id: str, n: int) -> Path:
        return self.worktree_root / f"{packet_id}-{n}"

    # -- resume -------------------------------------------------------------------------

    def _recover(self) -> None:
        self.repo.git("worktree", "prune")
        for row in self.store.packets():
            attempts = self.store.attempts(row["id"])
            last = attempts[-1] if attempts else None
            if row["state"] in lifecycle.IN_FLIGHT and last:
                self._discard(last, f"interrupted: the runner stopped while {row['state']}")
                self.store.transition(row["id"], "ready", "recovered", last["id"])
                self.echo(f"{row['id']}: attempt {last['n']} was interrupted; it does not "
                          "count, the packet is ready again")
            elif row["state"] == "merging" and last and row["id"] in self.packets:
                self.echo(f"{row['id']}: finishing the merge of attempt {last['n']}")
                self.store.event("merge-resumed", row["id"], last["id"], {"n": last["n"]})
                self._merge(self.packets[row["id"]], last, self._red_ids(last["id"]))
            for a in attempts:  # attempts created just before a crash, never claimed
                if a["state"] == "running" and row["state"] not in lifecycle.IN_FLIGHT:
                    self._discard(a, "interrupted before it started")

    def _discard(self, a: dict, why: str) -> None:
        wt = self._worktree_path(a["packet_id"], a["n"])
        # every stage's pid file, a reviewer's later asks (in <stage>-askN/) included
        ended: set[int] = set()
        for pid_file in Path(a["evidence_dir"] or "/nonexistent").rglob("*.pid"):
            # an agent the killed runner left behind must not go on writing (or spending)
            pid, _, where = pid_file.read_text().partition("\n")
            if pid.strip().isdigit() and kill_leftover_group(int(pid), where.strip() or str(wt)):
                ended.add(int(pid))
                self.echo(f"{a['packet_id']}: ended the agent left running by the killed "
                          f"runner (process group {pid.strip()})")
            pid_file.unlink()
        # ...and one it started but had no time to record: whatever still works in the worktree
        for pgid in kill_working_under(str(wt.resolve()), frozenset(ended)):
            self.echo(f"{a['packet_id']}: ended a process left working in the interrupted "
                      f"attempt's worktree (process group {pgid})")
        self.repo.remove_worktree(wt)
        branch = f"refs/heads/andon/{a['packet_id']}/{a['n']}"
        if self.repo.rev_parse(branch):
            self.repo.git("update-ref", "-d", branch)
        self.store.update_attempt(a["id"], state="interrupted", counted=0, reason=why,
                                  ended_at=now())
