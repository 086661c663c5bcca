"""The ``suite`` gate's full run and the ``hermetic`` runs, planned as one (issue 18).

The worktree ``suite`` run exists for what the worktree holds beyond the candidate commit
(ignored files, files written after the snapshot); the ``hermetic`` runs exist for a fresh
clone of the commit. When the worktree holds *exactly* the candidate commit — no ignored,
untracked or changed path, no empty folder, no submodule (``strays`` is empty, checked after
the plain-first run, which ran agent code there) — a run in the worktree and the first run in
a fresh clone test the same files in the same state: running both runs the suite twice in the
same state. Then the suite gate's full run is made in a fresh clone as the first run of the
first lane, and it *is* ``hermetic-1``: one plan ``[suite, hermetic-2, …, hermetic-random]``
dealt into lanes (gates/lanes.py) and run at the same time. The suite gate judges ``suite``;
the runs after it wait in ``ctx.ahead`` for the hermetic gate, which judges them without
running anything (and, if the suite gate fails, nobody reads them).

When the worktree is not clean, nothing changes: the full suite runs in the worktree, then
the hermetic gate makes all of its runs. With hidden files the hermetic gate's plain-first run
of the hidden tests must come before its full runs, so those packets keep the old order too.
"""

from __future__ import annotations

import random
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..runners.pytest import SuiteRun
from ..workspace import Repo
from .base import GateContext, fresh_clone
from .lanes import Planned, clean, deal, jobs, run_lanes

SUITE = "suite"


def strays(repo: Repo, worktree: Path, sha: str, limit: int = 20) -> list[str]:
    """Paths (relative, "/"-separated; a folder with nothing tracked ends in "/") by which
    ``worktree`` differs from commit ``sha``: untracked files and folders, ignored ones
    included, and tracked files changed, deleted or with another mode. A submodule in the
    commit counts as a difference (its checkout is not compared). At most ``limit`` paths;
    empty = the worktree holds exactly ``sha``'s tree.

    Like ``Repo.snapshot``, git reads the worktree through a temporary index and this
    repository's git dir: git never runs in the agent's repository (its config could name
    commands). Costs one stat and, for a tracked file whose stat git cannot trust (all of
    them: the index is new), one hash per file. GitError when git cannot read the tree."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": str(worktree),
               "GIT_DIR": str(repo.git_dir)}

        def git(*args: str, check: bool = True) -> list[str]:
            proc = repo._run(("-c", "core.sparseCheckout=false", "-c", "index.sparse=false",
                              *args), worktree, None, check, env)
            return [p for p in proc.stdout.decode(errors="replace").split("\0") if p]

        git("read-tree", sha)
        links = [e.split("\t", 1)[1] for e in git("ls-files", "-s", "-z")
                 if e.startswith("160000 ")]
        if links:
            return [f"{p} (submodule)" for p in links[:limit]]
        # every untracked path, ignored ones too (no --exclude-standard), folders collapsed
        found = git("ls-files", "-z", "--others", "--directory")
        git("update-index", "-q", "--refresh", check=False)
        found += git("diff-files", "-z", "--name-only")
    return sorted(set(found))[:limit]


@dataclass
class HermeticPlan:
    """The hermetic gate's runs (``hermetic-1`` … ``hermetic-N``, the random-order run with
    its seed) and what is not run by configuration."""

    runs: list[Planned]
    not_run: list[str]


def hermetic_plan(ctx: GateContext) -> HermeticPlan:
    """The hermetic runs ``[gates]`` asks for, each with the packet's hidden files as its own."""
    n = ctx.config.gates.hermetic_runs
    plan = [Planned(f"hermetic-{i}") for i in range(1, n + 1)]
    not_run = []
    if ctx.config.gates.hermetic_random_order:
        plan.append(Planned("hermetic-random", seed=random.SystemRandom().randrange(1, 2**31)))
    else:
        not_run.append("random order (disabled by gates.hermetic_random_order)")
    hidden = sorted(ctx.packet.hidden_files)
    for p in plan:
        p.own_files = hidden
    return HermeticPlan(plan, not_run)


@dataclass
class Ahead:
    """What the suite gate made for the hermetic gate: the runs after ``suite`` (by name), the
    lanes they were dealt into, the hermetic plan, and ``suite``'s own run (= hermetic-1)."""

    suite: SuiteRun
    runs: dict[str, SuiteRun]
    lanes: list[list[str]]
    plan: HermeticPlan


def can_join(ctx: GateContext) -> list[str] | None:
    """None when the suite gate's full run must stay in the worktree (no candidate, hidden
    files, or the worktree is not exactly the candidate: the paths that differ, at most 20);
    else [] — the full runs may be planned as one."""
    if not ctx.candidate_sha or ctx.packet.hidden_files:
        return None
    return strays(ctx.repo, ctx.worktree, ctx.candidate_sha) or []


def run_joint(ctx: GateContext) -> SuiteRun:
    """Make the suite gate's full run as the first run of a fresh clone, together with the
    hermetic runs after ``hermetic-1`` (in lanes, at the same time); keep those in
    ``ctx.ahead[candidate]`` and return the ``suite`` run. As in the hermetic gate, a lane
    ends after a run that is not clean (a failed suite run leaves its lane's hermetic runs
    unmade: the suite gate fails, and nobody needs them)."""
    assert ctx.candidate_sha
    herm = hermetic_plan(ctx)
    rest = herm.runs[1:]  # hermetic-1 is the suite run itself
    plan = [Planned(SUITE), *rest]
    dealt = deal(plan, jobs(ctx.config))
    with ExitStack() as stack:
        lanes = []
        for i, part in enumerate(dealt, start=1):
            label = f"suite-{ctx.packet.id}-{i}"
            lanes.append((stack.enter_context(fresh_clone(ctx.repo, ctx.candidate_sha, label)),
                          part))
        made = run_lanes(ctx, lanes, agent_code=True,
                         stop=lambda r: not clean(r))
    suite = made.pop(SUITE)
    ctx.ahead[ctx.candidate_sha] = Ahead(suite, made, [[p.name for p in part] for part in dealt],
                                         herm)
    return suite
