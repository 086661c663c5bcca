"""The editable-install trap (issue 9): the tests of a clone must import the clone's code. With
`[test] pythonpath = []` and the project installed from the user's own checkout, the harness
stops with layer environment naming both paths instead of judging the user's code. A real
virtualenv whose site-packages points at the user's checkout (as an editable install does)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from andon.exits import EXIT_OK, EXIT_PREFLIGHT
from andon.git.repo import Repo

from helpers import config_toml, honest_mul, make_project, mul_packet, runner_for


def trap_venv(where: Path, checkout_src: Path) -> Path:
    """A virtualenv that sees this environment's packages (pytest, andon) and, through a .pth
    file as an editable install writes it, the user's checkout's ``src``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "__editable__.calc.pth").write_text(str(checkout_src) + "\n")
    return where / "bin" / "python"


def project(tmp_path: Path, pythonpath: str) -> Path:
    root = tmp_path / "repo"
    python = trap_venv(tmp_path / "venv", root / "src")
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=[str(python), "-m", "pytest"]).replace(
        'pythonpath = ["src"]', f"pythonpath = {pythonpath}")
    return make_project(root, {"P1": mul_packet("P1")}, config=config)


def test_tests_importing_the_users_checkout_stop_preflight_with_both_paths(tmp_path):
    root = project(tmp_path, "[]")
    calls = []
    report = runner_for(root, lambda ctx: calls.append(1) or honest_mul(ctx)).run()
    pf = report.preflight
    assert (report.exit_status, pf.status, pf.layer) == (EXIT_PREFLIGHT, "error",
                                                         "environment")
    assert f"from {root / 'src' / 'calc'}" in pf.summary
    assert "outside the clone" in pf.summary and "[test] pythonpath" in pf.summary
    assert "'src'" in pf.summary
    assert calls == []


def test_with_pythonpath_the_clone_wins_and_the_honest_agent_is_merged(tmp_path):
    root = project(tmp_path, '["src"]')
    report = runner_for(root, honest_mul).run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message


# -- one question per attempt, not per clone (issue 18) ----------------------------------

def _asks(monkeypatch) -> list[str]:
    """Count the questions origin.check puts to the interpreter (each a real subprocess)."""
    from andon import origin
    asked: list[str] = []
    real_run = origin.subprocess.run

    def run(argv, **kw):
        if origin._ASK in argv:  # the same module object: git's runs pass through too
            asked.append(kw["cwd"])
        return real_run(argv, **kw)
    monkeypatch.setattr(origin.subprocess, "run", run)
    monkeypatch.setattr(origin, "_asked", {})
    monkeypatch.setattr(origin, "_clean", set())
    return asked


def _clone(root: Path, to: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(root), str(to)], check=True)
    return to


def test_a_clean_answer_holds_for_a_later_clone_with_the_same_packages(tmp_path, monkeypatch):
    from andon import origin
    from andon.config import load_config
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1))
    config = load_config(root)
    asked = _asks(monkeypatch)
    first, second = _clone(root, tmp_path / "c1"), _clone(root, tmp_path / "c2")
    assert origin.check(config, first) is None
    assert origin.check(config, second) is None
    assert asked == [first.absolute()]
    # another package set is another question
    (second / "src" / "extra").mkdir()
    (second / "src" / "extra" / "__init__.py").write_text("")
    assert origin.check(config, second) is None
    assert len(asked) == 2


def test_a_package_folder_linked_out_of_a_later_clone_is_still_asked_and_caught(
        tmp_path, monkeypatch):
    from andon import origin
    from andon.config import load_config
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1))
    config = load_config(root)
    asked = _asks(monkeypatch)
    assert origin.check(config, _clone(root, tmp_path / "c1")) is None
    linked = _clone(root, tmp_path / "c2")
    outside = tmp_path / "elsewhere" / "calc"
    (linked / "src" / "calc").rename(outside.parent.mkdir() or outside)
    (linked / "src" / "calc").symlink_to(outside)
    problem = origin.check(config, linked)
    assert len(asked) == 2
    assert problem is not None and "outside the clone" in problem


def test_a_forked_lane_holds_the_clean_answers_and_asks_none_again(tmp_path, monkeypatch):
    """gates/lanes.py forks its lanes from the attempt's process: they hold its clean
    layouts, so runs in two more clones of the same tree ask nothing (real forks, real
    pytest runs; the questions are counted in a file, since the lanes' memory is their own)."""
    from andon import origin
    from andon.config import load_config
    from andon.gates import lanes
    from andon.gates.base import GateContext
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1))
    config = load_config(root)
    _asks(monkeypatch)
    assert origin.check(config, _clone(root, tmp_path / "c1")) is None
    log = tmp_path / "asked.log"
    real_run = origin.subprocess.run

    def run(argv, **kw):
        if origin._ASK in argv:
            with log.open("a") as f:
                f.write(f"{kw['cwd']}\n")
        return real_run(argv, **kw)
    monkeypatch.setattr(origin.subprocess, "run", run)
    (tmp_path / "ev").mkdir()
    ctx = GateContext(repo=Repo(root), config=config, packet=None, worktree=root,  # type: ignore
                      evidence_dir=tmp_path / "ev", base_sha="", plant_sha="")
    two = [(_clone(root, tmp_path / "c2"), [lanes.Planned("hermetic-2", slot=1)]),
           (_clone(root, tmp_path / "c3"), [lanes.Planned("hermetic-3", slot=2)])]
    made = lanes.run_lanes(ctx, two, agent_code=False)
    assert sorted(made) == ["hermetic-2", "hermetic-3"]
    for r in made.values():
        assert r.results and {x.outcome for x in r.results.values()} == {"passed"}
    assert not log.exists()


def test_lanes_that_share_a_slot_are_refused_before_any_run(tmp_path):
    """Two lanes with a run of the same slot would share one fork server's socket, and one
    lane could read the other's answer and leave it waiting a minute: InvalidArgument, and no
    lane starts."""
    from andon.config import load_config
    from andon.gates import lanes
    from andon.gates.base import GateContext
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1))
    ctx = GateContext(repo=Repo(root), config=load_config(root), packet=None,  # type: ignore
                      worktree=root, evidence_dir=tmp_path / "ev", base_sha="", plant_sha="")
    from andon.errors import InvalidArgument
    with pytest.raises(InvalidArgument, match="'h-3' has slot 0, as a run of another lane"):
        lanes.run_lanes(ctx, [(root, [lanes.Planned("h-1"), lanes.Planned("h-2", slot=1)]),
                              (root, [lanes.Planned("h-3")])], agent_code=False)
    assert not (tmp_path / "ev").exists()  # nothing ran: no evidence folder was made
    # the same slot in order and in random order are two servers: allowed
    made = lanes.run_lanes(ctx, [(root, [lanes.Planned("h-1")]),
                                 (root, [lanes.Planned("h-r", seed=5)])], agent_code=False)
    assert sorted(made) == ["h-1", "h-r"]


def test_a_lane_that_raises_is_a_harness_error_with_its_traceback(tmp_path, monkeypatch):
    """A forked lane that fails is a RuntimeError naming the lane and carrying the child's
    traceback; the other lane is reaped, not left running."""
    from andon.config import load_config
    from andon.gates import lanes
    from andon.gates.base import GateContext
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=config_toml(red_runs=1, hermetic_runs=1))
    ctx = GateContext(repo=Repo(root), config=load_config(root), packet=None,  # type: ignore
                      worktree=root, evidence_dir=tmp_path / "ev", base_sha="", plant_sha="")
    real = lanes.run_project_suite

    def first_breaks(config, cwd, evidence_dir, name, **kw):
        if name == "hermetic-2":
            raise OSError("disk gone")
        return real(config, cwd, evidence_dir, name, **kw)
    started = []
    real_start = lanes.forked.start
    monkeypatch.setattr(lanes, "run_project_suite", first_breaks)
    monkeypatch.setattr(lanes.forked, "start", lambda *a, **k: started.append(
        real_start(*a, **k)) or started[-1])
    with pytest.raises(RuntimeError, match=r"(?s)test lane 1 failed.*OSError: disk gone"):
        lanes.run_lanes(ctx, [
            (_clone(root, tmp_path / "c2"), [lanes.Planned("hermetic-2", slot=1)]),
            (_clone(root, tmp_path / "c3"), [lanes.Planned("hermetic-3", slot=2)])],
            agent_code=False)
    assert len(started) == 2
    for child in started:  # the failed lane collected, the other killed: both reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(child.pid, os.WNOHANG)
