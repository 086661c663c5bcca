"""Which new files would be imported in place of a module the test process relies on.

A ``.py`` file (or a package folder) added where no ``__init__.py`` encloses it is importable
as a *top-level* module from any folder on the test run's ``sys.path`` — the ``[test]
pythonpath`` folders, the worktree root, each test file's folder (pytest's ``prepend`` import
mode). If its name is a standard-library module, the runner's (``pytest``, ``_pytest``,
``pluggy``, ``iniconfig``, ``packaging``, ``py``), andon's, or a top-level name of a
distribution installed in the interpreter the tests run with, it can be imported instead of
the real one by the runner, a plugin or the standard library itself (issue 19, kind 2).

Installed names come from ``importlib.metadata.packages_distributions()`` of the test
interpreter: andon's own when ``[test] command`` starts with ``python`` (or andon's
interpreter), else the command's first word asked once per process through a small
subprocess (``-I -B -c``) and cached. When that word is not a Python interpreter (``uv``,
``pytest``, a wrapper script) andon's own distributions are used — an approximation, said so
in the finding's evidence of the ``scope`` gate (``details['shadow_names_from']``).

A new top-level module named like one of the project's own (a ``tests/calc/`` package beside
``src/calc/``) shadows it just the same: pytest puts the test folder first.

Approximation of "on sys.path": every folder without an ``__init__.py`` counts, so a new
``json.py`` in a namespace-package folder is flagged as well.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py",
                            "andon", "sitecustomize", "usercustomize"})


@functools.lru_cache(maxsize=8)
def installed_names(python: str) -> tuple[frozenset[str], str]:
    """(top-level import names of the distributions installed for ``python``, where they
    came from). Cached per interpreter for the life of the process."""
    # not resolved: a virtualenv's python is a link to the same binary, with other packages
    if python and os.path.abspath(python) != os.path.abspath(sys.executable) \
            and Path(python).name.startswith("python"):
        code = ("import importlib.metadata as m, json; "
                "print(json.dumps(sorted(m.packages_distributions())))")
        try:
            out = subprocess.run([python, "-I", "-B", "-c", code], capture_output=True, text=True,
                                 timeout=60, check=True).stdout
            return frozenset(json.loads(out)), python
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # fall back to andon's own interpreter, and say so
    return frozenset(importlib.metadata.packages_distributions()), sys.executable


def own_modules(repo: Any, rev: str, pythonpath: list[str]) -> set[str]:
    """Top-level module names the project itself has at ``rev``: packages (folders with an
    ``__init__.py``) and ``.py`` files in the repository root and the ``pythonpath``
    folders. ``repo`` is a :class:`andon.git.repo.Repo`: its listing of ``rev``
    (``entries``, kept per sha) answers for plain folders (``src``, ``lib/py``); git is
    asked about any other spelling (``.``, ``..``, an absolute path) as it would read it."""
    out: set[str] = set()
    listed = repo.entries(rev)
    files = {e.path for e in listed if e.kind == "blob"}
    for folder in ["", *pythonpath]:
        folder = folder.strip("/")
        if folder and any(part in ("", ".", "..") for part in folder.split("/")):
            out |= _asked(repo, rev, folder)
            continue
        prefix = f"{folder}/" if folder else ""
        names = {e.path[len(prefix):].split("/", 1)[0] for e in listed
                 if e.path.startswith(prefix)}
        out |= {n[:-3] for n in names if n.endswith(".py")}
        out |= {n for n in names if not n.endswith(".py") and f"{prefix}{n}/__init__.py" in files}
    return out


def _asked(repo: Any, rev: str, folder: str) -> set[str]:
    """:func:`own_modules` for one folder spelt other than plainly, by git's own reading."""
    entries = repo.git("ls-tree", "--name-only", rev, "--", f"{folder}/").splitlines()
    out = {e.rsplit("/", 1)[-1][:-3] for e in entries if e.endswith(".py")}
    others = [e for e in entries if not e.endswith(".py")]
    packages = repo.blobs(rev, [f"{e}/__init__.py" for e in others])
    return out | {e.rsplit("/", 1)[-1] for e in others if f"{e}/__init__.py" in packages}


def shadowed(name: str, installed: frozenset[str], own: frozenset[str] = frozenset()
             ) -> str | None:
    """Why ``name`` as a new top-level module shadows something, or None."""
    if name in own:
        return "one of the project's own top-level modules"
    if name in sys.stdlib_module_names:
        return "a standard-library module"
    if name in RUNNER_MODULES:
        return "the test runner's or andon's own module"
    if name in installed:
        return "a module installed in the test interpreter"
    return None


def top_level(path: str, has_init: Callable[[str], bool]) -> tuple[str, str] | None:
    """(top-level module name, its path: ``dir/name.py`` or ``dir/name``) for a ``.py``
    file at ``path``; ``has_init(folder)`` says whether ``folder/__init__.py`` exists in the
    candidate. None for anything that is not a Python source file."""
    if not path.endswith(".py"):
        return None
    folder, _, file = path.rpartition("/")
    name, where = file[:-3], path
    if name == "__init__":
        if not folder:
            return None
        folder, _, name = folder.rpartition("/")
        where = f"{folder}/{name}" if folder else name
    while folder and has_init(folder):
        folder, _, name = folder.rpartition("/")
        where = f"{folder}/{name}" if folder else name
    return name, where
