"""The lean project venv the tests' projects (and benchmarks/overhead.py) run their suites in:
real pytest in a real venv, as most projects have, not andon's own .venv. Importing this
module does nothing; conftest.py builds one venv per suite run."""

import shutil
import subprocess
import sys
from pathlib import Path

PROJECT_PYTHON_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def build_project_python(where: Path) -> Path:
    """The venv the tests' projects run their suites in (helpers.project_test_command): real
    pytest in a real venv, as most projects have, made at ``where`` (must not exist) by
    ``venv --without-pip`` of the interpreter under this one, with every file that each of
    ``PROJECT_PYTHON_DISTS`` installed here lists in its RECORD copied in, and compiled.
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
            if src.is_file() and ".." not in f.parts:
                (purelib / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, purelib / f)
    # byte code written now: test runs never write it (PYTHONDONTWRITEBYTECODE), and each
    # would compile pytest from source again
    subprocess.run([str(where / "bin" / "python"), "-m", "compileall", "-q", str(purelib)],
                   check=True, stdout=subprocess.DEVNULL)
    return where / "bin" / "python"
