"""`andon run --workers N`: several packets at once, in process (scripted agents, real git,
real pytest, real SQLite).

Each packet ``Pk`` adds its own module ``src/calc/mod_pk.py`` (no textual conflict between
packets) and plants ``tests/test_pk.py``. Each attempt runs in a worker process forked from
this one, so what agents share with the test crosses processes: where attempts must overlap,
the agents meet at a ``multiprocessing.Barrier`` (it breaks, and the test fails, unless that
many agents run at the same time); where an agent must wait for the dispatcher, it waits on a
``multiprocessing.Event`` the runner's own message sets; calls are counted in a file. No
sleeps.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from andon.agents import StageContext
from andon.config import load_config
from andon.exits import EXIT_HALTED, EXIT_INTERRUPTED, EXIT_OK
from andon.report.board import board, worker_rows
from andon.store import Store
from andon.workers import WorkerError

from helpers import andon, git, make_project, packet_md, project_test_command, runner_for, write

WAIT = 120  # seconds an agent waits for the others before the test fails


def mod_packet(pid: str, **fields: object) -> tuple[str, dict[str, str]]:
    """Packet ``pid``: add ``calc/mod_<pid>.py`` with ``VALUE = 1``."""
    name = f"mod_{pid.lower()}"
    fields.setdefault("allowed_paths", [f"src/calc/{name}.py"])
    return packet_md(pid, f"add-{name}", f"calc.{name}.VALUE is 1.", **fields), {
        f"tests/test_{pid.lower()}.py":
            f"from calc import {name}\n\n\ndef test_{pid.lower()}():\n"
            f"    assert {name}.VALUE == 1\n"}


def honest(ctx: StageContext) -> str:
    write(ctx, f"src/calc/mod_{ctx.packet.id.lower()}.py", "VALUE = 1\n")
    return "done"


def squashes(root: Path) -> list[tuple[str, str]]:
    """(sha, Andon-Packet) of every commit of andon/integration after main, oldest first."""
    out = git(root, "log", "--reverse", "-z", "main..andon/integration",
              "--format=%H%n%(trailers:key=Andon-Packet,valueonly)")
    rows = []
    for record in out.split("\0"):
        sha, _, value = record.strip("\n").partition("\n")
        if sha:
            rows.append((sha, value.strip()))
    return rows


def assert_every_commit_green(root: Path, tmp: Path) -> int:
    """Check out every commit of the integration branch (main's head included) in a fresh
    clone and run the whole suite there; fail naming the first red commit. Returns the
    number of commits checked."""
    shas = [git(root, "rev-parse", "main").strip()] + [s for s, _ in squashes(root)]
    clone = tmp / "walk"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    for sha in shas:
        git(clone, "checkout", "-q", "--detach", sha)
        # the projects' own lean venv, plugins off: andon's .venv autoloads a dozen plugins
        r = subprocess.run([*project_test_command(), "-q", "-p", "no:cacheprovider", "tests"],
                           cwd=clone, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(clone / "src"),
                                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        assert r.returncode == 0, f"integration commit {sha[:10]} is red:\n{r.stdout}"
    return len(shas)


class Messages:
    """The runner's echo: kept (the dispatcher's lines), and an Event per phrase a test
    waits for, shared with the worker processes."""

    def __init__(self, *phrases: str):
        self.lines: list[str] = []
        self.seen = {p: multiprocessing.Event() for p in phrases}

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        for phrase, ev in self.seen.items():
            if phrase in line:
                ev.set()


class Calls:
    """Agent calls per packet, appended to a file (the agents run in worker processes)."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()

    def add(self, pid: str) -> None:
        with open(self.path, "a") as f:  # one short O_APPEND write: lines never interleave
            f.write(pid + "\n")

    def counts(self) -> Counter[str]:
        return Counter(self.path.read_text().split())


@pytest.fixture(scope="module")
def drained(tmp_path_factory):
    """Six packets, three workers: the agents of the first three meet at a barrier (so three
    attempts really ran at once), then the other three."""
    tmp = tmp_path_factory.mktemp("drain")
    ids = [f"P{i}" for i in range(1, 7)]
    root = make_project(tmp / "repo", {p: mod_packet(p) for p in ids})
    barrier = multiprocessing.Barrier(3, timeout=WAIT)
    calls = Calls(tmp / "calls")

    def agent(ctx: StageContext) -> str:
        calls.add(ctx.packet.id)
        if ctx.packet.id in ("P1", "P2", "P3"):  # the first three claimed
            barrier.wait()
        return honest(ctx)
    runner = runner_for(root, agent)
    runner.workers = 3
    report = runner.run()
    return root, tmp, runner, report, calls.counts(), ids


def test_n_workers_drain_the_queue_each_packet_worked_and_merged_once(drained):
    root, _, runner, report, calls, ids = drained
    assert report.exit_status == EXIT_OK, report.message
    assert sorted(report.merged) == ids
    assert calls == Counter({p: 1 for p in ids}), calls  # no packet worked twice
    assert sorted(p for _, p in squashes(root)) == ids  # no merge lost or doubled
    store = runner.store
    for pid in ids:
        assert store.packet(pid)["state"] == "done"
        assert [a["state"] for a in store.attempts(pid)] == ["merged"]
        claims = [e for e in store.events(pid) if e["kind"] == "claimed"]
        assert len(claims) == 1 and claims[0]["data"]["worker"] in {"w1", "w2", "w3"}
    # the pool said when it started and stopped; the board shows no worker once it stopped
    assert [e["data"]["workers"] for e in store.events(kind="pool-started")] == [3]
    assert store.events(kind="pool-stopped")[-1]["data"]["why"] == "drained"
    assert worker_rows(store) == []


def test_every_commit_of_the_integration_branch_passes_the_suite(drained, tmp_path):
    root = drained[0]
    assert assert_every_commit_green(root, tmp_path) == 7


def test_requires_are_respected_across_workers(tmp_path):
    """B requires A and C requires B; D is free. B starts only once A is merged: its base
    contains A's squash commit; likewise C and B."""
    packets = {"A": mod_packet("A"), "B": mod_packet("B", requires=["A"]),
               "C": mod_packet("C", requires=["B"]), "D": mod_packet("D")}
    root = make_project(tmp_path / "repo", packets)
    runner = runner_for(root, honest)
    runner.workers = 3
    report = runner.run()
    assert report.exit_status == EXIT_OK and sorted(report.merged) == ["A", "B", "C", "D"]
    store = runner.store
    for dep, pid in (("A", "B"), ("B", "C")):
        merged = store.attempts(dep)[-1]["merge_sha"]
        base = store.attempts(pid)[-1]["base_sha"]
        r = subprocess.run(["git", "merge-base", "--is-ancestor", merged, base], cwd=root)
        assert r.returncode == 0, f"{pid} started before {dep} was merged"


def test_a_clash_only_the_merged_result_shows_is_never_merged(tmp_path):
    """Two packets that pass alone on the same base but not together (X's test allows one
    plugin module; Y adds a second). Both agents run at once (a barrier), so the second to
    merge lands on a moved branch: the merged-result suite fails, the branch stays green."""
    x_test = ("from pathlib import Path\n\nimport calc\n\n\ndef test_one_plugin():\n"
              "    here = Path(calc.__file__).parent\n"
              "    assert [p.name for p in here.glob('plugin_*.py')] == ['plugin_x.py']\n")
    y_test = "from calc import plugin_y\n\n\ndef test_y():\n    assert plugin_y.VALUE == 2\n"
    packets = {
        "X": (packet_md("X", "plugin-x", "Add plugin x.", allowed_paths=["src/calc/**"],
                        max_attempts=1), {"tests/test_x.py": x_test}),
        "Y": (packet_md("Y", "plugin-y", "Add plugin y.", allowed_paths=["src/calc/**"],
                        max_attempts=1), {"tests/test_y.py": y_test})}
    root = make_project(tmp_path / "repo", packets)
    barrier = multiprocessing.Barrier(2, timeout=WAIT)

    def agent(ctx: StageContext) -> str:
        barrier.wait()
        value = "1" if ctx.packet.id == "X" else "2"
        write(ctx, f"src/calc/plugin_{ctx.packet.id.lower()}.py", f"VALUE = {value}\n")
        return "done"
    runner = runner_for(root, agent)
    runner.workers = 2
    report = runner.run()
    merged = [p for _, p in squashes(root)]
    assert len(merged) == 1, merged  # one of the two; the other failed its merge check
    loser = "Y" if merged == ["X"] else "X"
    assert report.exit_status == EXIT_HALTED and report.halted_by == loser
    gates = runner.store.gate_results(runner.store.attempts(loser)[-1]["id"])
    assert [g["status"] for g in gates if g["gate"] == "merge"] == ["fail"]
    assert assert_every_commit_green(root, tmp_path) == 2


def test_a_blocked_packet_halts_new_claims_running_ones_finish(tmp_path):
    """A fails its only attempt (blocked) while B runs; B waits until the pool has said the
    line halts, then finishes and is merged. C and D are never claimed."""
    packets = {"A": mod_packet("A", max_attempts=1), "B": mod_packet("B"),
               "C": mod_packet("C"), "D": mod_packet("D")}
    root = make_project(tmp_path / "repo", packets)
    says = Messages("the line halts")
    started = multiprocessing.Barrier(2, timeout=WAIT)

    def agent(ctx: StageContext) -> str:
        started.wait()
        if ctx.packet.id == "A":
            write(ctx, "src/calc/mod_a.py", "VALUE = 0\n")  # wrong: its test fails
            return "done"
        assert says.seen["the line halts"].wait(WAIT), "the pool never said the line halts"
        return honest(ctx)
    runner = runner_for(root, agent, echo=says)
    runner.workers = 2
    report = runner.run()
    store = runner.store
    assert report.exit_status == EXIT_HALTED and report.halted_by == "A"
    assert store.packet("A")["state"] == "blocked"
    assert store.packet("B")["state"] == "done"  # finished and recorded after the halt
    for pid in ("C", "D"):
        assert store.packet(pid)["state"] == "ready" and store.attempts(pid) == []


def test_ctrl_c_once_stops_claims_and_lets_running_attempts_finish(tmp_path):
    ids = ["P1", "P2", "P3", "P4"]
    root = make_project(tmp_path / "repo", {p: mod_packet(p) for p in ids})
    says = Messages("Ctrl-C: no new claims")
    barrier = multiprocessing.Barrier(2, timeout=WAIT)

    def agent(ctx: StageContext) -> str:
        if barrier.wait() == 0:  # one of the two presses Ctrl-C, as a person would
            os.kill(os.getppid(), signal.SIGINT)  # the runner: this is its worker process
        assert says.seen["Ctrl-C: no new claims"].wait(WAIT)
        return honest(ctx)
    runner = runner_for(root, agent, echo=says)
    runner.workers = 2
    report = runner.run()
    assert report.exit_status == EXIT_INTERRUPTED
    assert sorted(report.merged) == ["P1", "P2"]
    assert [runner.store.attempts(p) for p in ("P3", "P4")] == [[], []]
    # the next run works the rest and repeats nothing
    again = runner_for(root, honest)
    again.workers = 2
    assert sorted(again.run().merged) == ["P3", "P4"]
    assert sorted(p for _, p in squashes(root)) == ids
    assert all(len(again.store.attempts(p)) == 1 for p in ids)


def test_ctrl_c_twice_marks_running_attempts_interrupted(tmp_path):
    ids = ["P1", "P2", "P3"]
    root = make_project(tmp_path / "repo", {p: mod_packet(p) for p in ids})
    release = multiprocessing.Event()
    barrier = multiprocessing.Barrier(2, timeout=WAIT)
    says = Messages("Ctrl-C: no new claims")

    def agent(ctx: StageContext) -> str:
        if barrier.wait() == 0:
            os.kill(os.getppid(), signal.SIGINT)
            assert says.seen["Ctrl-C: no new claims"].wait(WAIT)
            os.kill(os.getppid(), signal.SIGINT)
        release.wait(WAIT)
        return honest(ctx)
    runner = runner_for(root, agent, echo=says)
    runner.workers = 2
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    store = runner.store
    for pid in ("P1", "P2"):
        assert store.packet(pid)["state"] == "ready"
        [a] = store.attempts(pid)
        assert a["state"] == "interrupted" and a["counted"] == 0
    assert not release.is_set()  # the agents never got to finish: their workers were killed
    again = runner_for(root, honest)
    again.workers = 2
    assert sorted(again.run().merged) == ids
    assert sorted(p for _, p in squashes(root)) == ids


def test_the_board_shows_what_each_worker_is_doing(tmp_path):
    """While two attempts run, each agent reads the board from the store (as `andon status`
    would from another process): both workers busy, each with its packet; once the pool
    stops, no worker is listed (`andon status --json` has an empty list)."""
    root = make_project(tmp_path / "repo", {p: mod_packet(p) for p in ("P1", "P2")})
    barrier = multiprocessing.Barrier(2, timeout=WAIT)
    seen = tmp_path / "seen"
    seen.mkdir()

    def agent(ctx: StageContext) -> str:
        barrier.wait()  # both claimed and running
        store = Store(root / ".andon" / "andon.db")
        console = Console(record=True, width=200)
        console.print(board(store, load_config(root), []))
        (seen / ctx.packet.id).write_text(json.dumps({"rows": worker_rows(store),
                                                      "board": console.export_text()}))
        store.close()
        barrier.wait()  # neither finishes before both have looked
        return honest(ctx)
    runner = runner_for(root, agent)
    runner.workers = 2
    assert sorted(runner.run().merged) == ["P1", "P2"]
    for pid in ("P1", "P2"):
        got = json.loads((seen / pid).read_text())
        assert [(r["worker"], r["packet"], r["state"], r["attempt"]) for r in got["rows"]] \
            == [("w1", "P1", "running", 1), ("w2", "P2", "running", 1)]
        assert "workers: w1 P1 running · w2 P2 running" in got["board"]
        assert "worker" in got["board"].splitlines()[2]  # the column header
    status = andon(root, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["workers"] == []


def test_a_worker_killed_alone_costs_only_its_attempt(tmp_path):
    """P1's worker process dies (SIGKILL, by its agent) while P2's works: P2 still merges,
    P1's attempt is interrupted (not counted, packet ready), nothing new is claimed, and the
    run ends with a WorkerError; the next run merges P1 and P3."""
    ids = ["P1", "P2", "P3"]
    root = make_project(tmp_path / "repo", {p: mod_packet(p) for p in ids})
    barrier = multiprocessing.Barrier(2, timeout=WAIT)

    def agent(ctx: StageContext) -> str:
        barrier.wait()
        if ctx.packet.id == "P1":
            os.kill(os.getpid(), signal.SIGKILL)  # this worker process, not the runner
        return honest(ctx)
    runner = runner_for(root, agent)
    runner.workers = 2
    with pytest.raises(WorkerError, match="worker w1 on P1: the worker process died"):
        runner.run()
    store = runner.store
    assert store.packet("P2")["state"] == "done"
    assert store.packet("P1")["state"] == "ready"
    [a] = store.attempts("P1")
    assert a["state"] == "interrupted" and a["counted"] == 0
    assert store.attempts("P3") == []
    again = runner_for(root, honest)
    again.workers = 2
    assert sorted(again.run().merged) == ["P1", "P3"]
    assert sorted(p for _, p in squashes(root)) == ids


def test_the_packet_that_halted_the_line_is_the_one_status_names(tmp_path):
    """B blocks first and halts the line; A, still running, blocks after it. `andon run`
    said B, while `andon status` said A (the first blocked packet in id order): both name the
    packet blocked first."""
    packets = {"A": mod_packet("A", max_attempts=1), "B": mod_packet("B", max_attempts=1)}
    root = make_project(tmp_path / "repo", packets)
    says = Messages("the line halts")
    started = multiprocessing.Barrier(2, timeout=WAIT)

    def agent(ctx: StageContext) -> str:
        started.wait()
        if ctx.packet.id == "A":
            assert says.seen["the line halts"].wait(WAIT), "the pool never said the line halts"
        write(ctx, f"src/calc/mod_{ctx.packet.id.lower()}.py", "VALUE = 0\n")  # wrong
        return "done"
    runner = runner_for(root, agent, echo=says)
    runner.workers = 2
    report = runner.run()
    assert report.exit_status == EXIT_HALTED and report.halted_by == "B"
    assert {runner.store.packet(p)["state"] for p in "AB"} == {"blocked"}
    status = json.loads(andon(root, "status", "--json").stdout)
    assert status["halted_by"] == "B", status
