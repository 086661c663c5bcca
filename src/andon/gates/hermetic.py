"""``hermetic`` gate: the candidate passes from a fresh clone, repeatedly and in random order.

Nothing the agent left in its worktree (ignored files, caches, build output) exists in a fresh
clone at the candidate commit. The full suite runs ``gates.hermetic_runs`` times (default 3),
then once in a random order with a recorded seed (andon's own shuffle plugin). Each run is
judged like the ``suite`` gate. A check that could not run is reported as not run, never as
passed.
"""

from __future__ import annotations

import random

from .base import GateContext, GateResult, fresh_clone
from .suite import judge, summarise


def run(ctx: GateContext) -> GateResult:
    assert ctx.candidate_sha
    with fresh_clone(ctx.repo, ctx.candidate_sha, f"hermetic-{ctx.packet.id}") as cwd:
        n = ctx.config.gates.hermetic_runs
        plan: list[tuple[str, int | None]] = [(f"hermetic-{i}", None) for i in range(1, n + 1)]
        not_run = []
        if ctx.config.gates.hermetic_random_order:
            plan.append(("hermetic-random", random.SystemRandom().randrange(1, 2**31)))
        else:
            not_run.append("random order (disabled by gates.hermetic_random_order)")
        runs = []
        for name, seed in plan:
            r = ctx.suite(cwd, name, seed=seed)
            runs.append(r)
            findings = judge(r, ctx.planted_tests(), ctx.red_ids, ctx.baseline_passed)
            if findings:
                where = f"in a fresh clone, run {name}" + (f" (seed {seed})" if seed else "")
                return GateResult("hermetic", "fail", summarise(findings, where), "code",
                                  findings, runs, {"not_run": not_run})
        seeds = [r.seed for r in runs if r.seed is not None]
        summary = f"{len(runs)} full-suite runs passed in a fresh clone"
        if seeds:
            summary += f" (random order seed {seeds[0]})"
        if not_run:
            summary += f"; not run: {', '.join(not_run)}"
        return GateResult("hermetic", "pass", summary, runs=runs,
                          details={"not_run": not_run, "seeds": seeds,
                                   "passed_ids": sorted(runs[0].ids_with("passed"))})
