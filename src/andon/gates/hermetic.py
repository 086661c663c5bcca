"""``hermetic`` gate: the candidate passes from a fresh clone, repeatedly and in random order.

Nothing the agent left in its worktree (ignored files, caches, build output) exists in a fresh
clone at the candidate commit. The full suite runs ``gates.hermetic_runs`` times (default 3),
then once in a random order with a recorded seed (andon's own shuffle plugin). Each run is
judged like the ``suite`` gate. A check that could not run is reported as not run, never as
passed. With ``[test] jobs`` above 1 the runs are dealt into lanes of two or more consecutive
runs, each lane in a fresh clone of its own, at the same time (gates/lanes.py); the runs are
judged in plan order and the first failure decides.

**Hidden tests.** A packet's ``hidden/`` tree (same layout as ``plant/``) is copied into the
fresh clone only now, after the agent has finished; it was never in the agent's worktree. Every
test in a hidden file must pass (judged like FAIL_TO_PASS; one that already passed on the base
is fine), and each hidden file must run at least one test: findings of kind ``hidden``. Hidden
files must stay out of git (``packets/*/hidden/`` in .gitignore): a hidden file committed at the
base commit was readable by the agent, and the gate fails with layer ``specification``.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

from ..errors import Problem
from ..git.repo import Repo
from ..packet import Packet
from ..runners.pytest import SuiteRun
from . import flaky_base
from .base import Finding, GateContext, GateResult, forged_result, fresh_clone
from .joint import Ahead, hermetic_plan
from .lanes import deal, jobs, run_lanes
from .suite import judge, plain_first, summarise

NAME = "hermetic"


def committed_hidden(repo: Repo, rev: str, packet: Packet) -> list[str]:
    """Hidden files of ``packet`` that are committed at ``rev`` (so an agent working from it
    could read them), as repo-relative paths of their copies in the packets folder. `andon
    check` asks at HEAD, `andon run` at the integration head before anything is claimed, and
    this gate at the attempt's base."""
    root = repo.root.resolve()
    out = []
    for src in packet.hidden_files.values():
        try:
            rel = Path(src).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if repo.file_bytes(rev, rel) is not None:
            out.append(rel)
    return sorted(out)


def committed_hidden_problem(path: Path, rel: str) -> Problem:
    """The problem `andon check` and `andon run` report for a committed hidden file."""
    return Problem(path, None, "hidden test is committed, so agents can read it: add "
                               f"packets/*/hidden/ to .gitignore and `git rm --cached {rel}`")


def visible_hidden(ctx: GateContext) -> list[str]:
    """Hidden files of the packet committed at the attempt's base (see ``committed_hidden``)."""
    return committed_hidden(ctx.repo, ctx.base_sha, ctx.packet)


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
        found += [Finding("hidden", f"hidden test {r.id} {r.outcome}: {r.brief}",
                          path=f, test_id=r.id) for r in in_file if r.outcome != "passed"]
    return found


def skip_reason(ctx: GateContext) -> str | None:
    """Always applies: every candidate is judged."""
    return None


def run(ctx: GateContext) -> GateResult:
    assert ctx.candidate_sha
    if leaked := visible_hidden(ctx):
        return GateResult(NAME, "fail", f"hidden test {leaked[0]} is committed, so the "
                          "agent could read it; keep packets/*/hidden/ out of git",
                          "specification", [Finding("hidden-visible", f"{p} is tracked at "
                                                    "the base commit", path=p) for p in leaked])
    if (ahead := ctx.ahead.pop(ctx.candidate_sha, None)) is not None:
        return _judge_ahead(ctx, ahead)
    herm = hermetic_plan(ctx)
    plan, not_run = herm.runs, herm.not_run
    hidden = sorted(ctx.packet.hidden_files)
    dealt = deal(plan, jobs(ctx.config))
    with ExitStack() as stack:
        lanes = []
        for i, part in enumerate(dealt, start=1):
            label = f"hermetic-{ctx.packet.id}" + (f"-{i}" if len(dealt) > 1 else "")
            cwd = stack.enter_context(fresh_clone(ctx.repo, ctx.candidate_sha, label))
            copy_hidden(ctx, cwd)
            lanes.append((cwd, part))
        plain = None
        if hidden:  # the hidden tests under the plain profile first (suite.py, "Plain first")
            first, plain = plain_first(ctx, lanes[0][0], NAME, hidden)
            if first is not None:
                return first
        made = run_lanes(ctx, lanes, agent_code=True,
                         stop=lambda r: _failure(ctx, r, [r], hidden, not_run, {}) is not None)
    runs = [made[p.name] for p in plan if p.name in made]
    flaky: dict[str, dict] = {}
    for r in runs:
        if failed := _failure(ctx, r, runs, hidden, not_run, flaky):
            return failed
    # a lane ends after a run that is not clean; a failure excused as flaky on the base
    # leaves that lane's later runs unmade: say so rather than count them
    not_run += [f"{p.name} (its lane stopped after a failure flaky on the base)"
                for p in plan if p.name not in made]
    seeds = [r.seed for r in runs if r.seed is not None]
    summary = f"{len(runs)} full-suite runs passed in a fresh clone"
    if len(dealt) > 1:
        summary = (f"{len(runs)} full-suite runs passed in {len(dealt)} fresh clones at the "
                   "same time")
    if seeds:
        summary += f" (random order seed {seeds[0]})"
    if hidden:
        summary += f"; with {len(hidden)} hidden file(s)"
    if not_run:
        summary += f"; not run: {', '.join(not_run)}"
    summary += flaky_base.note(list(flaky.values()))
    return GateResult(NAME, "pass", summary, runs=runs,
                      details={"not_run": not_run, "seeds": seeds, "hidden": hidden,
                               "flaky_on_base": list(flaky.values()),
                               "plain_run": plain.to_evidence() if plain else None,
                               "lanes": [[p.name for p in part] for part in dealt],
                               "passed_ids": sorted(runs[0].ids_with("passed")),
                               "env_digest": ctx.env_digest})


def _judge_ahead(ctx: GateContext, ahead: Ahead) -> GateResult:
    """Judge the runs the suite gate made beside its own (gates/joint.py): hermetic-1 is the
    suite gate's run, made in a fresh clone and judged there; the others are judged here in
    plan order, the first failure deciding. Nothing runs."""
    plan, not_run = ahead.plan.runs[1:], list(ahead.plan.not_run)
    runs = [ahead.runs[p.name] for p in plan if p.name in ahead.runs]
    flaky: dict[str, dict] = {}
    for r in runs:
        if failed := _failure(ctx, r, runs, [], not_run, flaky):
            return failed
    not_run += [f"{p.name} (its lane stopped after a failure flaky on the base)"
                for p in plan if p.name not in ahead.runs]
    seeds = [r.seed for r in runs if r.seed is not None]
    clones = len(ahead.lanes)
    summary = (f"{len(runs) + 1} full-suite runs passed in {clones} fresh clone"
               + ("s at the same time" if clones > 1 else "")
               + " (hermetic-1 is the suite gate's run: the worktree held exactly the "
               "candidate)")
    if seeds:
        summary += f" (random order seed {seeds[0]})"
    if not_run:
        summary += f"; not run: {', '.join(not_run)}"
    summary += flaky_base.note(list(flaky.values()))
    return GateResult(NAME, "pass", summary, runs=runs,
                      details={"not_run": not_run, "seeds": seeds, "hidden": [],
                               "flaky_on_base": list(flaky.values()), "plain_run": None,
                               "first_run": "suite", "lanes": ahead.lanes,
                               "passed_ids": sorted(ahead.suite.ids_with("passed")),
                               "env_digest": ctx.env_digest})


def _failure(ctx: GateContext, r: SuiteRun, runs: list[SuiteRun], hidden: list[str],
             not_run: list[str], flaky: dict[str, dict]) -> GateResult | None:
    """The failing result run ``r`` (one of ``runs``) calls for, or None when it passed.
    PASS_TO_PASS failures flaky on the base are taken out (gates/flaky_base.py) and added to
    ``flaky`` (test id -> record)."""
    if forged := forged_result(NAME, r, runs, {"not_run": not_run}):
        return forged
    findings = judge_hidden(r, hidden)
    seen = {f.test_id for f in findings if f.test_id}
    findings += [f for f in judge(r, ctx.planted_tests(), ctx.red_ids, ctx.baseline_passed)
                 if f.test_id not in seen or f.test_id is None]
    findings, excused = flaky_base.excuse(ctx, findings, r.results, r.seed)
    flaky.update({x["test_id"]: x for x in excused})
    if not findings:
        return None
    where = f"in a fresh clone, run {r.name}" + (f" (seed {r.seed})" if r.seed else "")
    return GateResult(NAME, "fail", summarise(findings, where), "code", findings, runs,
                      {"not_run": not_run, "flaky_on_base": list(flaky.values())})
