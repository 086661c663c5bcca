"""Run every red-team scenario (tests/redteam/scenarios.py): each catalogue kind's cheating
agents and the honest agents, through the real Runner on real git projects.

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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "redteam"))

import scenarios  # noqa: E402

from andon import netless  # noqa: E402


def run_one(name: str) -> dict:
    s = next(x for x in scenarios.build() if x.name == name)
    if s.needs_netns and not netless.available()[0]:
        return {"name": name, "kind": s.kind, "ok": True, "skipped": True, "seconds": 0.0,
                "why": "", "finding": f"not run: no network namespaces ({netless.available()[1]})"}
    tmp = Path(tempfile.mkdtemp(prefix="andon-redteam-"))
    t0 = time.monotonic()
    try:
        o = scenarios.play(s, tmp / "repo")
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
    table = [s for s in scenarios.build() if not args.names or s.name in args.names]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(run_one, [s.name for s in table]))
    print(f"{'kind':>4}  {'scenario':<26} {'result':<9} finding")
    for r in sorted(rows, key=lambda r: (r["kind"] is None, r["kind"] or 0, r["name"])):
        honest = r["kind"] is None
        result = ("accepted" if r["ok"] else "REJECTED") if honest else \
            ("caught" if r["ok"] else "SLIPPED")
        if r.get("skipped"):
            result = "skipped"
        line = f"{'-' if honest else r['kind']:>4}  {r['name']:<26} {result:<9} {r['finding']}"
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
