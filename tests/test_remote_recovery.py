"""Several machines (issue 12), when one of them dies: its packets come back through the
*lease*, not through the pid shortcut one host can take. Each simulated machine is an
``andon worker`` process with its own ``--machine`` name, clone, HOME and working folder;
one bare repository is the remote, one PostgreSQL server the store (tests/pgcluster.py).
No sleeps: the test polls the store (or a file the agent writes) with a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_remote_workers import HONEST, remote_repo, start_worker
from test_workers import assert_every_commit_green, squashes

from andon.store import connect

from helpers import _add_lines

IDS = ["P1", "P2"]
LEASE = {"ANDON_LEASE_S": "5"}  # short, so that a dead machine's lease lapses in the test


def synced_config(sync: Path) -> str:
    """The fast andon.toml with ``sync`` writable inside the agents' sandbox."""
    from helpers import FAST

    return _add_lines(FAST, "agent", f'sandbox_paths = ["rw:{sync}"]\n')


def wait_for(what: str, ready: Callable[[], object], proc: subprocess.Popen,
             deadline_s: float = 300) -> object:
    """Poll ``ready()`` until it gives something truthy; fail if ``proc`` ended first or
    after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = ready()
        if got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"the worker ended ({proc.returncode}) before {what}:\n"
                        f"{proc.communicate()[0]}")
        time.sleep(0.1)  # a poll interval, not a synchronisation: the deadline bounds it
    pytest.fail(f"no {what} within {deadline_s} s")


def store_rows(url: str, read: Callable) -> object:
    store = connect(Path("/nonexistent"), url)
    try:
        return read(store)
    finally:
        store.close()


@pytest.mark.e2e
@pytest.mark.waits
def test_a_machine_killed_mid_attempt_loses_its_packet_after_the_lease(
        tmp_path: Path, pg_store_target):
    sync = tmp_path / "sync"
    sync.mkdir()
    release = sync / "release"
    os.mkfifo(release)
    bare = remote_repo(tmp_path, IDS, synced_config(sync))
    url = pg_store_target.target
    # P1's first attempt says it started, then blocks until the test lets it go (and fails)
    blocking = (f"if [ \"$ANDON_PACKET_ID\" = P1 ] && [ ! -e {sync}/p1-started ]; then "
                f": > {sync}/p1-started; cat {release} >/dev/null; exit 1; fi; {HONEST}")
    m1 = start_worker(tmp_path, "m1", url, bare, "--machine", "m1", command=blocking,
                      env=LEASE)
    try:
        wait_for("P1's agent started", (sync / "p1-started").exists, m1)
        lease = store_rows(url, lambda s: [x for x in s.leases() if x["packet_id"] == "P1"])
        assert lease and lease[0]["worker"].startswith("m1:"), lease
        os.kill(m1.pid, signal.SIGKILL)  # the machine dies: no goodbye to the store
        m1.communicate(timeout=60)
        killed_at = datetime.now(UTC).isoformat(timespec="milliseconds")  # the store's form
        m2 = start_worker(tmp_path, "m2", url, bare, "--machine", "m2", command=blocking,
                          env=LEASE)
        out = m2.communicate(timeout=600)[0]
    finally:
        # m1's agent outlived its machine here (one host): let it go, it exits 1
        _release(release)
    assert m2.returncode == 0, out

    def read(store):
        return ({p: store.attempts(p) for p in IDS}, {p: store.events(p) for p in IDS})

    attempts, events = store_rows(url, read)
    first, second = attempts["P1"]
    assert (first["state"], first["counted"]) == ("interrupted", 0), first
    assert "lease of worker m1:" in first["reason"], first["reason"]
    assert second["state"] == "merged"
    assert [a["state"] for a in attempts["P2"]] == ["merged"]
    kinds = [e["kind"] for e in events["P1"]]
    assert "interrupted" in kinds and "failed" not in kinds, kinds
    assert kinds.count("merged") == 1
    # the lease path, not the pid shortcut: taken back only once m1's last lease had lapsed,
    # which was after the kill (it was renewed until then)
    taken = next(e for e in events["P1"] if e["kind"] == "interrupted")
    assert taken["data"]["worker"].startswith("m1:")
    expired = taken["data"]["expired_at"]
    assert taken["ts"] >= expired, taken
    assert expired > killed_at, (expired, killed_at)
    again = [e for e in events["P1"] if e["kind"] == "leased"][-1]
    assert again["data"]["worker"].startswith("m2:") and again["ts"] >= expired
    assert Counter(p for _, p in squashes(bare)) == dict.fromkeys(IDS, 1)


def _release(fifo: Path) -> None:
    """Open ``fifo`` for writing and close it: its reader sees the end of the file."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: nobody reads it (the agent already ended)
        pass


@pytest.mark.e2e
@pytest.mark.waits
@pytest.mark.parametrize("point", ["before-update-ref", "after-update-ref"])
def test_a_merge_left_by_a_dead_machine_is_finished_once_by_another(
        tmp_path: Path, pg_store_target, point: str):
    """m1 dies while merging P1: before the push of the integration branch (another
    machine must merge it), or after (the remote already has the squash commit: another
    machine must only record it). m2, already running and waiting on m1's lease (P2
    requires P1), finishes it once m1's lease lapses: P1 lands once, from its one attempt,
    and P2 after it."""
    sync = tmp_path / "sync"
    sync.mkdir()
    go = sync / "go"
    os.mkfifo(go)
    bare = remote_repo(tmp_path, IDS, synced_config(sync), requires={"P2": ["P1"]})
    url = pg_store_target.target
    # P1's agent waits for the test's go (m2 must be waiting first), then works honestly
    held = (f"if [ \"$ANDON_PACKET_ID\" = P1 ]; then : > {sync}/p1-started; "
            f"cat {go} >/dev/null; fi; {HONEST}")
    m1 = start_worker(tmp_path, "m1", url, bare, "--machine", "m1", command=held,
                      env={**LEASE, "ANDON_CRASHPOINT": point}, log=tmp_path / "m1.log")
    m2 = None
    try:
        wait_for("P1's agent started", (sync / "p1-started").exists, m1)
        m2 = start_worker(tmp_path, "m2", url, bare, "--machine", "m2", env=LEASE,
                          log=tmp_path / "m2.log")
        wait_for("m2 waiting on m1's lease",
                 lambda: "waiting for packets other runners hold: P1 (m1:"
                 in (tmp_path / "m2.log").read_text(), m2)
    finally:
        _release(go)
    m1.wait(timeout=600)
    assert m1.returncode == -signal.SIGKILL, (tmp_path / "m1.log").read_text()
    m2.wait(timeout=600)
    out2 = (tmp_path / "m2.log").read_text()
    assert m2.returncode == 0, out2

    def read(store):
        return ({p: store.attempts(p) for p in IDS}, {p: store.events(p) for p in IDS})

    attempts, events = store_rows(url, read)
    for p in IDS:
        assert [a["state"] for a in attempts[p]] == ["merged"], (p, attempts[p])
        assert [e["kind"] for e in events[p]].count("merged") == 1
    kinds = [e["kind"] for e in events["P1"]]
    assert "lease-expired" in kinds and "merge-resumed" in kinds, kinds
    assert kinds.index("lease-expired") < kinds.index("merge-resumed")
    assert attempts["P1"][0]["merge_sha"] == next(s for s, p in squashes(bare) if p == "P1")
    assert [p for _, p in squashes(bare)] == IDS
    assert assert_every_commit_green(bare, tmp_path) == len(IDS) + 1


@pytest.mark.e2e
@pytest.mark.waits
def test_postgresql_down_mid_run_under_two_machines(tmp_path: Path, pg_cluster,
                                                    pg_store_target):
    """The server goes down while each machine's agent works a packet, and stays down
    until both machines have met the outage: both say the store is unreachable, retry
    with backoff, say it is back once the server starts again, and the queue drains with
    every packet merged once, from its one attempt (the outage is shorter than the lease
    and than the store's 60 s of retries)."""
    sync = tmp_path / "sync"
    sync.mkdir()
    ids = ["P1", "P2", "P3", "P4"]
    bare = remote_repo(tmp_path, ids, synced_config(sync))
    url = pg_store_target.target
    # every agent says it started, then works once the test has stopped the server
    gated = (f": > {sync}/started-$ANDON_PACKET_ID; "
             f"while [ ! -e {sync}/go ]; do sleep 0.1; done; {HONEST}")
    env = {"ANDON_LEASE_S": "90"}
    names = ("m1", "m2")
    logs = {m: tmp_path / f"{m}.log" for m in names}
    machines = [start_worker(tmp_path, m, url, bare, "--machine", m, command=gated, env=env,
                             log=logs[m]) for m in names]
    down = False
    try:
        for m in machines:
            wait_for("an agent on each machine",
                     lambda: len(list(sync.glob("started-*"))) >= 2, m)
        holders = store_rows(url, lambda s: {x["worker"].split(":")[0] for x in s.leases()})
        assert holders == {"m1", "m2"}, holders
        pg_cluster.stop()
        down = True
        (sync / "go").touch()
        for m, name in zip(machines, names, strict=True):
            # each dispatcher renews its lease every 30 s: it meets the outage by then
            wait_for(f"{name} reporting the outage",
                     lambda n=name: "unreachable" in logs[n].read_text(), m, deadline_s=45)
    finally:
        (sync / "go").touch()
        if down:
            pg_cluster.start()
    for m in machines:
        m.wait(timeout=600)
    text = {m: logs[m].read_text() for m in names}
    assert [m.returncode for m in machines] == [0, 0], text
    for name, log in text.items():
        assert "reachable again after" in log, (name, log)

    def read(store):
        return ({p: store.attempts(p) for p in ids}, {p: store.events(p) for p in ids},
                store.events(kind="store-outage"))

    attempts, events, outages = store_rows(url, read)
    assert len(outages) >= 2, outages
    for p in ids:
        assert [a["state"] for a in attempts[p]] == ["merged"], (p, attempts[p])
        assert [e["kind"] for e in events[p]].count("merged") == 1
    assert Counter(p for _, p in squashes(bare)) == dict.fromkeys(ids, 1)
    assert assert_every_commit_green(bare, tmp_path) == len(ids) + 1
