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

import os
import random
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .. import treewalk
from ..git.repo import Repo
from ..runners.pytest import SuiteRun
from ..worktrees import index_at, index_of
from .base import GateContext, fresh_clone
from .lanes import Planned, clean, deal, jobs, run_lanes

SUITE = "suite"


# Settings that would hide a difference from git: a mode change (core.fileMode=false, which
# `git config` run in the worktree writes to the shared config), a case-only name, a symbolic
# link checked out as a file, an untracked file in a folder whose time was set back (the
# untracked cache), a daemon's word for what changed (fsmonitor).
_STRICT = ("-c", "core.sparseCheckout=false", "-c", "index.sparse=false",
           "-c", "core.fileMode=true", "-c", "core.ignoreCase=false", "-c", "core.symlinks=true",
           "-c", "core.untrackedCache=false", "-c", "core.fsmonitor=false")
# Attributes under which a checkout writes other bytes than the blob's (git's clean filter
# hides those from diff-files, so a file the agent wrote and the clone's file can differ).
_CONVERTING = ("ident", "filter", "working-tree-encoding", "eol", "crlf")


def strays(repo: Repo, worktree: Path, sha: str, limit: int = 20) -> list[str]:
    """Paths (relative, "/"-separated; a folder with nothing tracked ends in "/") by which
    ``worktree`` differs from commit ``sha``: untracked files and folders, ignored ones
    included, tracked files changed, deleted or with another mode, a tracked symbolic link
    whose relative target leaves the tree ("path (symbolic link out of the tree)"), and any
    path named ``.git`` below the top (git never lists one). A submodule in the commit counts
    as a difference (its checkout is not compared), and so does a tracked file a checkout
    converts ("path (checkout converts: ident)": ``ident``, ``filter``,
    ``working-tree-encoding``, ``eol=crlf``, or ``core.autocrlf``/``core.eol=crlf`` in the
    configuration) — its bytes in a fresh clone
    are not the blob's. At most ``limit`` paths; empty = the worktree holds exactly ``sha``'s
    tree, byte for byte.

    Like ``Repo.snapshot``, git reads the worktree through the harness's index of it (the
    one the snapshot left, holding ``sha``'s tree: its stat data spares the hashing of every
    file) or a temporary one, and this repository's git dir: git never runs in the agent's
    repository (its config could name commands). Costs one stat per file and one hash per
    tracked file whose stat git cannot trust (all of them with a new index); when git finds
    nothing, one walk of the tree for ``.git`` names. GitError when git cannot read the
    tree."""
    with tempfile.TemporaryDirectory() as tmp:
        own = index_of(worktree)
        env = {"GIT_INDEX_FILE": str(own if own.is_file() else Path(tmp) / "index"),
               "GIT_WORK_TREE": str(worktree), "GIT_DIR": str(repo.git_dir)}

        def git(*args: str, check: bool = True, input: bytes | None = None) -> list[str]:
            proc = repo._run((*_STRICT, *args), worktree, input, check, env)
            return [p for p in proc.stdout.decode(errors="replace").split("\0") if p]

        index_at(repo, env, worktree, sha)
        entries = git("ls-files", "-s", "-z")
        linked = [e.split("\t", 1)[1] for e in entries if e.startswith("120000 ")]
        links = [e.split("\t", 1)[1] for e in entries if e.startswith("160000 ")]
        if links:
            return [f"{p} (submodule)" for p in links[:limit]]
        converted = _converted(git, [e.split("\t", 1)[1] for e in entries])
        if converted:
            return converted[:limit]
        # every untracked path, ignored ones too (no --exclude-standard), folders collapsed
        found = git("ls-files", "-z", "--others", "--directory")
        git("update-index", "-q", "--refresh", check=False)
        found += git("diff-files", "-z", "--name-only")
    return (sorted(set(found))[:limit] or _leaving(worktree, linked)[:limit]
            or _dot_git(worktree, limit))


def _leaving(worktree: Path, links: list[str]) -> list[str]:
    """The tracked symbolic links (read in ``worktree``, which equals the commit by now) whose
    relative target climbs out of the tree: it names other files beside the worktree than
    beside a clone. An absolute target names the same file from both."""
    found = []
    for rel in links:
        target = os.readlink(worktree / rel)
        if os.path.isabs(target):
            continue
        if os.path.normpath(os.path.join(os.path.dirname(rel), target)).split(os.sep)[0] == "..":
            found.append(f"{rel} (symbolic link out of the tree)")
    return sorted(found)


def _converted(git: Callable[..., list[str]], paths: list[str]) -> list[str]:
    """``paths`` a checkout writes converted, each "path (checkout converts: attr)"; with
    ``core.autocrlf`` true or ``core.eol=crlf`` every text file may be, so one entry says so.
    Attributes are read from the candidate's tree (the temporary index), as a clone reads them."""
    # both settings in one process; git's value is the last one it reads
    said = dict(e.lower().split("\n", 1) for e in git(
        "config", "-z", "--get-regexp", r"^core\.(autocrlf|eol)$", check=False) if "\n" in e)
    if said.get("core.autocrlf", "").strip() == "true" or \
            said.get("core.eol", "").strip() == "crlf":
        return ["(checkout converts: core.autocrlf/core.eol in the configuration)"]
    if not paths:
        return []
    out = git("check-attr", "-z", "--cached", "--stdin", *_CONVERTING,
              input="\0".join(paths).encode())
    found: dict[str, str] = {}
    for path, attr, value in zip(out[0::3], out[1::3], out[2::3], strict=True):
        if value == "unspecified" or value == "unset" or (attr == "eol" and value != "crlf"):
            continue
        found.setdefault(path, attr)
    return [f"{p} (checkout converts: {a})" for p, a in sorted(found.items())]


def _dot_git(worktree: Path, limit: int) -> list[str]:
    """Paths named ``.git`` below the top of ``worktree`` (the top's own is the worktree's
    link to its repository): git skips them, a clone cannot have them, code can read them."""
    found = []
    for rel, e in treewalk.entries(worktree, descend=lambda _r, e: e.name != ".git"):
        if e.name == ".git" and "/" in rel:
            found.append(rel)
            if len(found) >= limit:
                break
    return sorted(found)[:limit]


@dataclass
class HermeticPlan:
    """The hermetic gate's runs (``hermetic-1`` … ``hermetic-N``, the random-order run with
    its seed) and what is not run by configuration."""

    runs: list[Planned]
    not_run: list[str]


def hermetic_plan(ctx: GateContext) -> HermeticPlan:
    """The hermetic runs ``[gates]`` asks for, each with the packet's hidden files as its own."""
    n = ctx.config.gates.hermetic_runs
    plan = [Planned(f"hermetic-{i}", slot=i - 1) for i in range(1, n + 1)]
    not_run = []
    if ctx.config.gates.hermetic_random_order:
        plan.append(Planned("hermetic-random", seed=random.SystemRandom().randrange(1, 2**31),
                            slot=n))
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
