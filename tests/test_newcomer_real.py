"""What a newcomer pass on a real project found (issue 9): iniconfig 2.3.1 from its sdist, made
a git repository as a clone would be, its UTF-8 BOM fix (#76) replayed as a packet with its own
tests planted. Each finding here in a small synthetic project: real git, real pytest.
"""

from __future__ import annotations

from andon import origin
from andon.config import load_config
from andon.runner import EXIT_PREFLIGHT

from helpers import git, honest_mul, make_project, mul_packet, runner_for

# A package of the project that pytest itself imports at start-up (iniconfig's, pluggy's and
# pygments' own repositories): the test process has it in sys.modules before any project folder
# is on sys.path, so every test run judges that copy, never the attempt's.
RUNNER_DEP = {"src/iniconfig/__init__.py": "BOM = '\\ufeff'\n"}


def test_a_package_pytest_itself_imports_is_named_not_left_to_blame_the_agent(tmp_path):
    """Before: the probe asked where `iniconfig` would be found on sys.path (the clone's
    src/, first), so the preflight passed, and an honest agent's fix was judged on the
    interpreter's copy: layer code, blocked. Now it is asked after `import pytest`, as the
    harness's start-up does, and the problem names the package, the copy and why."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files=RUNNER_DEP)
    problem = origin.check(load_config(root), root)
    assert problem is not None
    assert "pytest itself imports iniconfig" in problem and "outside the clone" in problem
    assert "[test] pythonpath" not in problem  # the setting cannot fix it: say so, not that


def test_the_run_stops_at_preflight_with_layer_environment_and_the_agent_never_runs(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files=RUNNER_DEP)
    calls: list[int] = []
    report = runner_for(root, lambda ctx: calls.append(1) or honest_mul(ctx)).run()
    pf = report.preflight
    assert (report.exit_status, pf.status, pf.layer) == (EXIT_PREFLIGHT, "error",
                                                         "environment"), report.message
    assert "pytest itself imports iniconfig" in pf.summary
    assert calls == []


def test_a_package_pytest_does_not_import_still_passes_the_probe(tmp_path):
    """The honest counterpart: a project named like nothing pytest loads is not refused."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        files={"src/inifile/__init__.py": ""})
    assert origin.check(load_config(root), root) is None
    git(root, "status")
