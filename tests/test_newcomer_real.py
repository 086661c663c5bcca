"""What a newcomer pass on a real project found (issue 9): iniconfig 2.3.1 from its sdist, made
a git repository as a clone would be, its UTF-8 BOM fix (#76) replayed as a packet with its own
tests planted. Each finding here in a small synthetic project: real git, real pytest.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from andon import origin
from andon.config import load_config
from andon.detect import WHEEL_SETUP, setup_step
from andon.exits import EXIT_PREFLIGHT

from helpers import (
    MUL_CODE,
    andon,
    git,
    honest_mul,
    make_project,
    mul_packet,
    runner_for,
    write,
)

# A package of the project that pytest itself imports at start-up (iniconfig's, pluggy's and
# pygments' own repositories): the test process has it in sys.modules before any project folder
# is on sys.path, so every test run judges that copy, never the attempt's.
HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
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


def test_preflight_says_the_suite_gave_no_results_not_that_it_wrote_a_bad_report(tmp_path):
    """Before: 'the suite on X wrote no usable report: …' when the suite never ran (the set-up
    failed, or the probe above stopped it)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files=RUNNER_DEP)
    pf = runner_for(root, honest_mul).run().preflight
    assert "no usable report" not in pf.summary and "gave no results" in pf.summary


SCM = {"pyproject.toml": '[project]\nname = "calc"\ndynamic = ["version"]\n\n'
                         '[tool.setuptools_scm]\nwrite_to = "src/calc/_version.py"\n'}


def test_init_warns_when_the_test_interpreter_cannot_run_the_setup_it_wrote(tmp_path):
    """Before: init wrote `setup = ["python", "-m", "setuptools_scm", …]` for the project's
    .venv, which had no setuptools_scm, and said nothing; every run then stopped at preflight
    with 'No module named setuptools_scm'. Now init names the interpreter and the install."""
    root = make_project(tmp_path / "repo", files=SCM)
    (root / "andon.toml").unlink()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
                   check=True)
    r = andon(root, "init")
    assert r.returncode == 0, r.stderr
    python = root / ".venv" / "bin" / "python"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1, r.stdout
    assert f"{python} cannot import setuptools_scm" in lines[0]
    assert f"{python} -m pip install" in lines[0] and "[test] setup" in lines[0]


def test_init_says_nothing_more_when_the_interpreter_has_the_setup_module(tmp_path):
    """The honest counterpart: andon's own interpreter (no .venv) imports setuptools_scm."""
    pytest.importorskip("setuptools_scm")
    root = make_project(tmp_path / "repo", files=SCM)
    (root / "andon.toml").unlink()
    r = andon(root, "init")
    assert r.returncode == 0 and "detected: pyproject.toml" in r.stdout, r.stdout
    assert "warning:" not in r.stdout


def test_the_uncommitted_note_names_what_is_left_out_and_collapses_untracked_folders(tmp_path):
    """Before: 'note: 998 file(s) … have uncommitted changes' for an untracked .venv/ of the
    project (not in its .gitignore) beside andon.toml and packets/: the user had changed
    nothing. Now modified and untracked are told apart and an untracked folder is one entry."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    venv = root / ".venv" / "lib"
    venv.mkdir(parents=True)
    for i in range(40):
        (venv / f"m{i}.py").write_text("")
    (root / "src/calc/ops.py").write_text((root / "src/calc/ops.py").read_text() + "# wip\n")
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("note:")]
    assert len(lines) == 1, r.stdout
    assert "1 changed (src/calc/ops.py)" in lines[0]
    assert "untracked: .venv/ (40 files)" in lines[0]
    assert "41 file(s)" not in lines[0] and "uncommitted changes" in lines[0]


def test_setuptools_scm_in_build_requires_with_an_attr_version_needs_no_setup(tmp_path):
    """Before (cachetools 8.0.2): setuptools-scm in `[build-system] requires` alone made init
    write a wheel build for every clone, 'it writes the version file during a build', though
    the version comes from `[tool.setuptools.dynamic] version = {attr = …}` and nothing is
    generated; the build then failed in the project's venv and every run stopped at
    preflight. Now nothing is written; with no such table the build is still written."""
    attr = ('[build-system]\nrequires = ["setuptools>=80", "setuptools-scm>=8.2"]\n\n'
            '[project]\nname = "calc"\ndynamic = ["version"]\n\n'
            '[tool.setuptools.dynamic]\nversion = {attr = "calc.__version__"}\n')
    (tmp_path / "pyproject.toml").write_text(attr)
    assert setup_step(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text(attr.split("[tool.setuptools.dynamic]")[0])
    assert setup_step(tmp_path).value == WHEEL_SETUP


def _tamper(ctx):
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    write(ctx, "tests/test_mul_p1.py", "def test_mul():\n    pass\n")
    return "done"


def _outside_allowed(ctx):
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    write(ctx, "README.md", "mul added\n")
    return "done"


def test_a_tampering_agent_is_named_as_the_cause_not_the_packet(tmp_path):
    """Before (cachetools, an agent that rewrote the planted test): 'what to do: the agent
    keeps failing the same way …: sharpen the packet, or use another agent' — the packet was
    right. Now the advice names the tamper and says the packet is not the cause."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    report = runner_for(root, _tamper).run()
    assert report.exit_status == 1, report.message
    todo = report.message.split("what to do:", 1)[1]
    assert "sharpen the packet" not in todo
    assert "planted test" in todo and "not the cause" in todo


def test_a_change_outside_allowed_paths_points_at_allowed_paths_too(tmp_path):
    """The other permission case: the change may have been needed, so the packet's paths
    are named as one remedy beside another agent."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    report = runner_for(root, _outside_allowed).run()
    assert report.exit_status == 1, report.message
    todo = report.message.split("what to do:", 1)[1]
    assert "allowed_paths" in todo and "sharpen the packet" not in todo


GUARD = (
    "from calc.ops import add\n\n\ndef test_add_still_adds():\n    assert add(2, 2) == 4\n")


def test_a_guard_test_in_plant_is_told_where_it_belongs(tmp_path):
    """Before (cachetools): a planted file with the new tests and one that guards today's
    behaviour was blocked with 'planted tests are not reliably red on the base: X passes on
    the base: it tests nothing the packet asks for' — it passed 3 of 3 runs, and it tests
    what it should. Now red says it passed every run and where such a test goes."""
    md, plant = mul_packet("P1")
    plant["tests/test_guard_p1.py"] = GUARD
    root = make_project(tmp_path / "repo", {"P1": (md, plant)})
    report = runner_for(root, honest_mul).run()
    assert report.exit_status == 1, report.message
    assert "not reliably red" not in report.message
    assert "passes on the base in every run" in report.message
    assert "belongs in the suite" in report.message


PIP_FAILURE = """\
  error: subprocess-exited-with-error

  × Preparing metadata (pyproject.toml) did not run successfully.
  │ exit code: 1
  ╰─> [91 lines of output]
      /x/.venv/lib/python3.11/site-packages/setuptools/config/pyprojecttoml.py:108: \
_BetaConfiguration: Support for `[tool.setuptools]` in `pyproject.toml` is still *beta*.
        warnings.warn(msg, _BetaConfiguration)
      configuration error: `project.license` must be valid exactly by one definition
"""


def test_a_failed_pip_build_set_up_names_the_builds_error_not_pips_wrapper():
    """Before (cachetools' detected wheel build): the set-up's problem was 'failed (exit
    status 1): error: subprocess-exited-with-error' — pip's wrapper line, the cause 90 lines
    further. Now the first error line inside is named."""
    from andon.clone_setup import _first_error
    assert _first_error(PIP_FAILURE).startswith("configuration error: `project.license`")
    assert _first_error("ModuleNotFoundError: No module named 'x'\n") == (
        "ModuleNotFoundError: No module named 'x'")
