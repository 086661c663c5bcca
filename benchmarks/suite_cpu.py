#!/usr/bin/env python3
"""Where andon's own test suite spends its CPU (issue 18: the suite in under 5 minutes).

Runs the suite as the README's test command does (``scripts/test``: its set-up, then pytest
with the pyproject's addopts, xdist on every core) with a plugin that records, for every
test, its wall seconds and the CPU seconds (user + system) of the worker process and of the
child processes it waited for (``getrusage``: RUSAGE_SELF and RUSAGE_CHILDREN; a daemon
started by a session fixture and never waited for, such as a PostgreSQL server, is not
counted; the fork servers of contain/forkpool.py reap the runs they fork, and the server
of tests/cli_fork.py the `python -m andon` processes it forks, so a live server's own CPU
and its children's are read from ``/proc``). Then prints the CPU by test file
and the most expensive tests, each worker's busy seconds (how evenly xdist spread the
work), and the CPU the run used against what the machine had (cores × wall seconds).

    benchmarks/suite_cpu.py                 # the whole suite (as scripts/test runs it)
    benchmarks/suite_cpu.py tests/redteam   # any pytest arguments
    SUITE_CPU_ROWS=rows.jsonl benchmarks/suite_cpu.py   # every test's figures kept there too

Exits with pytest's status (1 as well when no test ran)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = '''
import json, os, resource, time
import pytest

def _servers():
    # fork servers (andon.contain.forkpool) reap the runs they fork: their CPU reaches this
    # process's RUSAGE_CHILDREN only when a server ends, so a live server's own CPU and its
    # reaped runs' are read from /proc
    import sys
    pool = sys.modules.get("andon.contain.forkpool")
    pids = list(pool.pids() if pool else ())
    # tests/cli_fork.py's server reaps the `python -m andon` processes it forks, too
    cli = getattr(sys.modules.get("cli_fork"), "_server", None)
    if cli is not None and cli.proc.poll() is None:
        pids.append(cli.proc.pid)
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def _cpu():
    # the servers first: a poll() there may reap one that ended, whose CPU then reaches
    # RUSAGE_CHILDREN in this same sample
    servers = _servers()
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime + servers

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0, (s0, c0) = time.monotonic(), _cpu()
    yield
    t1, (s1, c1) = time.monotonic(), _cpu()
    with open(os.path.join(os.environ["SUITE_CPU_DIR"], f"{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps({"id": item.nodeid, "wall": t1 - t0, "self": s1 - s0,
                            "children": c1 - c0}) + "\\n")
'''


def main(args: list[str]) -> int:
    out = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    (out / "suite_cpu_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "SUITE_CPU_DIR": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(out), os.environ.get("PYTHONPATH")]))}
    load0, start = os.getloadavg()[0], time.monotonic()
    status = subprocess.run([str(ROOT / "scripts" / "test"), "-q", "-p", "suite_cpu_plugin",
                             *args], cwd=ROOT, env=env, check=False).returncode
    wall, load1 = time.monotonic() - start, os.getloadavg()[0]
    workers = {p.stem: [json.loads(line) for line in p.read_text().splitlines()]
               for p in out.glob("*.jsonl")}
    shutil.rmtree(out)
    rows = [r for w in workers.values() for r in w]
    if keep := os.environ.get("SUITE_CPU_ROWS"):
        Path(keep).write_text("".join(json.dumps(r) + "\n" for r in rows))
    if not rows:
        print(f"no test ran (pytest exit status {status})", file=sys.stderr)
        return status or 1
    print_figures(rows, workers, wall, (load0, load1))
    return status


def print_figures(rows: list[dict], workers: dict[str, list[dict]], wall: float,
                  load: tuple[float, float]) -> None:
    cpu = sum(r["self"] + r["children"] for r in rows)
    cores = os.cpu_count() or 1
    print(f"\n{len(rows)} tests in {wall:.0f} s on {cores} cores (load average {load[0]:.2f} → "
          f"{load[1]:.2f}): {cpu:.0f} CPU-s counted, {cpu / (cores * wall):.0%} of the "
          f"{cores * wall:.0f} CPU-s the machine had; {cpu / len(rows):.2f} CPU-s per test")
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = by_file[r["id"].split("::")[0]]
        f[0] += r["self"] + r["children"]
        f[1] += r["wall"]
        f[2] += 1
    print("\nCPU-s    share  wall-s  tests  CPU-s/test  file")
    for name, (c, w, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"{c:7.1f}  {c / cpu:5.1%}  {w:6.0f}  {n:5d}  {c / n:10.2f}  {name}")
    print("\nCPU-s   wall-s  test")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["children"]))[:20]:
        print(f"{r['self'] + r['children']:6.1f}  {r['wall']:6.0f}  {r['id'][:110]}")
    busy = sorted(sum(r["wall"] for r in w) for w in workers.values())
    print(f"\n{len(busy)} workers, busy (sum of their tests' wall seconds): "
          + ", ".join(f"{b:.0f}" for b in busy) + " s")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
