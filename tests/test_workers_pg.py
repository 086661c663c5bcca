"""The pool on PostgreSQL (issue 12): ``andon run --workers 2`` with the store on a real
PostgreSQL server claims through leases, renews them while attempts run, gives them back,
and works every packet exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from test_workers import honest, mod_packet, squashes

from andon.exits import EXIT_OK

from helpers import make_project, runner_for


def test_two_workers_drain_a_queue_on_postgresql(tmp_path: Path, pg_store_target,
                                                 monkeypatch):
    monkeypatch.setenv("ANDON_STORE_URL", pg_store_target.target)
    monkeypatch.setenv("ANDON_LEASE_S", "30")
    root = make_project(tmp_path / "p", {f"P{i}-m": mod_packet(f"P{i}") for i in range(1, 5)})
    calls = tmp_path / "calls"

    def counted(ctx):
        with open(calls, "a") as f:  # one line per agent call, from any worker process
            f.write(ctx.packet.id + "\n")
        return honest(ctx)

    runner = runner_for(root, counted)
    runner.workers = 2
    report = runner.run()
    assert report.exit_status == EXIT_OK, report.message
    assert sorted(report.merged) == ["P1", "P2", "P3", "P4"]
    store = runner.store
    assert type(store).__name__ == "PgStore"
    assert Counter(calls.read_text().split()) == {f"P{i}": 1 for i in range(1, 5)}
    assert Counter(v for _, v in squashes(root)) == {f"P{i}": 1 for i in range(1, 5)}
    for i in range(1, 5):
        assert [a["state"] for a in store.attempts(f"P{i}")] == ["merged"]
    leased = [e for e in store.events() if e["kind"] == "leased"]
    assert len(leased) == 4 and {e["data"]["worker"].rsplit(":", 1)[1]
                                  for e in leased} <= {"w1", "w2"}
    assert store.leases() == []  # every lease given back
