"""No process an agent starts outlives its stage, not even one in a session of its own.

An agent can escape the kill of its process group with ``setsid`` (or ``start_new_session``,
or a double fork): such a helper could swap files between andon's checks or answer later test
runs. On Linux the runner is a child subreaper, so orphans of the agent's tree become the
runner's children, and ``run_process`` kills and reaps them after the stage. Every helper here
announces itself by writing its pid to a file the agent waits for: no sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from andon.agents import CommandAgent, StageContext
from andon.agents.external import ExternalAgent, Parsed
from andon.agents.process import run_process
from andon.contain.procgroup import (
    become_subreaper,
    kill_group,
    kill_leftover_group,
    kill_leftovers,
    kill_working_under,
    own_children,
    start_time,
)
from andon.packet import load_packets
from andon.sandbox.plan import Plan

from helpers import (
    FAST,
    MUL_CODE,
    _add_lines,
    andon,
    make_project,
    mul_packet,
    process_alive,
    skip_without_fs,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="child subreaper and /proc are Linux only")

# Appends `mul` to calc/ops.py in the attempt's worktree (as in test_e2e_resume).
HONEST_COMMAND = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
HELPER = "sh -c 'echo $$ > {pf}; exec sleep 300'"


def wait_for(pf: Path) -> str:
    """Shell: spin until the helper has written its pid to ``pf``."""
    return f"while [ ! -s {pf} ]; do :; done"


def run(tmp_path: Path, argv: list[str], timeout_s: float = 60):
    stdin = tmp_path / "stdin"
    stdin.write_text("")
    started = time.monotonic()
    p = run_process(argv, tmp_path, {"PATH": os.environ["PATH"]}, stdin,
                    tmp_path / "out.log", timeout_s)
    # A helper holding the transcript pipe must not keep run_process waiting for its end.
    assert time.monotonic() - started < 60
    return p


def sh(tmp_path: Path, script: str, timeout_s: float = 60):
    return run(tmp_path, ["/bin/sh", "-c", script], timeout_s)


@pytest.fixture(autouse=True)
def no_helper_outlives_the_test(tmp_path):
    """Whatever a test asserts, every helper that wrote a pid file under tmp_path is ended
    afterwards (its pid is a group id: each helper leads a session of its own)."""
    yield
    for pf in tmp_path.rglob("*.pid"):
        text = pf.read_text().strip()
        if text.isdigit() and process_alive(int(text), within_s=0):
            kill_group(int(text))


def assert_gone(pid: int) -> None:
    """``pid`` is dead AND reaped: no zombie of it is left with the test process (which
    became the subreaper when it ran the agent)."""
    assert not process_alive(pid, within_s=0), f"helper {pid} survived the stage"
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def pid_in(pf: Path) -> int:
    return int(pf.read_text())


def test_setsid_helper_is_killed_after_a_normal_exit(tmp_path):
    pf = tmp_path / "helper.pid"
    p = sh(tmp_path, f"setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 &\n{wait_for(pf)}")
    assert p.exit_status == 0 and not p.timed_out
    assert_gone(pid_in(pf))
    assert p.leftovers_killed == 1 and p.leftovers_left == 0


def test_setsid_helper_holding_the_transcript_pipe_is_killed(tmp_path):
    """``setsid sleep 300 &`` keeps stdout (the transcript pipe) open: run_process still
    returns at once and the helper is gone."""
    pf = tmp_path / "helper.pid"
    p = sh(tmp_path, f"setsid {HELPER.format(pf=pf)} &\n{wait_for(pf)}\necho done")
    assert p.exit_status == 0
    assert_gone(pid_in(pf))
    assert (tmp_path / "out.log").read_text() == "done\n"


def test_double_forked_helper_is_killed(tmp_path):
    pf = tmp_path / "helper.pid"
    p = sh(tmp_path, f"( setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 & ) &\n{wait_for(pf)}")
    assert p.exit_status == 0
    assert_gone(pid_in(pf))
    assert p.leftovers_killed >= 1


def test_python_helper_with_a_new_session_is_killed(tmp_path):
    pf = tmp_path / "helper.pid"
    code = ("import subprocess, sys\n"
            "h = subprocess.Popen(['sleep', '300'], start_new_session=True,\n"
            "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            f"open({str(pf)!r}, 'w').write(str(h.pid))\n")
    p = run(tmp_path, [sys.executable, "-c", code])
    assert p.exit_status == 0
    assert_gone(pid_in(pf))
    assert p.leftovers_killed == 1


# Names the running process with bytes that are no UTF-8 (prctl PR_SET_NAME).
NOT_UTF8_NAME = "import ctypes; ctypes.CDLL(None).prctl(15, b'\\xff)(x', 0, 0, 0)\n"


def test_a_name_that_is_not_utf8_hides_no_helper(tmp_path):
    """Any process may rename itself with any bytes, and /proc/<pid>/stat then holds a line
    that is no UTF-8 text. Here the helper and the agent both do: the helper is still found
    and killed. (Read as text, such a line made a helper invisible to the sweep, and an agent
    so named had no known start time: no sweep at all.)"""
    pf = tmp_path / "helper.pid"
    helper = (NOT_UTF8_NAME + "import os, time\n"
              f"open({str(pf)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n")
    code = ("import os, subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', {helper!r}], start_new_session=True,\n"
            "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            f"while not os.path.exists({str(pf)!r}) or not os.path.getsize({str(pf)!r}):\n"
            "    pass\n" + NOT_UTF8_NAME)
    p = run(tmp_path, [sys.executable, "-c", code])
    assert p.exit_status == 0
    assert_gone(pid_in(pf))
    assert p.leftovers_killed == 1


def test_a_chain_of_sessions_is_killed_to_the_end(tmp_path):
    """Killing one helper hands its own helper (another session) to the runner: the sweep
    goes on until none is left."""
    outer, inner = tmp_path / "outer.pid", tmp_path / "inner.pid"
    chain = (f"setsid sh -c 'setsid sh -c \"echo \\$\\$ > {inner}; exec sleep 300\" & "
             f"echo $$ > {outer}; wait' > /dev/null 2>&1 &\n"
             f"{wait_for(outer)}\n{wait_for(inner)}")
    p = sh(tmp_path, chain)
    assert p.exit_status == 0
    assert_gone(pid_in(outer))
    assert_gone(pid_in(inner))
    assert p.leftovers_killed == 2


def test_helper_is_killed_after_a_timeout(tmp_path):
    pf = tmp_path / "helper.pid"
    p = sh(tmp_path, f"setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 &\n{wait_for(pf)}\n"
           "exec sleep 300", timeout_s=5)  # time for the helper to start, under load
    assert p.timed_out and p.exit_status is None
    assert_gone(pid_in(pf))
    assert p.leftovers_killed == 1


def test_an_honest_agent_leaves_nothing_to_kill(tmp_path):
    p = sh(tmp_path, "echo hello; sh -c 'echo child' ; (echo subshell) &\nwait")
    assert p.exit_status == 0
    assert p.leftovers_killed == 0 and p.leftovers_left == 0


def test_the_tests_own_children_are_not_killed(tmp_path):
    """Processes the test process started before the stage are its children too, like the
    agent's orphans — but not the agent's: they live on."""
    mine = subprocess.Popen(["sleep", "300"])
    mine_own_session = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        pf = tmp_path / "helper.pid"
        p = sh(tmp_path, f"setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 &\n{wait_for(pf)}")
        assert_gone(pid_in(pf))
        assert p.leftovers_killed == 1
        assert mine.poll() is None and mine_own_session.poll() is None
    finally:
        for proc in (mine, mine_own_session):
            proc.kill()
            proc.wait()
    assert mine.returncode == mine_own_session.returncode == -9  # we reaped them, not andon


def test_the_sweep_is_bounded_and_says_what_it_left(tmp_path):
    """With one round only, the inner helper of a chain is handed to the runner after the
    last round: it is counted as left, not waited for forever."""
    outer, inner = tmp_path / "outer.pid", tmp_path / "inner.pid"
    chain = (f"setsid sh -c 'setsid sh -c \"echo \\$\\$ > {inner}; exec sleep 300\" & "
             f"echo $$ > {outer}; wait' > /dev/null 2>&1 &\n"
             f"{wait_for(outer)}\n{wait_for(inner)}")
    assert become_subreaper()
    before = {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()}
    agent = subprocess.Popen(["/bin/sh", "-c", chain], start_new_session=True)
    since = start_time(agent.pid)
    agent.wait()
    killed, left = kill_leftovers(before, since, max_rounds=1)
    assert (killed, left) == (1, 1)
    assert_gone(pid_in(outer))
    assert process_alive(pid_in(inner), within_s=0)
    assert kill_leftovers(before, since) == (1, 0)
    assert_gone(pid_in(inner))


# -- the note in the stage's usage, and the whole run -----------------------------------------

@pytest.fixture
def packet(tmp_path):
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")})
    return load_packets(root / "packets", root)[0]


def ctx(tmp_path: Path, packet) -> StageContext:
    wt, ev = tmp_path / "wt", tmp_path / "ev"
    wt.mkdir()
    ev.mkdir()
    (ev / "prompt.md").write_text("do it")
    return StageContext(packet, "implement", 1, wt, "do it", ev / "prompt.md", ev, 60.0)


def test_the_stage_usage_notes_how_many_were_killed(tmp_path, packet):
    a, b = tmp_path / "a.pid", tmp_path / "b.pid"
    run_ = CommandAgent(f"setsid {HELPER.format(pf=a)} > /dev/null 2>&1 &\n"
                        f"setsid {HELPER.format(pf=b)} > /dev/null 2>&1 &\n"
                        f"{wait_for(a)}\n{wait_for(b)}").run(ctx(tmp_path, packet))
    assert_gone(pid_in(a))
    assert_gone(pid_in(b))
    assert "killed 2 processes the agent left running" in run_.usage.notes


def test_an_agent_cli_adapter_notes_it_too(tmp_path, packet):
    """The adapters for agent CLIs (claude-code, codex, …) share ExternalAgent.run."""
    pf = tmp_path / "helper.pid"

    class ShellCLI(ExternalAgent):
        name, executable = "shell-cli", "sh"

        def argv(self, ctx, s, files):
            return ["sh", "-c", f"setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 &\n"
                                f"{wait_for(pf)}"]

        def parse(self, ctx, s, files):
            return Parsed(claim="done")

    run_ = ShellCLI(environ={"PATH": os.environ["PATH"]}).run(ctx(tmp_path, packet))
    assert_gone(pid_in(pf))
    assert run_.exit_status == 0
    assert run_.usage.notes[0] == "killed 1 process the agent left running"


def test_an_honest_stage_has_no_such_note(tmp_path, packet):
    run_ = CommandAgent("echo fine").run(ctx(tmp_path, packet))
    assert not [n for n in run_.usage.notes if "left running" in n]


def test_andon_run_leaves_no_helper_behind(tmp_path):
    """Through the real CLI: the agent leaves a setsid helper and does the work; when `andon
    run` returns the helper is gone, and `andon show` says it was killed. Unsandboxed: the
    agent writes the helper's pid outside its worktree (inside the sandbox the helper would
    die with the stage's pid namespace, tests/test_sandbox_*.py)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        config=_add_lines(FAST, "agent", 'sandbox = "none"\n'))
    pf = tmp_path / "helper.pid"
    agent = f"setsid {HELPER.format(pf=pf)} > /dev/null 2>&1 &\n{wait_for(pf)}\n{HONEST_COMMAND}"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not process_alive(pid_in(pf), within_s=0), "the helper outlived andon run"
    shown = andon(root, "show", "P1")
    assert "killed 1 process the agent left running" in shown.stdout, shown.stdout


def test_crash_recovery_matches_whole_directories_only(tmp_path):
    """The group left by attempt 10's agent is not ended when attempt 1 is discarded: the
    working folder must be the attempt's worktree or inside it, not merely share a prefix."""
    ten = tmp_path / "P1-10"
    ten.mkdir()
    p = subprocess.Popen(["sleep", "300"], cwd=ten, start_new_session=True)
    try:
        assert not kill_leftover_group(p.pid, str(tmp_path / "P1-1"))
        assert p.poll() is None
        assert kill_leftover_group(p.pid, str(ten))
        assert p.wait(timeout=10) == -9
    finally:
        if p.poll() is None:
            kill_group(p.pid)
            p.wait()


def test_kill_working_under_ends_what_works_inside_the_worktree_only(tmp_path):
    """The sweep for an agent no pid file names: a process working in the worktree (or below)
    is killed with its group; one in a folder that merely shares the prefix, and a group in
    ``spare``, are left alone."""
    inside, ten = tmp_path / "P1-1" / "src", tmp_path / "P1-10"
    inside.mkdir(parents=True)
    ten.mkdir()
    procs = {name: subprocess.Popen(["sleep", "300"], cwd=cwd, start_new_session=True)
             for name, cwd in {"inside": inside, "spared": inside, "ten": ten}.items()}
    try:
        killed = kill_working_under(str(tmp_path / "P1-1"), frozenset({procs["spared"].pid}))
        assert killed == [procs["inside"].pid]
        assert procs["inside"].wait(timeout=10) == -9
        assert procs["spared"].poll() is None and procs["ten"].poll() is None
    finally:
        for p in procs.values():
            if p.poll() is None:
                kill_group(p.pid)
                p.wait()


# -- bubblewrap's own processes -----------------------------------------------------------
# With a pid namespace, bwrap is two processes: the monitor (the child andon started) and
# the namespace's init. The monitor exits as soon as the init reports the agent's exit
# status, a moment before the init itself exits, so the init is orphaned: a subreaper that
# does not reap it collects a zombie `[bwrap] <defunct>` per stage (seen in long runs).

def test_a_sandboxed_stage_leaves_no_zombie_and_counts_no_leftover(tmp_path):
    """bwrap's init is reaped by the stage and is not "a process the agent left running"."""
    skip_without_fs("fs")
    wt = tmp_path / "wt"
    wt.mkdir()
    (tmp_path / "stdin").write_text("")
    plan = Plan("fs", wt)
    before = own_children()
    # an honest agent that leaves a helper in the sandbox: it dies with the pid namespace,
    # which keeps the init a little longer
    env = {"PATH": os.environ["PATH"]}
    runs = [run_process(["/bin/sh", "-c", "sleep 300 & echo hello"], wt, env,
                        tmp_path / "stdin", tmp_path / "out.log", 60, sandbox=plan)
            for _ in range(12)]  # the init outlives its monitor only now and then: 12 tries
    assert [(p.exit_status, p.leftovers_killed, p.leftovers_left) for p in runs] == \
        [(0, 0, 0)] * 12
    assert own_children() - before == set()  # no zombie of it either


def test_the_sandbox_probe_leaves_no_orphan_for_a_subreaper(tmp_path):
    """``probe()`` in a process that is a subreaper (the runner after its first stage; a test
    process): every bwrap it started is gone and reaped when it returns."""
    skip_without_fs("fs")
    script = ("from andon.contain.procgroup import become_subreaper, own_children\n"
              "from andon.sandbox.probe import probe\n"
              "assert become_subreaper()\n"
              "for _ in range(8):\n"
              "    assert probe().fs[0]\n"
              "print(sorted(own_children()))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
