"""andon leaves nothing in the system temp dir: worktrees, fresh clones, review exports and
throwaway HOMEs are all removed, on a merge and on a rejection (issue 9)."""

from __future__ import annotations

import os
import tempfile

from andon.contain import forkpool

from helpers import FAST, andon, honest_mul, make_project, mul_packet, runner_for, write


def wrong_mul(ctx):
    write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a + b\n", append=True)
    return "done"


def test_a_run_with_a_merge_and_a_rejection_leaves_the_temp_dir_empty(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() caches its first answer
    assert tempfile.gettempdir() == str(tmp)
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1"),
                                         "P2": mul_packet("P2", max_attempts=1)}, config=FAST)
    report = runner_for(root, {"P1": honest_mul, "P2": wrong_mul}).run()
    assert report.merged == ["P1"]
    # a fork server this run started lives on for the process's next runs (forkpool.py),
    # its scratch folder with it; run alone, this test would find it (order dependence)
    forkpool.close_all()
    assert sorted(os.listdir(tmp)) == [], [(d, f) for d, _, f in os.walk(tmp)]


def test_the_cli_run_leaves_the_temp_dir_empty(tmp_path):
    """The same through `andon run` in its own process (a command agent, the command
    reviewer): TMPDIR is what the process inherits."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")}, config=FAST)
    agent = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py"
    r = andon(root, "run", "--agent", "command", "--command", agent, env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(tmp)) == []


def test_what_the_harness_runs_write_in_the_worktree_is_not_the_agents_change(tmp_path):
    """A test run that leaves a file in its working directory (pytest-cov's ``.coverage``,
    hypothesis' ``.hypothesis/``) did so in red's runs, in the worktree, before the agent
    started: scope blamed it on the agent (``outside allowed_paths``) and, with no
    allowed_paths, it was merged. Found trying andon on boltons with ``--cov``."""
    # as pytest-cov does: data written at the end of every session, whatever the outcomes
    conftest = ("import os\nfrom pathlib import Path\n\n\n"
                "def pytest_sessionfinish(session):\n"
                "    Path('.coverage').write_bytes(os.urandom(16))\n"
                "    Path('.hypothesis/examples').mkdir(parents=True, exist_ok=True)\n"
                "    Path('.hypothesis/examples/x').write_text('x')\n")
    pid, files = mul_packet("P1", max_attempts=1)
    root = make_project(tmp_path / "p", {"P1": (pid, files)}, {"conftest.py": conftest},
                        config=FAST)
    report = runner_for(root, {"P1": honest_mul}).run()
    assert report.merged == ["P1"], report.message
    from helpers import git
    merged = git(root, "ls-tree", "-r", "--name-only", "andon/integration").split()
    assert ".coverage" not in merged and not any(m.startswith(".hypothesis") for m in merged)
