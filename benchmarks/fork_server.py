#!/usr/bin/env python3
"""Harness test runs started fresh against runs forked from a fork server (issue 18).

Builds the demo project (andon.demo) in a temporary directory and runs its suite through
``run_suite`` ``--runs`` times each way (default 20), alternating, with the network cut
(``[test] network = "off"``, the default) and kept. Prints per run: CPU seconds of the test
process (fresh: this process's reaped children; forked: the server's reaped children, read from
``/proc/<server>/stat``), andon's own CPU in this process, wall seconds, and the ratio forked ÷
fresh measured in the same run; the server's own start-up once; and the load average.

Run: ``.venv/bin/python benchmarks/fork_server.py [--runs N] [--python PATH]``
(``--python``: the tests' interpreter; default andon's own, as the demo uses).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from andon.config import load_config
from andon.contain import forkpool
from andon.demo import build_project
from andon.runners.pytest import run_suite

TICK = os.sysconf("SC_CLK_TCK")


def reaped_cpu(pid: int) -> float:
    """CPU seconds of the children ``pid`` has reaped (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def own_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--python", default=sys.executable)
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    try:
        root = build_project(tmp / "demo")
        config = load_config(root)
        command = [opts.python, "-m", "pytest", f"--ignore={config.andon.packets_dir}"]
        paths = [root / p for p in config.test.pythonpath]
        print(f"load average before: {os.getloadavg()[0]:.2f}; {opts.runs} runs each way, "
              f"alternating; the demo project's suite ({opts.python})")
        for network in ("off", "on"):
            out: dict[str, dict[str, list[float]]] = {
                k: {"cpu": [], "andon": [], "wall": []} for k in ("fresh", "forked")}
            t0 = time.perf_counter()
            first = run_suite(command, root, tmp / "ev", "warm", pythonpath=paths,
                              network=network)  # type: ignore[arg-type]
            (server,) = forkpool.pids()
            start = time.perf_counter() - t0
            assert first.start == "fork server", first.start
            for i in range(opts.runs):
                for way in ("fresh", "forked"):
                    c0 = children_cpu() if way == "fresh" else reaped_cpu(server)
                    s0, w0 = self_cpu(), time.perf_counter()
                    r = run_suite(command, root, tmp / "ev", f"{way}-{i}", pythonpath=paths,
                                  network=network,  # type: ignore[arg-type]
                                  fork_server=way == "forked")
                    w1, s1 = time.perf_counter(), self_cpu()
                    c1 = children_cpu() if way == "fresh" else reaped_cpu(server)
                    assert r.start == ("fork server" if way == "forked" else "fresh"), r.start
                    assert not r.report_problem and not r.forged, r.output_tail
                    out[way]["cpu"].append(c1 - c0)
                    out[way]["andon"].append(s1 - s0)
                    out[way]["wall"].append(w1 - w0)
            print(f"\nnetwork {network}: the first forked run, server start included: "
                  f"{start:.3f} s wall (server's own CPU so far {own_cpu(server):.3f} s)")
            print("                          fresh    forked   forked/fresh")
            for key, label in (("cpu", "test process CPU s/run"), ("andon", "andon CPU s/run"),
                               ("wall", "wall s/run (median)")):
                a = statistics.median(out["fresh"][key]) if key == "wall" else \
                    sum(out["fresh"][key]) / opts.runs
                b = statistics.median(out["forked"][key]) if key == "wall" else \
                    sum(out["forked"][key]) / opts.runs
                print(f"  {label:<22}  {a:7.3f}  {b:7.3f}   {b / a if a else 0:5.2f}")
            forkpool.close_all()
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        forkpool.close_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
