"""Which copy of the code under test would the tests import? It must be the clone's own.

With ``[test] pythonpath = []`` and the project installed in editable mode from the user's own
checkout, a test run in a clone silently imports the user's package, not the attempt's: an
honest agent's fix is then judged on the user's code (issue 9). Before the first run in a clone
``check(config, cwd)`` asks the test interpreter, in the test runs' environment (same
``PYTHONPATH``, cwd first on ``sys.path`` as with ``python -m pytest``), where each of the
project's top-level packages would be imported from: the packages with an ``__init__.py`` directly
in the clone's root, in ``src/`` and in each ``[test] pythonpath`` folder (not ``tests``, ``test``,
``docs`` or the packets folder). One found outside the clone is an ``environment`` problem naming
both paths and the setting that fixes it. A package that cannot be imported at all is left to
the tests (they report it). Asked once per clone and package set in this process; a clean
answer (every package from inside its clone) also holds for any later clone with the same
packages at the same places below its root, each a real folder of that clone, for the same
interpreter and ``[test] pythonpath``: the answer depends on the interpreter's own start-up
(``-I``), never on the clone's other files, and a change to that interpreter's environment is
the ``outside-worktree`` finding's business (contain/envprint.py). So a fresh clone per run
costs one question per attempt, not one per run (issue 18).

The question is asked as ``contain/boot.py`` starts a test run: ``-I``, ``import pytest`` first,
then the clone's folders in front. A project package pytest imported by then (iniconfig's,
pluggy's, pygments' own repositories) is the copy every test runs, whatever ``sys.path`` says:
a problem no setting fixes, said as such (found on iniconfig 2.3.1, issue 9's newcomer pass).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from .config import Config
from .contain.interpreter import python_of
from .runners.pytest import harness_env

_SKIP = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"}
# Asked as contain/boot.py starts a test run (``-I``): pytest is imported while sys.path holds
# only the interpreter's own folders, then the clone and the pythonpath folders go first. A
# package pytest itself imported by then is the copy every test sees, whatever sys.path says.
_ASK = ("import importlib.util, json, sys\nfront = json.loads(sys.argv[1])\n"
        "try:\n    import pytest\nexcept Exception:\n    pass\n"
        "early = {n: getattr(sys.modules.get(n), '__file__', None) for n in sys.argv[2:]}\n"
        "sys.path[0:0] = front\nout = {}\nfor n in sys.argv[2:]:\n"
        "    if early[n]:\n        out[n] = [early[n], True]\n        continue\n"
        "    try:\n        s = importlib.util.find_spec(n)\n    except Exception:\n"
        "        s = None\n    out[n] = [s.origin if s is not None and s.origin else None, False]\n"
        "print(json.dumps(out))\n")
_asked: dict[tuple[str, tuple[str, ...]], str | None] = {}
# Layouts (interpreter, pythonpath, (package, folder below the clone root)...) that were clean.
_clean: set[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]] = set()


def packages(config: Config, cwd: Path) -> dict[str, Path]:
    """Top-level package name → its folder in the clone ``cwd`` (see the module docstring)."""
    cwd = Path(cwd)
    skip = _SKIP | {config.andon.packets_dir}
    found: dict[str, Path] = {}
    for folder in (".", "src", *config.test.pythonpath):
        base = cwd / folder
        if not base.is_dir():
            continue
        for init in sorted(base.glob("*/__init__.py")):
            name = init.parent.name
            if name.isidentifier() and name not in skip:
                found.setdefault(name, init.parent)
    return found


def check(config: Config, cwd: Path) -> str | None:
    """None when every package of the clone ``cwd`` would be imported from inside it (or
    cannot be asked: no Python interpreter in the test command); else the problem."""
    cwd = Path(cwd).absolute()
    own = packages(config, cwd)
    python = python_of(config.test_argv())
    if not own or python is None:
        return None
    memo = (str(cwd), tuple(sorted(own)))
    if memo in _asked:
        return _asked[memo]
    shape = _shape(config, cwd, own, python)
    if shape is not None and shape in _clean:
        return None
    with tempfile.TemporaryDirectory() as home:
        env = harness_env(Path(home), ())
        front = [str(cwd), *(str(cwd / p) for p in config.test.pythonpath)]
        try:
            out = subprocess.run([python, "-I", "-B", "-c", _ASK, json.dumps(front), *sorted(own)],
                                 cwd=cwd, env=env,
                                 capture_output=True, text=True, timeout=60, check=False)
            origins = json.loads(out.stdout) if out.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError):
            origins = {}
    problem = None
    for name, (origin, by_pytest) in sorted(origins.items()):
        if origin and not Path(origin).resolve().is_relative_to(cwd.resolve()) and by_pytest:
            problem = (f"pytest itself imports {name}, from {Path(origin).parent}, outside the "
                       f"clone (whose copy is {own[name]}), before any project folder is on "
                       "sys.path: every test would run that copy, not the attempt's. andon "
                       f"cannot test a package its test runner depends on (a known limit, "
                       "docs/configuration.md)")
            break
        if origin and not Path(origin).resolve().is_relative_to(cwd.resolve()):
            where = own[name].relative_to(cwd).parent.as_posix()
            problem = (f"the tests would import {name} from {Path(origin).parent}, outside the "
                       f"clone (whose copy is {own[name]}): an installed copy, e.g. an editable "
                       f"install of another checkout, comes first. Put {where!r} in [test] "
                       "pythonpath so the tests import the attempt's code")
            break
    _asked[memo] = problem
    if problem is None and origins and shape is not None:
        _clean.add(shape)
    return problem


def _shape(config: Config, cwd: Path, own: dict[str, Path], python: str
           ) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]] | None:
    # None when a package folder resolves outside the clone (a symlink): asked every time
    root = cwd.resolve()
    where = []
    for name, folder in sorted(own.items()):
        real = folder.resolve()
        if folder.is_symlink() or not real.is_relative_to(root):
            return None
        where.append((name, real.relative_to(root).as_posix()))
    return python, tuple(config.test.pythonpath), tuple(where)
