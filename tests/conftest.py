"""Suite-wide set-up: a private temporary folder per process, the ``e2e`` marker by rule, and
the fixtures shared by several modules.

Temporary files: every process of the suite (the xdist controller and each worker) points
``TMPDIR`` at a folder of its own, made at start and removed at the end, so what andon or a
test makes with ``tempfile`` (and every subprocess they start) never lands in the system temp
dir and never meets another worker's files. ``tmp_path`` folders are pytest's own (kept only
for failed tests: ``tmp_path_retention_policy`` in pyproject.toml). All of them live in
``$ANDON_TESTS_TMPROOT`` when set (scripts/test mounts a tmpfs there, and says why), else in
the system temp dir.

The ``e2e`` marker (``-m "not e2e"`` is the quick loop) is set by rule, so new files are
sorted without a list of names: see ``is_e2e``. The ``waits`` tests run first: see
``_waits_first``.
"""

import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

# tests/helpers.py holds the shared builders; make it importable as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))
import rewrite_cache
from project_python import build_project_python

# The system temp dir before this suite redirects it: for the one test that needs a folder
# another user can enter (pytest's folders are private to root). Inherited by xdist workers.
SYSTEM_TMP_ENV = "ANDON_TESTS_SYSTEM_TMPDIR"

# Where the suite's temporary folders go (scripts/test: a tmpfs); unset: the system temp dir.
TMPROOT_ENV = "ANDON_TESTS_TMPROOT"
TMPROOT = os.environ.get(TMPROOT_ENV) or None

_private_tmp: list[Path] = []

# helpers.PROJECT_PYTHON_ENV, spelled here: helpers reads it when imported (FAST is a module
# constant), so it is set before any module imports helpers
PROJECT_PYTHON_ENV = "ANDON_TESTS_PROJECT_PYTHON"

# once, in the first process (the xdist controller, or the only one): the workers inherit it
if PROJECT_PYTHON_ENV not in os.environ:
    _project_python = Path(tempfile.mkdtemp(prefix="suite-python-", dir=TMPROOT))
    _private_tmp.append(_project_python)
    os.environ[PROJECT_PYTHON_ENV] = str(build_project_python(_project_python / "venv"))


def pytest_configure(config):
    os.environ.setdefault(SYSTEM_TMP_ENV, tempfile.gettempdir())
    # pytest's own tmp_path folders stay where pytest puts them (and so outlive this run
    # when a test fails): its base is read from here before TMPDIR, and lazily, after this.
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", TMPROOT or os.environ[SYSTEM_TMP_ENV])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    # a neutral name: tests check that a harness test run shows code under test no "andon"
    d = Path(tempfile.mkdtemp(prefix=f"suite-{worker}-", dir=TMPROOT))
    _private_tmp.append(d)
    os.environ["TMPDIR"] = str(d)
    tempfile.tempdir = None  # gettempdir() caches its answer: read TMPDIR again
    # made once, by the controller (or the only process), before the workers start: they
    # inherit the variable; the folder goes with the controller's private one at the end


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's addopts): two workers per core and one more. Much of the
    suite's time is waiting, not computing — agent timeouts in the hang tests, an agent CLI's
    own retry back-off, leases lapsing, subprocesses blocked on each other — and a second
    worker per core computes meanwhile. The one more: for the first half of the run,
    WAIT_LANES workers are in the ``waits`` tests (below), and the rest still number more
    than the cores. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set (as in xdist
    itself); ``-n N`` and ``-n 0`` are unchanged."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env and env.isdigit():
        return int(env)
    return 2 * _cores() + 1


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    # in the xdist controller, before xdist's own sessionstart starts the workers
    if getattr(session.config.option, "numprocesses", None) and \
            not hasattr(session.config, "workerinput"):
        rewrite_cache.warm(session.config, [Path(__file__).parent], _cores())


def pytest_unconfigure(config):
    for d in _private_tmp:
        shutil.rmtree(d, ignore_errors=True)


# -- the e2e marker ---------------------------------------------------------------------

E2E_FOLDERS: set[str] = set()  # e.g. {"e2e"}: every test under tests/e2e/
# Names whose use means a whole harness run: the in-process runner and the red-team player,
# and the demo. The CLI helper `andon` counts when called with "run", "demo" or "validate".
E2E_NAMES = {"runner_for", "play", "Runner", "run_demo"}
E2E_VERBS = {"run", "demo", "validate"}


def is_e2e(item: pytest.Item) -> bool:
    """A test is end to end when it drives the whole harness (runner, gates, real pytest runs
    on real repositories). By rule, so new files need no list: its file is named
    ``test_e2e_*.py`` or lives in a folder of ``E2E_FOLDERS``; or the test function, a fixture
    it uses, or a function of the test's module that either calls, uses a name of
    ``E2E_NAMES`` or calls ``andon(root, "run" | "demo" | "validate", ...)``."""
    path = Path(item.path)
    rel = path.relative_to(Path(__file__).parent)
    if rel.name.startswith("test_e2e_") or E2E_FOLDERS & set(rel.parts[:-1]):
        return True
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        funcs += [d.func for d in defs]
    return any(_drives_harness(f, set()) for f in funcs if f is not None)


def _drives_harness(func, seen: set) -> bool:
    code = getattr(func, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    module = getattr(func, "__globals__", {})
    for c in _codes(code):
        names = set(c.co_names)
        if names & E2E_NAMES or ("andon" in names and E2E_VERBS & set(c.co_consts)):
            return True
        for name in names:  # helpers of the same test module, followed
            f = module.get(name)
            if (callable(f) and getattr(f, "__module__", None) == module.get("__name__")
                    and _drives_harness(f, seen)):
                return True
    return False


def _codes(code):
    """``code`` and the code of every function defined inside it."""
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            yield from _codes(c)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    # a wrapper: the e2e marker is set before -m deselects by it, and the order is made
    # after -m, -k and --deselect have left the items the workers run
    for item in items:
        if is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    result = yield
    _waits_first(items)
    return result


# The tests marked ``waits`` (pyproject.toml) spend most of their wall time on a timeout, a
# back-off or a lease: about five minutes in all, a fifth of a CPU-second each. Left where they
# fall, xdist hands some of them out last, and the suite ended with them alone on an idle
# machine (20-25 s of the 2-core run). So they go first, shared round-robin between
# WAIT_LANES of the workers: worksteal hands worker j the j-th of its first contiguous blocks
# and steals only from a block's end, so each lane starts at once and overlaps the rest.
# One lane would last as long as the suite; with two, the extra worker of
# pytest_xdist_auto_num_workers computes beside them (benchmarks/README.md, twenty-first pass).
WAIT_LANES = 2


def _waits_first(items):
    waits = [i for i in items if i.get_closest_marker("waits")]
    rest = [i for i in items if not i.get_closest_marker("waits")]
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    workers = max(1, int(count)) if count.isdigit() else 1
    lanes = [waits[j::WAIT_LANES] for j in range(WAIT_LANES)] if workers > WAIT_LANES \
        else [waits]
    order, left = [], len(items)
    for j in range(workers):
        size = left // (workers - j)  # as xdist's WorkStealingScheduling.check_schedule
        left -= size
        head = lanes[j] if j < len(lanes) else []
        order += head + rest[:size - len(head)]
        rest = rest[size - len(head):]
    items[:] = order + rest


# -- shared fixtures ---------------------------------------------------------------------

@pytest.fixture
def deep_ok(tmp_path):
    """A test that nests folders too deep for Python leaves nothing, even when it fails:
    pytest's own clean-up of old tmp_path folders uses shutil.rmtree and would raise
    RecursionError at the end of some later session."""
    yield
    subprocess.run(["chmod", "-R", "u+rwx", str(tmp_path)], capture_output=True)
    subprocess.run(["rm", "-rf", str(tmp_path)], capture_output=True)


class _Answer(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"answer")


@pytest.fixture
def outside_server():
    """A TCP server on 127.0.0.1 in the test's own network namespace that answers every
    connection with b"answer"; yields its port. Used to show what a test run cut off the
    network can and cannot reach."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answer) as srv:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        yield srv.server_address[1]
        srv.shutdown()
        t.join()


# -- the store on both backends (issue 12; tests/pgcluster.py) --------------------------

@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL server for this test process (skipped, or failed with
    CI=true, when PostgreSQL is not installed)."""
    from pgcluster import cluster_or_skip

    cluster = cluster_or_skip()
    yield cluster
    cluster.destroy()


class StoreTarget:
    """Where one test's store lives: ``open()`` opens (or reopens) it on ``backend``."""

    def __init__(self, backend: str, target: str, errors: tuple[type[BaseException], ...]):
        self.backend, self.target, self.errors = backend, target, errors

    def open(self, **kwargs):
        from andon.store import connect

        if self.backend == "sqlite":
            return connect(Path(self.target))
        return connect(Path("/nonexistent"), self.target, **kwargs)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """A fresh store on each backend: a SQLite file, then a new PostgreSQL database.
    ``errors``: what the backend's driver raises for a statement the database refuses."""
    import sqlite3

    if request.param == "sqlite":
        return StoreTarget("sqlite", str(tmp_path / "a.db"), (sqlite3.DatabaseError,))
    cluster = request.getfixturevalue("pg_cluster")
    import psycopg

    return StoreTarget("postgresql", cluster.new_database(), (psycopg.DatabaseError,))


@pytest.fixture
def pg_store_target(pg_cluster):
    """A fresh store on PostgreSQL only (outages, the server's own errors)."""
    import psycopg

    return StoreTarget("postgresql", pg_cluster.new_database(), (psycopg.DatabaseError,))


# -- every store a test leaves behind verifies (issue 11: `andon verify` on every store) --

STORE_NAME = Path(".andon") / "andon.db"
# folders that never hold a test's store and can be large: not walked
_NOT_WALKED = {".git", "node_modules", ".venv", "venv", "site-packages", "__pycache__"}


def stores_below(root: Path) -> list[Path]:
    """Every ``.andon/andon.db`` below ``root`` (``.git``, ``.andon``, venvs and
    ``node_modules`` are not walked)."""
    found = []
    for d, dirs, _files in os.walk(root):
        if ".andon" in dirs and os.path.isfile(os.path.join(d, ".andon", "andon.db")):
            found.append(Path(d) / ".andon" / "andon.db")
        # .andon/ holds evidence and attempt clones, never another store: not walked either
        dirs[:] = [x for x in dirs if x not in _NOT_WALKED and x != ".andon"]
    return found


def verify_store(db: Path) -> list[str]:
    """The problems ``andon verify`` would report for the SQLite store ``db`` (read-only:
    no migration runs), first broken link first; [] when intact."""
    import sqlite3

    from andon.store import chain

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        rows = ([dict(r) for r in con.execute("SELECT * FROM events ORDER BY id")]
                if "events" in tables else [])
    except sqlite3.DatabaseError as exc:  # overwritten or truncated: broken as a whole
        return [f"the store cannot be read: {exc}"]
    finally:
        con.close()
    return chain.verify(rows).problems


@pytest.fixture(autouse=True)
def _every_store_verifies(request):
    """After each test that used ``tmp_path``, every store below it must pass ``andon
    verify`` (the chain and the evidence files); a test that breaks its store on purpose
    says so with ``@pytest.mark.store_tampered``."""
    if ("tmp_path" not in request.fixturenames
            or request.node.get_closest_marker("store_tampered") is not None):
        yield
        return
    tmp = request.getfixturevalue("tmp_path")  # torn down after this fixture
    yield
    for db in stores_below(tmp):
        problems = verify_store(db)
        if problems:
            pytest.fail(f"andon verify fails on {db}: {problems[0]}"
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                        pytrace=False)
