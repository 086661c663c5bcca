"""The sandbox through `andon run` (issue 11): at ``auto`` an honest command
agent (git in its worktree, temp files, sub-processes, the project's tests with the
project's interpreter) is merged and its stage evidence names the level achieved; a fork
bomb ends its stage with layer ``environment`` naming the cap; an asked level the machine
cannot give stops the run before anything starts (exit 2)."""

from __future__ import annotations

import json
import sys

import pytest

from andon.report.board import sandbox_level
from andon.sandbox import probe

from helpers import FAST, _add_lines, andon, git, make_project, mul_packet, with_sandbox

CAPS = probe.capabilities()
needs_fs = pytest.mark.skipif(not CAPS.fs[0], reason=f"no fs sandbox here: {CAPS.fs[1]}")

HONEST = (
    "git status --short > /dev/null && git log --oneline | grep -q project && "
    't=$(mktemp) && echo scratch > "$t" && test "$(cat "$t")" = scratch && '
    "(echo child > /dev/null &) && wait && "
    r"printf '\n\ndef mul(a, b):\n    return a * b\n' >> src/calc/ops.py && "
    f"PYTHONPATH=src {sys.executable} -m pytest -q -p no:cacheprovider tests/test_ops.py "
    "> /dev/null && echo 'the work is done'")


def show(root):
    return json.loads(andon(root, "show", "P1", "--json").stdout)


@needs_fs
def test_honest_command_agent_is_merged_under_auto_and_the_level_is_recorded(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        config=with_sandbox(FAST, "auto"))
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    s = show(root)
    assert s["packet"]["state"] == "done"
    implement = next(x for x in s["attempts"][0]["stages"] if x["stage"] == "implement")
    # auto with the default [agent] network = "allow": fs+net through andon's proxy
    level = "fs+net" if CAPS.net[0] else "fs"
    note = implement["usage"]["notes"][0]
    assert note.startswith(f"sandbox {level}: bubblewrap, uid 65534"), note
    assert level == "fs" or "network only through andon's proxy" in note
    assert f"sandbox {level}" in andon(root, "show", "P1").stdout
    # the board says the level achieved, and so does its JSON
    row, = json.loads(andon(root, "status", "--json").stdout)["packets"]
    assert row["sandbox"] == level
    assert f"sandbox {level}" in andon(root, "status").stdout


def test_the_board_reads_the_level_of_the_newest_stage_that_recorded_one():
    def run(*notes):
        return {"usage": {"notes": list(notes)}}
    assert sandbox_level([run("sandbox fs: bubblewrap, …"),
                          run("ended at a limit: max_processes 64",
                              "sandbox none: the agent runs as andon's user")]) == "none"
    assert sandbox_level([run("sandbox fs+net: bubblewrap"), run("no level here")]) == "fs+net"
    assert sandbox_level([run("sandbox ok: not a level"), {"usage": None}]) is None
    assert sandbox_level([]) is None   # records from before issue 11, the scripted adapter


@needs_fs
def test_fork_bomb_ends_the_stage_as_environment_naming_the_limit(tmp_path):
    config = _add_lines(FAST, "agent", "max_processes = 64\n")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        config=config)
    r = andon(root, "run", "--agent", "command", "--command", "b() { b | b & }; b; sleep 300")
    assert r.returncode != 0
    attempt = show(root)["attempts"][0]
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert "max_processes" in attempt["reason"]
    gate = attempt["gates"][-1]
    assert gate["gate"] == "agent"
    assert [f["kind"] for f in gate["evidence"]["findings"]] == ["resource-limit"]


def test_an_asked_level_this_machine_lacks_refuses_the_run(tmp_path):
    config = _add_lines(FAST, "agent", 'sandbox = "fs"\n')
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)
    head = git(root, "rev-parse", "HEAD")
    r = andon(root, "run", "--agent", "command", "--command", "true",
              env={probe.BWRAP_ENV: "/nonexistent/bwrap"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "bubblewrap is not installed" in r.stderr + r.stdout
    assert 'sandbox = "none"' in r.stderr + r.stdout
    assert git(root, "rev-parse", "HEAD") == head
    assert not (root / ".andon" / "evidence").exists()


@needs_fs
def test_a_helper_left_in_a_session_of_its_own_dies_with_the_sandboxed_stage(tmp_path):
    import os
    import subprocess
    marker = f"andon-sbx-helper-{os.getpid()}-{tmp_path.name}"
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    agent = f"(setsid sh -c 'sleep 300; echo {marker}' > /dev/null 2>&1 &)\n{HONEST}"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.strip() == "", f"the helper outlived its sandboxed stage: {left}"


@pytest.mark.skipif(CAPS.cgroup_pids is None, reason="no pids cgroup this process may make")
def test_a_stale_group_of_the_same_name_does_not_lift_the_process_cap():
    """A stage's group was named after andon's pid and a counter. A group left behind by an
    earlier process of the same (reused) pid made the mkdir fail, and the stage fell back to
    RLIMIT_NPROC, which the kernel ignores for root: a fork bomb in CI then took every pid
    of the machine. A stale group of the name the next stage would have taken no longer
    matters."""
    import os

    from andon.sandbox import limits
    n = next(limits._seq)  # the next stage of this process would be n + 1
    stale = CAPS.cgroup_pids / f"andon-{os.getpid()}-{n + 1}"
    stale.mkdir(exist_ok=True)
    try:
        caps = limits.Caps(memory_mb=None, max_processes=64)
        try:
            assert caps.pids is not None and caps.pids != stale, caps.rlimits
            assert (caps.pids / "pids.max").read_text().strip() == "64"
            assert caps.rlimits == []
        finally:
            caps.close()
    finally:
        stale.rmdir()
