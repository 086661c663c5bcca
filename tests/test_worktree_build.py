"""The process that writes an attempt's worktree beside red (src/andon/worktree_build.py), and
what every forked child of andon shares with it (src/andon/forked.py): a Ctrl-C at the
terminal does not reach what it starts, and an interrupt while waiting for it never leaves
it running behind the clean-up.

Real forked processes, real subprocesses; the terminal's Ctrl-C is a SIGINT to the process
group of a script started in a session of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from andon import forked, worktree_build

# The parent as andon is when a Ctrl-C comes: it ignores SIGINT itself (a worker pool's
# dispatcher decides what a Ctrl-C means); its forked child starts a process that, as git
# does, sets its own SIGINT handler (here: the default, which ends it), then waits for a
# byte. The Ctrl-C goes to the parent's whole process group once that process is running.
CTRL_C = textwrap.dedent("""
    import os, signal, subprocess, sys
    from andon import forked
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    go_r, go_w = os.pipe()
    up_r, up_w = os.pipe()
    GIT_LIKE = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                "os.write(1, b'u'); sys.stdin.read(1); print('done')")

    def child():
        p = subprocess.Popen([sys.executable, "-c", GIT_LIKE], stdin=go_r,
                             stdout=subprocess.PIPE)
        p.stdout.read(1)
        os.write(up_w, b"x")
        return [p.wait(), p.stdout.read().decode().strip()]

    c = forked.start(child)
    os.read(up_r, 1)
    os.killpg(os.getpgrp(), signal.SIGINT)
    os.write(go_w, b"x")
    print(forked.collect(c))
""")


def test_a_ctrl_c_at_the_terminal_does_not_reach_what_a_forked_child_starts():
    """A forked child (a worker, a lane, the worktree's build) leaves the terminal's process
    group: the Ctrl-C that reaches andon's group does not end the git it runs mid-clone."""
    done = subprocess.run([sys.executable, "-c", CTRL_C], capture_output=True, text=True,
                          timeout=60, start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'value': [0, 'done']}", done.stdout


def test_a_forked_child_leads_a_process_group_of_its_own():
    child = forked.start(lambda: [os.getpgrp(), os.getpid()])
    group, pid = forked.collect(child)["value"]
    assert group == pid and group != os.getpgrp()


def test_an_interrupt_while_waiting_for_the_worktree_still_waits_for_it_on_the_way_out(
        tmp_path, monkeypatch):
    """A Ctrl-C that lands while the attempt waits for its worktree: the process writing it
    is still waited for (and reaped) before the interrupt goes on to the clean-up, which
    would otherwise remove a worktree still being written."""
    go_r, go_w = os.pipe()
    made = tmp_path / "made"

    def make():
        os.read(go_r, 1)
        made.write_text("x")
        return tmp_path, {"made": "clone"}

    real_collect, pids = forked.collect, []

    def collect(child):
        pids.append(child.pid)
        if len(pids) == 1:
            raise KeyboardInterrupt  # as if it landed in the read
        return real_collect(child)
    monkeypatch.setattr(worktree_build.forked, "collect", collect)
    ctx = SimpleNamespace(worktree_ready=True)
    try:
        build = worktree_build.WorktreeBuild(make, ctx, beside_red=True)  # type: ignore[arg-type]
        with pytest.raises(KeyboardInterrupt), build:
            assert ctx.worktree_ready is False
            os.write(go_w, b"x")
            build.wait()
    finally:
        os.close(go_r)
        os.close(go_w)
    assert len(pids) == 2 and pids[0] == pids[1]
    assert made.read_text() == "x"  # written before the with-block was left
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # reaped
