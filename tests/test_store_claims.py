"""Claims with a lease (store/claims.py), on both backends: the next claimable packet goes to
one worker only, a lease keeps it, and a dead worker's packet is reclaimed after its lease as
``interrupted`` — never counted as the agent's failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import pytest

from andon.errors import InvalidArgument

PAST = "2000-01-01T00:00:00.000+00:00"

# One worker process: open the store named by argv[1] (a PostgreSQL URL or a SQLite path),
# claim until nothing is left, print each packet claimed as one JSON line.
WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from andon.store import connect
    target, worker = sys.argv[1], sys.argv[2]
    url = target if target.startswith("postgresql") else None
    s = connect(Path(target), url)
    print(json.dumps({"ready": worker}), flush=True)
    sys.stdin.readline()  # every worker starts claiming at the same moment
    while (p := s.claim(worker, 600)) is not None:
        print(json.dumps({"claimed": p["id"]}), flush=True)
""")

# A worker that claims one packet, starts its attempt, says so, and waits to be killed.
DIES = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from andon.store import connect
    target = sys.argv[1]
    s = connect(Path(target), target if target.startswith("postgresql") else None)
    p = s.claim("doomed", float(sys.argv[2]))
    with s.tx():
        a = s.new_attempt(p["id"], "fake", 0)
        s.transition(p["id"], "running", "claimed", a["id"])
    print(json.dumps({"claimed": p["id"], "expires_at": p["lease"]["expires_at"]}), flush=True)
    sys.stdin.readline()
""")


def _packets(s, *specs):
    for pid, requires in specs:
        s.upsert_packet(pid, pid.lower(), f"{pid}.md", "sha", {"requires": requires})


def test_claim_takes_next_ready_packet_in_id_order_respecting_requires(store_target):
    s = store_target.open()
    _packets(s, ("P1", []), ("P2", ["P1"]), ("P3", []))
    first = s.claim("w1", 60)
    assert first["id"] == "P1" and first["lease"]["worker"] == "w1"
    assert first["state"] == "ready"  # the caller starts the attempt; claim changes no state
    # P2 waits for P1 (not done); P3 is free
    assert s.claim("w2", 60)["id"] == "P3"
    assert s.claim("w3", 60) is None
    assert [(x["packet_id"], x["worker"]) for x in s.leases()] == [("P1", "w1"), ("P3", "w2")]
    assert [e["kind"] for e in s.events("P1")] == ["registered", "leased"]


def test_claim_only_among_given_packets(store_target):
    s = store_target.open()
    _packets(s, ("P1", []), ("P2", []))
    assert s.claim("w", 60, among={"P2"})["id"] == "P2"
    assert s.claim("w", 60, among={"P2"}) is None


def test_renew_and_release(store_target):
    s = store_target.open()
    _packets(s, ("P1", []))
    lease = s.claim("w1", 60)["lease"]
    assert s.renew("w1", "P1", 120)
    assert s.leases()[0]["expires_at"] > lease["expires_at"]
    assert not s.renew("w2", "P1", 120), "a worker renewed a lease it does not hold"
    s.release("w2", "P1")  # not its lease: nothing happens
    assert s.claim("w2", 60) is None
    s.release("w1", "P1")
    assert s.claim("w2", 60)["id"] == "P1"
    assert not s.renew("w1", "P1", 60)


def test_bad_lease_is_refused_without_change(store_target):
    s = store_target.open()
    _packets(s, ("P1", []))
    for bad in (0, -1, float("nan")):
        with pytest.raises(InvalidArgument, match="lease_s"):
            s.claim("w", bad)
    assert s.leases() == []


def test_expired_lease_of_an_attempt_in_flight_is_reclaimed_as_interrupted(store_target):
    s = store_target.open()
    _packets(s, ("P1", []))
    s.claim("dead", 60)
    with s.tx():
        a = s.new_attempt("P1", "fake", 0)
        s.transition("P1", "running", "claimed", a["id"])
    s.db.execute("UPDATE leases SET expires_at = ?", (PAST,))  # the worker stopped renewing
    assert not s.renew("dead", "P1", 60), "an expired lease was renewed"
    got = s.claim("alive", 60)
    assert got["id"] == "P1" and got["state"] == "ready"
    interrupted = s.events("P1", kind="interrupted")
    assert len(interrupted) == 1
    assert interrupted[0]["from_state"] == "running" and interrupted[0]["to_state"] == "ready"
    assert interrupted[0]["data"] == {"worker": "dead", "expired_at": PAST}
    old = s.attempt(a["id"])
    assert old["state"] == "interrupted" and old["counted"] == 0
    assert "lease of worker dead expired" in old["reason"]


def test_expired_lease_while_merging_keeps_the_state_for_recovery(store_target):
    s = store_target.open()
    _packets(s, ("P1", []))
    s.claim("dead", 60)
    for to in ("running", "gating", "merging"):
        s.transition("P1", to, "x")
    s.db.execute("UPDATE leases SET expires_at = ?", (PAST,))
    assert s.reclaim_expired() == ["P1"]
    assert s.packet("P1")["state"] == "merging"
    assert s.events("P1", kind="lease-expired")[0]["data"]["state"] == "merging"
    assert s.leases() == [] and s.reclaim_expired() == []


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_concurrent_workers_never_claim_the_same_packet(store_target):
    """Six processes claim from one queue of 60 packets at the same moment: every packet
    is claimed exactly once."""
    s = store_target.open()
    ids = [f"P{i:02d}" for i in range(60)]
    _packets(s, *((i, []) for i in ids))
    procs = [_spawn(WORKER, store_target.target, f"w{n}") for n in range(6)]
    for p in procs:
        assert json.loads(p.stdout.readline()) == {"ready": p.args[-1]}
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    claimed: list[str] = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        claimed += [json.loads(line)["claimed"] for line in out.splitlines()]
    assert sorted(claimed) == ids, "a packet was claimed twice or not at all"
    assert len({x["worker"] for x in s.leases()}) > 1 or store_target.backend == "sqlite"


def test_killed_worker_packet_is_reclaimed_after_its_lease(store_target):
    s = store_target.open()
    _packets(s, ("P1", []))
    lease_s = 3.0
    proc = _spawn(DIES, store_target.target, str(lease_s))
    line = json.loads(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    expires = datetime.fromisoformat(line["expires_at"])
    if datetime.now(UTC) < expires:
        assert s.claim("other", 60) is None, "a live lease did not keep the packet"
    # the lease's length is the behaviour under test: wait it out
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.05)
    got = s.claim("other", 60)
    assert got is not None and got["id"] == "P1"
    [attempt] = s.attempts("P1")
    assert attempt["state"] == "interrupted" and attempt["counted"] == 0
    assert [e["kind"] for e in s.events("P1")][-2:] == ["interrupted", "leased"]
