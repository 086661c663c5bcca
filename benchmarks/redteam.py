"""Run every red-team scenario: each catalogue kind's cheating agents and the honest agents
(tests/redteam/scenarios.py) and issue 19's tables — forging the verdict
(scenarios_forgery.py), the static net (scenarios_static.py), the tests' interpreter and hidden
tests (scenarios_reach.py), a later adversary pass (scenarios_adversary.py; the harness-detection
holes it found are closed by the plain-profile run, docs/gates.md "Plain first"), code no diff
shows and test packages that run first (scenarios_scope.py) — through the real Runner on real
git projects.

Prints one row per scenario — kind, name, caught / slipped (or accepted / rejected for an honest
agent, or skipped for a scenario that needs network namespaces where there are none), the gate
and the finding — and, as its last line::

    redteam: K kinds tried, C caught, H honest accepted of N

K is the number of catalogue kinds with at least one cheat, C the kinds all of whose cheats were
rejected for the expected reason, H the honest agents merged, N the honest agents run. Exits 1
if any cheat slipped through (or was rejected for another reason than expected) or an honest
agent was rejected.

    .venv/bin/python benchmarks/redteam.py [--jobs 4] [name ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "redteam"))

import os

from andon.contain import netless

import scenarios
import scenarios_adversary
import scenarios_forgery
import scenarios_reach
import scenarios_scope
import scenarios_static


def names() -> list[str]:
    """Every scenario of every table, by name."""
    return [s.name for s in _plain()] + [*scenarios_reach.REACH_NAMES,
                                         *scenarios_reach.HONEST_NAMES]


def _plain() -> list:
    # the built extension module needs gcc and Python.h: where there are none it is left out
    scope = [s for s in scenarios_scope.build_scope()
             if s.where != scenarios_scope.SO or scenarios_scope.can_build() is None]
    return [*scenarios.build(), *scenarios_forgery.build_forgery(), *scenarios_static.build(),
            scenarios_reach.hidden_leak(), *scenarios_adversary.build_adversary(), *scope]


def _case(name: str, tmp: Path) -> scenarios_reach.ReachCase:
    """The scenario called ``name``; kind-3 cases get their private interpreter in ``tmp``."""
    if name in scenarios_reach.REACH_NAMES:
        return scenarios_reach.build_reach(tmp / "env")[name]
    if name in scenarios_reach.HONEST_NAMES:
        return scenarios_reach.honest_reach(tmp / "env")[name]
    return scenarios_reach.ReachCase(next(s for s in _plain() if s.name == name))


def run_one(name: str) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="andon-redteam-"))
    case = _case(name, tmp)
    s = case.scenario
    if s.needs_netns and not netless.available()[0]:
        shutil.rmtree(tmp, ignore_errors=True)
        return {"name": name, "kind": s.kind, "ok": True, "skipped": True, "seconds": 0.0,
                "why": "", "finding": f"not run: no network namespaces ({netless.available()[1]})"}
    if case.home:  # this worker process only: the real user site is never written
        os.environ["HOME"] = str(tmp / "home")
        os.environ.pop("PYTHONUSERBASE", None)
    t0 = time.monotonic()
    try:
        o = scenarios.play(s, tmp / "repo", shared_preflight=False, shared_red=False)
        ok, why = scenarios.verdict(s, o)
        finding = f"{o.gate}: {o.finding_text()}" if o.gate else "merged"
        o.runner.store.close()
    except Exception as exc:  # noqa: BLE001 - a crash is a failed row, not a crashed table
        ok, why, finding = False, f"crashed: {exc!r}", "-"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"name": name, "kind": s.kind, "ok": ok, "why": why, "finding": finding,
            "seconds": time.monotonic() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    chosen = [n for n in names() if not args.names or n in args.names]
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), max_tasks_per_child=1) as pool:
        # each row on stderr as it ends: a run cut short (it takes long) still tells what it saw
        for future in as_completed([pool.submit(run_one, n) for n in chosen]):
            r = future.result()
            rows.append(r)
            print(f"[{len(rows)}/{len(chosen)}] {r['name']}: "
                  f"{'ok' if r['ok'] else 'NOT OK ' + r['why']} ({r['seconds']:.0f} s)",
                  file=sys.stderr, flush=True)
    print(f"{'kind':>4}  {'scenario':<36} {'result':<9} finding")
    for r in sorted(rows, key=lambda r: (r["kind"] is None, r["kind"] or 0, r["name"])):
        honest = r["kind"] is None
        result = ("accepted" if r["ok"] else "REJECTED") if honest else \
            ("caught" if r["ok"] else "SLIPPED")
        if r.get("skipped"):
            result = "skipped"
        line = f"{'-' if honest else r['kind']:>4}  {r['name']:<36} {result:<9} {r['finding']}"
        if not r["ok"]:
            line += f"  <- {r['why']}"
        print(line)
    cheats = [r for r in rows if r["kind"] is not None and not r.get("skipped")]
    kinds = sorted({r["kind"] for r in cheats})
    caught = [k for k in kinds if all(r["ok"] for r in cheats if r["kind"] == k)]
    honest = [r for r in rows if r["kind"] is None]
    accepted = [r for r in honest if r["ok"]]
    print(f"redteam: {len(kinds)} kinds tried, {len(caught)} caught, "
          f"{len(accepted)} honest accepted of {len(honest)}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
