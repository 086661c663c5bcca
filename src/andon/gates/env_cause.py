"""Why a suite cannot run on the base, when the cause is the environment, said in one line.

A project whose generated module is missing from a fresh clone, or whose dependencies or pytest
plugins are not there for the test interpreter, fails preflight with collection or set-up errors
that look like failing tests ("6 test(s) fail … ::tests.test_benchmarks"), the cause only in the
log. ``cause(run, cwd)`` reads the run's results and log for ``ModuleNotFoundError: No module
named 'X'`` and ``fixture 'X' not found`` and returns ``(kind, first error line, the setting that
fixes it)`` — or None when the failures look like failing tests.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..runners.pytest import SuiteRun

_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_FIXTURE = re.compile(r"fixture '(\w+)' not found")


def cause(run: SuiteRun, cwd: Path | None = None) -> tuple[str, str, str] | None:
    """See the module docstring. ``cwd``: the clone, to tell a module of the project (made by
    a build) from one that is not installed."""
    texts = [r.message for r in run.results.values() if r.outcome in ("failed", "error")]
    try:
        texts.append(Path(run.log_path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        pass
    text = "\n".join(texts)
    if m := _MODULE.search(text):
        name = m[1]
        top = name.split(".")[0]
        own = cwd is not None and any((Path(cwd) / d / top).is_dir() for d in (".", "src"))
        if own:
            fix = (f"{name} is part of the project but not in a fresh clone (a file the build "
                   "generates, kept out of git?): set [test] setup to the build step "
                   "(`andon init` writes it for hatch-vcs, setuptools-scm and ext_modules)")
        else:
            fix = (f"{top} is not installed for the test interpreter: point [test] command at "
                   "the project's virtualenv (e.g. [\"/path/to/.venv/bin/python\", \"-m\", "
                   "\"pytest\"])")
        return "missing-module", m[0], fix
    if m := _FIXTURE.search(text):
        return "missing-fixture", m[0], (
            f"the pytest plugin that provides fixture '{m[1]}' is not loaded (plugins never "
            "autoload in harness runs): name its module in [test] plugins")
    return None
