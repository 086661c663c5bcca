#!/usr/bin/env python3
"""andon's own time per packet, next to the time of the suite runs its gates need.

Generates a repository of a few hundred files (``--modules`` modules, default 300, in 10
packages under ``src/genproj``, plus one small test file per package that imports every module
of it: a fast suite), and ``--packets`` packets (default 5), each planting a two-test file for a
function that does not exist yet. The agent is instant: an in-process ``ScriptedAgent`` that
appends the precomputed function. One in-process ``Runner.run()`` drains the queue, as
``andon run`` would.

Per packet (``Runner._attempt``, claim to merge, timed with ``perf_counter``):

- total: wall time of the attempt;
- suites: the sum of ``duration_s`` of every suite run the gates made (red-*, suite,
  hermetic-*, and preflight or a merge re-check if one happens inside the attempt), as recorded
  in the gate evidence in the store;
- overhead = total - suites: everything andon does around the project's tests.

The run's one-off cost (loading packets, preflight with its suite run, store set-up) is shown
on its own line. The overhead is broken down into git subprocesses (by subcommand), the
harness's work around each suite run (temp HOME, JUnit parsing), the agent, and the rest.
Where the platform has ``pidfd_open``, it also measures how late the harness notices that a
suite process has exited (it polls): that lag is inside the suites' ``duration_s``.

``--profile`` profiles one more packet with cProfile and prints the top entries by cumulative
time to stderr. Exits 0 (a measurement); says clearly when the aim is missed (< 1 s per
packet on the few-hundred-file repository, < 1.5 s at 6,000 files and more).

The generated repository is in the system temp dir (a user's checkout is on their disk);
the trees only the harness reads (gate clones, test runs' HOME and TMPDIR) go where
``[andon] temp_dir`` puts them (``--temp-dir``, default "auto" as in andon.toml;
``andon.tempdir``), as ``andon run`` does, and the line above the table says where and why,
with the cost of creating a file there.

``--small-too`` first measures the 335-file repository in the same run (same load), for the
ratio of the large repository's overhead to the small one's.

Run: ``.venv/bin/python benchmarks/overhead.py [--packets 5] [--modules 300] [--profile]
[--small-too]``
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import io
import json
import os
import pstats
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from andon import reaper, tempdir, worktree_build
from andon.agents import ScriptedAgent, StageContext
from andon.config import load_config
from andon.contain import envprint
from andon.git.repo import Repo
from andon.runner import Runner
from andon.runners import pytest as testrun
from andon.state import open_store

AIM_S = 1.0  # per packet, on the few-hundred-file repository
LARGE_AIM_S = 1.5  # per packet at 6,000 files and more (issue 18)
LARGE_FILES = 6000
SMALL_FIGURE_S = 0.62  # overhead per packet, 335 files, issue 18 (before its changes)
# the system temp dir before tempdir.use() moves andon's trees: the generated repositories
# stand for a user's checkout, which is on their disk
SYSTEM_TMP = tempfile.gettempdir()
PACKAGES = 10
GIT_ENV = {"GIT_AUTHOR_NAME": "Benchmark", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Benchmark", "GIT_COMMITTER_EMAIL": "bench@example.com"}

MODULE = '''\
"""Generated module {pkg}.{mod}."""


def scale_{i}(x):
    return x * {k}


def offset_{i}(x):
    return x + {k}


def describe_{i}(x):
    if x < 0:
        return "negative"
    return "{mod}:" + str(scale_{i}(x))


class Box{i}:
    def __init__(self, value):
        self.value = value

    def grow(self):
        return Box{i}(offset_{i}(self.value))
'''

PACKAGE_TEST = '''\
import importlib

import pytest

MODULES = {mods!r}


@pytest.mark.parametrize("name", MODULES)
def test_module(name):
    m = importlib.import_module("genproj.{pkg}." + name)
    i = int(name[3:])
    assert getattr(m, f"scale_{{i}}")(2) == 2 * (i % 7 + 1)
    assert getattr(m, f"Box{{i}}")(1).grow().value == 1 + i % 7 + 1
'''

FEATURE_TEST = '''\
from genproj.{pkg} import {mod}


def test_feature_{n}():
    assert {mod}.feature_{n}([3, 1, 2]) == [1, 2, 3, {n}]


def test_feature_{n}_empty():
    assert {mod}.feature_{n}([]) == [{n}]
'''

FEATURE_CODE = '''

def feature_{n}(items):
    return sorted(items) + [{n}]
'''

PACKET = '''\
+++
id = "{pid}"
slug = "feature-{n}"
goal = "genproj.{pkg}.{mod}.feature_{n} sorts its items and appends {n}."
allowed_paths = ["src/genproj/**"]
+++

## Context

A generated packet for the overhead benchmark.
'''


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})


def generate(root: Path, modules: int, packets: int, suite_imports: int | None = None,
             python: str = sys.executable) -> dict[str, tuple[str, str, int]]:
    """Write and commit the project; return packet id -> (package, module, n). Each
    package's test file imports its first ``suite_imports`` modules (None: all of them), so
    a large repository can have a quick suite. ``python``: the tests' interpreter."""
    per = max(1, modules // PACKAGES)
    files: dict[str, str] = {
        ".gitignore": "__pycache__/\n*.pyc\n",
        "README.md": "# genproj\n\nGenerated for andon's overhead benchmark.\n",
        "pyproject.toml": '[project]\nname = "genproj"\nversion = "0"\n',
        "src/genproj/__init__.py": "",
        # worktrees where andon puts them by default: in its temp dir (--temp-dir)
        "andon.toml": f'[test]\ncommand = ["{python}", "-m", "pytest"]\n'
                      # one run at a time: overhead = wall - the suites' summed durations only
                      # holds when runs do not overlap, and lane processes (jobs > 1) would
                      # escape this process's timers
                      'pythonpath = ["src"]\njobs = 1\n',
    }
    i = 0
    for p in range(PACKAGES):
        pkg = f"pkg{p:02d}"
        files[f"src/genproj/{pkg}/__init__.py"] = ""
        mods = []
        for _ in range(per):
            mod = f"mod{i:03d}"
            files[f"src/genproj/{pkg}/{mod}.py"] = MODULE.format(pkg=pkg, mod=mod, i=i,
                                                                 k=i % 7 + 1)
            mods.append(mod)
            i += 1
        files[f"tests/test_{pkg}.py"] = PACKAGE_TEST.format(pkg=pkg, mods=mods[:suite_imports])
    plan = {}
    for n in range(1, packets + 1):
        pid = f"P{n:02d}"
        pkg = f"pkg{(n - 1) % PACKAGES:02d}"
        mod = f"mod{((n - 1) % PACKAGES) * per:03d}"
        plan[pid] = (pkg, mod, n)
        d = f"packets/{pid}-feature-{n}"
        files[f"{d}/packet.md"] = PACKET.format(pid=pid, n=n, pkg=pkg, mod=mod)
        files[f"{d}/plant/tests/test_feature_{n}.py"] = FEATURE_TEST.format(pkg=pkg, mod=mod,
                                                                            n=n)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "generated project")
    return plan


# -- instruments ----------------------------------------------------------------------------

class Meter:
    """Patches a few seams in-process: git subprocesses, suite runs, the harness's wait."""

    def __init__(self) -> None:
        self.git: dict[str, list[float]] = defaultdict(list)
        self.suite_calls: list[tuple[str, float, float]] = []  # name, duration_s, call wall
        self.lags: list[float] = []
        self.deletions: list[float] = []  # seconds per tree deleted by andon.reaper's thread
        self.walks: list[float] = []  # seconds per fingerprint of the tests' environment
        # seconds the attempt waited for its worktree after red (worktree_build.py: a forked
        # process writes it beside red's runs, so its git is not in self.git)
        self.worktree_waits: list[float] = []
        # every git process this interpreter started, through Repo._run or not (guard's
        # config reads, scope's cat-file --batch): one entry each
        self.git_procs: list[str] = []
        self._patches: list[tuple[object, str, object]] = []

    def install(self) -> None:
        meter = self
        orig_run = Repo._run

        def git_run(self, args, *a, **kw):
            t0 = time.perf_counter()
            try:
                return orig_run(self, args, *a, **kw)
            finally:
                args = list(args)
                while args[:1] == ["-c"]:  # git's own options (worktrees.PARALLEL_CHECKOUT)
                    args = args[2:]
                words = [x for x in args if not x.startswith("-")]
                sub = " ".join(words[:2]) if words[:1] == ["worktree"] else \
                    (words[0] if words else "?")
                if sub == "clone":  # the worktree's and the gates' clones apart
                    sub += " --shared" if "--shared" in args else " --no-local"
                meter.git[sub].append(time.perf_counter() - t0)

        import andon.gates.base as gbase
        orig_suite = gbase.run_suite

        def run_suite(*a, **kw):
            t0 = time.perf_counter()
            r = orig_suite(*a, **kw)
            meter.suite_calls.append((r.name, r.duration_s, time.perf_counter() - t0))
            return r

        self._patch(Repo, "_run", git_run)
        orig_delete = reaper.delete_tree

        def delete_tree(path):
            t0 = time.perf_counter()
            try:
                return orig_delete(path)
            finally:
                meter.deletions.append(time.perf_counter() - t0)  # list.append: thread-safe

        self._patch(reaper, "delete_tree", delete_tree)
        orig_fingerprint = envprint.fingerprint

        def fingerprint(where):
            t0 = time.perf_counter()
            try:
                return orig_fingerprint(where)
            finally:
                meter.walks.append(time.perf_counter() - t0)

        self._patch(envprint, "fingerprint", fingerprint)
        orig_worktree_wait = worktree_build.WorktreeBuild.wait

        def worktree_wait(build):
            t0 = time.perf_counter()
            try:
                return orig_worktree_wait(build)
            finally:
                meter.worktree_waits.append(time.perf_counter() - t0)

        self._patch(worktree_build.WorktreeBuild, "wait", worktree_wait)
        self._patch(gbase, "run_suite", run_suite)
        orig_popen = subprocess.Popen.__init__

        def popen(proc, args, *a, **kw):
            if isinstance(args, (list, tuple)) and args and os.path.basename(args[0]) == "git":
                meter.git_procs.append(str(args[-1]))
            orig_popen(proc, args, *a, **kw)

        self._patch(subprocess.Popen, "__init__", popen)
        if hasattr(os, "pidfd_open"):
            orig_wait = testrun.wait_unreaped

            def wait(proc, timeout_s):
                # How late does the harness's polling notice the exit? A pidfd becomes
                # readable the moment the process exits.
                fd = os.pidfd_open(proc.pid)
                exited: list[float] = []
                th = threading.Thread(target=lambda: (select.select([fd], [], [], timeout_s),
                                                      exited.append(time.monotonic())),
                                      daemon=True)
                th.start()
                try:
                    result = orig_wait(proc, timeout_s)
                    noticed = time.monotonic()
                    th.join(1)
                    if exited:
                        meter.lags.append(max(0.0, noticed - exited[0]))
                    return result
                finally:
                    os.close(fd)

            self._patch(testrun, "wait_unreaped", wait)

    def _patch(self, owner: object, name: str, new: object) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def snapshot(self) -> tuple:
        return ({k: list(v) for k, v in self.git.items()}, len(self.suite_calls), len(self.lags),
                len(self.walks), len(self.git_procs), len(self.worktree_waits))

    def since(self, snap: tuple) -> dict:
        git0, n_suite, n_lag, n_walk, n_procs, n_wait = snap
        git = {k: v[len(git0.get(k, [])):] for k, v in self.git.items()}
        git = {k: v for k, v in git.items() if v}
        calls = self.suite_calls[n_suite:]
        return {"git": git, "git_s": sum(sum(v) for v in git.values()),
                "git_n": sum(len(v) for v in git.values()),
                "git_procs": len(self.git_procs) - n_procs,
                "suite_calls": calls,
                "suite_wrap_s": sum(wall - d for _, d, wall in calls),
                "lag_s": sum(self.lags[n_lag:]),
                "walk_s": sum(self.walks[n_walk:]), "walk_n": len(self.walks) - n_walk,
                "worktree_wait_s": sum(self.worktree_waits[n_wait:])}


# -- the measurement ------------------------------------------------------------------------

def instant_agent(plan: dict[str, tuple[str, str, int]]):
    def behaviour(ctx: StageContext) -> str:
        pkg, mod, n = plan[ctx.packet.id]
        path = ctx.worktree / "src" / "genproj" / pkg / f"{mod}.py"
        path.write_text(path.read_text() + FEATURE_CODE.format(n=n))
        return f"added feature_{n}"
    return ScriptedAgent(behaviour)


def instant_reviewer() -> ScriptedAgent:
    """Accepts at once with a verdict per invariant (the packets here name none): the review
    stage's harness work (export, manifest, validation) is measured, not a model."""
    def behaviour(ctx: StageContext) -> str:
        doc = json.dumps({"verdicts": [], "findings": [], "decision": "accept"})
        ctx.review_file.write_text(doc)
        return doc
    return ScriptedAgent(behaviour)


def measure(root: Path, plan: dict, meter: Meter, profile: str | None,
            temp_dir: str = "auto") -> dict:
    repo = Repo(root)
    config = load_config(root)
    trees = tempdir.use(repo, temp_dir)  # as `andon run` does before its runner exists
    store = open_store(repo)
    agent, reviewer = instant_agent(plan), instant_reviewer()
    runner = Runner(repo, config, store,
                    lambda p, stage: reviewer if stage.startswith("review") else agent,
                    echo=lambda s: None)
    rows: list[dict] = []
    orig_attempt = runner._attempt
    profiler = cProfile.Profile() if profile else None

    def attempt(packet):
        snap = meter.snapshot()
        prof = profiler if profile == packet.id else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        try:
            return orig_attempt(packet)
        finally:
            if prof:
                prof.disable()
            total = time.perf_counter() - t0
            rows.append({"id": packet.id, "total": total, "meter": meter.since(snap)})

    runner._attempt = attempt
    snap = meter.snapshot()
    t0 = time.perf_counter()
    report = runner.run()
    run_total = time.perf_counter() - t0
    outside = meter.since(snap)
    # Suite time per packet from the store: every run in every gate's evidence.
    for row in rows:
        atts = store.attempts(row["id"])
        runs = [r for a in atts for g in store.gate_results(a["id"])
                for r in g["evidence"].get("runs", [])]
        row["suites_store"] = sum(r["duration_s"] for r in runs)
        row["suites"] = sum(d for _, d, _ in row["meter"]["suite_calls"])  # incl. preflight
        row["runs"] = [n for n, _, _ in row["meter"]["suite_calls"]]
        row["agent"] = sum(s["duration_s"] for a in atts for s in store.stage_runs(a["id"]))
        row["state"] = store.packet(row["id"])["state"]
        row["attempts"] = len(atts)
    store.close()
    return {"rows": rows, "run_total": run_total, "outside": outside, "report": report,
            "profiler": profiler, "trees": trees}


def create_cost_us(where: Path, n: int = 2000) -> float:
    """Microseconds to create one empty file in a new folder under ``where`` (mean of ``n``,
    deleted afterwards). On a virtual machine this varies several-fold over minutes (the
    host's state, not andon's); a tree of 6,000 files is 6,000 such creations."""
    d = Path(tempfile.mkdtemp(dir=where))
    try:
        t0 = time.perf_counter()
        for i in range(n):
            (d / f"f{i}").touch()
        return (time.perf_counter() - t0) / n * 1e6
    finally:
        shutil.rmtree(d, ignore_errors=True)


def small_overhead(meter: Meter, packets: int, temp_dir: str, python: str
                   ) -> tuple[float, int]:
    """Mean overhead per packet (s) on the 335-file repository, and its file count."""
    tmp = Path(tempfile.mkdtemp(prefix="andon-overhead-small-", dir=SYSTEM_TMP))
    try:
        root = tmp / "genproj"
        root.mkdir()
        plan = generate(root, 300, packets, python=python)
        n_files = len(subprocess.run(["git", "ls-files"], cwd=root, capture_output=True,
                                     text=True, check=True).stdout.splitlines())
        rows = measure(root, plan, meter, None, temp_dir)["rows"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return statistics.fmean(r["total"] - r["suites"] for r in rows), n_files


def test_python(choice: str) -> tuple[str, Path | None]:
    """The tests' interpreter for ``--test-python`` and the folder to delete afterwards."""
    if choice == "andon":
        return sys.executable, None
    if choice != "lean":
        return choice, None
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from project_python import build_project_python
    where = Path(tempfile.mkdtemp(prefix="overhead-python-", dir=SYSTEM_TMP))
    return str(build_project_python(where / "venv")), where


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=5)
    ap.add_argument("--modules", type=int, default=300)
    ap.add_argument("--profile", action="store_true",
                    help="also profile one extra packet with cProfile (top 10 to stderr)")
    ap.add_argument("--profile-out", metavar="FILE",
                    help="with --profile: also write the whole profile there (pstats format: "
                         "python -m pstats FILE)")
    ap.add_argument("--keep", action="store_true", help="keep the generated repository")
    ap.add_argument("--suite-imports", type=int, default=None, metavar="N",
                    help="each package's test file imports only its first N modules (default: "
                         "all): a large repository with a suite small enough to run quickly")
    ap.add_argument("--small-figure", type=float, default=SMALL_FIGURE_S, metavar="S",
                    help="overhead per packet on the 335-file repository (--modules 300), "
                         f"for the ratio printed at the end (default {SMALL_FIGURE_S}: "
                         "issue 18's figure; measure it under the same load for a fair ratio)")
    ap.add_argument("--temp-dir", default="auto", metavar="auto|system|PATH",
                    help="[andon] temp_dir for the runs: where andon puts its trees (default "
                         "auto, as in andon.toml; system: the system temp dir)")
    ap.add_argument("--test-python", default="lean", metavar="lean|andon|PATH",
                    help="the tests' interpreter: lean (default: a venv with pytest only, "
                         "built here as the test suite builds its projects'), andon (this "
                         "interpreter, andon's own .venv with its test extras) or a path")
    ap.add_argument("--small-too", action="store_true",
                    help="first measure the 335-file repository (--modules 300, same packets) "
                         "in this run, under the same load, and take the ratio to that")
    args = ap.parse_args()

    python, venv_dir = test_python(args.test_python)
    if venv_dir is not None:
        atexit.register(shutil.rmtree, venv_dir, True)
    env_entries = len(envprint.fingerprint(envprint.layout(python, ())))
    meter = Meter()
    meter.install()
    small_line = ""
    if args.small_too:
        small, small_files = small_overhead(meter, args.packets, args.temp_dir, python)
        args.small_figure = small
        small_line = (f"measured first in this run: {small_files} files, overhead "
                      f"{small:.2f} s per packet (mean of {args.packets})")
    tmp = Path(tempfile.mkdtemp(prefix="andon-overhead-", dir=SYSTEM_TMP))
    root = tmp / "genproj"
    root.mkdir()
    n_packets = args.packets + (1 if args.profile else 0)
    plan = generate(root, args.modules, n_packets, args.suite_imports, python)
    n_files = len(subprocess.run(["git", "ls-files"], cwd=root, capture_output=True,
                                 text=True, check=True).stdout.splitlines())
    load_before = os.getloadavg()[0]
    profiled = sorted(plan)[-1] if args.profile else None
    create_before = create_cost_us(tmp)
    try:
        res = measure(root, plan, meter, profiled, args.temp_dir)
        create_after = create_cost_us(tmp)
        trees = res["trees"]
        trees_cost = create_cost_us(trees.path)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    rows = res["rows"]
    timed = [r for r in rows if r["id"] != profiled]

    print(f"generated repository: {n_files} files ({args.modules} modules in {PACKAGES} "
          f"packages, {PACKAGES} test files), {len(timed)} packets, instant in-process agent; "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average "
          f"{load_before:.2f} before / {os.getloadavg()[0]:.2f} after (other work on the "
          f"machine inflates every figure)")
    print(f"creating an empty file in the temp dir: {create_before:.0f} us before, "
          f"{create_after:.0f} us after (2,000 files; 20-40 us on a quiet disk here, "
          f"several hundred in this machine's slow spells: each packet writes its worktree, "
          f"its gate clone and its review export, about {3 * n_files:,} files)")
    print(f"the gate clones and test runs' scratch went to {trees.path} ({trees.why}; "
          f"--temp-dir {args.temp_dir}; worktrees and review exports stay in the system temp "
          f"dir): "
          f"{trees_cost:.0f} us per empty file there after the run")
    head = (f"{'packet':<7}{'state':<7}{'total s':>9}{'suites s':>10}{'overhead s':>12}"
            f"{'git s':>8}{'git calls':>10}{'around suites s':>17}{'agent s':>9}  suite runs")
    print(head)
    for r in timed:
        m = r["meter"]
        print(f"{r['id']:<7}{r['state']:<7}{r['total']:>9.2f}{r['suites']:>10.2f}"
              f"{r['total'] - r['suites']:>12.2f}{m['git_s']:>8.2f}{m['git_n']:>10}"
              f"{m['suite_wrap_s']:>17.2f}{r['agent']:>9.3f}  {len(r['runs'])}: "
              f"{', '.join(r['runs'])}")
    mean = lambda xs: statistics.fmean(xs) if xs else 0.0  # noqa: E731
    over = mean([r["total"] - r["suites"] for r in timed])
    suites = mean([r["suites"] for r in timed])
    git_s = mean([r["meter"]["git_s"] for r in timed])
    wrap_s = mean([r["meter"]["suite_wrap_s"] for r in timed])
    agent_s = mean([r["agent"] for r in timed])
    lag_s = mean([r["meter"]["lag_s"] for r in timed])
    walk_s = mean([r["meter"]["walk_s"] for r in timed])
    walk_n = mean([r["meter"]["walk_n"] for r in timed])
    print(f"{'mean':<14}{mean([r['total'] for r in timed]):>9.2f}{suites:>10.2f}{over:>12.2f}"
          f"{git_s:>8.2f}{mean([r['meter']['git_n'] for r in timed]):>10.0f}{wrap_s:>17.2f}"
          f"{agent_s:>9.3f}")

    mismatch = [r["id"] for r in timed if abs(r["suites"] - r["suites_store"]) > 0.01
                and "preflight" not in r["runs"]]
    if mismatch:
        # a check of this script's meter, not of andon: the overhead column subtracts the
        # runs this process saw; a run it did not see (made in a forked lane) is in the store
        diffs = ", ".join(f"{r['id']} {r['suites_store'] - r['suites']:+.2f} s" for r in timed
                          if r["id"] in mismatch)
        print(f"note: the store's runs (their duration_s) minus the suite seconds seen in this "
              f"process, which the overhead column subtracts: {diffs}. A positive difference is "
              f"run time counted as overhead above, a negative one runs this process saw that "
              f"no gate's evidence holds")
    else:
        print("(suite times above agree with the duration_s of the runs in the store's gate "
              "evidence)")
    # The run's one-off work: everything run() did outside the attempts.
    out = res["outside"]
    in_attempts = sum(r["total"] for r in rows)
    once_suites = sum(d for n, d, _ in out["suite_calls"]) - sum(r["suites"] for r in rows)
    print(f"once per `andon run`, outside the attempts: "
          f"{res['run_total'] - in_attempts:.2f} s, of which preflight suite "
          f"{once_suites:.2f} s (cached by tree on later runs)")
    procs = mean([r["meter"]["git_procs"] for r in timed])
    print(f"git processes: {procs:.0f} per packet (every one andon started, not only "
          f"Repo._run's 'git calls'), {out['git_procs']} in the whole run "
          f"({len(rows)} packets; git's own children not counted: "
          f"benchmarks/git_processes.py --children)")

    print("\nwhere the overhead goes (mean per packet):")
    per_sub: dict[str, list[float]] = defaultdict(list)
    for r in timed:
        for sub, ts in r["meter"]["git"].items():
            per_sub[sub].append(sum(ts))
    n = max(1, len(timed))
    for sub, ts in sorted(per_sub.items(), key=lambda kv: -sum(kv[1])):
        calls = sum(len(r["meter"]["git"].get(sub, [])) for r in timed) / n
        print(f"  git {sub:<16} {sum(ts) / n:6.3f} s  ({calls:.0f} calls)")
    print(f"  around each suite run (temp HOME, JUnit parse)  {wrap_s:6.3f} s")
    print(f"  agent                                           {agent_s:6.3f} s")
    print(f"  the tests' environment, fingerprinted           {walk_s:6.3f} s  ({walk_n:.0f} "
          f"walks of {env_entries:,} entries: {python}; contain/envprint.py)")
    wt_s = mean([r["meter"]["worktree_wait_s"] for r in timed])
    print(f"  waiting for the worktree after red              {wt_s:6.3f} s  (a forked process "
          f"writes it while red runs: worktree_build.py; its git is not counted above)")
    print(f"  the rest (store, packets, prompt, Python)       "
          f"{over - git_s - wrap_s - agent_s - walk_s - wt_s:6.3f} s")
    if meter.deletions:
        print(f"  (not in the overhead: deleting the trees andon was done with took "
              f"{sum(meter.deletions) / max(1, len(rows)):.3f} s per packet in the "
              f"background, {len(meter.deletions)} trees in all, andon.reaper)")
    if meter.lags:
        print(f"  (not in the overhead but inside the suites' time: the harness noticed a "
              f"suite process's exit {statistics.fmean(meter.lags) * 1000:.0f} ms late on "
              f"average, {lag_s:.3f} s per packet)")

    if res["profiler"] is not None:
        s = io.StringIO()
        stats = pstats.Stats(res["profiler"], stream=s)
        if args.profile_out:
            stats.dump_stats(args.profile_out)
        stats.sort_stats("cumulative").print_stats(10)
        s.write("\nand by own time (where the wall clock is actually spent):\n")
        stats.sort_stats("tottime").print_stats(10)
        print(f"\ncProfile of packet {profiled} (extra packet, not in the table), top 10 "
              f"by cumulative time:\n{s.getvalue()}", file=sys.stderr)

    failed = [r["id"] for r in rows if r["state"] != "done"]
    if failed:
        print(f"\nWARNING: not merged: {', '.join(failed)} — the figures are not comparable")
    median = statistics.median([r["total"] - r["suites"] for r in timed]) if timed else 0.0
    print(f"\noverhead (median {median:.2f} s, range "
          f"{min(r['total'] - r['suites'] for r in timed):.2f}-"
          f"{max(r['total'] - r['suites'] for r in timed):.2f} s)")
    aim = LARGE_AIM_S if n_files >= LARGE_FILES else AIM_S
    print(f"overhead: {over:.2f} s per packet excluding suites (target < {aim:g} s at "
          f"{n_files:,} files); suites {suites:.2f} s per packet")
    if small_line:
        print(small_line)
    print(f"ratio to the 335-file figure ({args.small_figure:.2f} s per packet): "
          f"{over / args.small_figure:.1f}x for {n_files} files")
    if over >= aim:
        print(f"AIM MISSED: harness overhead {over:.2f} s per packet is not under {aim:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
