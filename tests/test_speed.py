"""Time to verdict (issue 18): cached red results, concurrent independent runs, the count
and time of full-suite runs per attempt, and the budget on them.

Real git repositories, real pytest subprocesses, the real Runner with scripted agents. Test
runs are counted by the tests themselves: a planted module appends a line to a counter file
(an absolute path outside every clone) each time a pytest process imports it.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from helpers import (
    MUL_TEST,
    baseline_ids,
    config_toml,
    git,
    honest_mul,
    make_project,
    mul_packet,
    packet_md,
    project_test_command,
    runner_for,
    wrapper_config,
    write,
)


def counting_mul_test(counter: Path) -> str:
    """MUL_TEST that appends one line to ``counter`` whenever a test process imports it."""
    return (f"with open({str(counter)!r}, 'a') as _f:\n    _f.write('x\\n')\n\n\n"
            + MUL_TEST)


def count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def wrong_mul(ctx) -> str:
    write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a + b\n", append=True)
    return "done"


def test_a_retry_on_the_same_base_repeats_no_red_run(tmp_path, monkeypatch):
    """Attempt 1 (wrong mul) runs red twice and fails in the suite; attempt 2 on the same
    base records red as cached and starts no pytest before its agent: the planted module was
    imported exactly as often when attempt 2's agent started as when attempt 1 ended. Nor
    does it make a clone for red's runs (attempt 1 made one, beside its worktree)."""
    from andon.gates import red
    clones = []
    real_clone = red.fresh_clone

    def counting_clone(repo, sha, label):
        clones.append(label)
        return real_clone(repo, sha, label)
    monkeypatch.setattr(red, "fresh_clone", counting_clone)
    counter = tmp_path / "imports.txt"
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py":
                                                        counting_mul_test(counter)})},
                        config=config_toml(red_runs=2, hermetic_runs=1,
                                           hermetic_random_order=False))
    seen = []

    def agent(ctx):
        seen.append((count(counter), len(clones)))
        return (wrong_mul if ctx.attempt == 1 else honest_mul)(ctx)

    runner = runner_for(root, agent)
    report = runner.run()
    assert report.merged == ["P1"], report.message
    a1, a2 = runner.store.attempts("P1")
    red1 = next(g for g in runner.store.gate_results(a1["id"]) if g["gate"] == "red")
    red2 = next(g for g in runner.store.gate_results(a2["id"]) if g["gate"] == "red")
    assert [r["name"] for r in red1["evidence"]["runs"]] == ["red-1", "red-2"]
    assert red2["status"] == "pass" and "cached" in red2["summary"]
    assert red2["evidence"]["runs"] == [] and red2["evidence"]["cached"] is True
    assert red2["evidence"]["red_ids"] == red1["evidence"]["red_ids"]
    # attempt 1: 2 red runs before its agent; then the suite gate's plain-first run and, the
    # planted test failing there, the same selection under the usual profile (2): attempt 2's
    # agent starts with no run in between (and no clone)
    assert seen == [(2, 1), (4, 1)]


def test_cache_keys_name_what_can_change_a_test_outcome_and_nothing_else(tmp_path):
    """The red key changes with the tree red runs on (planted bytes), the hidden bytes, the
    test command and set-up, the number of runs, the tests' environment and andon's
    version; not with agent settings."""
    from andon import gates
    from andon.config import load_config
    from andon.gates.base import GateContext
    from andon.gates.cache import baseline_key, red_key
    from andon.git.repo import Repo
    from andon.packet import load_packets

    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": MUL_TEST})})
    repo, config = Repo(root), load_config(root)
    base = repo.rev_parse("HEAD")

    def red_of(plant_text=MUL_TEST, hidden=None, cfg=config, runs=3, env="env-1"):
        (root / "packets/P1/plant/tests/test_mul_p1.py").write_text(plant_text)
        h = root / "packets/P1/hidden/tests/test_mul_hidden.py"
        if hidden is None:
            shutil.rmtree(root / "packets/P1/hidden", ignore_errors=True)
        else:
            h.parent.mkdir(parents=True, exist_ok=True)
            h.write_text(hidden)
        packet = load_packets(root / "packets", root)[0]
        plant = repo.plant(base, packet.plant_blobs(), "plant")
        ctx = GateContext(repo, cfg, packet, root, tmp_path / "ev", base, plant,
                          env_digest=env)
        return red_key(ctx, ["tests/test_mul_p1.py"], runs)

    first = red_of()
    assert red_of() == first  # the same inputs, the same key (planting is deterministic)
    assert red_of(MUL_TEST + "\n# changed\n") != first
    assert red_of(hidden="def test_h():\n    pass\n") != first
    assert red_of(runs=2) != first
    assert red_of(env="env-2") != first  # the tests' interpreter's environment changed
    assert red_of(env=None) is None  # not known: not cached at all
    other_cmd = config.model_copy(deep=True)
    other_cmd.test.command = ["python", "-m", "pytest", "-x"]
    assert red_of(cfg=other_cmd) != first
    other_agent = config.model_copy(deep=True)
    other_agent.agent.timeout_s = 5
    assert red_of(cfg=other_agent) == first
    tree = repo.rev_parse("HEAD^{tree}")
    other_setup = config.model_copy(deep=True)
    other_setup.test.setup = ["python", "-c", "open('_version.py', 'w').write('V = 1')"]
    assert red_of(cfg=other_setup) != first  # what runs in every clone before its tests
    assert baseline_key(config, tree, "e") != baseline_key(other_setup, tree, "e")
    assert baseline_key(config, tree, "e") != baseline_key(other_cmd, tree, "e")
    assert baseline_key(config, tree, "e") == baseline_key(other_agent, tree, "e")
    assert baseline_key(config, tree, "e") != baseline_key(config, tree, "f")
    in_c = baseline_key(config, tree, "e")
    with pytest.MonkeyPatch.context() as mp:  # the locale every test process is given
        mp.setenv("LC_ALL", "de_DE.UTF-8")
        assert baseline_key(config, tree, "e") != in_c
        assert red_of() != first
    before, real = baseline_key(config, tree, "e"), gates.cache.__version__
    try:
        gates.cache.__version__ = "999"  # another andon: nothing it cached is reused
        assert baseline_key(config, tree, "e") != before
        assert red_of() != first
    finally:
        gates.cache.__version__ = real


def own_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv of its own (python, site-packages) whose tests import pytest from andon's venv
    (a ``.pth``): what is installed there can change without touching this suite's venv."""
    import subprocess
    import sys
    import sysconfig
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "python", site


def test_an_upgraded_package_in_the_tests_environment_runs_the_preflight_again(tmp_path):
    """The preflight's pass is cached per tree; the tests' interpreter's environment is part
    of what decides it. A package upgraded there between two runs (here: its new version
    breaks a test of the project) must not be answered from the cache: the next run
    preflights again and stops at preflight, layer environment, instead of letting an
    attempt's suite gate find the break and blame the agent."""
    from andon.exits import EXIT_PREFLIGHT
    python, site = own_venv(tmp_path)
    (site / "helperlib.py").write_text("VALUE = 1\n")
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(python), "-m", "pytest"])
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")},
                        config=config,
                        files={"tests/test_helper.py": "import helperlib\n\n\n"
                                                       "def test_value():\n"
                                                       "    assert helperlib.VALUE == 1\n"})
    said: list[str] = []
    assert runner_for(root, honest_mul, echo=said.append,
                      shared_preflight=False).run(only=["P1"]).merged == ["P1"]
    assert not any("cached" in s for s in said if s.startswith("preflight"))
    # a first run's preflight is on the head attempts start from (before the integration
    # branch exists, the base branch's), not on "an attempt's base the branch has moved past"
    assert any(s.startswith("preflight: running the full suite on ")
               and s.endswith(" (andon/integration)") for s in said), said
    (site / "helperlib.py").write_text("VALUE = 2\n")  # the "upgrade"
    said.clear()
    report = runner_for(root, honest_mul, echo=said.append, shared_preflight=False).run()
    assert not any("cached" in s for s in said if s.startswith("preflight")), said
    assert report.exit_status == EXIT_PREFLIGHT and report.merged == []
    assert "test_value" in report.preflight.summary


def test_an_approval_after_an_upgrade_keeps_no_stale_baseline(tmp_path):
    """A merge made by ``andon approve`` keeps the attempt's hermetic results as the merged
    tree's baseline only for the environment those runs saw. Upgraded in between (the new
    version breaks a test), the next run preflights the merged tree again and stops there."""
    from andon import decisions
    from andon.config import load_config
    from andon.exits import EXIT_PREFLIGHT
    from andon.git.repo import Repo
    python, site = own_venv(tmp_path)
    (site / "helperlib.py").write_text("VALUE = 1\n")
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(python), "-m", "pytest"])
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", gate="human"),
                                            "P2": mul_packet("P2")}, config=config,
                        files={"tests/test_helper.py": "import helperlib\n\n\n"
                                                       "def test_value():\n"
                                                       "    assert helperlib.VALUE == 1\n"})
    runner_for(root, honest_mul).run(only=["P1"])
    assert runner_for(root, honest_mul).store.packet("P1")["state"] == "awaiting_human"
    (site / "helperlib.py").write_text("VALUE = 2\n")  # after the attempt, before approval
    decisions.approve(Repo(root), load_config(root), "P1", "me", echo=lambda s: None)
    said: list[str] = []
    report = runner_for(root, honest_mul, echo=said.append).run(only=["P2"])
    assert not any("cached" in s for s in said if s.startswith("preflight")), said
    assert report.exit_status == EXIT_PREFLIGHT


def test_set_up_files_built_in_another_environment_are_not_copied_into_a_clone(tmp_path):
    """``[test] setup``'s output is kept and copied into later clones (clone_setup.py). What
    it built depends on the tests' environment (an extension compiled against an installed
    package's headers, here a module generated from its version): upgraded between two
    runs, the next clone must build again, not get the old build and fail the preflight."""
    import json

    from andon.exits import EXIT_OK
    python, site = own_venv(tmp_path)
    (site / "helperlib.py").write_text("VALUE = 1\n")
    build = "import helperlib; open('built.py', 'w').write('BUILT = %d\\n' % helperlib.VALUE)"
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(python), "-m", "pytest"],
                         add={"test": f"setup = {json.dumps([str(python), '-c', build])}\n"})
    neg = packet_md("P2", "negate", "calc.ops.neg negates.", allowed_paths=["src/calc/**"])
    neg_test = "from calc.ops import neg\n\n\ndef test_neg():\n    assert neg(4) == -4\n"

    def honest_neg(ctx) -> str:
        write(ctx, "src/calc/ops.py", "\n\ndef neg(a):\n    return -a\n", append=True)
        return "done"
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"),
                                            "P2": (neg, {"tests/test_neg_p2.py": neg_test})},
                        config=config,
                        files={".gitignore": "built.py\n",
                               "tests/test_built.py": (
                                   "import built\nimport helperlib\n\n\n"
                                   "def test_built_for_this_version():\n"
                                   "    assert built.BUILT == helperlib.VALUE\n")})
    assert runner_for(root, honest_mul).run(only=["P1"]).merged == ["P1"]
    assert list((root / ".andon" / "setup-cache").iterdir())  # kept for later clones
    (site / "helperlib.py").write_text("VALUE = 2\n")  # the "upgrade"
    report = runner_for(root, honest_neg).run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P2"]), report.message


@pytest.mark.parametrize("set_up", [False, True], ids=["no set-up", "with [test] setup"])
def test_red_runs_in_a_clone_of_its_own_while_git_writes_the_worktree(tmp_path, set_up):
    """Red, before any agent, judges a commit: its runs are made in a clone of the plant
    commit (outside the worktree root) while git writes the worktree, and the agent starts in
    the whole worktree. With ``[test] setup``, red runs in the worktree, so the agent starts on
    a tree already set up (here: the file the set-up writes is there)."""
    import json
    import sys
    build = [sys.executable, "-c", "open('built.txt', 'w')"]
    add = {"test": f"setup = {json.dumps(build)}\n"} if set_up else None
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=3, hermetic_runs=1,
                                           hermetic_random_order=False,
                                           worktree_root=tmp_path / "wt", add=add),
                        files={".gitignore": "built.txt\n"})
    seen = {}

    def agent(ctx):
        seen.update(planted=(ctx.worktree / "tests" / "test_mul_p1.py").is_file(),
                    head=(ctx.worktree / ".git" / "HEAD").is_file(),
                    built=(ctx.worktree / "built.txt").is_file())
        return honest_mul(ctx)

    runner = runner_for(root, agent)
    assert runner.run().merged == ["P1"]
    (attempt,) = runner.store.attempts("P1")
    red = next(g for g in runner.store.gate_results(attempt["id"]) if g["gate"] == "red")
    cwds = [Path(r["cwd"]) for r in red["evidence"]["runs"]]
    assert [r["name"] for r in red["evidence"]["runs"]] == ["red-1", "red-2", "red-3"]
    worktree = tmp_path / "wt" / "P1-1"
    if set_up:
        assert cwds[:2] == [worktree, worktree] and seen["built"]
    else:
        assert not any(c.is_relative_to(tmp_path / "wt") for c in cwds), cwds
        assert not seen["built"]
    assert seen["planted"] and seen["head"]


def test_a_process_the_worktree_build_starts_during_a_red_run_is_not_swept_with_it(
        tmp_path, monkeypatch):
    """After each of its runs, red (made in this process at ``jobs = 1``) kills every child
    of the process that started during the run: an agent's or a test's leftovers. The
    worktree is written meanwhile; a process it starts during red-1 and that is still alive
    when red-1 ends must survive, or the agent gets a half-written worktree. Here the build
    starts ``head -c 1`` while red-1 runs; it copies the byte written once red-1 has ended
    and swept."""
    import os
    import subprocess

    from andon import worktrees
    from andon.gates import base as gbase
    from andon.runners import pytest as runners_pytest
    go_r, go_w = os.pipe()      # red-1 runs: start the helper
    up_r, up_w = os.pipe()      # the helper has started
    end_r, end_w = os.pipe()    # red-1 has ended and swept: the helper may copy its byte
    now = {"run": None}
    real_suite, real_end = gbase.run_suite, runners_pytest.end_child
    real_identity = worktrees._identity

    def suite(*a, **k):
        now["run"] = a[3]
        return real_suite(*a, **k)

    def end_child(proc, known, *a, **k):
        if now["run"] != "red-1":
            return real_end(proc, known, *a, **k)
        now["run"] = None  # once
        os.write(go_w, b"x")
        os.read(up_r, 1)
        try:
            return real_end(proc, known, *a, **k)
        finally:
            os.write(end_w, b"x")

    def identity(repo):  # in the process that writes the worktree
        os.read(go_r, 1)
        helper = subprocess.Popen(["head", "-c", "1"], stdin=end_r, stdout=subprocess.PIPE)
        os.write(up_w, b"x")
        if helper.communicate()[0] != b"x":
            raise RuntimeError("the worktree's helper process was killed")
        return real_identity(repo)
    monkeypatch.setattr(gbase, "run_suite", suite)
    monkeypatch.setattr(runners_pytest, "end_child", end_child)
    monkeypatch.setattr(worktrees, "_identity", identity)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=2, hermetic_runs=1,
                                           hermetic_random_order=False,
                                           add={"test": "jobs = 1"}))
    try:
        report = runner_for(root, honest_mul).run()
    finally:
        for fd in (go_r, go_w, up_r, up_w, end_r, end_w):
            os.close(fd)
    assert report.merged == ["P1"], report.message


def test_red_is_recorded_when_the_worktree_cannot_be_made(tmp_path):
    """The worktree fails (its branch exists already) while red ran beside it: red's result
    and runs are in the store, then the harness error that says what failed."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=3, hermetic_runs=1,
                                           hermetic_random_order=False))
    git(root, "branch", "andon/P1/1")
    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx) or "done")
    runner.run()
    assert calls == []
    (attempt,) = runner.store.attempts("P1")
    gates = runner.store.gate_results(attempt["id"])
    assert [g["gate"] for g in gates] == ["red", "harness"], gates
    assert gates[0]["status"] == "pass"
    assert [r["name"] for r in gates[0]["evidence"]["runs"]] == ["red-1", "red-2", "red-3"]
    assert "the worktree could not be made: " in gates[1]["summary"]
    assert "andon/P1/1" in gates[1]["summary"]


def test_nothing_is_cached_for_a_test_command_whose_interpreter_andon_cannot_see(tmp_path):
    """``uv run pytest``, ``tox``, a script: the environment andon could fingerprint would be
    its own interpreter's, not the tests'. No environment key: a preflight's key names the
    run (each Baseline is one run's), so no other run reads what it kept."""
    from andon.baseline import Baseline
    from andon.config import load_config
    from andon.git.repo import Repo
    from andon.state import open_store
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    repo, config = Repo(root), load_config(root)
    tree = repo.rev_parse("HEAD^{tree}")

    def baseline(command):
        cfg = config.model_copy(deep=True)
        cfg.test.command = command
        return Baseline(repo, cfg, open_store(repo), tmp_path / "ev", lambda s: None)
    plain = baseline(["python", "-m", "pytest"])
    assert plain.key(tree) == baseline(["python", "-m", "pytest"]).key(tree)  # any run's
    assert plain.key(tree).startswith("preflight:")
    for wrapper in (["uv", "run", "pytest"], ["tox", "-e", "py"], ["./run-tests.sh"]):
        one, other = baseline(wrapper), baseline(wrapper)
        assert one.digest() is None
        assert one.key(tree).startswith(f"preflight-run:{one.run_scope}:")
        assert one.key(tree) != other.key(tree)  # another run's


@pytest.mark.parametrize("wrapper", [False, True], ids=["interpreter", "wrapper"])
def test_what_passes_on_a_base_that_is_no_longer_the_head_is_that_bases_own(tmp_path, wrapper):
    """A retry keeps its first attempt's base; when the branch moved since and nothing is
    known of that base's tree (a new run with a wrapper command, an upgraded environment),
    its PASS_TO_PASS set came from a preflight of the *head*, and so was empty: an attempt
    that broke an existing test was held to nothing. The base itself is preflighted now."""
    import stat

    from andon.baseline import Baseline
    from andon.config import load_config
    from andon.git.repo import Repo
    from andon.state import open_store
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    old_base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_more.py").write_text("def test_more():\n    assert True\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the branch moves on")
    repo, config = Repo(root), load_config(root)
    if wrapper:
        script = tmp_path / "run-tests.sh"
        script.write_text(f'#!/bin/sh\nexec {project_test_command()[0]} -m pytest "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        config.test.command = [str(script)]
    baseline = Baseline(repo, config, open_store(repo), tmp_path / "ev", lambda s: None)
    passing = baseline.passing(old_base)
    assert {"tests.test_ops::test_add", "tests.test_ops::test_div"} <= passing, passing
    assert not any("test_more" in t for t in passing)  # the head's own test is not the base's


@pytest.fixture
def preflights(tmp_path, monkeypatch):
    """Every preflight (a full-suite run) made from now on, in this process or a worker
    process forked from it: the commits they ran on, one line each in a file."""
    from andon.gates import preflight
    log, real = tmp_path / "preflights.log", preflight.run

    def counted(repo, config, sha, *args, **kwargs):
        with open(log, "a") as f:
            f.write(sha + "\n")
        return real(repo, config, sha, *args, **kwargs)
    monkeypatch.setattr(preflight, "run", counted)
    return lambda: log.read_text().split() if log.exists() else []


def test_a_wrapper_test_command_preflights_once_per_run_not_once_per_attempt(tmp_path,
                                                                            preflights):
    """Nothing is kept across runs for a test command whose interpreter andon cannot see,
    but within one run what the preflight found holds (the run's own walk watches the
    environment): one preflight, with one worker or two, however many attempts follow —
    P2's merge check, on the head P1 merged in another worker process, included."""
    config = wrapper_config(tmp_path)
    for workers in (1, 2):
        root = make_project(tmp_path / f"repo{workers}", {"P1": mul_packet("P1"),
                                                          "P2": mul_packet("P2")},
                            config=config)
        before = len(preflights())
        runner = runner_for(root, honest_mul)
        runner.workers = workers
        merged = runner.run().merged
        if workers == 2:  # side by side, so P2 merged onto P1's merge (one worker: P1 first,
            # and P2's planted test already passes on that head)
            assert sorted(merged) == ["P1", "P2"]
        assert len(preflights()) - before == 1, (workers, preflights())


SQUARE_TEST = "from calc.sq import square\n\n\ndef test_square():\n    assert square(3) == 9\n"


def test_a_wrapper_test_command_preflights_no_head_a_worker_merged(tmp_path, preflights):
    """With a test command whose interpreter andon cannot see, what passes on a tree holds
    for the run only. It was kept in the process's memory, so a worker process's merge told
    only that process: the next attempt, forked on the head that merge made, ran the whole
    suite again as a preflight — one more full-suite run per merge with ``--workers``. The
    run's workers share it through the store now, and it is gone when the run ends."""
    square = packet_md("P2", "square", "calc.sq.square squares.", requires=["P1"],
                       allowed_paths=["src/calc/**"])

    def by_packet(ctx) -> str:
        if ctx.packet.id == "P1":
            return honest_mul(ctx)
        write(ctx, "src/calc/sq.py", "def square(x):\n    return x * x\n")
        return "done"
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"),
                                            "P2": (square, {"tests/test_sq_p2.py": SQUARE_TEST})},
                        config=wrapper_config(tmp_path))
    runner = runner_for(root, by_packet, shared_preflight=False)
    # a run killed long ago left a row of its own: this run drops it
    runner.store.set_baseline("preflight-run:dead:1", {"t::a"}, {})
    db = sqlite3.connect(root / ".andon" / "andon.db")
    db.execute("UPDATE results_cache SET created_at = '2000-01-01T00:00:00.000+00:00'")
    db.commit()
    runner.workers = 2
    assert sorted(runner.run().merged) == ["P1", "P2"]
    assert len(preflights()) == 1, preflights()  # P2 started on P1's merge, known
    left = db.execute("SELECT count(*) FROM results_cache WHERE key LIKE 'preflight-run:%'")
    assert left.fetchone()[0] == 0  # what held for that run is gone with it, the old row too
    db.close()


def test_a_run_only_baseline_changed_in_the_store_is_not_used(tmp_path, preflights):
    """An agent that can write the store (no sandbox) empties the ids a run kept for a tree,
    so that later attempts are held to no PASS_TO_PASS test: the row no longer matches the
    run's signature, andon says so and preflights again."""
    from andon.baseline import Baseline
    from andon.config import load_config
    from andon.git.repo import Repo
    from andon.state import open_store
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=wrapper_config(tmp_path))
    repo, said = Repo(root), []
    baseline = Baseline(repo, load_config(root), open_store(repo), tmp_path / "ev",
                        said.append)
    head = git(root, "rev-parse", "HEAD").strip()
    want = baseline.passing(head)
    assert want and baseline.passing(head) == want and len(preflights()) == 1
    db = sqlite3.connect(root / ".andon" / "andon.db")
    db.execute("""UPDATE results_cache SET data = '{"passed_ids": []}'""")
    db.commit()
    assert baseline.passing(head) == want and len(preflights()) == 2
    assert sum("changed outside andon" in s for s in said) == 1, said  # said once
    # a row this run signed, for another tree, put under this tree's key: the key is signed
    # too; and a row of the wrong shape is not used either, rather than stopping the run
    tree = repo.resolve(f"{head}^{{tree}}")
    baseline.remember("0" * 40, {"tests.test_ops::test_add"}, {})
    db.execute("UPDATE results_cache SET data = (SELECT data FROM results_cache WHERE key = ?),"
               " evidence = (SELECT evidence FROM results_cache WHERE key = ?) WHERE key = ?",
               (baseline.key("0" * 40), baseline.key("0" * 40), baseline.key(tree)))
    db.commit()
    assert baseline.known(tree) is None and baseline.passing(head) == want
    db.execute("UPDATE results_cache SET evidence = '[]', data = '{\"passed_ids\": 5}'")
    db.commit()
    db.close()
    assert baseline.known(tree) is None and baseline.passing(head) == want
    assert len(preflights()) == 4
    other = Baseline(repo, load_config(root), open_store(repo), tmp_path / "ev",
                     said.append)
    assert other.known(repo.resolve(f"{head}^{{tree}}")) is None  # another run's: not read


def test_the_run_only_rows_of_a_run_killed_a_day_ago_are_dropped(tmp_path):
    """A run killed outright never drops its run-only rows; the next run drops those over a
    day old (a live run's rows are younger, and one that lost them preflights again)."""
    from andon.baseline import Baseline
    from andon.config import load_config
    from andon.git.repo import Repo
    from andon.state import open_store
    root = make_project(tmp_path / "repo", {})
    store = open_store(Repo(root))
    for k in ("preflight-run:dead:1", "preflight-run:live:1", "preflight:kept"):
        store.set_baseline(k, {"t::a"}, {})
    db = sqlite3.connect(root / ".andon" / "andon.db")
    db.execute("UPDATE results_cache SET created_at = '2000-01-01T00:00:00.000+00:00' "
               "WHERE key != 'preflight-run:live:1'")
    db.commit()
    db.close()
    Baseline(Repo(root), load_config(root), store, tmp_path / "ev",
             lambda s: None).forget_old_runs()
    assert baseline_ids(store, "preflight-run:dead:1") is None
    assert baseline_ids(store, "preflight-run:live:1") == {"t::a"}
    assert baseline_ids(store, "preflight:kept") == {"t::a"}


class _Stop(Exception):
    """Raised from the run's output once the first attempt has failed: the run ends there."""


def test_an_upgraded_package_in_the_tests_environment_runs_red_again(tmp_path):
    """Red's pass is cached for a retry on the same base. When the tests' environment changed
    in between (the new version of an installed package already does what the packet asks),
    the retry runs red again and finds the planted test already passing, instead of
    re-using "it failed on the base" and letting an agent be credited with nothing."""
    python, site = own_venv(tmp_path)
    (site / "helperlib.py").write_text("def triple(x):\n    return 0\n")
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(python), "-m", "pytest"])
    planted = ("from helperlib import triple\n\n\n"
               "def test_triple():\n    assert triple(2) == 6\n")
    md = packet_md("P1", "triple", "helperlib.triple triples.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_triple_p1.py": planted})},
                        config=config)

    def stop_after_the_first_attempt(line: str) -> None:
        if line.startswith("P1: needs work"):
            raise _Stop
    runner = runner_for(root, wrong_mul, echo=stop_after_the_first_attempt)
    with pytest.raises(_Stop):
        runner.run()
    (a1,) = runner.store.attempts("P1")
    red1 = next(g for g in runner.store.gate_results(a1["id"]) if g["gate"] == "red")
    assert red1["status"] == "pass" and not red1["evidence"].get("cached")
    (site / "helperlib.py").write_text("def triple(x):\n    return 3 * x\n")
    runner = runner_for(root, wrong_mul)
    runner.run()
    a2 = runner.store.attempts("P1")[1]
    red2 = next(g for g in runner.store.gate_results(a2["id"]) if g["gate"] == "red")
    assert not red2["evidence"].get("cached"), red2["summary"]
    assert red2["status"] == "fail" and "passes on the base" in red2["summary"]


# -- independent runs at the same time ------------------------------------------------------

LANES = config_toml(red_runs=1, hermetic_runs=3, add={"test": "jobs = 2\n"})

SECOND_RUN_TEST = '''\
from pathlib import Path

MARK = Path(__file__).with_name("_ran_before.txt")


def test_only_the_first_time():
    seen = MARK.exists()
    MARK.write_text("ran")
    assert not seen
'''


def lanes_project(tmp_path: Path, extra_paths: list[str]) -> Path:
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", max_attempts=1,
                   allowed_paths=["src/calc/**", *extra_paths])
    return make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": MUL_TEST})},
                        config=LANES)


def hermetic_row(runner) -> dict:
    att = runner.store.attempts("P1")[0]
    return next(g for g in runner.store.gate_results(att["id"]) if g["gate"] == "hermetic")


def test_hermetic_runs_in_two_lanes_of_two_and_an_honest_agent_is_merged(tmp_path):
    """jobs = 2: the suite run (which is hermetic-1: the worktree holds exactly the candidate,
    gates/joint.py), hermetic-2, hermetic-3 and the random-order run in two fresh clones of two
    runs each; all four ran, in clones of their own (their cwd differ by lane), and the honest
    change merges."""
    root = lanes_project(tmp_path, [])
    runner = runner_for(root, honest_mul)
    assert runner.run().merged == ["P1"]
    herm = hermetic_row(runner)
    assert herm["evidence"]["lanes"] == [["suite", "hermetic-2"],
                                         ["hermetic-3", "hermetic-random"]]
    att = runner.store.attempts("P1")[0]
    suite = next(g for g in runner.store.gate_results(att["id"]) if g["gate"] == "suite")
    runs = {r["name"]: r for r in [*suite["evidence"]["runs"], *herm["evidence"]["runs"]]}
    assert list(runs) == ["suite", "hermetic-2", "hermetic-3", "hermetic-random"]
    assert runs["suite"]["cwd"] == runs["hermetic-2"]["cwd"]
    assert runs["hermetic-3"]["cwd"] == runs["hermetic-random"]["cwd"]
    assert runs["suite"]["cwd"] != runs["hermetic-3"]["cwd"]
    assert len({r["log_path"] for r in runs.values()}) == 4
    assert all(r["counts"]["passed"] == 4 for r in runs.values())  # 2 old + 2 planted
    assert "2 fresh clones at the same time" in herm["summary"]


def test_a_test_that_fails_only_on_its_second_run_is_still_caught(tmp_path):
    """The agent adds a test that leaves a file beside itself and fails when it finds one:
    it passes in the first run of each clone and fails in the second — in the worktree
    already, where the suite gate's plain-first run (which takes the agent's test modules
    too) comes before the full suite."""
    root = lanes_project(tmp_path, ["tests/test_once.py"])

    def second_run_fails(ctx):
        honest_mul(ctx)
        write(ctx, "tests/test_once.py", SECOND_RUN_TEST)

    runner = runner_for(root, second_run_fails)
    runner.run()
    att = runner.store.attempts("P1")[0]
    suite = next(g for g in runner.store.gate_results(att["id"]) if g["gate"] == "suite")
    assert (suite["status"], suite["failure_layer"]) == ("fail", "code")
    assert [r["name"] for r in suite["evidence"]["runs"]] == ["suite"]
    assert {(f["kind"], f["test_id"]) for f in suite["evidence"]["findings"]} == {
        ("failing-test", "tests.test_once::test_only_the_first_time")}


def test_a_test_that_fails_only_in_random_order_is_still_caught(tmp_path):
    """20 tests that pass only in file order: the in-order runs pass, the random-order run
    (in the second lane) fails and its seed is in the summary."""
    chain = "SEEN = []\n" + "".join(
        f"\n\ndef test_step_{i:02d}():\n    assert SEEN == list(range({i}))\n"
        f"    SEEN.append({i})\n" for i in range(20))
    root = lanes_project(tmp_path, ["tests/test_chain.py"])

    def order_dependent(ctx):
        honest_mul(ctx)
        write(ctx, "tests/test_chain.py", chain)

    runner = runner_for(root, order_dependent)
    runner.run()
    herm = hermetic_row(runner)
    assert herm["status"] == "fail"
    runs = {r["name"]: r for r in herm["evidence"]["runs"]}
    assert runs["hermetic-2"]["counts"]["failed"] == 0  # hermetic-1 is the suite gate's run
    assert runs["hermetic-random"]["counts"]["failed"] > 0
    assert f"seed {runs['hermetic-random']['seed']}" in herm["summary"]
    assert {f["path"] for f in herm["evidence"]["findings"]} == {"tests/test_chain.py"}


def test_a_test_that_fails_only_in_a_fresh_clone_is_still_caught(tmp_path):
    """mul reads a git-ignored file the agent left in its worktree: the suite gate passes
    there, every fresh clone lacks it."""
    root = lanes_project(tmp_path, [])

    def reads_ignored(ctx):
        write(ctx, "src/calc/.gitignore", "_factor.txt\n")
        write(ctx, "src/calc/_factor.txt", "1\n")
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    import pathlib\n"
              "    f = pathlib.Path(__file__).with_name('_factor.txt')\n"
              "    return a * b * int(f.read_text())\n", append=True)

    runner = runner_for(root, reads_ignored)
    runner.run()
    att = runner.store.attempts("P1")[0]
    rows = {g["gate"]: g for g in runner.store.gate_results(att["id"])}
    assert rows["suite"]["status"] == "pass"
    herm = rows["hermetic"]
    assert herm["status"] == "fail" and "run hermetic-1" in herm["summary"]
    assert {f["kind"] for f in herm["evidence"]["findings"]} == {"fail-to-pass"}


# -- accounting -------------------------------------------------------------------------------

def test_show_and_the_board_count_each_attempts_full_suite_runs_and_their_seconds(tmp_path):
    """red 2 runs of the planted file; suite 1 (which is hermetic-1: the worktree holds exactly
    the candidate) + the random-order run: 2 full-suite runs out of 4 test runs, their seconds
    the sum of the recorded runs' durations, in `andon show` (text and --json) and on the
    board."""
    import json

    from helpers import andon

    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": MUL_TEST})},
                        config=config_toml(red_runs=2, hermetic_runs=1))
    runner = runner_for(root, honest_mul)
    assert runner.run().merged == ["P1"]
    detail = json.loads(andon(root, "show", "P1", "--json").stdout)
    [a] = detail["attempts"]
    runs = [r for g in a["gates"] for r in g["evidence"].get("runs", [])]
    assert [r["name"] for r in runs] == ["red-1", "red-2", "suite", "hermetic-random"]
    full = sum(r["duration_s"] for r in runs[2:])
    assert a["test_runs"]["full_suite_runs"] == 2 and a["test_runs"]["test_runs"] == 4
    assert abs(a["test_runs"]["full_suite_s"] - full) < 0.01
    assert abs(a["test_runs"]["test_s"] - sum(r["duration_s"] for r in runs)) < 0.01
    text = andon(root, "show", "P1").stdout
    assert f"test runs: 2 full-suite run(s) {full:.1f} s; 4 test run(s) in all" in text
    board = andon(root, "status").stdout
    assert f"2 suites {'<1' if full < 1 else f'{full:.0f}'} s" in board
    status = json.loads(andon(root, "status", "--json").stdout)
    assert status["packets"][0]["last_attempt"]["test_runs"]["full_suite_runs"] == 2


# -- the tests' environment is walked after what ran code, not after every gate ----------

def test_an_honest_attempt_walks_site_packages_only_around_code_that_ran(tmp_path,
                                                                         monkeypatch):
    """The fingerprint of the tests' interpreter (contain/envprint.py) is taken when the run
    starts and again after each agent stage and each gate that ran code: not after a skipped
    gate nor after scope or patterns, which only read git and the changed files, nor after
    the hermetic gate when it judges the runs the suite gate made (gates/joint.py: they ran
    inside the suite gate, whose walk saw them), nor before an agent stage when the last walk
    found nothing and no code ran since (after red, before implement; after the gates, before
    the review). On the default config that is 6 walks when the preflight runs (one keys
    its cache, one after it is the run's start), then red, implement, suite, review (9
    before issue 12's benchmark, 13 before issue 18); a later run whose preflight is cached
    walks once for both."""
    from andon.contain import envprint
    walks: list[int] = []
    real = envprint.fingerprint
    monkeypatch.setattr(envprint, "fingerprint", lambda where: walks.append(1) or real(where))
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    assert runner_for(root, honest_mul, shared_preflight=False).run().merged == ["P1"]
    assert len(walks) == 6
    walks.clear()
    said: list[str] = []
    runner_for(root, honest_mul, echo=said.append,  # P1 is done: nothing to attempt
               shared_preflight=False).run()
    assert any(s.startswith("preflight: pass: cached") for s in said), said
    assert len(walks) == 1


def test_a_pth_written_by_the_suite_gates_tests_is_still_caught(tmp_path):
    """The cheating side of the walk above: a test of the candidate that drops a ``.pth`` into
    the tests' interpreter's site-packages fails the suite gate with an ``outside-worktree``
    finding (an own venv, so this suite's environment is not touched)."""
    import subprocess
    import sys
    import sysconfig
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    drop = site / "steer.pth"
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(venv / "bin" / "python"), "-m", "pytest"])
    packet = mul_packet("P1", allowed_paths=["src/calc/**", "tests/**"])
    root = make_project(tmp_path / "repo", {"P1": packet}, config=config)

    def cheat(ctx) -> str:
        honest_mul(ctx)
        write(ctx, "tests/test_steer.py", f"def test_steer():\n"
                                          f"    open({str(drop)!r}, 'w').write('')\n")
        return "done"
    runner = runner_for(root, cheat)
    assert runner.run().merged == []
    (att, *_) = runner.store.attempts("P1")
    bad = next(g for g in runner.store.gate_results(att["id"]) if g["status"] == "fail")
    assert bad["gate"] == "suite"
    assert ("outside-worktree", str(drop)) in [(f["kind"], f["path"])
                                               for f in bad["evidence"]["findings"]]



@pytest.fixture
def server_starts(monkeypatch):
    """The fork servers started and the preflights run, in order, from an empty pool:
    ("server", slot, shuffled) and ("preflight",); the pool is emptied again after."""
    from andon.contain import forkpool
    from andon.gates import preflight

    forkpool.close_all()  # this process's servers of earlier tests would hide any start
    order: list[tuple] = []
    real_start, real_preflight = forkpool.Server.start, preflight.run

    def start(interpreter, env, blocked, key):
        order.append(("server", key[1], "randomly" in blocked))
        return real_start(interpreter, env, blocked, key)

    def preflight_run(*args, **kwargs):
        order.append(("preflight",))
        return real_preflight(*args, **kwargs)
    monkeypatch.setattr(forkpool.Server, "start", staticmethod(start))
    monkeypatch.setattr(preflight, "run", preflight_run)
    yield order
    forkpool.close_all()


def test_the_fork_servers_an_attempt_needs_start_before_the_preflight_not_on_demand(
        tmp_path, server_starts):
    """The servers red and hermetic fork their runs from (a slot per repeated run, and the
    random-order run's) start, all at once, before the preflight's suite runs, so that they
    come up beside it: the first attempt starts none of its own."""
    from andon.gates import lanes

    root = make_project(tmp_path / "repo", {"p1": mul_packet()}, config=config_toml())
    runner = runner_for(root, honest_mul, shared_preflight=False)
    assert runner.run().merged == ["P1"]
    wanted = [("server", slot, shuffled)
              for slot, shuffled in lanes.servers_of_an_attempt(runner.config)]
    assert wanted == [("server", 0, False), ("server", 1, False), ("server", 2, False),
                      ("server", 3, True)]
    assert sorted(server_starts) == sorted([*wanted, ("preflight",)])
    assert server_starts[-1] == ("preflight",), server_starts


def test_a_run_with_nothing_to_claim_starts_no_fork_server(tmp_path, server_starts):
    """With every packet done a run starts no server for attempts that will not be made (a
    review found a no-op run spending 0.55 CPU-s more on them)."""
    from andon.contain import forkpool

    root = make_project(tmp_path / "repo", {"p1": mul_packet()}, config=config_toml())
    assert runner_for(root, honest_mul).run().merged == ["P1"]
    forkpool.close_all()
    server_starts.clear()
    assert runner_for(root, honest_mul).run().merged == []
    assert server_starts == []
