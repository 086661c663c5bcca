"""The lean project venv the tests' projects (and benchmarks/overhead.py) run their suites in:
real pytest in a real venv, as most projects have, not andon's own .venv. Importing this
module does nothing; conftest.py builds one venv per suite run."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_PYTHON_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def build_project_python(where: Path) -> Path:
    """The venv the tests' projects run their suites in (helpers.project_test_command): real
    pytest in a real venv, as most projects have, made at ``where`` (must not exist) by
    ``venv --without-pip`` of the interpreter under this one, with every file that each of
    ``PROJECT_PYTHON_DISTS`` installed here lists in its RECORD copied in (less its byte
    code), and what a test run imports compiled.
    Not andon's own .venv: its 16,000 files (selenium, mypy, scipy, …) were walked by every
    environment fingerprint of every attempt (contain/envprint.py): the red-team's honest
    scenarios took 38 CPU-s with it, 30.5 with this one. Returns its ``bin/python``."""
    import importlib.metadata
    import sysconfig
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(where)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(where),
                                                        "platbase": str(where)}))
    for name in PROJECT_PYTHON_DISTS:
        dist = importlib.metadata.distribution(name)
        for f in dist.files or ():
            src = Path(dist.locate_file(f))
            # not the byte code pip compiled at install: what a run imports is compiled below
            if src.is_file() and ".." not in f.parts and "__pycache__" not in f.parts:
                (purelib / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, purelib / f)
    # byte code written now, by one pytest run that writes it (as the first run in a venv
    # pip installed with --no-compile, or uv, leaves it): test runs never write it
    # (PYTHONDONTWRITEBYTECODE) and would compile pytest from source each time. Only what a
    # run imports: pygments' 300 lexers and styles stay source, as they do in such a venv, and
    # are not walked as caches by each environment fingerprint (contain/envprint.py).
    python = where / "bin" / "python"
    with tempfile.TemporaryDirectory() as project:
        (Path(project) / "test_once.py").write_text(
            "def test_passes():\n    assert [1] == [1]\n\n\n"
            "def test_fails():\n    assert {'a': 1} == {'a': 2}\n")
        # whatever the suite was started with (PYTEST_ADDOPTS="--lf", PYTHONPATH, a -p of
        # xdist's): none of it reaches this run, which is the venv's and no one else's. -I
        # as the harness's runs start (contain/boot.py): no PYTHON* variable, no user site
        env = {"PATH": os.defpath, "HOME": project, "LC_ALL": "C.UTF-8"}
        done = subprocess.run([str(python), "-I", "-m", "pytest", "-q", "-c", os.devnull,
                               "-p", "no:cacheprovider", "--junitxml",
                               str(Path(project) / "report.xml"), project],
                              cwd=project, env=env, capture_output=True, text=True,
                              check=False)
    compiled = list(purelib.glob("_pytest/__pycache__/*.pyc"))
    if done.returncode != 1 or not compiled:  # one test fails, on purpose
        raise RuntimeError(f"the project venv's first pytest run ended {done.returncode} "
                           f"and compiled {len(compiled)} of _pytest's modules:\n"
                           f"{done.stdout}{done.stderr}")
    return python
