"""`andon run --workers 2` killed with -9, then a plain run: nothing lost, nothing repeated.

Through the real CLI in a subprocess, with command agents that write their packet's module
(``$ANDON_PACKET_ID`` names it). A crash point (``ANDON_CRASHPOINT``) reached in a worker
kills the runner and that worker; the other worker dies with the runner (the kernel's
parent-death signal), which the test sees as the run lock becoming free. Where the test kills
the runner itself, the agents announce themselves on a FIFO and block on another: no sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from test_e2e_resume import start_andon, wait_for_line
from test_workers import assert_every_commit_green, mod_packet, squashes

from andon.store import Store

from helpers import _add_lines, andon, config_toml, make_project

IDS = ["P1", "P2", "P3"]
HONEST = ("printf 'VALUE = 1\\n' > "
          "src/calc/mod_$(printf %s \"$ANDON_PACKET_ID\" | tr A-Z a-z).py")


def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         worktree_root=tmp_path / "worktrees")
    # the agents speak through FIFOs in tmp_path/sync: writable inside their sandbox
    (tmp_path / "sync").mkdir()
    config = _add_lines(config, "agent", f'sandbox_paths = ["rw:{tmp_path / "sync"}"]\n')
    return make_project(root, {p: mod_packet(p) for p in IDS}, config=config)


def wait_lock_free(root: Path) -> None:
    """Block (60 s at most) until nothing holds the run lock: every worker is gone."""
    lock = root / ".andon" / "run.lock"
    r = subprocess.run(["flock", "-w", "60", str(lock), "true"], check=False)
    assert r.returncode == 0, "a worker outlived the killed runner and still holds the lock"


def assert_drained_once(root: Path, tmp_path: Path) -> None:
    """Every packet done, squash-merged exactly once; interrupted attempts not counted; the
    integration branch green at every commit."""
    store = Store(root / ".andon" / "andon.db")
    try:
        for pid in IDS:
            assert store.packet(pid)["state"] == "done", pid
            attempts = store.attempts(pid)
            assert [a["state"] for a in attempts if a["counted"]] == ["merged"], attempts
            assert all(a["state"] == "interrupted" for a in attempts if not a["counted"])
            assert [e["kind"] for e in store.events(pid)].count("merged") == 1
    finally:
        store.close()
    assert sorted(p for _, p in squashes(root)) == IDS
    assert_every_commit_green(root, tmp_path)


@pytest.mark.parametrize("point", ["after-agent", "before-update-ref"])
def test_kill_9_at_a_crash_point_in_a_worker_then_resume(tmp_path, point):
    root = project(tmp_path)
    first = andon(root, "run", "--workers", "2", "--agent", "command", "--command", HONEST,
                  env={"ANDON_CRASHPOINT": point})
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    wait_lock_free(root)
    second = andon(root, "run", "--workers", "2", "--agent", "command", "--command", HONEST)
    assert second.returncode == 0, second.stdout + second.stderr
    assert_drained_once(root, tmp_path)


def test_kill_9_of_the_runner_while_two_agents_work_then_resume(tmp_path):
    """kill -9 of the runner's pid alone (not its group): the workers die with it, the
    agents (in sessions of their own) are ended by the next run, which recovers both
    attempts as interrupted and merges every packet once."""
    root = project(tmp_path)
    spoke, hold = tmp_path / "sync" / "spoke.fifo", tmp_path / "sync" / "hold.fifo"
    os.mkfifo(spoke)
    os.mkfifo(hold)
    agent = f"{HONEST}; echo \"$ANDON_PACKET_ID\" > '{spoke}'; read x < '{hold}'"
    log = tmp_path / "first.log"
    proc = start_andon(root, log, "--workers", "2", "--agent", "command", "--command", agent)
    try:
        said = set(wait_for_line(spoke, proc, log).split())
        while len(said) < 2:  # one line per agent; two may arrive in one read
            said |= set(wait_for_line(spoke, proc, log).split())
        assert said == {"P1", "P2"}
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    wait_lock_free(root)
    second = andon(root, "run", "--workers", "2", "--agent", "command", "--command", HONEST)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("was interrupted") == 2, second.stdout
    assert_drained_once(root, tmp_path)
