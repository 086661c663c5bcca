"""The harness's test runs are contained (contain/netless.py ``enter``): the agent's code, run by
the gates, cannot write the user's checkout, its ``.git`` or the store — not by path, not through
``/proc/<pid>/root`` of a process outside — while the run's own tree, HOME and TMPDIR stay
writable, and the run ends as its process ended."""

from __future__ import annotations

import errno
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from andon.contain import netless
from andon.runners.pytest import run_suite

from helpers import FAST, MUL_CODE, git, make_project, mul_packet, runner_for, write, write_tree

AVAILABLE, WHY = netless.contain_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"runs cannot be contained here: {WHY}")
PYTEST = [sys.executable, "-m", "pytest"]
# a file in the user's real home (where ~/.gitconfig is, which andon's own git reads)
HOME_DROP = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".andon-contained-runs-test"


def cheating_payload(root: Path) -> str:
    """Code that, on import, tries every way it has to change the user's checkout at ``root``
    and swallows each failure, so that the packet's own work still passes."""
    outside = os.getpid()  # this test's process: its /proc entry leads to the host's root
    return f'''

def _try(write):
    try:
        write()
    except Exception:
        pass


def _attack():
    import pathlib, subprocess
    root = pathlib.Path({str(root)!r})
    _try(lambda: (root / "dropped.txt").write_text("x"))
    _try(lambda: (root / "src" / "calc" / "__init__.py").write_text("BROKEN = 1\\n"))
    _try(lambda: (root / ".andon" / "dropped.txt").write_text("x"))
    _try(lambda: (root / ".git" / "refs" / "heads" / "evil").write_text("0" * 40 + "\\n"))
    _try(lambda: subprocess.run(["git", "-C", str(root), "branch", "evil2"],
                                capture_output=True, check=True))
    _try(lambda: pathlib.Path("/proc/{outside}/root" + str(root) + "/via-proc.txt")
         .write_text("x"))
    _try(lambda: pathlib.Path("/proc/{outside}/cwd/via-proc-cwd.txt").write_text("x"))
    _try(lambda: pathlib.Path({str(HOME_DROP)!r}).write_text("[core]\\n\\thooksPath = /x\\n"))


_attack()
'''


def test_code_under_test_cannot_change_the_checkout_its_git_or_the_store(tmp_path):
    # the patterns gate would block the payload (broad-except) before any test ran: off here,
    # since the subject is what stands behind it when a cheat gets past the patterns
    root = make_project(tmp_path / "repo", {"P1-mul": mul_packet("P1")},
                        config=FAST + "\n[gates.patterns]\nenabled = false\n")
    state_before = sorted(p.name for p in (root / ".git" / "refs" / "heads").iterdir())

    def agent(ctx):
        write(ctx, "src/calc/ops.py", MUL_CODE + cheating_payload(root), append=True)
        return "done"

    runner = runner_for(root, agent)
    try:
        runner.run()
        assert not HOME_DROP.exists()
    finally:
        HOME_DROP.unlink(missing_ok=True)
    # its own work passes: merged, and with it the code that tried (andon judges the tests)
    assert runner.store.packet("P1")["state"] == "done"
    assert not (root / "dropped.txt").exists()
    assert (root / "src" / "calc" / "__init__.py").read_text() == ""
    assert not (root / ".andon" / "dropped.txt").exists()
    assert not (root / "via-proc.txt").exists()
    assert not (Path.cwd() / "via-proc-cwd.txt").exists()
    assert git(root, "status", "--porcelain") == ""
    heads = sorted(p.name for p in (root / ".git" / "refs" / "heads").iterdir())
    assert "evil" not in heads and "evil2" not in git(root, "branch", "--list")
    assert set(state_before) <= set(heads)
    # every test run of the attempt says how it was contained
    runs = [r for a in runner.store.attempts("P1") for g in runner.store.gate_results(a["id"])
            for r in (g["evidence"] or {}).get("runs", []) if "contained" in r]
    assert {r["name"] for r in runs} >= {"red-1", "suite"}
    for r in runs:
        assert r["contained"].startswith("read-only: "), r["name"]
        assert str(root.resolve()) in r["contained"].split(": ", 1)[1].split(", ")


OWN_WRITES = '''
import errno, os, pathlib

def test_writes_its_own_tree_home_and_tmp(tmp_path):
    pathlib.Path("made-here.txt").write_text("x")
    (tmp_path / "t.txt").write_text("x")
    (pathlib.Path(os.environ["HOME"]) / "h.txt").write_text("x")

def test_cannot_write_beside_its_tree():
    try:
        (pathlib.Path.cwd().parent / "beside.txt").write_text("x")
    except OSError as exc:
        assert exc.errno == errno.EROFS
    else:
        raise AssertionError("wrote beside its own tree")
'''


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "fresh"])
def test_a_contained_run_writes_its_own_tree_home_and_tmp_and_nothing_beside(tmp_path,
                                                                             fork_server):
    outer = tmp_path / "outer"
    project = write_tree(outer / "proj", {"tests/test_own.py": OWN_WRITES})
    r = run_suite(PYTEST, project, tmp_path / "evidence", "suite", readonly=[outer],
                  fork_server=fork_server)
    assert r.contained == f"read-only: {outer.resolve()}"
    assert r.to_evidence()["contained"] == r.contained
    assert {i: x.outcome for i, x in r.results.items()} == {
        "tests.test_own::test_writes_its_own_tree_home_and_tmp": "passed",
        "tests.test_own::test_cannot_write_beside_its_tree": "passed"}
    assert (project / "made-here.txt").exists()
    assert not (outer / "beside.txt").exists()


def test_an_uncontained_run_says_nothing_and_writes_anywhere(tmp_path):
    outer = tmp_path / "outer"
    project = write_tree(outer / "proj", {"tests/test_own.py": OWN_WRITES})
    r = run_suite(PYTEST, project, tmp_path / "evidence", "suite")
    assert r.contained == ""
    assert r.results["tests.test_own::test_cannot_write_beside_its_tree"].outcome == "failed"


def test_where_runs_cannot_be_contained_the_evidence_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(netless, "_contain_cached", (False, "user namespaces refused (test)"))
    project = write_tree(tmp_path / "outer" / "proj", {"tests/test_own.py": OWN_WRITES})
    r = run_suite(PYTEST, project, tmp_path / "evidence", "suite", readonly=[tmp_path / "outer"])
    assert r.contained == "not contained: user namespaces refused (test)"
    assert r.results["tests.test_own::test_writes_its_own_tree_home_and_tmp"].outcome == "passed"


def wrapped(folder: Path, script: str, readonly: list[str] | None = None
            ) -> subprocess.CompletedProcess:
    return subprocess.run(netless.wrap(["sh", "-c", script], cut=False,
                                       readonly=readonly or [str(folder)]),
                          capture_output=True, text=True, cwd=folder.parent, timeout=60)


def test_a_contained_run_ends_as_its_process_ended(tmp_path):
    folder = tmp_path / "fenced"
    folder.mkdir()
    assert wrapped(folder, "exit 3").returncode == 3
    assert wrapped(folder, "kill -SEGV $$").returncode == -signal.SIGSEGV
    # its own process is not pid 1 (a signal it sends itself works as anywhere else)
    assert wrapped(folder, "kill -TERM $$").returncode == -signal.SIGTERM


def test_the_read_only_folders_cannot_be_unmounted_or_remounted_from_inside(tmp_path):
    folder = tmp_path / "fenced"
    folder.mkdir()
    p = wrapped(folder, f"umount -l {folder}; mount -o remount,rw {folder}; "
                        f"mount -o remount,rw,bind {folder}; echo x > {folder}/f; "
                        f"mount -t tmpfs none {folder} && echo x > {folder}/g; exit 0")
    assert p.returncode == 0, p.stderr
    assert "Read-only file system" in p.stderr
    assert list(folder.iterdir()) == []  # a tmpfs mounted inside is the run's own


def test_processes_outside_are_not_in_a_contained_runs_proc(tmp_path):
    folder = tmp_path / "fenced"
    folder.mkdir()
    p = wrapped(folder, f"test -e /proc/{os.getpid()} && echo seen; ls /proc/{os.getpid()}/cwd;"
                        " exit 0")
    assert "seen" not in p.stdout
    assert os.strerror(errno.ENOENT) in p.stderr  # no such pid in the run's own /proc


def test_pid_1_of_a_contained_run_leads_nowhere(tmp_path):
    """Pid 1 waits for the run and is not dumpable: its ``/proc/1/cwd`` (the folder it was
    in before the mounts, below them) and ``/proc/1/environ`` are closed to the run."""
    folder = tmp_path / "fenced"
    (folder / "own").mkdir(parents=True)
    p = subprocess.run(netless.wrap(["sh", "-c", "echo x > /proc/1/cwd/../escaped; "
                                     "cat /proc/1/environ; exit 0"], cut=False,
                                    readonly=[str(folder)], writable=[str(folder / "own")]),
                       capture_output=True, text=True, cwd=folder / "own", timeout=60)
    assert p.returncode == 0 and p.stderr.count("Permission denied") == 2, p.stderr
    assert sorted(x.name for x in folder.iterdir()) == ["own"]


@pytest.mark.skipif(os.geteuid() != 0, reason="what root keeps inside: needs root")
def test_root_inside_a_contained_run_keeps_every_id(tmp_path):
    """As root (CI, containers) the run is root over every id, as outside: it can chown a
    file to another user, and read and write files other users own, in its own tree."""
    folder = tmp_path / "fenced"
    (folder / "own").mkdir(parents=True)
    theirs = folder / "own" / "theirs"
    theirs.write_text("x")
    theirs.chmod(0o600)
    os.chown(theirs, 4242, 4242)
    p = subprocess.run(netless.wrap(["sh", "-c", "touch mine && chown 1000:1000 mine && "
                                     "cat theirs && echo y >> theirs"], cut=False,
                                    readonly=[str(folder)], writable=[str(folder / "own")]),
                       capture_output=True, text=True, cwd=folder / "own", timeout=60)
    assert p.returncode == 0, p.stderr
    assert (folder / "own" / "mine").stat().st_uid == 1000
    assert theirs.read_text() == "xy\n"


def test_doctor_says_whether_test_runs_are_contained(tmp_path):
    import json

    from helpers import andon

    root = make_project(tmp_path / "p")
    p = andon(root, "doctor", "--json")
    assert json.loads(p.stdout)["contained_runs"] == {"available": AVAILABLE, "reason": WHY}
    assert "test runs contained: yes" in andon(root, "doctor").stdout


def test_a_mount_below_a_read_only_folder_is_read_only_too(tmp_path):
    """A volume mounted inside the checkout (a tmpfs here) is as read-only as the rest."""
    folder = tmp_path / "fenced"
    (folder / "vol").mkdir(parents=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "none", str(folder / "vol")], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        p = wrapped(folder, f"echo x > {folder}/vol/f; exit 0")
        assert "Read-only file system" in p.stderr
        assert list((folder / "vol").iterdir()) == []
    finally:
        subprocess.run(["umount", str(folder / "vol")], check=False)


def test_pid_1_ignores_the_signals_the_run_sends_it(tmp_path):
    """Pid 1 ignores SIGINT (Python's own handler would raise there), SIGTERM and SIGHUP
    before the run starts: its ``SigIgn`` mask says so when the run reads it."""
    folder = tmp_path / "fenced"
    folder.mkdir()
    p = wrapped(folder, "grep SigIgn /proc/1/status")
    assert p.returncode == 0, p.stderr
    ignored = int(p.stdout.split()[1], 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert ignored & (1 << (sig - 1)), sig
    assert not ignored & (1 << (signal.SIGCHLD - 1))


def test_a_run_cannot_rewrite_andon_itself(tmp_path):
    """The next run's wrapper (contain/netless.py) and andon's venv are read from andon's own
    installation: a run that rewrote them would run the next one uncontained, and its
    evidence would still say contained. They are fenced like the checkout."""
    from andon.gates.base import fenced
    from andon.git.repo import Repo

    root = make_project(tmp_path / "repo")
    folders = {str(p.resolve()) for p in fenced(Repo(root))}
    assert str(netless.WRAPPER.parent.parent) in folders
    assert str(Path(sys.prefix).resolve()) in folders
    p = wrapped(root, f"echo '# x' >> {netless.WRAPPER}; touch {sys.prefix}/pwned; exit 0",
                readonly=[str(p) for p in fenced(Repo(root))])
    assert p.stderr.count("Read-only file system") == 2, p.stderr
    assert not Path(sys.prefix, "pwned").exists()


def test_dev_has_its_plain_devices_and_no_other(tmp_path):
    """/dev/null and the like work; every other device node (a raw disk, /dev/mem) cannot be
    opened: /dev is remounted nodev with those few bound back."""
    folder = tmp_path / "fenced"
    folder.mkdir()
    p = wrapped(folder, "echo x > /dev/null && head -c 4 /dev/urandom > /dev/null && "
                        "grep -E ' /dev rw?[^ ]*' /proc/self/mountinfo | head -1")
    assert p.returncode == 0, p.stderr
    assert "nodev" in p.stdout.split(" - ")[0], p.stdout
