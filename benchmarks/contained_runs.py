#!/usr/bin/env python3
"""What containing a harness test run costs (docs/gates.md, "What a test run can write").

Builds the demo project (andon.demo) in a temporary directory and runs its suite through
``run_suite`` ``--runs`` times each way (default 20), alternating: contained (``readonly`` =
the project's folder and the one above it: a pid, mount and user namespace, its own ``/proc``,
the folders bound read-only, the run's own tree bound writable again) and not. Both ways are
forked from the same fork server and cut from the network (``[test] network = "off"``, the
default), so the difference is the containment alone. Prints per run, each way: CPU seconds of
the test process and of the two processes that wait for it (the server's reaped children, read
from ``/proc/<server>/stat``), andon's own CPU in this process, wall seconds (median), and the
ratio contained ÷ not measured in the same run; and the load average.

Run: ``.venv/bin/python benchmarks/contained_runs.py [--runs N]``. Exits 1 when runs cannot be
contained on this machine (the reason is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fork_server import reaped_cpu, self_cpu  # beside this script: the same measures

from andon.config import load_config
from andon.contain import forkpool, netless
from andon.demo import build_project
from andon.runners.pytest import run_suite


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    opts = ap.parse_args()
    can, why = netless.contain_available()
    if not can:
        print(f"runs cannot be contained here: {why}")
        return 1
    tmp = Path(tempfile.mkdtemp())
    try:
        root = build_project(tmp / "demo")
        config = load_config(root)
        command = [sys.executable, "-m", "pytest", f"--ignore={config.andon.packets_dir}"]
        paths = [root / p for p in config.test.pythonpath]
        fenced = [root, tmp]
        print(f"load average before: {os.getloadavg()[0]:.2f}; {opts.runs} runs each way, "
              "alternating, forked, network cut; the demo project's suite")
        warm = run_suite(command, root, tmp / "ev", "warm", pythonpath=paths, network="off",
                         readonly=fenced)
        assert warm.start == "fork server" and warm.contained.startswith("read-only"), warm
        (server,) = forkpool.pids()
        out: dict[str, dict[str, list[float]]] = {
            k: {"cpu": [], "andon": [], "wall": []} for k in ("plain", "contained")}
        for i in range(opts.runs):
            for way in ("plain", "contained"):
                c0, s0, w0 = reaped_cpu(server), self_cpu(), time.perf_counter()
                r = run_suite(command, root, tmp / "ev", f"{way}-{i}", pythonpath=paths,
                              network="off", readonly=fenced if way == "contained" else ())
                w1, s1, c1 = time.perf_counter(), self_cpu(), reaped_cpu(server)
                assert not r.report_problem and not r.forged, r.output_tail
                assert bool(r.contained) == (way == "contained"), r.contained
                out[way]["cpu"].append(c1 - c0)
                out[way]["andon"].append(s1 - s0)
                out[way]["wall"].append(w1 - w0)
        print("                               plain  contained  contained/plain")
        for key, label in (("cpu", "test processes CPU s/run"), ("andon", "andon CPU s/run"),
                           ("wall", "wall s/run (median)")):
            a = statistics.median(out["plain"][key]) if key == "wall" else \
                sum(out["plain"][key]) / opts.runs
            b = statistics.median(out["contained"][key]) if key == "wall" else \
                sum(out["contained"][key]) / opts.runs
            print(f"  {label:<26}  {a:7.3f}  {b:9.3f}   {b / a if a else 0:5.2f}")
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        forkpool.close_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
