"""A flat-layout setuptools project that names no packages: setuptools' automatic discovery
takes every top-level folder of Python files for a package, packets/ included once `andon
init` made it, and refuses to build ("Multiple top-level packages discovered in a
flat-layout", seen on zipp): the user's own `pip install .` and a `[test] setup` that builds.
`andon init` says so with the lines that fix it, and a set-up that fails so says it too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from andon.config import PACKETS_CONFTEST
from andon.detect import discovery_note

from helpers import FAST, andon, git, make_project, mul_packet

PYPROJECT = ('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
             '"setuptools.build_meta"\n\n[project]\nname = "calc"\nversion = "1.0"\n')


def _flat(root: Path, pyproject: str = PYPROJECT) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(pyproject)
    return root


def test_a_flat_layout_that_names_no_packages_gets_the_note_naming_its_package(tmp_path):
    note = discovery_note(_flat(tmp_path))
    assert note is not None and "Multiple top-level packages" in note
    assert '[tool.setuptools.packages.find]\n  include = ["calc*"]' in note, note


@pytest.mark.parametrize("case", ["src layout", "packages named", "py-modules named",
                                  "setup.cfg names them", "hatchling", "no packaging"])
def test_no_note_where_the_discovery_is_not_automatic_or_not_setuptools(tmp_path, case):
    root = _flat(tmp_path)
    if case == "src layout":
        (root / "src").mkdir()
    elif case == "packages named":
        (root / "pyproject.toml").write_text(PYPROJECT + '\n[tool.setuptools]\npackages = '
                                             '["calc"]\n')
    elif case == "py-modules named":
        (root / "pyproject.toml").write_text(PYPROJECT + '\n[tool.setuptools]\npy-modules = '
                                             '["calc"]\n')
    elif case == "setup.cfg names them":
        (root / "setup.cfg").write_text("[options]\npackages = find:\n")
    elif case == "hatchling":
        (root / "pyproject.toml").write_text(PYPROJECT.replace(
            "setuptools.build_meta", "hatchling.build"))
    else:
        (root / "pyproject.toml").unlink()
    assert discovery_note(root) is None


def _wheel(root: Path, out: Path) -> subprocess.CompletedProcess:
    # the build's first step, where setuptools discovers the packages (egg_info: no `wheel`
    # package needed, no network)
    out.mkdir()
    return subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()",
                           "egg_info", "--egg-base", str(out)],
                          cwd=root, capture_output=True, text=True, timeout=300)


def test_andon_init_prints_the_fix_and_the_fix_makes_the_project_build(tmp_path):
    """The note is right on both counts: after `andon init` the build fails as it says, and
    with the lines it gives, the project builds again (real setuptools, real pip)."""
    pytest.importorskip("setuptools")
    root = _flat(tmp_path / "repo")
    git(root, "init", "-q", "-b", "main")
    r = andon(root, "init")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert 'Name your packages in pyproject.toml: [tool.setuptools.packages.find] include = ' \
           '["calc*"]' in out, r.stdout
    failed = _wheel(root, tmp_path / "w1")
    assert failed.returncode != 0
    assert "Multiple top-level packages discovered in a flat-layout" in failed.stdout + \
        failed.stderr
    (root / "pyproject.toml").write_text(PYPROJECT + '\n[tool.setuptools.packages.find]\n'
                                         'include = ["calc*"]\n')
    built = _wheel(root, tmp_path / "w2")
    assert built.returncode == 0, built.stdout + built.stderr


def test_a_set_up_that_fails_so_names_the_packets_folder_and_the_fix(tmp_path):
    pytest.importorskip("setuptools")
    # the build's discovery step, by andon's own interpreter (the tests' project venv has no
    # pip or setuptools)
    step = [sys.executable, "-c", "import os, sys; d = sys.argv.pop(1); os.makedirs(d, "
            "exist_ok=True); sys.argv[1:] = ['egg_info', '--egg-base', d]; "
            "from setuptools import setup; setup()", "{scratch}"]
    config = FAST.replace("[test]\n", f"[test]\nsetup = {json.dumps(step)}\n", 1)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config, files={
        "pyproject.toml": PYPROJECT, "calc/__init__.py": "", "calc/ops.py": "X = 1\n",
        "packets/conftest.py": PACKETS_CONFTEST})  # as `andon init` writes it
    git(root, "rm", "-rq", "src")  # a flat layout: calc/ at the top
    git(root, "commit", "-qm", "flat layout")
    r = andon(root, "run", "--agent", "command", "--command", "true")
    assert r.returncode == 3, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "packets/ holds .py files, so setuptools' automatic discovery counts it as a " \
           "package" in said, said
