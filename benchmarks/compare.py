"""How long `andon compare` takes on a few thousand runs: a seeded generator writes a CSV
(tasks × conditions × repeats rows), then the comparison is timed from the file to each
output (read + compare, the JSON document, the terminal report, the HTML page).

The generated experiment: every task has a difficulty; condition i resolves it with a
probability that rises with i, errors 2 % of the time, and costs about 1.3^i times more
(log-normal noise), with tokens and times to match; a few values are left empty.

Prints the rows, conditions, tasks, repeats and resamples, the seconds of each step (the
median of ``--times`` runs, wall and CPU), and as its last line::

    compare: N rows, R resamples, X.XXX s (C.CCC s CPU; read + compare; target < 1 s)

followed by ``AIM MISSED`` if X >= 1. Exit status 0.

    .venv/bin/python benchmarks/compare.py [--tasks 500] [--conditions 2] [--repeats 3]
        [--resamples 10000] [--seed 0] [--times 3] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from andon.experiments.compare import as_dict, compare
from andon.experiments.html import render_html
from andon.experiments.render import render_terminal
from andon.experiments.runs import read_csv

COLUMNS = ["task", "condition", "repeat", "outcome", "resolved", "cost_usd", "input_tokens",
           "output_tokens", "cache_read_tokens", "cache_write_tokens", "wall_s", "tool_s"]


def generate(path: Path, tasks: int, conditions: int, repeats: int, seed: int) -> int:
    """Write a CSV of tasks × conditions × repeats runs to ``path``, interleaved as an
    experiment runs them; returns the number of rows. The same arguments give the same
    bytes."""
    rng = random.Random(seed)
    names = [chr(ord("A") + i) for i in range(conditions)]
    difficulty = [rng.gauss(0.0, 1.5) for _ in range(tasks)]
    size = [rng.lognormvariate(0.0, 0.6) for _ in range(tasks)]
    rows = 0
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for r in range(repeats):
            for t in range(tasks):
                for i, name in enumerate(names):
                    if rng.random() < 0.02:
                        out.writerow([f"task-{t:04d}", name, r, "error", "", "", "", "", "",
                                      "", f"{rng.uniform(1, 5):.2f}", ""])
                        rows += 1
                        continue
                    p = 1 / (1 + math.exp(difficulty[t] - 0.4 * i))
                    ok = rng.random() < p
                    scale = size[t] * 1.3 ** i * rng.lognormvariate(0.0, 0.3)
                    inp = int(40_000 * scale)
                    cache = int(inp * rng.uniform(0.3, 0.8))
                    cost = "" if rng.random() < 0.01 else f"{0.5 * scale:.4f}"
                    wall = 120 * scale * rng.lognormvariate(0.0, 0.2)
                    out.writerow([f"task-{t:04d}", name, r, "resolved" if ok else "unresolved",
                                  "true" if ok else "false", cost, inp,
                                  int(inp * rng.uniform(0.02, 0.08)), cache, int(inp * 0.1),
                                  f"{wall:.1f}", f"{wall * rng.uniform(0.2, 0.6):.1f}"])
                    rows += 1
    return rows


def timed(fn, times: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``times`` calls, and the last result. On a shared
    machine the wall time includes waiting for a core; the CPU time does not."""
    walls, cpus, result = [], [], None
    for _ in range(times):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--conditions", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--times", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="andon-compare-bench-"))
    try:
        path = tmp / "runs.csv"
        rows = generate(path, args.tasks, args.conditions, args.repeats, args.seed)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"{rows} rows ({args.tasks} tasks × {args.conditions} conditions × "
              f"{args.repeats} repeats), {args.resamples} resamples, seed {args.seed}, "
              f"{os.cpu_count()} CPUs, load {load:.1f}")

        def read_and_compare():
            return compare(read_csv(path), "A", resamples=args.resamples, seed=args.seed)

        console = Console(file=io.StringIO(), width=120)
        steps = [("read CSV", lambda: read_csv(path)), ("read + compare", read_and_compare)]
        results = {}
        for name, fn in steps:
            results[name] = timed(fn, args.times)
        result = results["read + compare"][2]
        for name, fn in [("JSON document", lambda: json.dumps(as_dict(result))),
                         ("terminal report", lambda: render_terminal(result, console)),
                         ("HTML page", lambda: render_html(result))]:
            results[name] = timed(fn, args.times)
        for name, (wall, cpu, _) in results.items():
            print(f"{name:<18} {wall:.3f} s wall, {cpu:.3f} s CPU")
        page = results["HTML page"][2]
        print(f"HTML page size     {len(page) / 1024:.0f} KiB")
        t_total, c_total, _ = results["read + compare"]
        if args.keep:
            (tmp / "report.html").write_text(page)
            print(f"kept {tmp}", file=sys.stderr)
        print(f"compare: {rows} rows, {args.resamples} resamples, {t_total:.3f} s "
              f"({c_total:.3f} s CPU; read + compare; target < 1 s)")
        if t_total >= 1:
            print("AIM MISSED")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
