#!/usr/bin/env python3
"""How fast the dashboard's board answers on a big store.

Builds a store (a real SQLite file written with the store's own methods) of ``--packets``
packets (default 1,000), each with one attempt, one stage run with usage, and gate results,
and enough events that the log holds ``--events`` (default 10,000); states are spread over
the lifecycle (some blocked and awaiting a person, most done). Then starts the real server
(uvicorn on 127.0.0.1) and requests the board page ``/`` and its live fragment
``/board/rows`` ``--requests`` times each (default 30) over HTTP, one after another,
timing each from request to last byte with ``perf_counter``. Prints the median and p95 in
milliseconds, the events page (the newest 500 of the log, with the hash-chain status) for
scale, and the page's poll when nothing changed (``If-None-Match`` with the board's mark: 304,
no rows read). The board's rows are rendered once per change of the store and reused; the
"store changed" rows write an event before each request (not timed), so every one of them
reads and renders the 1,000 rows.

Run: ``.venv/bin/python benchmarks/serve.py [--packets 1000] [--events 10000]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from andon.store import Store
from andon.usage import Usage
from andon.web.app import Settings
from andon.web.server import start

PATHS = {"/": "board page", "/board/rows": "board fragment (live update)",
         "/events": "events page (newest 500)"}


def build(root: Path, packets: int, events: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b",
                    "commit", "-q", "--allow-empty", "-m", "empty"], check=True)
    store = Store(root / ".andon" / "andon.db")
    ends = ["done"] * 8 + ["blocked", "awaiting_human"]
    with store.tx():  # one transaction: building is not what is measured
        _fill(store, packets, ends)
    have = store.db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    with store.tx():
        for i in range(max(0, events - have)):
            store.event("note", f"P{i % packets:04d}", data={"i": i})
    store.close()


def _fill(store: Store, packets: int, ends: list[str]) -> None:
    for i in range(packets):
        pid = f"P{i:04d}"
        store.upsert_packet(pid, f"slug-{i}", f"packets/{pid}/packet.md", "0" * 64,
                            {"goal": f"goal {i}", "gate": "auto", "max_attempts": 3})
        a = store.new_attempt(pid, "scripted", 1)
        store.transition(pid, "running", "claimed", a["id"])
        store.add_stage_run(a["id"], "implement", "scripted", 0, False, 3.5, "t.log", "ok",
                            Usage(input_tokens=1200, output_tokens=300, cost_usd=0.01,
                                  cost_source="reported"), "2026-01-01T00:00:00")
        for gate in ("preflight", "red", "scope", "suite", "hermetic", "patterns"):
            store.add_gate_result(a["id"], gate, "pass", None, "ok",
                                  {"findings": [], "runs": []}, "2026-01-01T00:00:00", 0.5)
        store.transition(pid, "gating", "gating", a["id"])
        end = ends[i % len(ends)]
        if end == "done":
            store.transition(pid, "merging", "accepted", a["id"])
            store.update_attempt(a["id"], state="merged", merge_sha="f" * 40)
        else:
            store.update_attempt(a["id"], state="failed", reason="same failure twice",
                                 failure_layer="code")
        store.transition(pid, end, end, a["id"])


def timed(url: str, n: int, headers: dict[str, str] | None = None,
          before=None) -> list[float]:
    out = []
    for _ in range(n):
        if before is not None:  # not timed: a change in the store, so nothing is cached
            before()
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                        timeout=120) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:  # 304: nothing new since the page's mark
            if exc.code != 304:
                raise
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1000)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        t0 = time.perf_counter()
        build(root, args.packets, args.events)
        print(f"store: {args.packets} packets, {args.events} events "
              f"(built in {time.perf_counter() - t0:.1f} s)")
        running = start(Settings(root))
        try:
            base = running.login.rstrip("/")
            with urllib.request.urlopen(base + "/board/rows") as resp:
                mark = resp.headers["ETag"]
            writer = Store(root / ".andon" / "andon.db")

            def changed() -> None:
                writer.event("note", "P0000", data={"bench": 1})
            cases = [(base + path, what, None, None) for path, what in PATHS.items()]
            cases += [(base + "/", "board page, store changed", None, changed),
                      (base + "/board/rows", "board fragment, store changed", None, changed),
                      (base + "/board/rows", "board poll, nothing new (304)",
                       {"If-None-Match": mark}, None)]
            for url, what, headers, before in cases:
                timed(url, 2, headers, before)  # warm: templates compiled, pages cached
                ms = sorted(timed(url, args.requests, headers, before))
                p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
                print(f"{what:32} median {statistics.median(ms):7.1f} ms   "
                      f"p95 {p95:7.1f} ms   ({args.requests} requests)")
        finally:
            running.stop()
            writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
