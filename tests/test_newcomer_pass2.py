"""A newcomer's pass on cachetools (issue 9, second pass): what pointed the wrong way, as the
behaviour that is right now. Real repositories, the real CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from andon.store import chain

from helpers import andon, honest_mul, make_project, mul_packet, runner_for

PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """A project with a pyproject.toml (so every test run names it on its command line) whose
    packet P1 an honest agent got merged; the attempt's worktree is gone afterwards."""
    root = make_project(tmp_path_factory.mktemp("newcomer") / "repo",
                        {"P1": mul_packet("P1")}, files={"pyproject.toml": PYPROJECT})
    report = runner_for(root, honest_mul).run()
    assert report.exit_status == 0, report.message
    return root


def test_a_fresh_honest_record_verifies_once_its_worktrees_are_gone(ran):
    # The test runs' command lines name the worktree's pyproject.toml and andon's own start-up
    # files; recording those as evidence made every fresh store "NOT intact" after cleanup.
    r = andon(ran, "verify", "--json")
    v = json.loads(r.stdout)
    assert r.returncode == 0 and v["ok"], r.stdout + r.stderr
    assert v["evidence_files"] > 0


def test_how_a_process_was_started_is_not_evidence(tmp_path):
    log, prog, wt = tmp_path / "run.log", tmp_path / "boot.py", tmp_path / "wt"
    wt.mkdir()
    for f in (log, prog, wt / "pyproject.toml"):
        f.write_text("x")
    run = {"argv": ["python", str(prog), "-c", str(wt / "pyproject.toml")], "cwd": str(wt),
           "wrapper": [str(prog)], "log_path": str(log)}
    assert set(chain.evidence_files({"runs": [run]})) == {str(log)}


def test_after_a_drained_run_andon_says_where_the_merged_work_is(ran):
    # a newcomer's honest run ended on the board alone: nothing said that the merges are on
    # andon/integration, not on main, nor how to take them
    for args in (("status",), ("run", "--agent", "command", "--command", "true")):
        r = andon(ran, *args)
        assert r.returncode == 0, r.stdout + r.stderr
        text = " ".join(r.stdout.split())
        assert ("the merged work is on andon/integration, 1 commit ahead of main" in text
                and "`git merge andon/integration` with main checked out" in text), text


@pytest.mark.parametrize("on_path", [False, True])
def test_the_demo_tells_you_to_call_andon_the_way_you_installed_it(tmp_path, monkeypatch,
                                                                   on_path):
    # the README installs into .venv (not on PATH) and runs .venv/bin/andon demo; the demo's
    # "look closer: andon -C …" lines then failed with "command not found"
    from andon.demo import how_to_call

    script = tmp_path / "venv" / "bin" / "andon"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr("sys.argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", str(script.parent) if on_path else str(tmp_path / "empty"))
    assert how_to_call() == ("andon" if on_path else str(script))
    monkeypatch.setattr("sys.argv", ["/x/andon/__main__.py", "demo"])
    assert how_to_call().endswith(" -m andon")
