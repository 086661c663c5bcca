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


# [test] pythonpath: `andon init` wrote ["src"] whatever the layout. A flat layout needs the
# repository root itself first on sys.path: a test run by a pytest script (not `python -m
# pytest`, which adds the working directory) puts there only the test file's first folder
# without an __init__.py (pytest's "prepend" import mode: tests/), and the package at the root
# is then not importable — or, worse, an installed copy is imported in its place.
@pytest.mark.parametrize("layout,files,want", [
    ("flat package", {"calc/__init__.py": "", "calc/ops.py": "X = 1\n"}, ["."]),
    ("flat module", {"calc.py": "X = 1\n", "setup.py": "", "conftest.py": ""}, ["."]),
    ("src layout", {"src/calc/__init__.py": "", "src/calc/ops.py": "X = 1\n"}, ["src"]),
    ("no code yet", {"README.md": "# x\n", "tests/test_x.py": ""}, ["src"]),
])
def test_andon_init_writes_the_pythonpath_of_the_layout(tmp_path, layout, files, want):
    from andon.config import load_config

    root = tmp_path / "repo"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    r = andon(root, "init")
    assert r.returncode == 0, r.stdout + r.stderr
    assert load_config(root).test.pythonpath == want
    said = " ".join(r.stdout.split())
    assert ("wrote [test] pythonpath = [\".\"]" in said) == (want == ["."]), said


FLAT_OPS = "def add(a, b):\n    return a + b\n"
FLAT_TESTS = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FLAT_MUL = "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"


def test_a_flat_layout_with_the_file_andon_init_wrote_is_checked_run_and_merged(tmp_path):
    """A flat project (calc/ at the root, tests/ without __init__.py) whose tests run by the
    pytest script: with what `andon init` wrote, `andon check` passes and an honest agent is
    merged (with ["src"] every run stopped at preflight: `import calc` failed)."""
    root = tmp_path / "repo"
    for rel, text in {"calc/__init__.py": "", "calc/ops.py": FLAT_OPS,
                      "tests/test_ops.py": FLAT_TESTS, ".gitignore": "__pycache__/\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    assert andon(root, "init").returncode == 0
    toml = root / "andon.toml"
    script = Path(sys.executable).parent / "pytest"  # andon's own pytest, as a script
    text = toml.read_text().replace('command = ["python", "-m", "pytest"]',
                                    f"command = [{json.dumps(str(script))}]")
    toml.write_text(text.replace("red_runs = 3", "red_runs = 1")
                    .replace("hermetic_runs = 3", "hermetic_runs = 1")
                    .replace("hermetic_random_order = true", "hermetic_random_order = false"))
    p1 = root / "packets" / "P1"
    (p1 / "plant" / "tests").mkdir(parents=True)
    (p1 / "packet.md").write_text(mul_packet("P1", allowed_paths=["calc/**"])[0])
    (p1 / "plant" / "tests" / "test_mul.py").write_text(FLAT_MUL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "flat project")
    r = andon(root, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    honest = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> calc/ops.py"
    r = andon(root, "run", "--agent", "command", "--command", honest)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "def mul" in git(root, "show", "andon/integration:calc/ops.py")
