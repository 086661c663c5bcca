#!/usr/bin/env python3
"""Per-claim overhead of the store: PostgreSQL against SQLite (issue 12).

For each backend, a fresh store with ``--packets`` ready packets (default 200); then

- one worker: for every packet, what a worker does to start work — ``claim`` (with its
  reclaim of expired leases and the row lock), then ``new_attempt`` and
  ``transition(running)`` in one transaction — timed with ``perf_counter``; median and 95th
  percentile in milliseconds;
- ``--workers`` processes (default 4) draining another such queue at once: wall time and
  claims per second, and a check that no packet was claimed twice.

SQLite: a file in a temp dir (WAL). PostgreSQL: ``--url`` if given, else a throwaway cluster
started as in the tests (tests/pgcluster.py: initdb/pg_ctl, fsync off — as a CI server would
be, not as a production one). Exits 0 (a measurement).

Run: ``.venv/bin/python benchmarks/store.py [--packets 200] [--workers 4] [--url URL]``
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from andon.store import connect  # noqa: E402


def _open(target: str) -> Any:
    return connect(Path(target), target if target.startswith("postgresql") else None)


def _fill(target: str, n: int) -> None:
    s = _open(target)
    for i in range(n):
        s.upsert_packet(f"P{i:04d}", "p", "p.md", "sha", {})
    s.close()


def _start(s: Any, worker: str) -> str | None:
    p = s.claim(worker, 600)
    if p is None:
        return None
    with s.tx():
        a = s.new_attempt(p["id"], "bench", 0)
        s.transition(p["id"], "running", "claimed", a["id"])
    return str(p["id"])


def one_worker(target: str, n: int) -> list[float]:
    _fill(target, n)
    s = _open(target)
    times = []
    while True:
        t = time.perf_counter()
        if _start(s, "w0") is None:
            break
        times.append(time.perf_counter() - t)
    s.close()
    return times


def _drain(args: tuple[str, str]) -> list[str]:
    target, worker = args
    s = _open(target)
    got = []
    while (pid := _start(s, worker)) is not None:
        got.append(pid)
    return got


def many_workers(target: str, n: int, workers: int) -> tuple[float, bool]:
    _fill(target, n)
    t = time.perf_counter()
    with mp.get_context("spawn").Pool(workers) as pool:
        results = pool.map(_drain, [(target, f"w{i}") for i in range(workers)])
    wall = time.perf_counter() - t  # includes starting the processes
    claimed = [p for r in results for p in r]
    return wall, len(claimed) == len(set(claimed)) == n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--url", help="a PostgreSQL URL (an empty database); default: a "
                                  "throwaway cluster")
    a = ap.parse_args()
    cluster = None
    tmp = Path(tempfile.mkdtemp(prefix="andon-bench-store-"))
    if a.url:
        urls = [a.url, a.url]
        print("note: --url is used for both runs; give an empty database", file=sys.stderr)
    else:
        from pgcluster import Cluster, bindir
        b = bindir()
        if b is None:
            print("no PostgreSQL (/usr/lib/postgresql/*/bin): install Debian's postgresql")
            return 0
        cluster = Cluster(b)
        urls = [cluster.new_database(), cluster.new_database()]
    try:
        rows = []
        for name, t1, t2 in (("sqlite", str(tmp / "a.db"), str(tmp / "b.db")),
                             ("postgresql", *urls)):
            times = one_worker(t1, a.packets)
            wall, ok = many_workers(t2, a.packets, a.workers)
            med = statistics.median(times) * 1000
            p95 = sorted(times)[int(len(times) * 0.95) - 1] * 1000
            rows.append((name, med, p95, wall, ok))
        print(f"{a.packets} packets; per claim = claim + new_attempt + transition(running)")
        print(f"{'backend':<11} {'median ms':>10} {'p95 ms':>8} "
              f"{a.workers} workers: {'wall s':>7} {'claims/s':>9}  each once")
        for name, med, p95, wall, ok in rows:
            print(f"{name:<11} {med:>10.2f} {p95:>8.2f} {'':>10} {wall:>7.2f} "
                  f"{a.packets / wall:>9.0f}  {'yes' if ok else 'NO'}")
        print(f"PostgreSQL / SQLite per claim (median): {rows[1][1] / rows[0][1]:.2f}×")
    finally:
        if cluster is not None:
            cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
