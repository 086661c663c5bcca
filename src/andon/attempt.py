"""One attempt at one packet: worktree → plant → red → agent → snapshot → gates.

Returns the gate results in order; the caller (``runner``) decides the lifecycle from them.
The agent's exit status and claims are recorded and never consulted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import crash
from .agents import Agent, StageContext
from .config import Config
from .gates import hermetic, red, scope, suite
from .gates.base import Finding, GateContext, GateResult
from .packet import Packet
from .prompt import PreviousFailure, render_prompt
from .store import Store, now
from .workspace import Repo

GATES_AFTER_AGENT = (("scope", scope.run), ("suite", suite.run), ("hermetic", hermetic.run))


@dataclass
class AttemptResult:
    gates: list[GateResult] = field(default_factory=list)
    red_ids: set[str] = field(default_factory=set)
    candidate_sha: str | None = None

    @property
    def failure(self) -> GateResult | None:
        return next((g for g in self.gates if not g.ok), None)


def run_attempt(repo: Repo, config: Config, store: Store, packet: Packet, attempt: dict,
                agent: Agent, baseline: set[str], previous: PreviousFailure | None,
                worktree: Path, evidence_dir: Path, on_gate: Callable[[GateResult], None],
                template: Path | None) -> AttemptResult:
    out = AttemptResult()

    def record(result: GateResult, started: str, seconds: float) -> GateResult:
        store.add_gate_result(attempt["id"], result.gate, result.status, result.layer,
                              result.summary, result.evidence(), started, seconds)
        out.gates.append(result)
        on_gate(result)
        return result

    def timed(gate: str, fn: Callable[[GateContext], GateResult]) -> GateResult:
        started, t0 = now(), time.monotonic()
        return record(fn(ctx), started, time.monotonic() - t0)

    base = attempt["base_sha"]
    repo.add_worktree(worktree, attempt["branch"], base)
    crash.point("after-worktree")
    plant_sha = base
    if packet.plant_files:
        plant_sha = repo.plant(worktree, packet.plant_files,
                               f"andon: plant the tests of packet {packet.id}")
    store.update_attempt(attempt["id"], plant_sha=plant_sha)
    crash.point("after-plant")

    ctx = GateContext(repo, config, packet, worktree, evidence_dir, base, plant_sha,
                      baseline_passed=baseline)
    r = timed("red", red.run)
    if not r.ok:
        return out
    out.red_ids = ctx.red_ids = set(r.details.get("red_ids", []))

    prompt = render_prompt(packet, attempt["n"], config.andon.packets_dir, previous, template)
    prompt_file = evidence_dir / "implement.prompt.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    refs_before = repo.refs_snapshot()
    started = now()
    run = agent.run(StageContext(packet, "implement", attempt["n"], worktree, prompt,
                                 prompt_file, evidence_dir, config.agent.timeout_s))
    store.add_stage_run(attempt["id"], "implement", run.agent, run.exit_status, run.timed_out,
                        run.duration_s, str(run.transcript_path), run.claim, run.usage, started)
    crash.point("after-agent")
    moved = _restore_moved_refs(repo, refs_before, attempt["branch"])

    candidate = repo.snapshot(worktree, plant_sha,
                              f"andon: what the agent changed in attempt {attempt['n']} of "
                              f"{packet.id}")
    repo.set_ref(f"refs/heads/{attempt['branch']}", candidate, None)
    out.candidate_sha = ctx.candidate_sha = candidate
    store.update_attempt(attempt["id"], candidate_sha=candidate)
    store.transition(packet.id, "gating", "agent-finished", attempt["id"],
                     {"exit_status": run.exit_status, "timed_out": run.timed_out})
    if moved:
        record(GateResult(
            "scope", "fail", f"the agent moved git refs it does not own: {', '.join(moved)}",
            "permission", [Finding("tamper", f"ref {m} was moved, deleted or made by the "
                                   "agent (put back)", path=m) for m in moved]), now(), 0.0)
        return out
    for name, fn in GATES_AFTER_AGENT:
        if not timed(name, fn).ok:
            break
    return out


def _restore_moved_refs(repo: Repo, before: dict[str, str], own_branch: str) -> list[str]:
    """Put back every pre-existing ref the agent moved or deleted, and delete refs it made in
    andon's namespaces (a branch ``andon/<id>/<n+1>`` would collide with a later attempt);
    its worktree shares the repository's refs. Return their names."""
    after = repo.refs_snapshot()
    own = f"refs/heads/{own_branch}"
    moved = [r for r, sha in before.items() if after.get(r) != sha and r != own]
    for r in moved:  # not set_ref: it refuses the user's checked-out branch, which we restore
        repo.git("update-ref", "-m", "andon: restore a ref the agent moved", r, before[r])
    made = [r for r in after if r not in before and r != own
            and r.startswith(("refs/heads/andon/", "refs/andon/"))]
    for r in made:
        repo.git("update-ref", "-d", r)
    return moved + made
