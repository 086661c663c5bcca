"""The suite's own rules (tests/conftest.py), on a throwaway copy of it in a real pytest
subprocess: which tests get the ``e2e`` marker, and that temporary files stay in a private
folder that is gone after the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).parent / "conftest.py"

MODULE = '''
import pytest

def runner_for(*a): pass
def andon(*a): pass
def make_project(*a): pass

def project(tmp_path):
    make_project(tmp_path)
    return runner_for(tmp_path)

@pytest.fixture
def merged(tmp_path):
    return andon(tmp_path, "run", "--agent", "command")

def test_uses_the_runner(tmp_path):
    runner_for(tmp_path).run()

def test_through_a_module_helper(tmp_path):
    project(tmp_path).run()

def test_through_a_fixture(merged):
    assert merged is None

def test_cli_run_in_a_nested_agent(tmp_path):
    def agent():
        return andon(tmp_path, "demo")
    assert agent

def test_only_prints(tmp_path):
    andon(tmp_path, "status")

def test_builds_a_project_only(tmp_path):
    make_project(tmp_path)
'''


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ANDON_TESTS"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                           *args], cwd=root, capture_output=True, text=True, timeout=120,
                          check=False, env=env)


def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "tests" / "deep").mkdir(parents=True)
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    for module in ("project_python.py", "rewrite_cache.py"):  # conftest imports them
        shutil.copy(CONFTEST.parent / module, root / "tests")
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    e2e: end to end\n")
    (root / "tests" / "test_mixed.py").write_text(MODULE)
    (root / "tests" / "deep" / "test_e2e_named.py").write_text("def test_any():\n    pass\n")
    return root


def test_e2e_is_set_by_file_name_and_by_what_a_test_drives(tmp_path):
    root = suite(tmp_path)
    p = pytest_in(root, "--collect-only", "-q", "-m", "e2e", "tests")
    assert p.returncode == 0, p.stdout + p.stderr
    marked = {line.split("::")[-1] for line in p.stdout.splitlines() if "::" in line}
    assert marked == {"test_any", "test_uses_the_runner", "test_through_a_module_helper",
                      "test_through_a_fixture", "test_cli_run_in_a_nested_agent"}
    quick = pytest_in(root, "--collect-only", "-q", "-m", "not e2e", "tests")
    assert {line.split("::")[-1] for line in quick.stdout.splitlines() if "::" in line} == {
        "test_only_prints", "test_builds_a_project_only"}


def test_temporary_files_go_to_a_private_folder_removed_at_the_end(tmp_path):
    """A test (and a subprocess it starts) writing with tempfile lands in the suite's own
    TMPDIR, not the system's; after the run the folder is gone."""
    root = suite(tmp_path)
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    seen = tmp_path / "seen.txt"
    (root / "tests" / "test_mixed.py").write_text(f'''
import subprocess, sys, tempfile

def test_leaves_a_file(tmp_path):
    fd, path = tempfile.mkstemp(prefix="left-")
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    open({str(seen)!r}, "w").write(tempfile.gettempdir() + "\\n" + path + "\\n" + child
                                   + "\\n" + str(tmp_path))
''')
    env_tmp = {"TMPDIR": str(system_tmp)}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                        "-q", "tests/test_mixed.py", "-p", "no:randomly"], cwd=root,
                       capture_output=True, text=True, timeout=120, check=False,
                       env={**{k: v for k, v in os.environ.items()
                               if not k.startswith(("PYTEST_", "ANDON_TESTS"))}, **env_tmp})
    assert p.returncode == 0, p.stdout + p.stderr
    private, path, child, tmp = seen.read_text().splitlines()
    assert Path(private).parent == system_tmp and Path(private).name.startswith("suite-")
    assert Path(path).parent == Path(child).parent == Path(private)
    assert not Path(private).exists()
    # tmp_path is pytest's, in the system temp dir (kept there when a test fails)
    assert Path(tmp).is_relative_to(system_tmp) and not Path(tmp).is_relative_to(private)
    # what stays is pytest's own folder of tmp_path roots, nothing of the tests'
    assert all(p.name.startswith("pytest-of-") for p in system_tmp.iterdir())


def test_the_waits_tests_start_first_shared_between_two_workers(tmp_path):
    """The ``waits`` tests go to the front of the first two workers' blocks, whatever their
    place in the files: a real xdist run (worksteal, three workers) records each worker's
    order, and each lane begins with its share."""
    root = suite(tmp_path)
    log = tmp_path / "log"
    log.mkdir()
    record = (f"def record(name):\n    import os\n"
              f"    with open({str(log)!r} + '/' + os.environ['PYTEST_XDIST_WORKER'], 'a') as f:\n"
              f"        f.write(name + '\\n')\n")
    plain = "".join(f"def test_plain_{i}():\n    record('plain_{i}')\n" for i in range(30))
    waits = "".join(f"@pytest.mark.waits\ndef test_waits_{i}():\n    record('waits_{i}')\n"
                    for i in range(4))
    (root / "tests" / "test_mixed.py").write_text(f"import pytest\n{record}{plain}{waits}")
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    e2e: end to end\n"
                                     "    waits: waits\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3",
                        "--dist", "worksteal", "-q", "tests/test_mixed.py"], cwd=root,
                       capture_output=True, text=True, timeout=120, check=False,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith(("PYTEST_", "ANDON_TESTS"))})
    assert p.returncode == 0, p.stdout + p.stderr
    orders = [f.read_text().split() for f in sorted(log.iterdir())]
    assert sum(len(o) for o in orders) == 34
    heads = sorted(o[:2] for o in orders if o[0].startswith("waits_"))
    assert heads == [["waits_0", "waits_2"], ["waits_1", "waits_3"]], orders


def test_the_controller_writes_the_rewritten_test_modules_before_the_workers_start(tmp_path):
    """With PYTHONDONTWRITEBYTECODE=1 (this machine's and CI's), pytest writes no cache of
    its rewritten test modules, and every xdist worker rewrote them all again: the
    controller writes them first. The workers then run the rewritten code: a failing
    ``assert`` still says what differed."""
    root = suite(tmp_path)
    (root / "tests" / "test_mixed.py").write_text(
        "def test_lists():\n    assert [1, 2] == [1, 3]\n")
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("PYTEST_", "ANDON_TESTS"))}, "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-q",
            "tests/test_mixed.py"]
    # --assert=plain: pytest keeps no assertion state and rewrites nothing; nor does this
    plain = subprocess.run([*argv, "--assert=plain"], cwd=root, capture_output=True,
                           text=True, timeout=120, check=False, env=env)
    assert plain.returncode == 1 and "INTERNALERROR" not in plain.stdout + plain.stderr, \
        plain.stdout + plain.stderr
    assert not (root / "tests" / "__pycache__").exists()
    p = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120,
                       check=False, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "At index 1 diff: 2 != 3" in p.stdout, p.stdout
    caches = {f.name.split(".")[0]: f for f in (root / "tests" / "__pycache__").iterdir()
              if "-pytest-" in f.name}
    assert set(caches) == {"test_mixed", "conftest"}, caches
    # pytest's own check, as a worker makes it before using a cache
    from _pytest.assertion.rewrite import _read_pyc
    for name, pyc in caches.items():
        assert _read_pyc(root / "tests" / f"{name}.py", pyc) is not None, pyc


def test_waits_first_keeps_every_test_once_whatever_the_worker_count(monkeypatch):
    """Only the order changes: for no xdist, one worker, a count of 0 set by hand, and
    more workers than lanes, every test is there exactly once."""
    import conftest

    class Item:
        def __init__(self, n, waits):
            self.n, self.waits = n, waits

        def get_closest_marker(self, name):
            return True if name == "waits" and self.waits else None

    for count in (None, "0", "1", "2", "5", "x"):
        if count is None:
            monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
        else:
            monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", count)
        for waits in (set(), {3, 7, 19}):
            items = [Item(n, n in waits) for n in range(23)]
            conftest._waits_first(items)
            assert sorted(i.n for i in items) == list(range(23)), count
            if waits:
                assert {i.n for i in items[:2]} <= waits, count
