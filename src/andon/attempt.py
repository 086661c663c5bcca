"""One attempt at one packet: plant → worktree, red beside it (worktree_build.py) → stages →
snapshots → gates → reviews.

Stages run in order, each a fresh agent run with only its own inputs:

- ``atdd`` writes tests only; the ``atdd-scope`` gate checks that, and ``red`` checks its
  tests fail on the current code every time and cover each invariant they name twice or more;
- ``implement`` writes code; ``scope``, ``suite`` and ``hermetic`` gate it (with an atdd
  stage, any change to a test path is tamper);
- ``review``, ``review-tests``, ``review-correctness`` each run in a fresh export (no .git)
  of the candidate (``review-correctness`` without the tests) and must change nothing; their
  JSON documents are validated and decided by :mod:`andon.review.contract`.

The result lists every gate result in order and, on failure, the stage the next attempt
starts from. The agents' exit statuses and claims are recorded and never make anything pass;
an agent that changed nothing and exited non-zero (or timed out) without output is judged by
the ``agent`` gate (layer ``environment``: it could not work) instead of ``no-change``.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from . import budget, fault_injection, leftovers, plain_file, reaper, sandbox
from .agents import Agent, StageContext
from .config import CONFIG_NAME, Config
from .contain import envprint, guard
from .errors import AndonError, UsageError
from .gates import AFTER_IMPLEMENT, Gate, atdd_scope, hermetic, judge, patterns, red, scope
from .gates.agent import could_not_work
from .gates.base import Finding, GateContext, GateResult
from .git.repo import Repo, SnapshotError
from .packet import Packet, path_matches
from .prompt import PreviousFailure, render_prompt, template_for
from .review.stage import Reviewer, ReviewInput
from .runners.pytest import collectable
from .store import StoreProtocol, now
from .worktree_build import WorktreeBuild

REVIEW_STAGES = ("review", "review-tests", "review-correctness")


class _WroteOutside(AndonError):
    """An agent stage changed watched files in the user's checkout; ends the attempt."""

    def __init__(self, result: GateResult):
        self.result = result


@dataclass
class AttemptResult:
    gates: list[GateResult] = field(default_factory=list)
    red_ids: set[str] = field(default_factory=set)
    candidate_sha: str | None = None
    route_stage: str = "implement"   # where the next attempt starts if this one failed

    @property
    def failure(self) -> GateResult | None:
        return next((g for g in self.gates if not g.ok), None)


class Attempt:
    """Carry out one attempt; ``agent_for(stage)`` gives the agent of each stage;
    ``env_digest``: the tests' environment as the results cache names it (None: no cache)."""

    def __init__(self, repo: Repo, config: Config, store: StoreProtocol, packet: Packet, row: dict,
                 agent_for: Callable[[str], Agent], baseline: set[str],
                 previous: PreviousFailure | None, worktree: Path, evidence_dir: Path,
                 on_gate: Callable[[GateResult], None], on_state: Callable[[str, str], object],
                 say: Callable[[str], None] = lambda s: None, run_started: str | None = None,
                 watch: Callable[[], dict[str, str]] | None = None,
                 env: envprint.Watch | None = None, env_digest: str | None = None):
        self.repo, self.config, self.store, self.packet = repo, config, store, packet
        self.env = env                          # the tests' interpreter (contain/envprint.py)
        self.env_clean = False  # walked, unchanged, no code run since: no walk before a stage
        self.run_started = run_started          # when this `andon run` began: run budget
        self.watch = watch                      # fingerprint of the checkout (guard.py)
        self.over_budget: GateResult | None = None
        self.row, self.agent_for, self.previous = row, agent_for, previous
        self.worktree, self.ev, self.on_gate, self.on_state, self.say = \
            worktree, evidence_dir, on_gate, on_state, say
        self.stages = config.stages_of(packet.stages, packet.tier)
        self.out = AttemptResult()
        self.ctx = GateContext(repo, config, packet, worktree, evidence_dir, row["base_sha"],
                               row["base_sha"], baseline_passed=baseline, store=store,
                               env_digest=env_digest)
        self.prompt_dir = repo.root / config.agent.prompt_dir if config.agent.prompt_dir else None
        self.implement_template = (repo.root / config.agent.prompt_template
                                   if config.agent.prompt_template else None)
        self._worktree: WorktreeBuild  # set by run(), around every gate and stage

    # -- the flow -----------------------------------------------------------------------

    def run(self) -> AttemptResult:
        """Carry out the attempt. A budget found exceeded after a stage run (or with nothing
        left before one) ends it there with a ``budget`` failure; what the agents left is
        kept (transcripts, the candidate commit)."""
        try:
            self._run()
        except budget.Exceeded as stop:
            self.over_budget = self.over_budget or stop.result
        except _WroteOutside as out:
            self._record(out.result, now(), 0.0)
        except Exception as exc:  # noqa: BLE001 — anything else: evidence, not a stuck packet
            # An escaped error would leave the packet `running`; the next run would call it
            # interrupted and try again, uncounted, for ever. Recorded, it blocks the line.
            trace = self.ev / "harness-error.txt"
            plain_file.write(trace, traceback.format_exc())
            what = f"{type(exc).__name__}: {exc}"
            self._record(GateResult(
                "harness", "error", f"andon failed during the attempt: {what}", "harness",
                [Finding("harness-error", f"{what} (traceback in {trace})", path=None)],
                details={"traceback": str(trace)}), now(), 0.0)
        if self.over_budget is not None:
            self._record(self.over_budget, now(), 0.0)
        return self.out

    def _run(self) -> AttemptResult:
        start = self.row["start_stage"] or self.stages[0]
        resume_from_atdd = start == "implement" and self.row["atdd_sha"]
        review_again = start in REVIEW_STAGES and self.row["candidate_sha"]
        if resume_from_atdd or review_again:
            self.ctx.plant_sha = self.row["plant_sha"]
            self.ctx.atdd_sha = self.row["atdd_sha"]
        else:
            self.ctx.plant_sha = self.row["base_sha"]
            if self.packet.plant_files:
                self.ctx.plant_sha = self.repo.plant(
                    self.row["base_sha"], self.packet.plant_blobs(),
                    f"andon: plant the tests of packet {self.packet.id}")
            self.store.update_attempt(self.row["id"], plant_sha=self.ctx.plant_sha)
        fault_injection.point("after-plant")
        if self.worktree.exists() or self.worktree.is_symlink():
            # left by an earlier repository at the same path (kept worktrees): not ours now
            self.repo.remove_worktree(self.worktree)
        tip = self.row["candidate_sha"] if review_again else self.ctx.atdd_sha or self.ctx.plant_sha
        make = partial(self.repo.make_worktree, self.worktree, self.row["branch"], tip,
                       self.config.andon.agent_history)
        with WorktreeBuild(make, self.ctx, not review_again and not self.config.test.setup,
                           self.row["id"]) as self._worktree:
            return self._stages(review_again, resume_from_atdd, start)

    def _stages(self, review_again: bool, resume_from_atdd: bool, start: str) -> AttemptResult:
        reviews = [s for s in self.stages if s in REVIEW_STAGES]
        if review_again:
            if not self._candidate_again():
                return self.out
            reviews = reviews[reviews.index(start):] if start in reviews else reviews
        elif "atdd" in self.stages and not resume_from_atdd:
            if not self._gate(red).ok or not self._atdd():
                return self._fail_at("atdd")
        elif not self._red_before_implement():
            return self._fail_at("atdd" if "atdd" in self.stages else "implement")
        self.out.red_ids = self.ctx.red_ids

        if not review_again and not self._implement():
            return self.out
        for stage in reviews:
            if not self._review(stage):
                return self.out
        return self.out

    def _candidate_again(self) -> bool:
        """The previous attempt's candidate, verified again without running its agent (that
        attempt failed only because its reviewer broke): red is carried over from the attempt
        that ran it on the same plant commit; every gate after implement runs again."""
        prev = next(x for x in reversed(self.store.attempts(self.packet.id))
                    if x["candidate_sha"] == self.row["candidate_sha"]
                    and x["id"] != self.row["id"])
        red_row = [g for g in self.store.gate_results(prev["id"]) if g["gate"] == red.NAME][-1]
        ids = red_row["evidence"].get("red_ids", [])
        self.ctx.red_ids = self.out.red_ids = set(ids)
        self.ctx.atdd_tests = self._atdd_tests()
        self._record(GateResult(
            red.NAME, "pass", f"carried over from attempt {prev['n']}: same plant commit "
            f"{self.ctx.plant_sha[:10]}, {len(ids)} planted test(s) red there",
            details={"red_ids": sorted(ids), "carried_from_attempt": prev["n"]}), now(), 0.0)
        self.ctx.candidate_sha = self.out.candidate_sha = self.row["candidate_sha"]
        self.say(f"  implement: not run again — the candidate of attempt {prev['n']} is "
                 "verified again, since only its review broke")
        self.on_state("gating", "candidate-carried")
        return all(self._gate(gate).ok for gate in AFTER_IMPLEMENT)

    def _fail_at(self, stage: str) -> AttemptResult:
        self.out.route_stage = stage
        return self.out

    def _red_before_implement(self) -> bool:
        self.ctx.atdd_tests = self._atdd_tests()
        r = self._gate(red)
        self.ctx.red_ids = set(r.details.get("red_ids", []))
        return r.ok

    def _atdd(self) -> bool:
        run = self._agent("atdd")
        self.ctx.atdd_sha = self._snapshot("atdd")
        if self.ctx.atdd_sha is None or self._could_not_work(run, "atdd", self.ctx.plant_sha,
                                                              self.ctx.atdd_sha):
            return False
        self.store.update_attempt(self.row["id"], atdd_sha=self.ctx.atdd_sha)
        if not self._gate(atdd_scope).ok:
            return False
        self.ctx.atdd_tests = self._atdd_tests()
        # after an agent ran in the worktree: what it left beside the commit is not in the
        # cache key, so red runs; the atdd tests are judged as the agent's
        self.ctx.atdd_just_ran = True
        r = self._gate(red)
        self.ctx.red_ids = set(r.details.get("red_ids", []))
        return r.ok

    def _implement(self) -> bool:
        run = self._agent("implement")
        fault_injection.point("after-agent")
        self.ctx.candidate_sha = self.out.candidate_sha = self._snapshot("implement")
        if self.ctx.candidate_sha is None:
            return False
        self.store.update_attempt(self.row["id"], candidate_sha=self.ctx.candidate_sha)
        if self._could_not_work(run, "implement", self.ctx.atdd_sha or self.ctx.plant_sha,
                                self.ctx.candidate_sha):
            return False
        self.on_state("gating", "agent-finished")
        if self.over_budget is not None:
            return False
        return all(self._gate(gate).ok for gate in AFTER_IMPLEMENT)

    # -- stages -------------------------------------------------------------------------

    def _agent(self, stage: str, **extra):
        prompt = render_prompt(self.packet, self.row["n"], self.config.andon.packets_dir,
                               self.previous, template_for(stage, self.prompt_dir,
                                                           self.implement_template),
                               stage=stage, **extra.get("prompt_vars", {}))
        # a reviewer asked again writes into its own folder: every ask's evidence is kept
        ev = extra.get("evidence_dir", self.ev)
        ev.mkdir(parents=True, exist_ok=True)
        # The copy kept as evidence is what the agent got (it names no hidden test: see
        # prompt.redacted_failure); the file the agent is pointed at lives in a folder of
        # its own outside the checkout (next to packets/*/hidden/) and the worktree.
        plain_file.write(ev / f"{stage}.prompt.md", prompt)
        stage_dir = Path(tempfile.mkdtemp(prefix=f"andon-{self.packet.id}-{stage}-prompt-"))
        try:
            prompt_file = stage_dir / f"{stage}.prompt.md"
            prompt_file.write_text(prompt, encoding="utf-8")
            return self._run_agent(stage, prompt, prompt_file, ev, extra)
        finally:
            reaper.discard(stage_dir)

    def _run_agent(self, stage: str, prompt: str, prompt_file: Path, ev: Path, extra: dict):
        self._worktree.wait()  # red ran first, beside it
        agent = self.agent_for(stage)
        stop = budget.check(self.store, self.config.budgets, self.row, self.run_started, True)
        if stop is not None:
            raise budget.Exceeded(stop)
        if not self.env_clean and (env := self._env_changed(
                scope.NAME, f"since this run started, before the {stage} agent ran")) is not None:
            raise _WroteOutside(env)
        self.env_clean = False  # the agent runs code
        started = now()
        before = self.watch() if self.watch else None
        refs_before = self.repo.refs_snapshot()
        wt, review = extra.get("worktree", self.worktree), extra.get("review_file")
        plan = sandbox.stage_plan(agent.sandbox, self.config, self.repo.root, stage, wt,
                                  self.worktree.parent, prompt_file, review,
                                  list(self.packet.plant_blobs()), agent.command)
        run = agent.run(StageContext(self.packet, stage, self.row["n"], wt, prompt,
                                     prompt_file, ev, self.config.agent.timeout_s, review, plan))
        self.store.add_stage_run(self.row["id"], stage, run.agent, run.exit_status,
                                 run.timed_out, run.duration_s, str(run.transcript_path),
                                 run.claim, run.usage, started)
        status = "timed out" if run.timed_out else f"exited {run.exit_status}"
        self.say(f"  {stage}: {run.agent} agent {status} after {run.duration_s:.1f} s "
                 f"(recorded, not used to decide); transcript {run.transcript_path}")
        if blocked := scope.blocked(scope.NAME, f"while the {stage} agent ran", self.repo.root):
            raise _WroteOutside(blocked)  # first: the git commands below would hang on it
        self.over_budget = self.over_budget or budget.check(
            self.store, self.config.budgets, self.row, self.run_started, False)
        changed = (guard.changes(before, self.watch()) if before is not None and self.watch
                   else [])
        own = guard.packet_files(self.packet.dir or self.packet.source,
                                 bool(self.packet.dir), self.repo.root)
        reached = scope.reached_outside(
            stage, guard.blamable(changed, own, self.config.andon.packets_dir.strip("/"),
                                  CONFIG_NAME),
            self.repo.restore_refs(refs_before, (
                f"refs/heads/{self.config.andon.integration_branch}",)))
        if reached is not None:
            raise _WroteOutside(reached)
        if (env := self._env_changed(scope.NAME, f"while the {stage} agent ran")) is not None:
            raise _WroteOutside(env)
        self.env_clean = True
        return run

    def _snapshot(self, stage: str) -> str | None:
        """The commit of what the stage left — its parent the harness's own last commit of
        this attempt, whatever the agent did to HEAD — or None after recording why there is
        none (the agent removed its worktree, replaced it by a link, left a nested repo...)."""
        parent = (stage == "implement" and self.ctx.atdd_sha) or self.ctx.plant_sha
        try:
            sha = self.repo.snapshot(self.worktree, parent, f"andon: what the {stage} stage "
                                     f"changed in attempt {self.row['n']} of {self.packet.id}")
        except SnapshotError as exc:
            self._record(GateResult(
                atdd_scope.NAME if stage == "atdd" else scope.NAME, "fail",
                f"the {stage} stage left a worktree andon cannot read: {exc}", "permission",
                [Finding("unreadable-worktree", str(exc), path=exc.path)]), now(), 0.0)
            return None
        try:  # the branch only lets a person look at the attempt; the store has the sha
            self.repo.set_ref(f"refs/heads/{self.row['branch']}", sha, None)
        except UsageError:  # they have it checked out: moving it would dirty their tree
            self.say(f"  {self.row['branch']} is checked out in your tree, so it stays where "
                     f"it is; the {stage} commit is {sha[:10]}")
        return sha

    def _review(self, stage: str) -> bool:
        if stage == next(s for s in self.stages if s in REVIEW_STAGES):
            self.on_state("reviewing", "review-started")
        started, t0 = now(), time.monotonic()
        result = Reviewer(self._review_input(), stage).run()
        self._record(result, started, time.monotonic() - t0)
        if not result.ok:
            # a broken reviewer says nothing about the candidate: only the review runs again
            self.out.route_stage = stage if result.layer == "verifier" else \
                result.details.get("revise_stage", "implement")
        return result.ok

    def _review_input(self) -> ReviewInput:
        assert self.ctx.candidate_sha is not None  # reviews run after implement committed
        return ReviewInput(self.repo, self.config, self.packet, self.store, self.row["id"],
                           self.row["start_stage"], self.stages, self.ctx.plant_sha,
                           self.ctx.candidate_sha, self.ev,
                           [g.gate for g in self.out.gates if not g.ok], self._agent,
                           self.worktree)

    def _could_not_work(self, run, stage: str, start: str, sha: str) -> bool:
        """Record the ``agent`` gate's failure if the stage's agent could not work: True."""
        result = could_not_work(run, stage, bool(self.repo.changes(start, sha)))
        if result is not None:
            self._record(result, now(), 0.0)
        return result is not None

    def _atdd_tests(self) -> list[str]:
        """The test files the atdd stage's commit added or changed (none without one)."""
        if not self.ctx.atdd_sha:
            return []
        return sorted(c.path for c in self.repo.changes(self.ctx.plant_sha, self.ctx.atdd_sha)
                      if c.status != "D" and collectable(c.path)
                      and path_matches(c.path, self.config.stages.test_paths))

    def _record(self, result: GateResult, started: str, seconds: float) -> GateResult:
        self.store.add_gate_result(self.row["id"], result.gate, result.status, result.layer,
                                   result.summary, result.evidence(), started, seconds)
        self.out.gates.append(result)
        self.on_gate(result)
        return result

    def _gate(self, gate: Gate) -> GateResult:
        """Run or skip (:func:`andon.gates.judge`) ``gate`` on the context; record the result."""
        name = gate.NAME
        started, t0 = now(), time.monotonic()
        # hermetic judging the runs the suite gate made (joint.py) runs nothing: walked there
        ahead = name == hermetic.NAME and self.ctx.candidate_sha in self.ctx.ahead
        # scope, atdd-scope and patterns only read git; a gate judge skips runs nothing
        runs = gate.skip_reason(self.ctx) is None and not ahead and name not in (
            scope.NAME, atdd_scope.NAME, patterns.NAME)
        # red before any agent runs in a clone while the worktree is made: nothing to tidy
        in_worktree = runs and self.ctx.worktree_ready
        before = leftovers.untracked(self.repo, self.worktree) if in_worktree else set()
        result = judge(gate, self.ctx)
        if in_worktree and (gone := leftovers.remove_added(self.repo, self.worktree, before)):
            result.details["removed_after_runs"] = gone  # not the agent's: leftovers.py
        # Code under test ran here: a file it left in the interpreter's site-packages would
        # steer every later run (issues 18, 12). A skipped gate ran nothing.
        if runs and result.status != "skipped":
            outside = self._env_changed(
                name, f"during the {name} gate's test runs (the code under test ran there)")
            self.env_clean = outside is None
            if outside is not None:
                outside.runs = result.runs
                result = outside
        recorded = self._record(result, started, time.monotonic() - t0)
        self._worktree.wait()  # after red's record: kept if the worktree failed
        return recorded

    def _env_changed(self, gate: str, when: str) -> GateResult | None:
        """A failing ``gate`` result with ``outside-worktree`` findings if the repository
        holds a file git would hang on (scope.blocked) or the tests' interpreter environment
        differs from the run's start, else None."""
        if (blocked := scope.blocked(gate, when, self.repo.root)) or self.env is None or \
                not (changed := self.env.changed()):
            return blocked
        text, cmds = envprint.describe(changed, self.env.where, when)
        found = [Finding("outside-worktree", f"{p} was {how} {when}", path=p) for p, how in changed]
        return GateResult(gate, "fail", text, "permission", found, details={"restore": cmds})
