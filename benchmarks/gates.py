#!/usr/bin/env python3
"""The time each gate adds, on the demo project (``andon demo``'s ledger and its packets).

Builds the demo project with ``andon.demo.build_project``, turns on every optional gate in its
andon.toml (``[gates.flaky] enabled``, ``[gates.mutation] enabled`` with ``min_score = 0`` so
that a weakly tested demo function is measured rather than retried, ``[gates.static]`` with
ruff when it is installed), commits that, and runs the queue in process with the demo's
scripted agents and reviewer — as ``andon demo`` does: the honest attempts go through every
gate; the demo's cheating attempts stop at the gate that catches them.

Reads every gate result's ``duration_s`` from the store and prints one row per gate: how many
times it ran (skipped results excluded), mean and total seconds, and its share of all gate
time; then the mutation scores it saw. Exits 0 (a measurement), 1 if the run itself broke.

Run: ``.venv/bin/python benchmarks/gates.py [--flaky-runs 4] [--keep]``

``--verdict-overhead N`` measures only what the verdict channel and the canaries add to one
suite run (docs/gates.md, "What the verdict is read from"), on two generated suites of N tests:
trivial tests, and tests that each spin ``--work-ms`` (5) ms of CPU first (closer to a real
suite). Each is run alternately through boot.py with canaries and the old way (a command the
channel cannot map, so no channel, no canaries), ``--repeats`` times, interleaved; prints the
medians of wall and child CPU seconds and the ratio for each suite. A third configuration,
the channel without canaries, splits what the canaries add from what the channel adds.
``--real-sdist more-itertools-10.5.0.tar.gz`` adds a real suite (664 tests and 2,332
unittest sub-tests, each sub-test a report and an outcome line).

Where the time went (profiled 2026-11-30: ``-X importtime`` and cProfile of the test process,
N=500): start-up — ``pluggy.__version__`` reads the distribution's metadata (importlib.metadata
and the email parser) in every run, and hook.py is compiled from source (``-B``, an editable
install has no ``.pyc``); the canaries — a failing canary's long traceback reads the module's
source, parses it and, on the run's first failure, ``inspect.getmodule`` walks every loaded
module (most of the canaries' ~60 ms); per test — an old-style ``makereport`` hookwrapper per
phase (pluggy wraps each in a generator and a ``Result``), two audit events (the outcome line and
the check of the report's path), and every other audit event of the process (~23 a test:
``object.__getattr__``, ``builtins.id``, ``os.putenv`` …) entering the hook, each attribute
event running a generator. Cut: one new-style wrapper, a failing canary's report is its
exception line (the plugin learns the canary module through the nonce pipe), the pluggy
version from its ``dist-info`` name, the per-test check over only the report's hooks, the
attribute event's identity test in C. Left: compiling hook.py per run, the outcome line and the
check (~0.1 ms a test), the hook's entry for every audit event.

Measured 2026-11-30 on the shared 2-core machine at load average 22-28 (other helpers' test
runs), N=500: after (branch channel, 5 repeats) trivial CPU 2.17 s vs 1.94 s — ratio 1.12, wall
1.01, 0.46 ms CPU a test; 5 ms/test CPU 5.25 s vs 5.10 s — ratio 1.03, wall 1.00, 0.29 ms a
test. Before (39009a3, same script, 3 repeats, right after): trivial CPU 1.20, wall 1.08, 0.77 ms
a test; 5 ms/test CPU 1.08, wall 0.99, 0.77 ms a test. At this load the spread between repeats
of one configuration is ±0.3 s CPU (±15 %), as large as what changed: read the ratios as a
direction, not a digit. Again after, at load 5-6, 3 repeats: trivial CPU 1.48 s vs 1.40 s — ratio
1.06, 0.16 ms a test; 5 ms/test CPU ratio 1.06; wall 1.12 and 1.34, but the wall time of one
and the same run varies 2.5-6.0 s here (200 tests of 5 ms, 5 repeats each: CPU ratio 1.03, wall
medians 3.8 s without and 3.4 s with the channel): CPU is the figure to read. A suite of real
tests is within the "few percent"; a suite of 500 trivial tests (each ~3-4 ms of pytest's own
CPU) is at 5-12 % depending on the load.

2026-12-01 (issue 19, the last gaps), more-itertools 10.5.0: the audit hook is where the channel's
cost is (a copy of boot.py without ``sys.addaudithook`` costs what no channel costs). The test
process raises ~45,000 audit events (28,000 ``builtins.id``, 11,500 ``object.__getattr__``,
2,000 ``os.putenv`` …) against ~3,000 outcome lines and 664 checks; each entered a hook with ~50
default arguments. Now a fast entry with few defaults passes on only what the hook answers (an
ignored event 0.41 → 0.19 µs, an attribute event 1.04 → 0.49 µs including the attribute read,
measured inside an armed run), and the per-test path check is one identity comparison in C.
Instruction counts (callgrind, deterministic; ``tests/test_recipes.py`` only, 130 tests and 113
sub-tests): no channel 4.864 G, boot.py with the plugin but no hook 4.910 G, channel before
5.085 G (1.045×), after 5.047 G (1.038×); the whole suite (channel without canaries): no
channel 17.089 G, before 17.756 G (1.039×), after 17.632 G (1.032×). CPU medians of this
script (N=50, 7 repeats, load 14-20
with a red-team run beside it): real suite channel+canaries / no channel 1.100, canaries alone
1.003; the same script before the change at load 9: 1.064 — at these loads the spread between
runs of one configuration (±5 %) is larger than what changed. What is left: the hook's arming
snapshot (~12 ms a run), compiling hook.py and the plugin from source (no ``.pyc``: ``-B``),
the outcome line per phase (~4 µs), and CPython building each audit event's arguments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from andon.demo import GIT_ENV, build_project, demo_runner
from andon.gates import mutation


def _suite(proj: Path, n: int, work_ms: float) -> None:
    """``n`` tests in modules of 50; each test spins ``work_ms`` ms of its thread's CPU first."""
    (proj / "tests").mkdir(parents=True)
    spin = (f"    t = time.thread_time() + {work_ms / 1e3}\n"
            "    while time.thread_time() < t:\n        pass\n") if work_ms else ""
    for f in range(n // 50):
        body = "".join(f"\n\ndef test_{f}_{i}():\n{spin}    assert {i} + 1 == {i + 1}\n"
                       for i in range(50))
        (proj / "tests" / f"test_gen_{f}.py").write_text("import time\n" + body)


def _real_suite(work: Path, sdist: Path, planted: str) -> tuple[Path, int, str]:
    """Unpack a project's sdist below ``work``; return its folder, its test count (one plain
    pytest run) and the test file the canaries go beside."""
    from real_sources import unpack_sdist

    unpack_sdist(sdist, work / "real")
    (proj,) = (work / "real").iterdir()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--co", "tests"], cwd=proj, capture_output=True, text=True).stdout
    count = sum(1 for line in out.splitlines() if "::" in line)
    return proj, count, planted


def verdict_overhead(n: int, repeats: int, work_ms: float = 5.0,
                     sdist: Path | None = None, planted: str = "") -> int:
    """Median seconds of a suite run of ``n`` tests with and without the channel+canaries, on
    trivial tests and on tests doing ``work_ms`` ms of CPU each — and, given a project's
    ``sdist`` (a ``.tar.gz`` with a ``tests/`` folder that runs with no dependency but pytest),
    on that real suite with canaries beside ``planted``; each ratio printed."""
    from andon.runners.pytest import run_suite

    work = Path(tempfile.mkdtemp())
    suites = {"trivial": work / "trivial", f"{work_ms:g} ms/test": work / "work"}
    _suite(suites["trivial"], n, 0)
    _suite(suites[f"{work_ms:g} ms/test"], n, work_ms)
    counts = dict.fromkeys(suites, n)
    canary_file = dict.fromkeys(suites, "tests/test_gen_0.py")
    if sdist is not None:
        proj, counts["real"], canary_file["real"] = _real_suite(work, sdist, planted)
        suites["real"] = proj
    unmapped = ["/bin/sh", "-c", 'exec "$0" -m pytest "$@"', sys.executable]
    import resource

    labels = ("channel+canaries", "channel", "no channel")
    times = {(s, lb): list[float]() for s in suites for lb in labels}
    cpu = {k: list[float]() for k in times}
    for i in range(repeats):  # interleaved: the machine's load changes under a run
        for suite, proj in suites.items():
            for label in labels:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                ch = label != "no channel"
                r = run_suite([sys.executable, "-m", "pytest"] if ch else unmapped, proj,
                              work / "ev", f"run-{i}", network="on",
                              canaries=[canary_file[suite]] if label == labels[0] else None)
                assert len(r.results) >= counts[suite] and not r.forged, (
                    suite, len(r.results), r.report_problem, r.forged)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                times[suite, label].append(r.duration_s)
                cpu[suite, label].append(after.ru_utime + after.ru_stime - before.ru_utime
                                         - before.ru_stime)
    print(f"N={n}, {repeats} repeats, load {os.getloadavg()[0]:.1f}")
    for suite in suites:
        med = {lb: statistics.median(times[suite, lb]) for lb in labels}
        mcpu = {lb: statistics.median(cpu[suite, lb]) for lb in labels}
        for lb in labels:
            print(f"{suite:>12} {lb:18} wall median {med[lb]:6.3f} s, CPU median "
                  f"{mcpu[lb]:6.3f} s (CPU: {', '.join(f'{x:.2f}' for x in cpu[suite, lb])})")
        both, chan, base = labels
        print(f"{suite:>12} ratio channel+canaries / no channel: wall {med[both] / med[base]:.3f}, "
              f"CPU {mcpu[both] / mcpu[base]:.3f}; per test: "
              f"{(mcpu[both] - mcpu[base]) / counts[suite] * 1e3:.3f} ms CPU "
              f"({counts[suite]} tests)")
        print(f"{suite:>12} the canaries alone (channel+canaries / channel): CPU "
              f"{mcpu[both] / mcpu[chan]:.3f}, wall {med[both] / med[chan]:.3f}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flaky-runs", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="keep the project directory")
    ap.add_argument("--verdict-overhead", type=int, metavar="N", default=0,
                    help="only measure the verdict channel on a generated suite of N tests")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work-ms", type=float, default=5.0,
                    help="CPU each test of the realistic suite spends (--verdict-overhead)")
    ap.add_argument("--real-sdist", type=Path, metavar="TAR_GZ",
                    help="also measure a real project's suite (--verdict-overhead), e.g. "
                    "more-itertools-10.5.0.tar.gz from PyPI: an archive you trust, unpacked "
                    "without PEP 706's filter on a Python before 3.11.4")
    ap.add_argument("--real-planted", default="tests/test_more.py", metavar="FILE",
                    help="the real suite's file the canaries go beside")
    args = ap.parse_args()
    if args.verdict_overhead:
        return verdict_overhead(args.verdict_overhead, args.repeats, args.work_ms,
                                args.real_sdist, args.real_planted)

    tmp = Path(tempfile.mkdtemp(prefix="andon-bench-gates-"))
    try:
        root = build_project(tmp / "ledger")
        ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
        extra = (f"\n[gates.flaky]\nenabled = true\nruns = {args.flaky_runs}\n"
                 "\n[gates.mutation]\nenabled = true\nmin_score = 0.0\n")
        if ruff:
            extra += ('\n[gates.static]\ncommands = [["ruff", "check", "--output-format=json", '
                      '"--no-cache", "--isolated"]]\n')
        with (root / "andon.toml").open("a") as f:
            f.write(extra)
        env = {**os.environ, **GIT_ENV}
        subprocess.run(["git", "commit", "-qam", "bench: every optional gate on"], cwd=root,
                       env=env, check=True)

        runner = demo_runner(root, echo=lambda s: None)
        store = runner.store
        t0 = time.perf_counter()
        report = runner.run()
        wall = time.perf_counter() - t0
        if report.preflight is not None:
            print(f"the demo project's preflight failed: {report.message}")
            return 1

        durations: dict[str, list[float]] = defaultdict(list)
        skipped: dict[str, set[str]] = defaultdict(set)
        scores = []
        order: list[str] = []
        for p in store.packets():
            for a in store.attempts(p["id"]):
                for g in store.gate_results(a["id"]):
                    if g["gate"] not in order:
                        order.append(g["gate"])
                    if g["status"] == "skipped":
                        skipped[g["gate"]].add(g["summary"])
                        continue
                    durations[g["gate"]].append(g["duration_s"])
                    if g["gate"] == "mutation" and "score" in g["evidence"]:
                        ev = g["evidence"]
                        scores.append(f"{p['id']}/{a['n']}: {ev['killed']}/{ev['executed']} "
                                      f"killed ({ev['score']:.0%}) in "
                                      + ", ".join(f for fs in ev["targets"].values()
                                                  for f in fs))
        every = sum(sum(v) for v in durations.values())
        mm = mutation.mutmut_version(sys.executable)[0] or "not installed"
        print(f"gates on the demo project: {len(store.packets())} packets, "
              f"{sum(len(store.attempts(p['id'])) for p in store.packets())} attempts, "
              f"queue wall time {wall:.1f} s; flaky runs {args.flaky_runs}; "
              f"mutmut {mm}; ruff {'yes' if ruff else 'not installed (static skipped)'}; "
              f"load {os.getloadavg()[0]:.1f}")
        print()
        print(f"{'gate':<20} {'ran':>4} {'mean s':>8} {'total s':>8} {'share':>6}")
        for gate in order:
            d = durations.get(gate, [])
            if not d:
                why = "; ".join(sorted(skipped[gate]))[:70]
                print(f"{gate:<20} {0:>4} {'-':>8} {'-':>8} {'-':>6}  skipped: {why}")
                continue
            print(f"{gate:<20} {len(d):>4} {statistics.mean(d):>8.2f} {sum(d):>8.2f} "
                  f"{sum(d) / every:>6.0%}")
        print(f"{'all gates':<20} {sum(map(len, durations.values())):>4} {'':>8} "
              f"{every:>8.2f}")
        new = [g for g in ("static", "flaky", "mutation") if durations.get(g)]
        added = sum(sum(durations[g]) for g in new)
        honest = len(durations.get("mutation", [])) or 1
        print()
        for s in scores:
            print(f"mutation score {s}")
        print(f"gates: static+flaky+mutation add {added:.2f} s in total, "
              f"{added / honest:.2f} s per attempt that reached them ({honest})")
        if args.keep:
            print(f"kept: {root}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
