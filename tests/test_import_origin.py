"""The editable-install trap (issue 9): the tests of a clone must import the clone's code. With
`[test] pythonpath = []` and the project installed from the user's own checkout, the harness
stops with layer environment naming both paths instead of judging the user's code. A real
virtualenv whose site-packages points at the user's checkout (as an editable install does)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from andon.runner import EXIT_OK, EXIT_PREFLIGHT

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
