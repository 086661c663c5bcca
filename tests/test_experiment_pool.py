"""Experiment runs on a pool of processes (`concurrency`): one forked process per run, the
same outcomes as one at a time with the same seed, no SQLite connection across a fork, a
run whose process dies recorded as an `error`, and a kill -9 of the experiment's process
group with two runs in flight resumed without repeating or losing a finished run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from experiment_agents import project, spec_file

from andon import forked
from andon.config import load_config
from andon.experiments.experiment import Experiment
from andon.experiments.pool import run_pool
from andon.experiments.spec import load_spec
from andon.experiments.stored import export_rows, status
from andon.git.repo import Repo
from andon.state import open_store

from helpers import GIT_ENV, andon

TESTS = Path(__file__).parent


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# -- the pool itself, on plain functions -------------------------------------------

def _pid(_key: str) -> dict:
    return {"pid": os.getpid()}


def _raise(key: str) -> dict:
    raise ValueError(f"bad {key}")


def _die(_key: str) -> dict:
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def test_each_run_in_a_process_of_its_own_and_every_end_reported():
    got = dict(run_pool(["a", "b", "c"], _pid, 2, lambda: True))
    pids = {k: v["value"]["pid"] for k, v in got.items()}
    assert sorted(pids) == ["a", "b", "c"]
    assert len(set(pids.values())) == 3 and os.getpid() not in pids.values()
    assert dict(run_pool(["x"], _raise, 2, lambda: True))["x"]["error"] == "ValueError: bad x"
    died = dict(run_pool(["y"], _die, 2, lambda: True))["y"]
    assert died == {"error": "the process died (killed by signal 9)"}


def test_runs_overlap_up_to_concurrency(tmp_path):
    def wait_for_other(key: str) -> dict:
        (tmp_path / key).write_text("")
        other = tmp_path / ("b" if key == "a" else "a")
        deadline = time.monotonic() + 20
        while not other.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"saw": other.exists()}
    got = dict(run_pool(["a", "b"], wait_for_other, 2, lambda: True))
    assert got["a"]["value"]["saw"] and got["b"]["value"]["saw"]


def test_no_run_starts_once_may_start_says_no():
    asked = []

    def may_start() -> bool:
        asked.append(1)
        return len(asked) == 1
    assert [k for k, _ in run_pool(["a", "b", "c"], _pid, 2, may_start)] == ["a"]


def test_stopping_early_kills_the_runs_in_flight(tmp_path):
    def slow(key: str) -> dict:
        if key == "slow":  # written whole, then renamed: never read half-written
            (tmp_path / "pid.tmp").write_text(str(os.getpid()))
            os.replace(tmp_path / "pid.tmp", tmp_path / "pid")
            time.sleep(120)  # the test kills it long before
        return {}
    abandoned = []
    pool = run_pool(["fast", "slow"], slow, 2, lambda: True, abandoned=abandoned.append)
    key, _ = next(pool)
    assert key == "fast"
    deadline = time.monotonic() + 20
    while not (tmp_path / "pid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pid = int((tmp_path / "pid").read_text())
    pool.close()
    assert abandoned == ["slow"] and not _alive(pid)


def test_a_child_ignores_ctrl_c_and_dies_with_its_parent():
    child = forked.start(lambda: signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
    assert forked.collect(child) == {"value": True}


# -- experiments at concurrency 2 --------------------------------------------------

def _experiment(root: Path, path: Path) -> Experiment:
    repo = Repo(root)
    return Experiment(repo, load_config(root), open_store(repo), load_spec(path))


def _outcomes(exp: Experiment, name: str) -> dict:
    return {(r["task"], r["condition"], r["repeat"]): (r["outcome"], r["failure_gate"],
                                                       r["false_claim"], r["claim_rule"])
            for r in export_rows(exp.store, name)}


@pytest.mark.e2e
def test_concurrency_2_gives_the_outcomes_of_concurrency_1(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", n=1)
    one, two = tmp_path / "m1", tmp_path / "m2"
    one.mkdir()
    two.mkdir()
    conds = {"A": "seeded_mul", "C": "seeded_mul"}  # with seed 7: A resolves, C does not
    serial = spec_file(root, conds, name="serial")
    parallel = spec_file(root, conds, name="parallel", extra="concurrency = 2")
    for p in (serial, parallel):  # one stage per run: the review would only add time
        p.write_text(p.read_text().replace('reviewer = "scripted:helpers:accept_review"\n',
                                           'stages = ["implement"]\n'))
    monkeypatch.setenv("EXP_MARKER_DIR", str(one))
    a = _experiment(root, serial)
    assert len(a.run().recorded) == 2
    expected = _outcomes(a, "serial")
    a.store.close()  # this test's second connection: the fork check below must see none
    monkeypatch.setenv("EXP_MARKER_DIR", str(two))
    monkeypatch.setenv("EXP_WAIT_PEER", "1")
    b = _experiment(root, parallel)
    assert len(b.run().recorded) == 2
    assert _outcomes(b, "parallel") == expected
    assert expected["P1", "A", 0][0] == "resolved"
    # C's agent wrote wrong code and said "This cannot fail, done!": the word list would
    # read "cannot" as an admission; its STATUS: done line makes it a false claim
    outcome, _gate, claimed, rule = expected["P1", "C", 0]
    assert (outcome, claimed, rule) == ("unresolved", True, "status-line")
    # every run in a process of its own, none of them this one
    pids = {p.read_text() for p in two.glob("started-*")}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    # both runs were in flight together
    assert len(list(two.glob("overlap-*"))) == 2
    # no run inherited the experiment's store connection (closed before each fork; a
    # second connection left open in this process is seen: found when writing this test)
    assert not list(one.glob("leak-*")) and not list(two.glob("leak-*"))
    # the store is usable after the forks
    assert status(b.store, "parallel")["done"] == 2


@pytest.mark.e2e
def test_a_run_whose_process_dies_is_an_error_and_the_others_finish(tmp_path):
    root = project(tmp_path / "proj", n=1)
    path = spec_file(root, {"ok": "good", "dies": "dies"}, name="dies",
                     extra="concurrency = 2")
    path.write_text(path.read_text().replace('reviewer = "scripted:helpers:accept_review"\n',
                                             'stages = ["implement"]\n'))
    exp = _experiment(root, path)
    progress = exp.run()
    assert len(progress.recorded) == 2
    rows = {r["condition"]: r for r in export_rows(exp.store, "dies")}
    assert rows["ok"]["outcome"] == "resolved"
    assert rows["dies"]["outcome"] == "error" and rows["dies"]["failure_layer"] == "harness"
    assert "killed by signal 9" in rows["dies"]["failure_summary"]
    assert (Path(rows["dies"]["evidence_dir"]) / "harness-error.txt").is_file()


@pytest.mark.e2e
def test_kill_9_with_two_runs_in_flight_then_resume(tmp_path):
    root = project(tmp_path / "proj", n=1)
    markers = tmp_path / "markers"
    markers.mkdir()
    path = spec_file(root, {"A": "slow_good", "B": "slow_good"}, repeats=2, name="kill2",
                     extra="concurrency = 2")
    path.write_text(path.read_text().replace('reviewer = "scripted:helpers:accept_review"\n',
                                             'stages = ["implement"]\n'))
    env = {**os.environ, **GIT_ENV, "EXP_MARKER_DIR": str(markers),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "andon", "-C", str(root), "experiment",
                             "run", str(path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        # repeat 0 finishes; both runs of repeat 1 are in flight, blocked in their agents
        while len(list(markers.glob("started-*.1"))) < 2:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    in_flight = [int(p.read_text()) for p in markers.glob("started-*.1")]
    assert len(set(in_flight)) == 2 and proc.pid not in in_flight
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in in_flight):  # the kill reached the run processes
        assert time.monotonic() < deadline
        time.sleep(0.05)
    store = open_store(Repo(root))
    before = store.experiment_runs("kill2")
    assert sorted((r["condition"], r["repeat"]) for r in before) == [("A", 0), ("B", 0)]
    (markers / "release").write_text("")
    again = andon(root, "experiment", "run", str(path), env={
        "EXP_MARKER_DIR": str(markers),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])})
    assert again.returncode == 0, again.stderr
    assert "2 run(s) now, 2 done before, 4 planned" in again.stdout
    after = store.experiment_runs("kill2")
    assert after[:2] == before  # the finished runs, untouched
    assert sorted((r["condition"], r["repeat"], r["outcome"]) for r in after) == [
        ("A", 0, "resolved"), ("A", 1, "resolved"), ("B", 0, "resolved"),
        ("B", 1, "resolved")]
    doc = json.loads(andon(root, "experiment", "status", str(path), "--json").stdout)
    assert doc["done"] == 4 and doc["left"] == 0
