"""`andon init` finds the project's virtualenv and the pytest plugins installed there (issue 9:
the default command used andon's interpreter, and with autoload off the project's fixtures
vanished). A real virtualenv that sees this environment's packages through a .pth file."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib

from andon.config import DEFAULT_TOML
from andon.detect import (
    ISOLATED_SETUP,
    SCM_SETUP,
    WHEEL_SETUP,
    apply,
    detect,
    missing_build_requires,
    plugins_of,
    setup_step,
)


def test_init_writes_the_venv_interpreter_and_its_plugins_by_module(tmp_path):
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    found = {d.key: d for d in detect(tmp_path)}
    assert found["command"].value == [str(venv / "bin" / "python"), "-m", "pytest"]
    # what is installed here registers pytest11 entry points (xdist at least); xdist is
    # never named (it would change how the harness's runs execute)
    assert plugins_of(sys.executable) == plugins_of(venv / "bin" / "python")
    assert "xdist.plugin" not in found.get("plugins", found["command"]).value
    doc = tomllib.loads(apply(DEFAULT_TOML, list(found.values())))
    assert doc["test"]["command"][0] == str(venv / "bin" / "python")


def test_no_venv_no_guess(tmp_path):
    assert detect(tmp_path) == []
    assert plugins_of(tmp_path / "no-such-python") == []


HATCH_VCS = ('[build-system]\nrequires = ["hatchling>=1.25", "hatch-vcs>=0.4"]\n'
             'build-backend = "hatchling.build"\n\n[tool.hatch.version]\nsource = "vcs"\n')


def test_a_venv_without_the_build_backend_gets_an_isolated_build(tmp_path):
    """A user's `.venv` made with `pip install -e '.[test]'` has the test deps and plugins but
    not hatchling/hatch-vcs (pip installed them only into a throwaway build environment):
    the offline build (`--no-build-isolation --no-index`) could never work there, so init
    writes the isolated build and names what is missing and what would make it offline."""
    (tmp_path / "pyproject.toml").write_text(HATCH_VCS)
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert missing_build_requires(tmp_path, venv / "bin" / "python") == ["hatchling",
                                                                         "hatch-vcs"]
    found = {d.key: d for d in detect(tmp_path)}
    assert found["setup"].value == ISOLATED_SETUP
    assert "--no-build-isolation" not in ISOLATED_SETUP and "--no-index" not in ISOLATED_SETUP
    assert "hatchling, hatch-vcs" in found["setup"].why and "andon init --force" in \
        found["setup"].why


def test_a_venv_with_the_build_backend_keeps_the_offline_build(tmp_path):
    """The same project, its `.venv` seeing this environment's packages (hatchling and
    hatch-vcs are installed here): the offline build, no network at set-up."""
    (tmp_path / "pyproject.toml").write_text(HATCH_VCS)
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert missing_build_requires(tmp_path, venv / "bin" / "python") == []
    assert {d.key: d for d in detect(tmp_path)}["setup"].value == WHEEL_SETUP
    # setuptools-scm's own writer needs setuptools_scm for the interpreter, else a build
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n\n'
        '[tool.setuptools_scm]\nversion_file = "src/x/_version.py"\n')
    assert setup_step(tmp_path, venv / "bin" / "python").value == SCM_SETUP
    assert setup_step(tmp_path, tmp_path / "no-such-python").value == SCM_SETUP  # cannot ask
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    assert setup_step(tmp_path, bare / "bin" / "python").value == ISOLATED_SETUP
