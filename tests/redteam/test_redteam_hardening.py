"""The hardened test run, below the gates: entry-point plugins do not load, named plugins do,
scope's runner-config naming rule, and hidden tests that were committed (readable by the agent)
stop the packet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from andon.gates.scope import named_explicitly
from andon.runners.pytest import run_suite

from helpers import andon, config_toml, make_project, mul_packet
from scenarios import FAST, HIDDEN, HIDDEN_TEST, Scenario, git, honest_mul, play, verdict

PLUGIN = '''\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


def tree_with_entry_point_plugin(root):
    """A failing test and, on the path, an installed-looking distribution whose pytest11 entry
    point rewrites every report to passed."""
    (root / "site" / "evil-1.0.dist-info").mkdir(parents=True)
    (root / "site" / "evil-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (root / "site" / "evil-1.0.dist-info" / "entry_points.txt").write_text(
        "[pytest11]\nevil = evil_plugin\n")
    (root / "site" / "evil_plugin.py").write_text(PLUGIN)
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test_x():\n    assert 1 == 2\n")


def test_entry_point_plugins_do_not_load_but_named_ones_do(tmp_path):
    root = tmp_path / "proj"
    tree_with_entry_point_plugin(root)
    argv = [sys.executable, "-m", "pytest"]
    r = run_suite(argv, root, tmp_path / "ev", "plain", pythonpath=[root / "site"])
    assert r.results["tests.test_x::test_x"].outcome == "failed"
    # sabotage check: without the harness's environment the same plugin loads and lies, so
    # the assertion above can fail
    env = {**os.environ, "PYTHONPATH": str(root / "site")}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    out = subprocess.run([*argv, "-q", "-p", "no:cacheprovider"], cwd=root, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout
    # a plugin the project names in [test] plugins is loaded with -p
    named = run_suite(argv, root, tmp_path / "ev", "named", pythonpath=[root / "site"],
                      plugins=["evil_plugin"])
    assert named.argv[named.argv.index("evil_plugin") - 1:][:2] == ["-p", "evil_plugin"]
    assert named.results["tests.test_x::test_x"].outcome == "passed"


def test_runner_config_is_allowed_only_when_named():
    assert named_explicitly("tests/conftest.py", ["tests/conftest.py"])
    assert named_explicitly("tests/conftest.py", ["**/conftest.py"])
    assert named_explicitly("pyproject.toml", ["pyproject.toml"])
    assert not named_explicitly("tests/conftest.py", ["tests/**"])
    assert not named_explicitly("pyproject.toml", ["*.toml"])
    assert not named_explicitly("src/conftest.py", ["tests/conftest.py"])


def test_config_plugins_reach_the_argv(tmp_path):
    """[test] plugins is read from andon.toml and passed as -p to every harness run."""
    config = FAST.replace("timeout_s = 900", 'timeout_s = 900\nplugins = ["calc_plugin"]')
    assert config != FAST
    plugin = "import pytest\n\n\n@pytest.fixture\ndef unit():\n    return 1\n"
    uses = "def test_unit(unit):\n    assert unit == 1\n"
    o = play(Scenario("honest-plugins", None, "honest with a named plugin", honest_mul,
                      config=config, files={"src/calc_plugin.py": plugin,
                                            "tests/test_unit.py": uses}), tmp_path / "repo")
    assert o.merged, o.summary
    att = o.runner.store.attempts("P1")[0]
    suite = next(g for g in o.runner.store.gate_results(att["id"]) if g["gate"] == "suite")
    argv = suite["evidence"]["runs"][0]["argv"]
    assert argv[argv.index("calc_plugin") - 1] == "-p"


def test_a_committed_hidden_test_stops_the_run_before_any_agent(tmp_path):
    """A hidden file tracked in git would be in every agent's worktree: `andon run` refuses
    before anything is claimed (exit 2, naming the file, as `andon check` does) — no attempt,
    no agent run. The hermetic gate would refuse it again at the attempt's base."""
    md, plant = mul_packet("P1")
    root = make_project(tmp_path / "repo", {"P1": (md, plant)})
    hidden = root / "packets" / "P1" / "hidden" / HIDDEN
    hidden.parent.mkdir(parents=True)
    hidden.write_text(HIDDEN_TEST)
    git(root, "add", "-f", str(hidden))
    git(root, "commit", "-q", "-m", "hidden, by mistake")
    spoke = tmp_path / "agent-ran"
    r = andon(root, "run", "--agent", "command", "--command", f"touch {spoke}")
    assert r.returncode == 2, r.stdout + r.stderr
    text = " ".join((r.stdout + r.stderr).split())
    assert f"hidden/{HIDDEN}: hidden test is committed" in text
    assert not spoke.exists()
    status = andon(root, "status", "--json")
    assert all(p["attempts"] == 0 for p in json.loads(status.stdout)["packets"])


def test_a_bare_tool_name_runs_by_absolute_path_from_the_fixed_path(tmp_path):
    """``command = ["pytest"]``: the harness runs the pytest beside its own interpreter, by
    absolute path, even with a ``pytest`` script at the top of the tree and in ./bin."""
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n")
    for trojan in (root / "pytest", root / "bin" / "pytest"):
        trojan.parent.mkdir(exist_ok=True)
        trojan.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
        trojan.chmod(0o755)
    r = run_suite(["pytest"], root, tmp_path / "ev", "bare")
    # the script found on the fixed PATH is run by the interpreter of its #! line, through
    # the verdict channel's start-up
    script = Path(sys.executable).parent / "pytest"
    assert r.argv[0] == script.read_text().splitlines()[0][2:].strip()
    assert r.argv[3].endswith("contain/boot.py") and r.integrity.channel == "used"
    assert r.results["tests.test_x::test_x"].outcome == "passed"
    assert not (tmp_path / "ran").exists()


def test_andon_check_reports_a_committed_hidden_test(tmp_path):
    """`andon check` names a hidden file that is tracked in git (the agent would see it) and
    exits 2; ignored by git, the same packet checks clean."""
    md, plant = mul_packet("P1")
    root = make_project(tmp_path / "repo", {"P1": (md, plant)},
                        files={".gitignore": "packets/*/hidden/\n"})
    hidden = root / "packets" / "P1" / "hidden" / HIDDEN
    hidden.parent.mkdir(parents=True)
    hidden.write_text(HIDDEN_TEST)
    clean = andon(root, "check")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    git(root, "add", "-f", str(hidden))
    git(root, "commit", "-q", "-m", "hidden, by mistake")
    bad = andon(root, "check")
    assert bad.returncode == 2
    text = " ".join(bad.stdout.split())
    assert f"hidden/{HIDDEN}: hidden test is committed" in text, bad.stdout


# -- issue 18: runs at the same time keep every guarantee -----------------------------------
# The default 3 + 1 hermetic runs with [test] jobs = 2: two lanes of two runs, each lane in a
# fresh clone of its own (gates/lanes.py).

LANES = config_toml(red_runs=1, hermetic_runs=3, add={"test": "jobs = 2"})
ONCE_TEST = '''\
from pathlib import Path

MARK = Path(__file__).with_name("_ran_before.txt")


def test_once():
    seen = MARK.exists()
    MARK.write_text("ran")
    assert not seen
'''
ORDER_TEST = "SEEN = []\n" + "".join(
    f"\n\ndef test_step_{i:02d}():\n    assert SEEN == list(range({i}))\n    SEEN.append({i})\n"
    for i in range(20))
IGNORED_MUL = ('\n\ndef mul(a, b):\n    import pathlib\n'
               '    f = pathlib.Path(__file__).with_name("_factor.txt")\n'
               '    return a * b * int(f.read_text())\n')


def _adds(rel, text):
    def agent(ctx):
        honest_mul(ctx)
        path = ctx.worktree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return "done"
    return agent


def _leaves_ignored(ctx):
    for rel, text in (("src/calc/.gitignore", "_factor.txt\n"), ("src/calc/_factor.txt", "1\n")):
        (ctx.worktree / rel).write_text(text)
    ops = ctx.worktree / "src/calc/ops.py"
    ops.write_text(ops.read_text() + IGNORED_MUL)
    return "done"


LANE_SCENARIOS = [
    # the worktree runs it twice (the plain-first run takes the agent's test modules too), so
    # the suite gate already sees its second run
    Scenario("second-run-only", 18, "adds a test that fails only when it runs a second time "
             "in the same clone (it leaves a file behind)", _adds("tests/test_once.py", ONCE_TEST),
             "suite", "failing-test", "tests.test_once::test_once",
             packet={"allowed_paths": ["src/calc/**", "tests/test_once.py"]}, config=LANES),
    Scenario("random-order-only", 18, "adds 20 tests that pass only in file order",
             _adds("tests/test_chain.py", ORDER_TEST), "hermetic", "failing-test",
             "tests/test_chain.py",
             packet={"allowed_paths": ["src/calc/**", "tests/test_chain.py"]}, config=LANES),
    Scenario("fresh-clone-only", 18, "mul reads a git-ignored file it left in the worktree",
             _leaves_ignored, "hermetic", "fail-to-pass", "tests.test_mul_p1::test_mul",
             config=LANES),
    Scenario("honest-in-lanes", None, "a real mul, judged by runs at the same time", honest_mul,
             config=LANES),
]


@pytest.mark.parametrize("scenario", LANE_SCENARIOS, ids=[s.name for s in LANE_SCENARIOS])
def test_runs_at_the_same_time_keep_every_guarantee(scenario, tmp_path):
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why}"
