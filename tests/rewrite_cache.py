"""pytest's cache of rewritten test modules, written once by the xdist controller before
its workers start.

pytest rewrites the ``assert`` statements of every test module and conftest.py it imports
and keeps the result in ``__pycache__/<name>.cpython-311-pytest-<version>.pyc`` — unless
``sys.dont_write_bytecode`` is set, as ``PYTHONDONTWRITEBYTECODE=1`` sets it on this machine
and in CI. Then each xdist worker rewrote all 133 modules again when it collected: 2.3 of
the 3.9 CPU-s a worker spends starting, 11.8 s of wall time before the first test with five
workers on 2 cores against 6.1 s with the caches written (benchmarks/README.md,
twenty-first pass). The variable is left as it is (andon's own processes and the projects'
test runs still write no byte code); only these caches are written, by pytest's own
functions, and the workers read them as they would any cache pytest wrote (a hash-based
pyc: it is used only while its source has the same bytes). The suite's other modules
(helpers.py, …) get their ordinary byte code the same way.

Uses pytest's internal ``_pytest.assertion.rewrite`` functions (pytest is pinned below
10 in pyproject.toml); when they are not there, nothing is written and the suite is only
slower."""

from __future__ import annotations

import importlib.util
import multiprocessing
import py_compile
from pathlib import Path

import pytest

try:
    from _pytest.assertion import assertstate_key
    from _pytest.assertion.rewrite import (
        PYC_TAIL,
        _read_pyc,
        _rewrite_test,
        _write_pyc,
        get_cache_dir,
    )
except ImportError:  # moved in some later pytest: nothing is written
    assertstate_key = None

_config: pytest.Config | None = None  # the forked pool's processes read it


def warm(config: pytest.Config, folders: list[Path], processes: int) -> None:
    """Write the rewritten byte code of every ``test_*.py`` and ``conftest.py`` below
    ``folders``, and the ordinary byte code of every other ``.py`` there, where missing or
    stale; on ``processes`` forked processes. A file that fails (a syntax error, a NUL byte, a
    read-only folder) gets nothing: pytest rewrites it itself when it collects and reports
    what is wrong. As with any cache pytest writes, a rewrite warning ("assertion is always
    true") is shown only by the run that rewrites the module, and this pass shows none."""
    global _config
    # no assertion state: --assert=plain, where pytest rewrites nothing
    if assertstate_key is None or config.stash.get(assertstate_key, None) is None:
        return
    files = sorted({p for d in folders for p in d.rglob("*.py") if "__pycache__" not in p.parts})
    if not files:
        return
    _config = config
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_one, files, chunksize=4)


def _one(path: Path) -> None:
    assert _config is not None
    try:
        if path.name.startswith("test_") or path.name == "conftest.py":
            pyc = get_cache_dir(path) / (path.name[:-3] + PYC_TAIL)
            if _read_pyc(path, pyc) is None:
                pyc.parent.mkdir(parents=True, exist_ok=True)
                source_hash, co = _rewrite_test(path, _config)
                _write_pyc(_config.stash[assertstate_key], co, source_hash, pyc)
        else:
            py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)),
                               doraise=True)
    except Exception:  # noqa: BLE001 - any failure: pytest rewrites it itself, and says why
        pass
