"""recover() with several runners on one store (issue 12): a packet another runner holds
with a live lease is left alone; one whose lease expired is reclaimed as ``interrupted``
(not counted, never the agent's failure); one with no lease is recovered as before. Both
backends: real SQLite, real PostgreSQL (tests/pgcluster.py)."""

from __future__ import annotations

from pathlib import Path

from andon import recovery
from andon.config import load_config
from andon.git.repo import Repo
from andon.packet import load_packets
from andon.runner import Runner

from helpers import make_project, packet_md

OTHER = "other-host:4242:w1"  # a runner on another machine


def _claimed(store, pid: str, worker: str | None) -> dict:
    """Start an attempt of ``pid`` as a runner would: leased by ``worker`` (or no lease,
    a single runner of old), its row created, the packet ``running``."""
    if worker:
        got = store.claim(worker, 600, among=[pid])
        assert got and got["id"] == pid
    with store.tx():
        a = store.new_attempt(pid, "scripted", 0)
        store.transition(pid, "running", "claimed", a["id"], {"n": a["n"]})
    return a


def _expire(store, pid: str) -> None:
    """The worker holding ``pid`` died long ago: its lease lapsed (set in the past, rather
    than waiting for it)."""
    with store.tx() as db:
        db.execute("UPDATE leases SET expires_at = ? WHERE packet_id = ?",
                   ("2000-01-01T00:00:00.000+00:00", pid))


def test_recover_leaves_live_leases_and_reclaims_expired(tmp_path: Path, store_target):
    root = make_project(tmp_path / "p", {
        f"{p}-x": (packet_md(p, "x", allowed_paths=["src/calc/ops.py"]),
                   {f"tests/test_{p.lower()}.py": "def test_x():\n    assert True\n"})
        for p in ("P1", "P2", "P3", "P4")})
    repo, config = Repo(root), load_config(root)
    store = store_target.open()
    runner = Runner(repo, config, store, lambda p, s: None)
    packets = load_packets(root / "packets", root)
    runner._sync(packets)
    runner.packets = {p.id: p for p in packets}
    live = _claimed(store, "P1", OTHER)
    dead = _claimed(store, "P2", "dead-host:1:w1")
    _expire(store, "P2")
    old = _claimed(store, "P3", None)
    merging = _claimed(store, "P4", OTHER)
    store.update_attempt(merging["id"], state="passed")
    store.transition("P4", "gating", "agent-done", merging["id"])
    store.transition("P4", "merging", "gates-passed", merging["id"])
    said: list[str] = []

    def must_not_merge(*args):
        raise AssertionError("merged a packet another runner is merging")

    recovery.recover(repo, store, runner.packets, runner._worktree_path, must_not_merge,
                     lambda i: set(), said.append)

    assert store.packet("P1")["state"] == "running"
    assert store.attempt(live["id"])["state"] == "running"
    assert [x["packet_id"] for x in store.leases()] == ["P1", "P4"]
    assert store.packet("P4")["state"] == "merging"
    p2 = store.attempt(dead["id"])
    assert store.packet("P2")["state"] == "ready"
    assert (p2["state"], p2["counted"]) == ("interrupted", 0)
    assert "lease" in p2["reason"] and "dead-host:1:w1" in p2["reason"]
    assert any(e["kind"] == "interrupted" for e in store.events("P2"))
    assert not any(e["kind"] == "failed" for e in store.events("P2"))
    p3 = store.attempt(old["id"])
    assert store.packet("P3")["state"] == "ready" and p3["counted"] == 0
    assert any("P1" in s and OTHER in s for s in said)
    store.close()
