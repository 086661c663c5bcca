"""``hermetic`` gate: the candidate passes from a fresh clone, repeatedly and in random order.

Nothing the agent left in its worktree (ignored files, caches, build output) exists in a fresh
clone at the candidate commit. The full suite runs ``gates.hermetic_runs`` times (default 3),
then once in a random order with a recorded seed (andon's own shuffle plugin). Each run is
judged like the ``suite`` gate. A check that could not run is reported as not run, never as
passed.

**Hidden tests.** A packet's ``hidden/`` tree (same layout as ``plant/``) is copied into the
fresh clone only now, after the agent has finished; it was never in the agent's worktree. Every
test in a hidden file must pass (judged like FAIL_TO_PASS; one that already passed on the base
is fine), and each hidden file must run at least one test: findings of kind ``hidden``. Hidden
files must stay out of git (``packets/*/hidden/`` in .gitignore): a hidden file committed at the
base commit was readable by the agent, and the gate fails with layer ``specification``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from ..runners.pytest import SuiteRun
from .base import Finding, GateContext, GateResult, forged_result, fresh_clone
from .suite import judge, summarise


def visible_hidden(ctx: GateContext) -> list[str]:
    """Hidden files of the packet that are committed at the base (so the agent could read
    them), as repo-relative paths of their copies in the packets folder."""
    root = ctx.repo.root.resolve()
    out = []
    for src in ctx.packet.hidden_files.values():
        try:
            rel = Path(src).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if ctx.repo.file_bytes(ctx.base_sha, rel) is not None:
            out.append(rel)
    return sorted(out)


def copy_hidden(ctx: GateContext, cwd: Path) -> list[str]:
    """Write the packet's hidden files, as they were when the packet was loaded (not as they
    are on disk now), into the clone ``cwd``; return their paths."""
    for rel, (data, _) in ctx.packet.hidden_blobs().items():
        dest = cwd / rel
        if not dest.parent.resolve().is_relative_to(cwd.resolve()):
            continue  # a link in the candidate must not send the copy outside the clone
        if dest.is_symlink():
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        os.chmod(dest, 0o644)
    return sorted(ctx.packet.hidden_files)


def judge_hidden(run: SuiteRun, hidden: list[str]) -> list[Finding]:
    """Every test of a hidden file passed, and every hidden test file ran tests."""
    if run.report_problem:
        return []
    found = []
    tests = [h for h in hidden if (h.endswith(".py")
             and os.path.basename(h).startswith("test_")) or h.endswith("_test.py")]
    for f in tests:
        in_file = [r for r in run.results.values() if r.file == f]
        if not in_file:
            found.append(Finding("hidden", f"hidden test file {f} ran no tests", path=f))
        found += [Finding("hidden", f"hidden test {r.id} {r.outcome}: {r.message[:200]}",
                          path=f, test_id=r.id) for r in in_file if r.outcome != "passed"]
    return found


def run(ctx: GateContext) -> GateResult:
    assert ctx.candidate_sha
    if leaked := visible_hidden(ctx):
        return GateResult("hermetic", "fail", f"hidden test {leaked[0]} is committed, so the "
                          "agent could read it; keep packets/*/hidden/ out of git",
                          "specification", [Finding("hidden-visible", f"{p} is tracked at "
                                                    "the base commit", path=p) for p in leaked])
    with fresh_clone(ctx.repo, ctx.candidate_sha, f"hermetic-{ctx.packet.id}") as cwd:
        hidden = copy_hidden(ctx, cwd)
        n = ctx.config.gates.hermetic_runs
        plan: list[tuple[str, int | None]] = [(f"hermetic-{i}", None) for i in range(1, n + 1)]
        not_run = []
        if ctx.config.gates.hermetic_random_order:
            plan.append(("hermetic-random", random.SystemRandom().randrange(1, 2**31)))
        else:
            not_run.append("random order (disabled by gates.hermetic_random_order)")
        runs = []
        for name, seed in plan:
            r = ctx.suite(cwd, name, seed=seed, agent_code=True, own_files=hidden)
            runs.append(r)
            if forged := forged_result("hermetic", r, runs, {"not_run": not_run}):
                return forged
            findings = judge_hidden(r, hidden)
            seen = {f.test_id for f in findings if f.test_id}
            findings += [f for f in judge(r, ctx.planted_tests(), ctx.red_ids,
                                          ctx.baseline_passed) if f.test_id not in seen
                         or f.test_id is None]
            if findings:
                where = f"in a fresh clone, run {name}" + (f" (seed {seed})" if seed else "")
                return GateResult("hermetic", "fail", summarise(findings, where), "code",
                                  findings, runs, {"not_run": not_run})
        seeds = [r.seed for r in runs if r.seed is not None]
        summary = f"{len(runs)} full-suite runs passed in a fresh clone"
        if seeds:
            summary += f" (random order seed {seeds[0]})"
        if hidden:
            summary += f"; with {len(hidden)} hidden file(s)"
        if not_run:
            summary += f"; not run: {', '.join(not_run)}"
        return GateResult("hermetic", "pass", summary, runs=runs,
                          details={"not_run": not_run, "seeds": seeds, "hidden": hidden,
                                   "passed_ids": sorted(runs[0].ids_with("passed"))})
