#!/usr/bin/env python3
"""Time to drain a queue with 1, 2 and 4 workers (``andon run --workers N``) on one machine.

Builds a small project (``src/calc`` with two tests) and ``--packets`` packets (default 100),
each adding its own module ``src/calc/mod_<id>.py`` and planting a one-test file for it: no
two packets touch the same file, so none conflicts. The agent is instant (an in-process
``ScriptedAgent`` writing the module); the review stage is off (``stages = ["implement"]``)
and the gates run once each (one red run, one hermetic run, no random-order run), so what is
timed is andon and the project's suite. For each worker count a fresh copy of the project and
a fresh store drain the whole queue through one ``Runner.run()``: SQLite, and with ``--pg``
PostgreSQL too (a throwaway cluster from tests/pgcluster.py, a fresh schema per run).

Per worker count it prints: wall time, speed-up against one worker, packets per minute, and
where the time went, from the store: the sum over attempts of their suite runs
(``duration_s`` of every gate's test run, merge checks included) and of the agent's time,
next to the wall time multiplied by the workers (the worker-seconds available); what is
left of those, per packet done, is andon's own work (clones, git, the environment walks,
the store) and waiting (the merge lock, a free core); and the 1-minute load average before
and after the drain (the machine is shared: read figures with it). A closing note says what
bounds the speed-up on this machine (``os.cpu_count()``).

Per-claim overhead: the dispatcher's time inside :func:`andon.workers.claim_next` (the
store's leased claim plus the attempt's first rows), averaged per claim, for each backend
(one SQLite worker claims without the pool: no claims there); with ``--pg`` a last line
sets PostgreSQL's mean against SQLite's.

The packets are tests/test_workers.py's ``mod_packet`` and its ``honest`` agent (one place
for the queue the tests and this benchmark share).

``--where`` adds, for each one-worker drain (in-process: its children are the attempt's
processes), the CPU seconds per packet by kind: the test runs (and the few interpreter
probes), git clones and checkouts, other git commands, the walks of the tests' environment
(contain/envprint.py) and the rest of andon's Python. CPU seconds do not depend on how
many other jobs share the cores; the wall time does.

Run: ``.venv/bin/python benchmarks/workers.py [--packets 100] [--workers 1,2,4] [--pg]
[--where]``
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_workers import honest, mod_packet

import andon.git.repo
from andon import workers as pool
from andon.contain import envprint

from helpers import config_toml, make_project, runner_for

CLAIMS = {"n": 0, "s": 0.0}  # the dispatcher's claims: how many, seconds inside them
_claim_next = pool.claim_next


def _timed_claim(*args, **kwargs):
    t0 = time.perf_counter()
    try:
        return _claim_next(*args, **kwargs)
    finally:
        CLAIMS["n"] += 1
        CLAIMS["s"] += time.perf_counter() - t0


pool.claim_next = _timed_claim

# --where: CPU seconds by kind, in the process that drains (one worker works in-process)
CPU: dict[str, float] = {}


def _children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _count(kind: str, own: float, children: float) -> None:
    CPU[kind + " (andon)"] = CPU.get(kind + " (andon)", 0.0) + own
    CPU[kind] = CPU.get(kind, 0.0) + children


def _cpu_of(kind_of, fn):
    def timed(*args, **kwargs):
        own, kids = time.process_time(), _children()
        try:
            return fn(*args, **kwargs)
        finally:
            _count(kind_of(*args, **kwargs), time.process_time() - own, _children() - kids)
    return timed


def _git_kind(_repo, args, *rest, **kw) -> str:
    name = next((a for a in args if not a.startswith("-") and "=" not in a), "?")
    return "git clone/checkout" if name in ("clone", "checkout") else "git, other commands"


def where_on() -> None:
    """Count CPU time by kind from here on: git processes (clones and checkouts apart),
    the walks of the tests' environment; the rest of the children's is the test runs (and
    the few interpreter probes), the rest of this process's is andon's Python."""
    andon.git.repo.Repo._run = _cpu_of(_git_kind, andon.git.repo.Repo._run)  # type: ignore[method-assign]
    envprint.fingerprint = _cpu_of(lambda *a: "environment walks", envprint.fingerprint)


def where_table(packets: int, own: float, children: float) -> None:
    git_kids = sum(v for k, v in CPU.items() if k.startswith("git") and "(andon)" not in k)
    walks = CPU.get("environment walks (andon)", 0.0)
    rows = {**{k: v for k, v in CPU.items() if not k.endswith("(andon)")},
            "environment walks": walks,
            "test runs and other child processes": children - git_kids,
            "andon's own Python (the rest)": own - sum(
                v for k, v in CPU.items() if k.endswith("(andon)"))}
    rows.pop("environment walks (andon)", None)
    print(f"where the CPU goes, one worker, per packet ({packets} packets, "
          f"{own + children:.1f} CPU s in all):")
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<40} {v / packets:6.2f} s")


def packet(i: int) -> tuple[str, dict[str, str]]:
    return mod_packet(f"P{i:03d}", stages=["implement"])


def drain(where: Path, packets: int, workers: int) -> dict:
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         worktree_root=where / "worktrees")
    root = make_project(where / "repo", {f"P{i:03d}": packet(i) for i in range(packets)},
                        config=config)
    runner = runner_for(root, honest)
    runner.workers = workers
    CLAIMS.update(n=0, s=0.0)
    CPU.clear()
    load0 = os.getloadavg()[0]
    own, kids = time.process_time(), _children()
    t0 = time.perf_counter()
    report = runner.run()
    wall = time.perf_counter() - t0
    own, kids = time.process_time() - own, _children() - kids
    load1 = os.getloadavg()[0]
    if workers == 1 and CPU:
        where_table(packets, own, kids)
    store = runner.store
    suites = agents = 0.0
    merge_checks = 0
    for p in store.packets():
        for a in store.attempts(p["id"]):
            for g in store.gate_results(a["id"]):
                runs = g["evidence"].get("runs", []) if isinstance(g["evidence"], dict) else []
                suites += sum(r.get("duration_s") or 0.0 for r in runs)
                merge_checks += g["gate"] == "merge"
            agents += sum(s["duration_s"] or 0.0 for s in store.stage_runs(a["id"]))
    done = sum(1 for p in store.packets() if p["state"] == "done")
    return {"workers": workers, "wall_s": wall, "done": done, "merged": len(report.merged),
            "exit": report.exit_status, "suites_s": suites, "agents_s": agents,
            "merge_checks": merge_checks, "claims": CLAIMS["n"], "claims_s": CLAIMS["s"],
            "load": (load0, load1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=100)
    ap.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    ap.add_argument("--pg", action="store_true",
                    help="also on PostgreSQL (a throwaway cluster: Debian's postgresql)")
    ap.add_argument("--where", action="store_true",
                    help="with one worker: CPU seconds per packet by kind (git, test runs...)")
    args = ap.parse_args()
    if args.where:
        where_on()
    counts = [int(w) for w in args.workers.split(",")]
    per_claim: dict[str, float] = {}
    cluster = None
    if args.pg:
        from pgcluster import Cluster, bindir

        bin_ = bindir()
        if bin_ is None:
            ap.error("--pg: PostgreSQL is not installed (/usr/lib/postgresql/*/bin)")
        cluster = Cluster(bin_)
    try:
        for backend in ["sqlite"] + (["postgresql"] if cluster else []):
            rows = []
            for n in counts:
                if cluster and backend == "postgresql":
                    os.environ["ANDON_STORE_URL"] = cluster.new_database()
                else:
                    os.environ.pop("ANDON_STORE_URL", None)
                with tempfile.TemporaryDirectory(prefix=f"bench-workers-{n}-") as tmp:
                    row = drain(Path(tmp), args.packets, n)
                rows.append(row)
                print(f"{backend}, {n} worker(s): {row['wall_s']:7.1f} s wall, "
                      f"{row['done']}/{args.packets} done (exit {row['exit']}), load "
                      f"{row['load'][0]:.1f} -> {row['load'][1]:.1f}",
                      file=sys.stderr, flush=True)
            per_claim[backend] = table(args.packets, backend, rows)
    finally:
        if cluster:
            cluster.destroy()
    if len(per_claim) == 2 and all(per_claim.values()):
        sq, pg = per_claim["sqlite"], per_claim["postgresql"]
        print(f"per-claim overhead, PostgreSQL against SQLite: {1000 * pg:.1f} ms against "
              f"{1000 * sq:.1f} ms ({pg / sq:.1f}x, {1000 * (pg - sq):+.1f} ms a claim)")
    return 0


def table(packets: int, backend: str, rows: list[dict]) -> float:
    """Print ``backend``'s table; return its mean seconds per claim (0 without claims)."""
    one = next((r["wall_s"] for r in rows if r["workers"] == 1), rows[0]["wall_s"])
    print(f"{packets} packets, instant agents, {backend} store, {os.cpu_count()} CPU(s)")
    print(f"{'workers':>7} {'wall s':>8} {'speed-up':>8} {'pkt/min':>8} {'suites s':>9} "
          f"{'agents s':>9} {'worker-s':>9} {'suites %':>8} {'andon s/pkt':>11} "
          f"{'merge chk':>9} {'ms/claim':>8} {'load':>11}")
    for r in rows:
        capacity = r["wall_s"] * r["workers"]
        own = (capacity - r["suites_s"] - r["agents_s"]) / max(r["done"], 1)
        claim_ms = f"{1000 * r['claims_s'] / r['claims']:.1f}" if r["claims"] else "-"
        print(f"{r['workers']:>7} {r['wall_s']:>8.1f} {one / r['wall_s']:>8.2f} "
              f"{60 * r['done'] / r['wall_s']:>8.1f} {r['suites_s']:>9.1f} "
              f"{r['agents_s']:>9.1f} {capacity:>9.1f} "
              f"{100 * r['suites_s'] / capacity:>7.0f}% {own:>11.2f} {r['merge_checks']:>9} "
              f"{claim_ms:>8} {r['load'][0]:>5.1f}-{r['load'][1]:<5.1f}")
    claims = sum(r["claims"] for r in rows)
    mean = sum(r["claims_s"] for r in rows) / claims if claims else 0.0
    print(f"per claim (dispatcher, claim_next incl. the attempt's rows): "
          f"{1000 * mean:.1f} ms over {claims} claim calls")
    print("suites s: time inside the project's test runs (all gates, merge checks "
          "included); worker-s: wall x workers; the rest is andon's own work (git clones, "
          "planting, snapshots, store) and waiting for the merge lock or a core; andon "
          "s/pkt: that rest per packet done; load: the 1-minute load average before and "
          "after.")
    return mean


if __name__ == "__main__":
    sys.exit(main())
