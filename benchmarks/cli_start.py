"""How long the CLI takes to answer the commands people type between runs (`andon --help`,
`andon status`, `andon check`), against a bare interpreter start, measured in one run.

    .venv/bin/python benchmarks/cli_start.py [--repeat 7]

Makes a small project in a temporary folder (git repository, andon.toml, one packet), then
times each command as a fresh process (`python -m andon -C <project> …`), after one warm-up
run each. Prints, per command, the median, min and max wall seconds, the median as a
multiple of `python -c pass`, the median CPU seconds (user + system: steadier than wall
time on a loaded machine), and how many modules of andon the command imported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (["--help"], ["run", "--help"], ["status"], ["status", "--json"],
            ["check"])

# Prints the andon modules the command imported, after the command has run.
COUNT = ("import runpy, sys\n"
         "sys.argv = ['andon', *sys.argv[1:]]\n"
         "try:\n"
         "    runpy.run_module('andon', run_name='__main__', alter_sys=True)\n"
         "except SystemExit:\n"
         "    pass\n"
         "print(sum(m.split('.')[0] == 'andon' for m in sys.modules), file=sys.stderr)\n")

ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}


def project(root: Path) -> Path:
    """A committed project made by `andon init`, with one packet (no run made)."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=ENV)
    subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "init"], cwd=root,
                   check=True, env=ENV, capture_output=True)
    packet = root / "packets" / "P1-add"
    packet.mkdir(parents=True, exist_ok=True)
    (packet / "packet.md").write_text(
        '+++\nid = "P1"\nslug = "add"\ngoal = "Add numbers."\nallowed_paths = ["src/**"]\n'
        '+++\n\n## Context\n\nA benchmark packet.\n')
    (packet / "plant" / "tests").mkdir(parents=True)
    (packet / "plant" / "tests" / "test_add.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=ENV)
    return root


def timed(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of each of ``repeat`` runs of ``cmd``."""
    subprocess.run(cmd, capture_output=True, env=ENV, check=False)  # warm-up
    times, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=ENV, check=False)
        times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return times, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="andon-cli-start-") as tmp:
        root = project(Path(tmp) / "project")
        bare_times, bare_cpu = timed([sys.executable, "-c", "pass"], args.repeat)
        bare = statistics.median(bare_times)
        rows = []
        for command in COMMANDS:
            probe = subprocess.run([sys.executable, "-m", "andon", "-C", str(root), *command],
                                   capture_output=True, text=True, env=ENV, check=False)
            if probe.returncode != 0:
                print(f"andon {' '.join(command)} exited {probe.returncode}:\n{probe.stderr}",
                      file=sys.stderr)
                return 1
            times, cpu = timed([sys.executable, "-m", "andon", "-C", str(root), *command],
                               args.repeat)
            counted = subprocess.run([sys.executable, "-c", COUNT, "-C", str(root), *command],
                                     capture_output=True, text=True, env=ENV, check=False)
            modules = int(counted.stderr.strip().splitlines()[-1])
            rows.append({"command": "andon " + " ".join(command),
                         "median_s": statistics.median(times), "min_s": min(times),
                         "max_s": max(times), "cpu_s": statistics.median(cpu),
                         "modules": modules})
    if args.json:
        print(json.dumps({"python_s": bare, "python_cpu_s": statistics.median(bare_cpu),
                          "commands": rows}, indent=2))
        return 0
    print(f"python -c pass: {bare:.3f} s, {statistics.median(bare_cpu):.3f} CPU s (median of "
          f"{args.repeat}); load {os.getloadavg()[0]:.2f}")
    for r in rows:
        print(f"{r['command']:<22} {r['median_s']:.3f} s (min {r['min_s']:.3f}, max "
              f"{r['max_s']:.3f}) = {r['median_s'] / bare:5.1f}x python; "
              f"{r['cpu_s']:.3f} CPU s; {r['modules']} andon modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
