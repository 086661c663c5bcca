#!/usr/bin/env python3
"""Three red runs of a planted file, three ways: one after the other (what andon does), in one
pytest process (the file given three times with ``--keep-duplicates``), and at the same time
(three lane processes, gates/lanes.py).

On the demo project's first planted test file (andon.demo). Prints the median, min and max
seconds of each way over ``ROUNDS`` rounds (argument, default 5) and the load average. The one
process way writes one testcase per copy, but its three outcomes share one interpreter: one
hash seed, one import of the module, one module state — not three independent outcomes.

Run: ``.venv/bin/python benchmarks/red_modes.py [ROUNDS]``
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

from andon.config import load_config
from andon.demo import build_project
from andon.demo.project import PACKETS
from andon.gates.base import run_project_suite
from andon.gates.lanes import Planned, run_lanes
from andon.runners.pytest import run_suite


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = Path(tempfile.mkdtemp())
    try:
        root = build_project(tmp / "demo")
        _, (_, plant) = next(iter(PACKETS.items()))
        rel, text = next((r, t) for r, t in plant.items() if Path(r).name.startswith("test_"))
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        config = load_config(root)
        ev = tmp / "ev"
        ctx = SimpleNamespace(config=config, evidence_dir=ev)  # what run_lanes reads
        times: dict[str, list[float]] = {"one after the other": [], "one process": [],
                                         "at the same time": []}
        for k in range(rounds):
            t0 = time.perf_counter()
            runs = [run_project_suite(config, root, ev, f"s{k}-{i}", select=[rel])
                    for i in range(3)]
            times["one after the other"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            argv = [*config.test_argv(), f"--ignore={config.andon.packets_dir}",
                    "--keep-duplicates"]
            one = run_suite(argv, root, ev, f"o{k}", select=[rel, rel, rel],
                            pythonpath=[root / p for p in config.test.pythonpath])
            times["one process"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_lanes(ctx, [(root, [Planned(f"c{k}-{i}", select=[rel])]) for i in range(3)],
                      agent_code=False)
            times["at the same time"].append(time.perf_counter() - t0)
        cases = len(list(ET.parse(one.junit_path).getroot().iter("testcase")))
        print(f"{rel}: {len(runs[0].results)} tests; the one process wrote {cases} testcases "
              f"for the 3 copies; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        for way, xs in times.items():
            print(f"{way:20} median {statistics.median(xs):.2f} s (min {min(xs):.2f}, "
                  f"max {max(xs):.2f}, {len(xs)} rounds)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
