"""End to end through the real CLI: crash and resume, kill -9, the run lock, halting, and the
editable-install pitfall.

Every test builds a real git repository in tmp_path and runs ``python -m andon`` as a
subprocess; agents are ``command`` agents (shell commands run in the attempt's worktree).
Where a test must catch the runner mid-flight, the agent announces itself by writing its pid
into a FIFO the test blocks on, and then blocks itself on a second FIFO: no sleeps.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from andon import fault_injection
from andon.store import Store

from helpers import (
    GIT_ENV,
    MUL_CODE,
    _add_lines,
    andon,
    config_toml,
    git,
    make_project,
    mul_packet,
    process_alive,
    with_reviewer,
)

# The honest agent: append `mul` to calc/ops.py in its cwd (the attempt's worktree).
HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
# An agent that gets it wrong the same way every time: mul adds.
WRONG = HONEST.replace("a * b", "a + b")
# An agent that touches the code without doing the work.
IDLE = "echo '# had a look' >> src/calc/ops.py"


def resume_toml(worktrees: Path, test_command: list[str] | None = None) -> str:
    """FAST settings (one red and one hermetic run, no random order) with attempt worktrees
    under ``worktrees`` (so a test can see leftovers) and optionally another test command."""
    text = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                       worktree_root=worktrees, test_command=test_command)
    assert "worktree_root" in text and (test_command is None or json.dumps(test_command) in text)
    return text


def project(tmp_path: Path, name: str = "repo", files: dict[str, str] | None = None,
            test_command: list[str] | None = None, sandbox: str | None = None,
            **packet_fields: object) -> Path:
    """A calc project with one packet P1 (add `mul`), worktrees under tmp_path/worktrees;
    ``tmp_path/sync`` (the blocking agent's FIFOs) is writable inside the agent's sandbox;
    ``sandbox``: an explicit ``[agent] sandbox`` level (default: andon's)."""
    root = tmp_path / name
    root.mkdir()
    (tmp_path / "sync").mkdir(exist_ok=True)
    lines = f'sandbox_paths = ["rw:{tmp_path / "sync"}"]\n'
    if sandbox is not None:
        lines += f'sandbox = "{sandbox}"\n'
    return make_project(root, {"P1": mul_packet("P1", **packet_fields)}, files=files,
                        config=_add_lines(resume_toml(tmp_path / "worktrees", test_command),
                                          "agent", lines))


def open_store(root: Path) -> Store:
    path = root / ".andon" / "andon.db"
    assert path.is_file(), f"no store at {path}"
    return Store(path)


def snapshot(root: Path) -> tuple[dict, list[dict], list[dict]]:
    """(packet row, attempts, events) of P1 as the store has them now."""
    store = open_store(root)
    try:
        return store.packet("P1"), store.attempts("P1"), store.events("P1")
    finally:
        store.close()


def squash_commits(root: Path, pid: str = "P1") -> list[str]:
    """Commits on andon/integration whose Andon-Packet trailer is ``pid``."""
    if not git(root, "for-each-ref", "refs/heads/andon/integration").strip():
        return []
    out = git(root, "log", "andon/integration", "-z",
              "--format=%H%n%(trailers:key=Andon-Packet,valueonly)")
    shas = []
    for record in out.split("\0"):
        sha, _, value = record.strip("\n").partition("\n")
        if sha and value.strip() == pid:
            shas.append(sha)
    return shas


def extra_worktrees(root: Path) -> list[str]:
    """Worktrees git knows of besides the main one."""
    out = git(root, "worktree", "list", "--porcelain")
    paths = [line[len("worktree "):] for line in out.splitlines() if line.startswith("worktree ")]
    return [p for p in paths if Path(p).resolve() != root.resolve()]


def assert_events_complete(events: list[dict]) -> None:
    """The packet's transition events form one unbroken chain from registration to `done`."""
    assert events[0]["kind"] == "registered", events[0]
    state = None
    for e in events:
        if e["to_state"] is None:
            continue
        assert e["from_state"] == state, f"gap in the event chain before {e}"
        state = e["to_state"]
    assert state == "done", [e["kind"] for e in events]
    assert [e["kind"] for e in events].count("merged") == 1


def assert_clean_after(root: Path, tmp_path: Path) -> None:
    """No andon worktree left, on disk or in git's records, and the user's tree is clean."""
    assert extra_worktrees(root) == []
    wt = tmp_path / "worktrees"
    assert not wt.exists() or list(wt.iterdir()) == [], list(wt.iterdir())
    assert git(root, "status", "--porcelain") == ""


def wait_for_line(fifo: Path, proc: subprocess.Popen, log: Path, timeout: float = 120) -> str:
    """Block until a line arrives on ``fifo`` (the agent announcing itself); fail early if the
    andon process ``proc`` ends first. O_RDWR: opening never blocks and no EOF is seen."""
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        buf, deadline = b"", time.monotonic() + timeout
        while b"\n" not in buf:
            if proc.poll() is not None:
                pytest.fail(f"andon exited {proc.returncode} before its agent spoke:\n"
                            + log.read_text())
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"the agent did not speak within {timeout} s:\n" + log.read_text())
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                buf += os.read(fd, 4096)
        return buf.decode().strip()
    finally:
        os.close(fd)


def start_andon(root: Path, log: Path, *args: str) -> subprocess.Popen:
    """`andon run ...` in the background, in its own process group, output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "andon", "-C", str(root), *with_reviewer(("run", *args))],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **GIT_ENV, "COLUMNS": "200"}, start_new_session=True)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def blocking_agent(tmp_path: Path, then: str = "") -> tuple[str, Path, Path]:
    """A command agent that edits its worktree, writes its pid to ``spoke`` and waits on
    ``hold`` (a line written there releases it), then runs ``then``. The FIFOs live in
    ``tmp_path/sync``, which ``project`` makes writable inside the sandbox."""
    (tmp_path / "sync").mkdir(exist_ok=True)
    spoke, hold = tmp_path / "sync" / "spoke.fifo", tmp_path / "sync" / "hold.fifo"
    os.mkfifo(spoke)
    os.mkfifo(hold)
    cmd = f"{HONEST}; echo $$ > '{spoke}'; read x < '{hold}'"
    return cmd + (f"; {then}" if then else ""), spoke, hold


# -- 1. crash at every point, then resume ------------------------------------------------

# point -> (packet state right after the crash, P1 commits already on the integration branch,
#           whether an attempt worktree is on disk at the crash, whether an attempt is interrupted)
AFTER_CRASH = {
    "after-claim": ("running", 0, False, True),
    "after-plant": ("running", 0, False, True),  # planted with plumbing: no worktree yet
    "after-worktree": ("running", 0, True, True),
    "after-agent": ("running", 0, True, True),
    "after-gates": ("reviewing", 0, False, True),  # the default stages end with a review
    "before-update-ref": ("merging", 0, False, False),
    "after-update-ref": ("merging", 1, False, False),
}


def test_every_crash_point_is_covered():
    """The table of expectations names exactly the crash points andon has."""
    assert set(AFTER_CRASH) == set(fault_injection.POINTS)


@pytest.mark.parametrize("point", fault_injection.POINTS)
def test_sigkill_at_crash_point_then_resume_merges_exactly_once(tmp_path, point):
    """SIGKILL at ``point`` (ANDON_CRASHPOINT), then a plain `andon run`: the packet ends done,
    squash-merged exactly once; an interrupted attempt is marked so, not counted, its worktree
    and branch gone; the event log is one unbroken chain with a `recovered` event where an
    attempt was in flight and a `merge-resumed` one where the merge was."""
    state, commits, worktree_on_disk, interrupted = AFTER_CRASH[point]
    root = project(tmp_path)

    first = andon(root, "run", "--agent", "command", "--command", HONEST,
                  env={"ANDON_CRASHPOINT": point})
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    row, attempts, _ = snapshot(root)
    assert row["state"] == state
    assert len(attempts) == 1 and attempts[0]["state"] in ("running", "passed")
    assert len(squash_commits(root)) == commits
    assert (tmp_path / "worktrees" / "P1-1").is_dir() == worktree_on_disk

    second = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert second.returncode == 0, second.stdout + second.stderr
    row, attempts, events = snapshot(root)
    assert row["state"] == "done"
    merged = squash_commits(root)
    assert len(merged) == 1, merged
    assert "def mul(a, b)" in git(root, "show", "andon/integration:src/calc/ops.py")
    assert attempts[-1]["state"] == "merged" and attempts[-1]["merge_sha"] == merged[0]
    kinds = [e["kind"] for e in events]
    if interrupted:
        assert len(attempts) == 2, attempts
        first_attempt = attempts[0]
        assert first_attempt["state"] == "interrupted" and first_attempt["counted"] == 0
        assert "interrupted" in first_attempt["reason"]
        assert git(root, "branch", "--list", "andon/P1/1") == ""
        recovered = [e for e in events if e["kind"] == "recovered"]
        assert len(recovered) == 1 and recovered[0]["attempt_id"] == first_attempt["id"]
        assert recovered[0]["to_state"] == "ready"
        assert "merge-resumed" not in kinds
    else:
        assert len(attempts) == 1 and attempts[0]["counted"] == 1
        assert "recovered" not in kinds
        assert kinds.count("merge-resumed") == 1
    assert_events_complete(events)
    assert_clean_after(root, tmp_path)


# -- 2. kill -9 from outside while the agent works -----------------------------------------

def agent_pid_files(root: Path) -> list[Path]:
    return list((root / ".andon").rglob("*.pid"))


@pytest.mark.parametrize("recorded", [True, False], ids=["pid-file-written", "killed-before"])
def test_kill_9_of_the_runner_group_while_the_agent_runs_then_resume(tmp_path, recorded):
    """A real SIGKILL to andon's process group while its agent is mid-task: a second run
    ends the orphaned agent, discards the interrupted attempt (not counted), retries with the
    honest agent and merges once; every event the killed run wrote is still there, in order.
    The runner writes the agent's pid file just after the agent starts; killed in between
    (``killed-before``: the file is removed), the next runner still finds the agent by the
    worktree it works in."""
    # sandbox none: the test checks the orphaned agent by the pid it reports itself ($$),
    # which a sandbox's pid namespace makes meaningless outside it
    root = project(tmp_path, sandbox="none")
    agent, spoke, _hold = blocking_agent(tmp_path)
    log = tmp_path / "first-run.log"
    proc = start_andon(root, log, "--agent", "command", "--command", agent)
    agent_pid = None
    try:
        agent_pid = int(wait_for_line(spoke, proc, log))
        if recorded:  # the agent speaks the moment it starts: the runner may not have written yet
            deadline = time.monotonic() + 60
            while not agent_pid_files(root) and time.monotonic() < deadline:
                os.sched_yield()
        assert proc.poll() is None
        assert (root / ".andon" / "run.lock").read_text() == str(proc.pid)
        kill_group(proc.pid)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        kill_group(proc.pid)
        proc.wait(timeout=60)
    if recorded:
        assert len(agent_pid_files(root)) == 1
    else:  # often the case by itself: the agent speaks before the runner records it
        for f in agent_pid_files(root):
            f.unlink()
    row, attempts, events_before = snapshot(root)
    assert row["state"] == "running" and attempts[0]["state"] == "running"
    try:
        # The agent runs in its own session: the runner's death alone leaves it running...
        assert process_alive(agent_pid, within_s=0)
        second = andon(root, "run", "--agent", "command", "--command", HONEST)
        # ...and the next runner ends it before it discards the attempt.
        assert not process_alive(agent_pid), "the orphaned agent is still running"
        said = ("ended the agent left running" if recorded
                else "ended a process left working in the interrupted attempt's worktree")
        assert said in second.stdout
        assert second.stdout.count("P1: ended") == 1, second.stdout
    finally:
        if agent_pid is not None:
            kill_group(agent_pid)
    assert second.returncode == 0, second.stdout + second.stderr
    row, attempts, events = snapshot(root)
    assert events[:len(events_before)] == events_before
    assert row["state"] == "done"
    assert [a["state"] for a in attempts] == ["interrupted", "merged"]
    assert [a["counted"] for a in attempts] == [0, 1]
    assert len(squash_commits(root)) == 1
    assert [e["kind"] for e in events].count("recovered") == 1
    assert_events_complete(events)
    assert_clean_after(root, tmp_path)


# -- 3. one runner at a time -------------------------------------------------------------

def test_second_run_exits_2_while_another_holds_the_lock(tmp_path):
    """While one `andon run` is working (its agent blocked on a FIFO), a second one exits 2
    saying another run is active (with its pid) and writes nothing; released, the first run
    finishes and merges."""
    root = project(tmp_path)
    agent, spoke, hold = blocking_agent(tmp_path)
    log = tmp_path / "first-run.log"
    proc = start_andon(root, log, "--agent", "command", "--command", agent)
    agent_pid = None
    try:
        agent_pid = int(wait_for_line(spoke, proc, log))
        _, _, events_before = snapshot(root)

        second = andon(root, "run", "--agent", "command", "--command", HONEST)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "another `andon run`" in second.stderr
        assert f"pid {proc.pid}" in second.stderr
        assert snapshot(root)[2] == events_before

        with open(hold, "w") as f:  # release the first run's agent
            f.write("go\n")
        assert proc.wait(timeout=300) == 0, log.read_text()
    finally:
        kill_group(proc.pid)
        proc.wait(timeout=60)
        if agent_pid is not None:
            kill_group(agent_pid)
    row, attempts, _ = snapshot(root)
    assert row["state"] == "done" and len(attempts) == 1
    assert len(squash_commits(root)) == 1


# -- 4. halting and unblocking through the CLI ------------------------------------------------

def test_repeated_failure_halts_the_line_until_edited_and_unblocked(tmp_path):
    """An agent whose `mul` adds fails the suite gate the same way twice: `andon run`
    exits 1 naming the packet, the reason and the evidence; a rerun exits 1 at once without a
    new attempt; after editing the packet `andon unblock P1` makes it ready, and an honest run
    merges it. `unblock` of a packet that is not blocked exits 2."""
    root = project(tmp_path)

    halted = andon(root, "run", "--agent", "command", "--command", WRONG)
    assert halted.returncode == 1, halted.stdout + halted.stderr
    err = halted.stderr
    assert "packet P1 is blocked" in err
    assert "same failure as attempt 1" in err and "no new evidence" in err
    evidence = next(line.split(":", 1)[1].strip() for line in err.splitlines()
                    if line.startswith("evidence:"))
    assert Path(evidence).is_dir() and Path(evidence) == root / ".andon/evidence/P1/2"
    # the wrong mul fails the planted tests in the plain-first run: the full suite is not run
    assert (Path(evidence) / "suite-plain.log").is_file()
    row, attempts, events = snapshot(root)
    assert row["state"] == "blocked"
    assert [a["state"] for a in attempts] == ["failed", "failed"]
    assert attempts[0]["fingerprint"] == attempts[1]["fingerprint"]

    again = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "packet P1 is blocked" in again.stderr
    assert snapshot(root)[1:] == (attempts, events)  # no attempt, no event

    md = root / "packets" / "P1" / "packet.md"
    md.write_text(md.read_text().replace("calc.ops.mul multiplies.",
                                         "calc.ops.mul(a, b) returns a * b."))
    unblocked = andon(root, "unblock", "P1")
    assert unblocked.returncode == 0, unblocked.stdout + unblocked.stderr
    assert "warning" not in unblocked.stderr
    status = json.loads(andon(root, "status", "--json").stdout)
    assert [p["state"] for p in status["packets"] if p["id"] == "P1"] == ["ready"]

    merged = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    row, attempts, events = snapshot(root)
    assert row["state"] == "done" and attempts[-1]["state"] == "merged"
    assert [e["kind"] for e in events].count("unblocked") == 1
    assert len(squash_commits(root)) == 1

    not_blocked = andon(root, "unblock", "P1")
    assert not_blocked.returncode == 2
    assert "not blocked" in not_blocked.stderr


# -- 5. the editable-install pitfall ----------------------------------------------------------

# A PEP 517/660 backend in the project itself, so that `pip install -e` needs nothing from a
# package index: like setuptools for a src layout, the editable wheel is one .pth file that
# puts <checkout>/src on sys.path. (setuptools < 70.1 would also need `wheel` installed.)
BACKEND = '''\
import base64, hashlib, os, zipfile

NAME, VERSION = "calc", "0.1"
DIST = f"{NAME}-{VERSION}.dist-info"


def _record(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _wheel(directory, files):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
    wheel = ("Wheel-Version: 1.0\\nGenerator: calc_build\\nRoot-Is-Purelib: true\\n"
             "Tag: py3-none-any\\n")
    files = {**files, f"{DIST}/METADATA": metadata.encode(), f"{DIST}/WHEEL": wheel.encode()}
    with zipfile.ZipFile(os.path.join(directory, name), "w") as z:
        lines = []
        for path, data in files.items():
            z.writestr(path, data)
            lines.append(_record(path, data))
        z.writestr(f"{DIST}/RECORD", "\\n".join(lines + [f"{DIST}/RECORD,,"]) + "\\n")
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    src = os.path.join(os.path.abspath(os.getcwd()), "src")
    return _wheel(wheel_directory, {"__editable__.calc.pth": (src + "\\n").encode()})


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("only editable installs in this test project")
'''

PYPROJECT = '''\
[build-system]
requires = []
build-backend = "calc_build"
backend-path = ["_build"]

[project]
name = "calc"
version = "0.1"
'''


def editable_venv(tmp_path: Path, checkout: Path) -> Path:
    """A venv (with system site packages) in which ``checkout`` is installed in editable mode;
    returns its python. pytest comes from this interpreter's site-packages if the system's
    lacks it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True)
    py = venv / "bin" / "python"
    has_pytest = subprocess.run([str(py), "-c", "import pytest"], capture_output=True)
    if has_pytest.returncode != 0:
        import pytest as ours
        site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                               "['purelib'])"], check=True, capture_output=True, text=True)
        Path(site.stdout.strip(), "zz_andon_tests_pytest.pth").write_text(
            str(Path(ours.__file__).parent.parent) + "\n")
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps",
                          "--no-build-isolation", "-e", str(checkout)],
                         capture_output=True, text=True,
                         env={**os.environ, "PIP_NO_INDEX": "1"})
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return py


def resolve_calc(py: Path, cwd: Path) -> tuple[str, bool]:
    """(file of calc.ops, whether it has mul) as a plain `python` in this venv sees it."""
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = subprocess.run([str(py), "-c", "import calc.ops as m; print(m.__file__); "
                          "print(hasattr(m, 'mul'))"], cwd=cwd, env=env,
                         check=True, capture_output=True, text=True).stdout.split("\n")
    return out[0], out[1] == "True"


def editable_project(tmp_path: Path, **packet_fields: object) -> tuple[Path, Path]:
    venv_py = tmp_path / "venv" / "bin" / "python"
    root = project(tmp_path, name="checkout", test_command=[str(venv_py), "-m", "pytest"],
                   files={"pyproject.toml": PYPROJECT, "_build/calc_build.py": BACKEND},
                   **packet_fields)
    assert editable_venv(tmp_path, root) == venv_py
    return root, venv_py


def test_editable_install_of_the_users_checkout_does_not_hide_the_agents_code(tmp_path):
    """The project is installed in editable mode from the user's checkout (which lacks `mul`)
    into the venv the test command uses, and a plain import there finds that checkout. The
    agent adds `mul` in its worktree: the gates run the worktree's code, so FAIL_TO_PASS passes
    and the packet merges (had they imported the checkout, `mul` would be missing)."""
    root, py = editable_project(tmp_path)
    where, has_mul = resolve_calc(py, tmp_path / "neutral")
    assert Path(where) == root / "src" / "calc" / "ops.py" and not has_mul

    run = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert run.returncode == 0, run.stdout + run.stderr
    row, attempts, _ = snapshot(root)
    assert row["state"] == "done" and len(squash_commits(root)) == 1
    store = open_store(root)
    try:
        gates = {g["gate"]: g for g in store.gate_results(attempts[0]["id"])}
    finally:
        store.close()
    assert gates["suite"]["evidence"]["runs"][0]["argv"][0] == str(py)
    assert "mul" not in (root / "src" / "calc" / "ops.py").read_text()


def test_editable_install_with_uncommitted_fix_in_the_checkout_is_not_a_pass(tmp_path):
    """The reverse: the user has an uncommitted `mul` in the checkout the venv imports, and the
    agent only adds a comment. The planted tests must still be red on the base and the suite must
    fail, and the failure must point at the worktree's calc/ops.py, never the checkout's."""
    root, py = editable_project(tmp_path, max_attempts=1)
    ops = root / "src" / "calc" / "ops.py"
    ops.write_text(ops.read_text() + MUL_CODE)  # the user's uncommitted work
    where, has_mul = resolve_calc(py, tmp_path / "neutral")
    assert Path(where) == ops and has_mul

    run = andon(root, "run", "--agent", "command", "--command", IDLE)
    assert run.returncode == 1, run.stdout + run.stderr
    assert squash_commits(root) == []
    row, attempts, _ = snapshot(root)
    assert row["state"] == "blocked" and attempts[0]["state"] == "failed"
    store = open_store(root)
    try:
        gates = {g["gate"]: g for g in store.gate_results(attempts[0]["id"])}
    finally:
        store.close()
    assert gates["red"]["status"] == "pass", gates["red"]["summary"]
    assert gates["suite"]["status"] == "fail"
    assert any(f["kind"] == "fail-to-pass" for f in gates["suite"]["evidence"]["findings"])
    for gate in ("red", "suite"):
        for r in gates[gate]["evidence"]["runs"]:
            # the tree the run was made in: red's a clone of the plant commit (the worktree
            # was being written meanwhile), the suite's the worktree or a clone of it
            assert r["cwd"] != str(root)
            log = Path(r["log_path"]).read_text()
            assert str(Path(r["cwd"]) / "src" / "calc" / "ops.py") in log, (gate, log)
            assert str(ops) not in log, (gate, log)
    assert git(root, "status", "--porcelain") == " M src/calc/ops.py\n"


def test_a_pid_file_the_agent_made_a_fifo_does_not_hang_the_recovery(tmp_path):
    """Crash recovery reads every ``*.pid`` file in an interrupted attempt's evidence to end
    the agent the killed runner left behind. The agent (its stage's folder is its to write)
    left a FIFO named like one: the next `andon run` does not wait on it; it recovers the
    attempt and merges."""
    root = project(tmp_path)
    leaves_a_fifo = HONEST + '; mkfifo "$(dirname "$ANDON_USAGE_FILE")/left.pid"'

    first = andon(root, "run", "--agent", "command", "--command", leaves_a_fifo,
                  env={"ANDON_CRASHPOINT": "after-agent"})
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    assert list((root / ".andon").rglob("left.pid")), "the agent's FIFO is in the evidence"

    second = andon(root, "run", "--agent", "command", "--command", HONEST, timeout=60)
    assert second.returncode == 0, second.stdout + second.stderr
    row, attempts, _ = snapshot(root)
    assert row["state"] == "done" and attempts[0]["state"] == "interrupted"
