"""Harness runs forked from a fork server (contain/forkserver.py, zygote.py): what the code
under test sees is what a fresh process shows it, repeated runs keep their own hash seeds, a
server that read a file that changed is never used again, and a server that dies or is killed
by the code under test costs no run. Real pytest processes of the tests' own project venv."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from project_python import build_project_python

from andon.config import load_config
from andon.contain import forkpool, forkserver
from andon.gates.lanes import Planned, run_lanes
from andon.runners.pytest import run_suite

from helpers import make_project, write_tree

PYTHON = os.environ.get("ANDON_TESTS_PROJECT_PYTHON", sys.executable)
PYTEST = [PYTHON, "-m", "pytest"]

# What a test can see of its process, written where the test file is (the run's cwd).
SNAPSHOT = '''
import gc, json, os, signal, socket, sys, threading
from pathlib import Path


def test_snapshot():
    out = {
        "modules": sorted(sys.modules),
        "env": {k: v for k, v in os.environ.items()},
        "cwd": os.getcwd(),
        "path": sys.path,
        "argv": sys.argv,
        "orig_argv": getattr(sys, "orig_argv", None),
        "fds": sorted(os.listdir("/proc/self/fd")),
        "stdin": os.readlink("/proc/self/fd/0"),
        "flags": list(sys.flags),
        "signals": [str(signal.getsignal(s)) for s in
                    (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM,
                     signal.SIGCHLD, signal.SIGHUP)],
        "session_leader": os.getsid(0) == os.getpid() == os.getpgrp(),
        "threads": threading.active_count(),
        "gc": [gc.isenabled(), gc.get_threshold()],
        "frozen": gc.get_freeze_count(),
        "full_collections": gc.get_stats()[2]["collections"],
        "stdout": [type(sys.stdout).__name__, sys.stdout.encoding,
                   sys.stdout.line_buffering],
        "net": sorted(name for _, name in socket.if_nameindex()),
        "hash": hash("andon"),
        "main": getattr(sys.modules["__main__"], "__file__", None),
    }
    Path(__file__).with_name("snapshot-%d.json" % os.getpid()).write_text(json.dumps(out))
'''


def snapshot(tmp_path: Path, name: str, **kw) -> dict:
    root = write_tree(tmp_path / name, {"tests/test_snapshot.py": SNAPSHOT})
    r = run_suite(PYTEST, root, tmp_path / f"ev-{name}", "suite", **kw)
    assert r.results["tests.test_snapshot::test_snapshot"].outcome == "passed", r.output_tail
    assert r.integrity.channel == "used" and r.forged == []
    (found,) = (root / "tests").glob("snapshot-*.json")
    return {**json.loads(found.read_text()), "start": r.start, "root": str(root)}


def same_shape(snap: dict) -> dict:
    """A snapshot without what differs from run to run whatever starts it: the run's own
    folders, channel fds, pid and hash seed."""
    def norm(text: str) -> str:
        text = text.replace(snap["root"], "<root>")
        text = re.sub(r"/[^\s:'\"]*/(home|tmp|report\.xml)\b", r"<scratch>/\1", text)
        return re.sub(r"^\d+:\d+$", "<fds>", text)
    env = dict(snap["env"])
    for k in ("HOME", "TMPDIR"):
        assert env.pop(k)
    out = {k: v for k, v in snap.items() if k not in ("env", "hash", "start", "root", "fds")}
    out["env"] = {k: norm(v) for k, v in env.items()}
    out["fds"] = len(snap["fds"])
    for key in ("cwd", "argv", "orig_argv", "path"):
        v = out[key]
        out[key] = norm(v) if isinstance(v, str) else [norm(x) for x in v] if v else v
    return out


@pytest.mark.parametrize("profile", ["normal", "plain"])
@pytest.mark.parametrize("network", ["on", "off"])
def test_the_code_under_test_sees_what_a_fresh_process_shows(tmp_path, profile, network):
    fresh = snapshot(tmp_path, "fresh", fork_server=False, profile=profile, network=network)
    forked = snapshot(tmp_path, "forked", fork_server=True, profile=profile, network=network)
    assert fresh["start"] == "fresh" and forked["start"] == "fork server"
    a, b = same_shape(fresh), same_shape(forked)
    assert set(a["modules"]) ^ set(b["modules"]) == set()
    assert a == b
    assert forked["frozen"] == 0  # nothing frozen: the heap is the process's own
    if network == "off":
        assert forked["net"] == ["lo"]


# What a forked run's garbage collector shows is a fresh run's. Freezing the server's objects
# (gc.freeze) was measured and not taken (benchmarks/README.md, twenty-fifth pass): three
# reviews found a way to tell each of its versions apart; these tests are those ways.
#
# A listing of gc's objects, or of an object's referrers, in the code under test. The class is
# made when pytest is imported: in the fork server, for a forked run.
LISTING = """\
import gc, json, os

import _pytest.python


def test_listing():
    frozen = gc.get_freeze_count()
    if os.environ["LISTING"] == "objects":
        found = any(o is _pytest.python.Function for o in gc.get_objects())
    else:
        found = any(r is vars(_pytest.python) for r in gc.get_referrers(_pytest.python.Function))
    with open("listing.json", "w") as f:
        json.dump([frozen, found, gc.get_freeze_count()], f)
"""


@pytest.mark.parametrize("listing", ["objects", "referrers"])
def test_gc_listings_in_a_forked_run_show_what_a_fresh_run_shows(tmp_path, listing):
    seen = {}
    for start, fork in (("fresh", False), ("forked", True)):
        root = write_tree(tmp_path / start, {"tests/test_listing.py": LISTING})
        r = run_suite(PYTEST, root, tmp_path / f"ev-{start}", "suite", fork_server=fork,
                      extra_env={"LISTING": listing})
        assert r.results["tests.test_listing::test_listing"].outcome == "passed", r.output_tail
        seen[start] = json.loads((root / "listing.json").read_text())
    assert seen == {"fresh": [0, True, 0], "forked": [0, True, 0]}


# What the code under test freezes is its own business: a leak check that freezes what is
# alive as its baseline and lists what is new, and a probe that raises the listing's audit
# event itself to see whether its own frozen garbage comes back (no hook may answer it).
OWN_FREEZE = """\
import gc, json, sys, weakref


class Widget:
    def __init__(self):
        self.me = self


KEEP = [Widget() for _ in range(3)]


def probe():
    w = Widget()
    r = weakref.ref(w)
    del w
    gc.freeze()
    try:
        sys.audit("gc.get_objects")
        gc.collect()
        return r() is None
    finally:
        gc.unfreeze()


def test_own_freeze():
    collected = probe()
    gc.collect()
    gc.freeze()
    try:
        Widget()
        gc.collect()
        leaked = sum(isinstance(o, Widget) for o in gc.get_objects())
    finally:
        gc.unfreeze()
    with open("own.json", "w") as f:
        json.dump([collected, leaked], f)
"""


def test_what_the_code_under_test_freezes_stays_frozen(tmp_path):
    seen = {}
    for start, fork in (("fresh", False), ("forked", True)):
        root = write_tree(tmp_path / start, {"tests/test_own_freeze.py": OWN_FREEZE})
        r = run_suite(PYTEST, root, tmp_path / f"ev-{start}", "suite", fork_server=fork)
        assert r.results["tests.test_own_freeze::test_own_freeze"].outcome == "passed", \
            r.output_tail
        seen[start] = json.loads((root / "own.json").read_text())
    assert seen == {"fresh": [False, 0], "forked": [False, 0]}


# After gc.unfreeze(), a collection finds nothing a fresh process lacks, and two listings with
# nothing made between them agree.
THAWED = """\
import gc, json, types


def functions():
    return sum(isinstance(o, types.FunctionType) for o in gc.get_objects())


def test_a_listing_is_steady():
    gc.collect()
    before = functions()
    gc.collect()
    assert functions() == before


def test_nothing_thawed_is_garbage():
    gc.collect()
    gc.unfreeze()
    with open("thawed.json", "w") as f:
        json.dump(gc.collect(), f)
"""


def test_nothing_a_thaw_gives_a_collection_is_the_servers(tmp_path):
    for start, fork in (("fresh", False), ("forked", True)):
        root = write_tree(tmp_path / start, {"tests/test_thawed.py": THAWED})
        r = run_suite(PYTEST, root, tmp_path / f"ev-{start}", "suite", fork_server=fork)
        assert r.start == ("fork server" if fork else "fresh")
        assert {i: x.outcome for i, x in r.results.items()} == {
            "tests.test_thawed::test_a_listing_is_steady": "passed",
            "tests.test_thawed::test_nothing_thawed_is_garbage": "passed"}, r.output_tail
        assert json.loads((root / "thawed.json").read_text()) == 0, start


WARMED = """\
import inspect, re, sys, tokenize
from pathlib import Path


def test_warm():
    import _pytest.junitxml
    keys = [k[1] for k in getattr(re, "_cache", {})]
    Path(__file__).with_name("warm.txt").write_text(repr([
        any("\\uFFFD" in k or "\\ufffd" in k for k in keys if isinstance(k, str)),
        inspect.modulesbyfile.get(_pytest.junitxml.__file__),
        tokenize._compile.cache_info().currsize]))
"""


def test_a_forked_run_finds_no_cache_the_server_filled(tmp_path):
    """A cache the server filled would tell a forked run from a fresh one (a review of
    2026-12-07 read the tokenizer's and inspect's: merged); the server fills none."""
    def warm(name: str, fork: bool) -> str:
        root = write_tree(tmp_path / name, {"tests/test_warm.py": WARMED})
        r = run_suite(PYTEST, root, tmp_path / f"ev-{name}", "suite", fork_server=fork)
        assert r.results["tests.test_warm::test_warm"].outcome == "passed", r.output_tail
        return (root / "tests" / "warm.txt").read_text()
    assert warm("forked", True) == warm("fresh", False) == "[False, None, 0]"


def test_a_forked_run_reads_as_a_fresh_one(tmp_path):
    files = {"src/calc/__init__.py": "def mul(a, b):\n    return a + b\n",
             "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n"
                                  "    assert mul(3, 4) == 12\n\n\ndef test_two():\n"
                                  "    assert mul(2, 2) == 4\n"}
    root = write_tree(tmp_path / "p", files)
    runs = [run_suite(PYTEST, root, tmp_path / "ev", f"r{i}", pythonpath=[root / "src"],
                      canaries=["tests/test_mul.py"], own_files=["tests/test_mul.py"],
                      fork_server=forked)
            for i, forked in enumerate((False, True, True))]
    assert [r.start for r in runs] == ["fresh", "fork server", "fork server"]
    for r in runs:
        assert {i: x.outcome for i, x in r.results.items()} == {
            "tests.test_mul::test_mul": "failed", "tests.test_mul::test_two": "passed"}
        assert r.integrity.channel == "used" and r.forged == [] and r.exit_status == 1
        assert r.to_evidence()["start"] == r.start


def hash_of(tmp_path: Path, name: str, slot: int) -> int:
    return snapshot(tmp_path, name, slot=slot)["hash"]


def test_each_slot_has_a_hash_seed_of_its_own(tmp_path):
    seeds = [hash_of(tmp_path, f"s{slot}", slot) for slot in (0, 1, 2)]
    assert len(set(seeds)) == 3, "repeated runs must not share a hash seed"
    # the price, said in docs/gates.md: runs from one server share its seed
    assert hash_of(tmp_path, "again", 0) == seeds[0]


def test_a_file_the_server_read_changing_means_a_new_server(tmp_path):
    python = build_project_python(tmp_path / "venv")
    site = Path(next((tmp_path / "venv" / "lib").glob("python*/site-packages")))
    probe = {"tests/test_env.py": "import os\n\n\ndef test_env():\n"
                                  "    assert os.environ.get('FROM_PTH') is None\n"}
    root = write_tree(tmp_path / "p", probe)
    first = run_suite([str(python), "-m", "pytest"], root, tmp_path / "ev", "r1")
    assert first.start == "fork server" and first.results["tests.test_env::test_env"].outcome \
        == "passed"
    servers = forkpool.pids()
    # a .pth runs at every fresh start: the old server never ran it, so it must not fork
    (site / "andon_probe.pth").write_text("import os; os.environ['FROM_PTH'] = '1'\n")
    second = run_suite([str(python), "-m", "pytest"], root, tmp_path / "ev", "r2")
    assert second.start == "fork server"
    assert second.results["tests.test_env::test_env"].outcome == "failed"  # the .pth ran
    assert forkpool.pids() - servers  # a new server
    # a module pytest imported, rewritten in place (same size, same name): stale too
    (site / "andon_probe.pth").unlink()
    mark = site / "_pytest" / "timing.py"
    mark.write_bytes(mark.read_bytes())
    third = run_suite([str(python), "-m", "pytest"], root, tmp_path / "ev", "r3")
    assert third.results["tests.test_env::test_env"].outcome == "passed"
    assert len(forkpool.pids() - servers) >= 1 and third.start == "fork server"


def test_a_server_that_died_between_runs_is_replaced(tmp_path):
    root = write_tree(tmp_path / "p", {"tests/test_ok.py": "def test_ok():\n    pass\n"})
    assert run_suite(PYTEST, root, tmp_path / "ev", "r1").start == "fork server"
    for pid in forkpool.pids():
        os.kill(pid, signal.SIGKILL)
    again = run_suite(PYTEST, root, tmp_path / "ev", "r2")
    assert again.start == "fork server"
    assert again.results["tests.test_ok::test_ok"].outcome == "passed"


def test_code_under_test_that_kills_its_server_loses_no_run(tmp_path):
    kill = ("import os, signal\n\n\ndef test_kill():\n"
            "    os.kill(os.getppid(), signal.SIGKILL)\n\n\ndef test_after():\n    pass\n")
    root = write_tree(tmp_path / "p", {"tests/test_kill.py": kill})
    r = run_suite(PYTEST, root, tmp_path / "ev", "r1")
    assert r.start == "fork server"
    assert {i: x.outcome for i, x in r.results.items()} == {
        "tests.test_kill::test_kill": "passed", "tests.test_kill::test_after": "passed"}
    assert r.integrity.channel == "used" and r.exit_status == 0
    (root / "tests/test_kill.py").write_text("def test_ok():\n    pass\n")
    after = run_suite(PYTEST, root, tmp_path / "ev", "r2")
    assert after.start == "fork server" and after.exit_status == 0


def test_a_forked_run_that_hangs_is_killed_with_its_group(tmp_path):
    hang = ("import os, subprocess, sys, time\n\n\ndef test_hang():\n"
            "    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "    with open('child.pid', 'w') as f:\n"
            "        f.write(str(p.pid))\n"
            "    time.sleep(600)\n")
    root = write_tree(tmp_path / "p", {"tests/test_hang.py": hang})
    r = run_suite(PYTEST, root, tmp_path / "ev", "r1", timeout_s=3)
    assert r.start == "fork server" and r.timed_out and r.exit_status is None
    child = int((root / "child.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_without_linux_pidfds_or_when_asked_runs_start_fresh(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "p", {"tests/test_ok.py": "def test_ok():\n    pass\n"})
    assert run_suite(PYTEST, root, tmp_path / "ev", "off", fork_server=False).start == "fresh"
    monkeypatch.setattr(forkpool.sys, "platform", "darwin")
    r = run_suite(PYTEST, root, tmp_path / "ev", "mac")
    assert r.start == "fresh: fork servers need Linux (pidfd_open)"
    assert r.results["tests.test_ok::test_ok"].outcome == "passed"


def test_blocked_plugins_are_read_as_pytest_reads_them():
    assert forkserver.blocked_plugins(["-p", "no:doctest", "-pno:cacheprovider", "-p",
                                       "xdist", "-q", "-p", " no:warnings"]) == {
        "doctest", "cacheprovider", "warnings"}


LEAVE = '''
import os
import subprocess
import sys


def test_leave():
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              start_new_session=True)
    with open("helper-%d.pid" % os.getpid(), "w") as f:
        f.write(str(helper.pid))
    with open("parent-%d.pid" % os.getpid(), "w") as f:
        f.write(str(os.getppid()))
'''


def test_lanes_borrow_this_processs_servers_and_what_their_runs_leave_is_ended(tmp_path):
    """Lanes (forked processes, gates/lanes.py) fork their runs from the servers of the
    process that forked them, one slot each, and that process keeps them: a second plan
    starts no server. A helper a run leaves in a session of its own ends with the run, in a
    lane too (the server is the subreaper that sweeps it)."""
    root = make_project(tmp_path / "a", files={"tests/test_leave.py": LEAVE})
    other = write_tree(tmp_path / "b", {})
    os.system(f"cp -r {root}/. {other}")
    ctx = SimpleNamespace(config=load_config(root), evidence_dir=tmp_path / "ev",
                          env_digest=None, fenced=lambda: [])

    def plan(tag: str) -> list[tuple[Path, list[Planned]]]:
        runs = [Planned(f"{tag}-{i}", slot=i, seed=7 if i == 3 else None) for i in range(4)]
        return [(root, runs[:2]), (other, runs[2:])]

    made = run_lanes(ctx, plan("one"), agent_code=False)
    assert sorted(made) == ["one-0", "one-1", "one-2", "one-3"]
    assert {r.start for r in made.values()} == {"fork server"}
    assert all(r.results["tests.test_leave::test_leave"].outcome == "passed"
               for r in made.values())
    servers = forkpool.pids()
    parents = {int(f.read_text()) for d in (root, other) for f in d.glob("parent-*.pid")}
    assert len(parents) == 4 and parents <= servers  # one server a slot, this process's
    again = run_lanes(ctx, plan("two"), agent_code=False)
    assert {r.start for r in again.values()} == {"fork server"}
    assert forkpool.pids() == servers  # the lanes borrowed them: none started, none lost
    helpers = [int(f.read_text()) for d in (root, other) for f in d.glob("helper-*.pid")]
    assert len(helpers) == 8
    for pid in helpers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
