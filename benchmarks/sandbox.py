"""The sandbox's cost per agent stage start: median wall time of ``run_process`` on
``/bin/true`` without a sandbox and under each plan, over N starts, in one run (ratios to
the unsandboxed start):

- ``fs``: bubblewrap and the cgroup caps; ``fs (no caps)``: bubblewrap alone;
- ``fs+net allow``: the default (``auto`` with ``[agent] network = "allow"``): its own
  network namespace, andon's proxy started and stopped around the stage, netbridge inside;
- ``fs+net off``: its own network namespace, loopback only, no proxy.

    python benchmarks/sandbox.py [N]     # default 30
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from andon import sandbox
from andon.agents.process import run_process
from andon.config import Config


def main(n: int = 30) -> None:
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        repo, wt = tmp / "repo", tmp / "wt" / "P1-1"
        repo.mkdir()
        wt.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (tmp / "in").write_text("")
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp / "home")}
        (tmp / "home").mkdir()
        off = Config.model_validate({"agent": {"network": "off"}})
        plans = {"none": None,
                 "fs": sandbox.plan_for("fs", Config(), repo, wt, hidden=[wt.parent]),
                 "fs (no caps)": sandbox.plan_for(
                     "fs", Config.model_validate({"agent": {"max_processes": None}}), repo,
                     wt, hidden=[wt.parent]),
                 "fs+net allow": sandbox.plan_for("fs+net", Config(), repo, wt,
                                                  hidden=[wt.parent]),
                 "fs+net off": sandbox.plan_for("fs+net", off, repo, wt, hidden=[wt.parent])}
        times: dict[str, list[float]] = {name: [] for name in plans}
        for _ in range(n):
            for name, plan in plans.items():
                t0 = time.perf_counter()
                run_process(["/bin/true"], wt, env, tmp / "in", tmp / "out", 30, sandbox=plan)
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["none"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:<14} median {m * 1000:7.1f} ms  ratio {m / base:5.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
