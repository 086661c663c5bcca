"""Independent test runs at the same time: up to ``[test] jobs`` lanes, each in a fresh clone.

A gate that repeats runs (``hermetic``: ``hermetic_runs`` + the random-order run; ``flaky``:
its random orders) plans them as a list and deals it into *lanes*: consecutive runs share one
lane, a lane runs its runs one after the other in a clone of its own. Every lane holds at
least two runs, so a test that fails only when it runs a second time in the same clone (it
leaves a file behind) is still caught; so there are at most ``len(plan) // 2`` lanes, and never
more than ``jobs``. With one lane nothing changes: the runs happen here, in order.

With two or more lanes each lane is a process of its own, forked from this one (forked.py),
not a thread. A test run's leftovers are swept by the process that started it
(contain/procgroup.py: every child of this process started after the run began is the run's);
two runs started from one process would sweep each other's pytest. In its own process a lane
is its own child subreaper and sweeps only its own runs. Forked rather than started afresh:
a new interpreter importing andon cost about 0.4 CPU-seconds per lane, four lanes per attempt,
and a forked lane already holds the configuration and the import-origin answers. Temp
HOME/TMPDIR, the JUnit report and the verdict channel are made per run (runners/pytest.py);
evidence files are named after the run, whose names are unique within a gate; canaries go
into the lane's own clone.

A lane stops after a run that is not clean (no usable report, a forged report, a failed or
erroring test): the gate judges the runs made, in plan order, and the first failure decides.
"""

from __future__ import annotations

import base64
import math
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .. import forked, tempdir
from ..config import Config
from ..contain import forkpool
from ..contain.channel import plan as plan_start
from ..errors import InvalidArgument
from ..runners.pytest import SuiteRun, harness_args, harness_env, resolved_command
from .base import GateContext, fresh_clone, run_project_suite


@dataclass
class Planned:
    """One run of a plan: its evidence name, selection and shuffle seed, and its slot (its
    place among the plan's repeated runs: each slot has a fork server, so a hash seed, of its
    own; see runners/pytest.py ``run_suite``)."""

    name: str
    select: list[str] | None = None
    seed: int | None = None
    own_files: list[str] = field(default_factory=list)
    slot: int = 0


def ready_servers(command: Sequence[str], plugins: Sequence[str],
                  runs: Sequence[tuple[int, bool]], wait: bool = True) -> None:
    """Start, and wait for (unless not ``wait``), the fork servers runs of ``command`` will be
    forked from — one per ``(slot, shuffled)`` of ``runs`` — so that the lanes forked next
    borrow them (and this process keeps them for its next gate) instead of each lane starting
    its own. A server that cannot start is left to the run, which then starts fresh and says
    why."""
    start = plan_start(resolved_command(command))
    if start.interpreter is None:
        return
    home = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
    try:
        env = harness_env(home, (), None, flags_in_env=False)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    (forkpool.ready_all if wait else forkpool.start_all)(start.interpreter, env, [
        ([*start.args, *harness_args(home, plugins, "normal", 1 if shuffled else None)], slot)
        for slot, shuffled in runs])


def servers_of_an_attempt(config: Config) -> list[tuple[int, bool]]:
    """The ``(slot, shuffled)`` fork servers an attempt's red and hermetic runs (the suite
    gate's among them) are forked from under ``config``: a slot per repeated run, and the
    random-order run's after the hermetic ones."""
    gates = config.gates
    runs = {(slot, False) for slot in range(max(gates.red_runs, gates.hermetic_runs, 1))}
    if gates.hermetic_random_order:
        runs.add((gates.hermetic_runs, True))
    return sorted(runs)


def jobs(config: Config) -> int:
    """``[test] jobs``, or the cores this process may use."""
    if config.test.jobs:
        return config.test.jobs
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return counted() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


def deal(plan: list[Planned], lanes: int) -> list[list[Planned]]:
    """``plan`` in consecutive chunks, one per lane, each of at least two runs (one lane for
    a plan of fewer than four)."""
    n = max(1, min(lanes, len(plan) // 2))
    size = math.ceil(len(plan) / n)
    return [plan[i:i + size] for i in range(0, len(plan), size)]


def clean(run: SuiteRun) -> bool:
    """No reason yet to stop the lane: a usable, unforged report with no failure or error."""
    return not (run.report_problem or run.forged
                or any(r.outcome in ("failed", "error") for r in run.results.values()))


def _kwargs(ctx: GateContext, p: Planned, agent_code: bool) -> dict:
    # GateContext.suite's arguments, spelt out so that a lane process can take them
    common = {"select": p.select, "seed": p.seed, "slot": p.slot,
              "env_digest": ctx.env_digest, "readonly": ctx.fenced()}
    if not agent_code:
        return common
    planted = ctx.planted_tests()
    return {**common, "canaries": planted, "own_files": [*planted, *p.own_files]}


def run_lanes(ctx: GateContext, lanes: list[tuple[Path, list[Planned]]], agent_code: bool,
              stop: Callable[[SuiteRun], bool] | None = None) -> dict[str, SuiteRun]:
    """Run each lane's plan in its clone; lanes at the same time when there are several.
    With one lane, ``stop(run)`` true ends it after ``run``; with several (each judged in
    its own process), any ``stop`` means: end a lane after a run that is not ``clean``.
    Returns the runs made, by name.

    Raises RuntimeError (with the lane's traceback) when a lane process fails: a harness error,
    never a verdict; InvalidArgument when two lanes have a run of the same slot (and order), which
    would share one fork server's socket: the answer to one lane's request can be read by the
    other, and the first then waits out forkserver.ANSWER_TIMEOUT_S."""
    if len(lanes) == 1:
        cwd, plan = lanes[0]
        out: dict[str, SuiteRun] = {}
        for p in plan:
            r = run_project_suite(ctx.config, cwd, ctx.evidence_dir, p.name,
                                  **_kwargs(ctx, p, agent_code))
            if agent_code:
                ctx.check_wrappers(r, cwd)
            out[r.name] = r
            if stop is not None and stop(r):
                break
        return out
    owner: dict[tuple[int, bool], int] = {}
    for i, (_, plan) in enumerate(lanes):
        for p in plan:
            if owner.setdefault((p.slot, p.seed is not None), i) != i:
                raise InvalidArgument(f"run {p.name!r} has slot {p.slot}, as a run of another "
                                      "lane")
    children: list[forked.Child] = []
    try:
        # the lanes borrow this process's fork servers, one per slot of the plan (distinct)
        if ctx.config.test.fork_server:
            ready_servers(ctx.config.test_argv(), ctx.config.test.plugins,
                          [(p.slot, p.seed is not None) for _, plan in lanes for p in plan])
        with forkpool.lending():
            for cwd, plan in lanes:
                children.append(forked.start(
                    partial(_lane, ctx.config, ctx.evidence_dir, cwd,
                            [(p.name, _kwargs(ctx, p, agent_code)) for p in plan],
                            stop is not None),
                    close=[c.fd for c in children]))
        out = {}
        for i in range(len(lanes)):
            ended = forked.collect(children[0])
            del children[0]  # reaped: its pid may be another process's from now on
            if "error" in ended:
                why = ended.get("traceback") or ended["error"]
                raise RuntimeError(f"test lane {i + 1} failed: {why[-2000:]}")
            for r in pickle.loads(base64.b64decode(ended["value"])):
                if agent_code:
                    ctx.check_wrappers(r, lanes[i][0])
                out[r.name] = r
        return out
    finally:
        for child in children:
            forked.kill(child)  # those not collected: a result not read, or a lane failed


def _lane(config: Config, evidence_dir: Path, cwd: Path, runs: list[tuple[str, dict]],
          stop_unclean: bool) -> str:
    # in the forked lane: its runs one after the other, the SuiteRuns pickled, through the
    # lane's result pipe (forked.py) — not a file: the code under test can list the harness's
    # temporary folder, and a FIFO or a link in a result file's place would hang or be written
    # through
    made = []
    for name, kwargs in runs:
        r = run_project_suite(config, cwd, evidence_dir, name, **kwargs)
        made.append(r)
        if stop_unclean and not clean(r):
            break
    return base64.b64encode(pickle.dumps(made)).decode("ascii")


def red_runs(ctx: GateContext, home: Path, tests: list[str], n: int,
             at_the_same_time: bool) -> list[SuiteRun]:
    """The red gate's ``n`` runs of ``tests`` (``red-1`` … ``red-n``, in that order;
    ``red-atdd-1`` … after an atdd stage, whose tests red judges again). One
    after the other in ``home`` (the worktree, or a clone of the commit red judges while the
    worktree is made), unless ``at_the_same_time`` (``home`` holds exactly that commit: no
    agent has run in it), ``n`` ≥ 3 and ``jobs`` > 1: then the first ``n - 1`` runs stay one
    after the other in ``home`` (a planted test that turns green on its second run in the
    same tree is still seen) while ``red-n`` runs at the same time in a fresh clone of that
    commit (its own interpreter, hash seed and fresh tree, as any run's). A lane that is not
    clean does not stop: red judges every run."""
    # red runs again after an atdd stage, in the same attempt: its own names, so the first
    # red's evidence files (hashed in the record) are never written over
    stem = "red-atdd" if ctx.atdd_sha else "red"
    if not at_the_same_time or n < 3 or jobs(ctx.config) < 2:
        return [ctx.suite(home, f"{stem}-{i}", select=tests, slot=i - 1)
                for i in range(1, n + 1)]
    tip = ctx.atdd_sha or ctx.plant_sha
    here = [Planned(f"{stem}-{i}", select=tests, slot=i - 1) for i in range(1, n)]
    with fresh_clone(ctx.repo, tip, f"red-{ctx.packet.id}") as cwd:
        made = run_lanes(ctx, [(home, here),
                               (cwd, [Planned(f"{stem}-{n}", select=tests, slot=n - 1)])],
                         agent_code=False)
    return [made[f"{stem}-{i}"] for i in range(1, n + 1)]
