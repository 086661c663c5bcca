"""An agent that leaves, in the user's git directory, a file git would wait on for ever.

git opens ``HEAD``, ``config``, ``packed-refs``, each loose ref and each reflog as plain files:
a FIFO there (or a link to one) blocks every git command that reads it, in open(2), with no
timeout. An agent that is not sandboxed reaches ``.git`` by absolute path and can make one.
andon must stop the line with that path as evidence, not hang at its next git command: the
attempt fails ``scope`` with an ``outside-worktree`` finding naming the file, and a later
``andon run`` refuses to start until the file is gone, changing nothing.

A test that fails would hang: each run gets a deadline, and teardown opens every FIFO it made
for writing, which lets a blocked git go on (it reads an empty file).
"""

from __future__ import annotations

import os
import socket
import stat
import textwrap
import threading
from pathlib import Path

import pytest

from andon.errors import GitBlocked, UsageError
from andon.exits import EXIT_HALTED
from andon.git import watch
from andon.git.hazards import in_work_tree
from andon.git.repo import Repo
from andon.store import Store

from helpers import (
    andon,
    git,
    honest_mul,
    make_project,
    mul_packet,
    runner_for,
    unblock,
    within_deadline,
    write,
)

DEADLINE_S = 60.0
FIFOS: list[Path] = []


@pytest.fixture(autouse=True)
def _unblock():
    yield
    unblock(FIFOS)


def _fifo(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    FIFOS.append(path)


def _run(root: Path, agent):
    """A run of ``agent`` within a deadline (a hang fails the test instead of the suite); its
    report, and the store read afresh (SQLite's objects stay in the thread that made them;
    Store itself, since a Repo asks git)."""
    def go():
        runner = runner_for(root, agent)
        report = runner.run()
        runner.store.close()
        return report
    return within_deadline(go, DEADLINE_S), Store(root / ".andon" / "andon.db")


def _failing(store) -> list[dict]:
    """The gate results of P1's first attempt that did not pass."""
    attempt = store.attempts("P1")[0]
    return [g for g in store.gate_results(attempt["id"]) if g["status"] != "pass"]


# Where in .git: what git reads there (each replaced by a FIFO, or a link to one)
PLACES = {
    "refs/heads/evil": "a loose ref of the user's (for-each-ref, clone)",
    "refs/heads/andon/P9/1": "a loose ref in andon's own namespace",
    "packed-refs": "every ref lookup that misses a loose ref",
    "HEAD": "every git command (it finds the repository by it)",
    "config": "every git command",
    "logs/refs/heads/andon/integration": "the reflog the merge appends to",
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("how", ["fifo", "link"])
def test_a_file_git_would_wait_on_stops_the_line_and_is_named(tmp_path, place, how):
    """The implement agent, by absolute path, leaves a FIFO (or a link to one outside the
    repository) at ``.git/<place>``: the run ends without hanging, the packet blocks on a
    ``scope`` failure whose ``outside-worktree`` finding names the file and says what it is,
    nothing is merged, and a second ``andon run`` refuses to start, naming the file and
    exiting 2, with the store as it was."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    target = root / ".git" / place

    def agent(ctx):
        honest_mul(ctx)
        if how == "fifo":
            _fifo(target)
        else:
            fifo = tmp_path / "elsewhere.fifo"
            _fifo(fifo)
            if target.exists() or target.is_symlink():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(fifo)
        return "done"

    report, store = _run(root, agent)

    assert report.exit_status == EXIT_HALTED, report.message
    assert report.merged == []
    assert store.packet("P1")["state"] == "blocked"
    assert store.packet("P2")["state"] == "ready"  # the line stopped before it
    attempt = store.attempts("P1")[0]
    failing = [g for g in store.gate_results(attempt["id"]) if g["status"] == "fail"]
    assert [(g["gate"], g["failure_layer"]) for g in failing] == [("scope", "permission")]
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [("outside-worktree", f".git/{place}")]
    assert "FIFO" in found[0]["message"]
    assert stat.S_ISFIFO(os.stat(target).st_mode)  # andon removes nothing of the user's

    events = len(store.events())
    again = andon(root, "run", "--agent", "command", "--command", "true", timeout=DEADLINE_S)
    assert again.returncode == 2, again.stdout + again.stderr
    said = " ".join(again.stderr.split())
    assert f".git/{place}" in said and "FIFO" in said, said
    assert len(store.events()) == events


def test_the_look_names_devices_and_loops_and_leaves_sockets_and_dev_null(tmp_path,
                                                                         monkeypatch):
    """The stat look (git/hazards.py) names a link to /dev/zero (git reads it without end), a
    link that loops back into refs/ (git lists it without end) and a FIFO behind a link to a
    folder (git follows it); it leaves alone what git does not wait on: a socket (open(2)
    fails at once) and a global config that is /dev/null (read as empty)."""
    root = make_project(tmp_path / "repo")
    git_dir = root / ".git"
    (git_dir / "refs" / "heads" / "zero").symlink_to("/dev/zero")
    (git_dir / "refs" / "heads" / "loop").symlink_to(git_dir / "refs")
    outside = tmp_path / "outside"
    outside.mkdir()
    _fifo(outside / "x")
    (git_dir / "refs" / "tags" / "out").symlink_to(outside)
    monkeypatch.chdir(git_dir / "refs" / "tags")  # a socket's path holds 107 bytes at most
    s = socket.socket(socket.AF_UNIX)
    s.bind("sock")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    try:
        found = dict(in_work_tree(root))
    finally:
        s.close()
    assert found == {git_dir / "refs" / "heads" / "zero": "a link to a character device",
                     git_dir / "refs" / "heads" / "loop": "a link that loops",
                     git_dir / "refs" / "tags" / "out" / "x": "a FIFO"}


def test_repo_refuses_before_running_any_git_command(tmp_path, monkeypatch):
    """Every command makes a Repo first: with a FIFO at .git/HEAD it raises UsageError,
    naming the file and the rm that removes it, without starting git (which would hang)."""
    root = make_project(tmp_path / "repo")
    _fifo(root / ".git" / "HEAD")

    def no_git(*args, **kwargs):
        raise AssertionError(f"git was started: {args}")
    monkeypatch.setattr(watch, "run", no_git)
    with pytest.raises(UsageError) as exc:
        Repo(root)
    said = str(exc.value)
    assert ".git/HEAD is a FIFO" in said and f"rm {root / '.git' / 'HEAD'}" in said


def test_a_git_command_stuck_on_a_fifo_anywhere_is_stopped_naming_it(tmp_path):
    """A FIFO where no stat look goes (here a config file named on the command line, as an
    include would be): git blocks opening it; the watch sees the open(2) wait in /proc,
    ends the command, and GitBlocked names the path the open was given."""
    root = make_project(tmp_path / "repo")
    fifo = tmp_path / "anywhere.fifo"
    _fifo(fifo)
    with pytest.raises(GitBlocked) as exc:
        watch.run(["git", "config", "--file", str(fifo), "--list"], root, None,
                      os.environ)
    assert exc.value.found == [(fifo, "a FIFO")]
    assert f"{fifo} is a FIFO" in str(exc.value)


def test_a_fifo_given_by_a_relative_path_is_named_absolute(tmp_path):
    """The path a blocked open(2) was given is named as an absolute, normalised path (here
    relative to git's working folder, through "..")."""
    root = make_project(tmp_path / "repo")
    _fifo(tmp_path / "rel.fifo")
    with pytest.raises(GitBlocked) as exc:
        watch.run(["git", "config", "--file", "../rel.fifo", "--list"], root, None,
                      os.environ)
    assert exc.value.found == [(tmp_path / "rel.fifo", "a FIFO")]


def test_a_fifo_another_process_keeps_open_is_stopped_naming_it(tmp_path):
    """A process outside the command keeps the FIFO open (read and write): git's open
    succeeds and its read waits. The watch sees git holding a named FIFO and stops it."""
    root = make_project(tmp_path / "repo")
    fifo = tmp_path / "held.fifo"
    _fifo(fifo)
    held = os.open(fifo, os.O_RDWR)
    try:
        with pytest.raises(GitBlocked) as exc:
            watch.run(["git", "config", "--file", str(fifo), "--list"], root, None,
                          os.environ)
    finally:
        os.close(held)
    assert exc.value.found == [(fifo, "a FIFO")]


def test_a_slow_honest_git_command_is_not_stopped(tmp_path, monkeypatch):
    """git opens /dev/urandom for an instant for each object it writes; a look that lands
    then must not stop it. With looks every 5 ms, adding 3,000 new files still ends as git
    ends it."""
    root = make_project(tmp_path / "repo")
    for i in range(3000):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    monkeypatch.setattr(watch, "FIRST_LOOK_S", 0.005)
    monkeypatch.setattr(watch, "WATCH_S", 0.005)
    done = watch.run(["git", "add", "-A"], root, None, os.environ)
    assert done.returncode == 0, done.stderr
    assert len(git(root, "diff", "--cached", "--name-only").split()) == 3000


def test_a_device_held_for_an_instant_is_not_a_stop_and_one_held_on_is(tmp_path,
                                                                       monkeypatch):
    """The re-look, without waiting for git to be caught mid-open (its /dev/urandom opens
    last microseconds, too short to land a look on at will): a real git command blocked on
    a pipe, and what /proc says of the device it holds played two ways. Seen at the first
    look only, it is no stop and the command ends as git ends it; seen at both, it is."""
    root = make_project(tmp_path / "repo")
    fifo = tmp_path / "slow.fifo"
    _fifo(fifo)
    looks: list[int] = []
    real = watch._held

    def held(pid, at_first_only):
        looks.append(pid)
        out = real(pid)
        if at_first_only and len(looks) > 1:
            return out
        return {**out, (pid, 99): (Path("/dev/urandom"), "a character device", 7)}

    # the command waits on a FIFO someone writes to late, then ends: never stuck on a device
    writer = threading.Timer(1.0, lambda: os.close(os.open(fifo, os.O_WRONLY)))
    monkeypatch.setattr(watch, "_FIFO_WAITS", frozenset())  # only the device is judged
    monkeypatch.setattr(watch, "_held", lambda pid: held(pid, True))
    writer.start()
    try:
        done = watch.run(["git", "config", "--file", str(fifo), "--list"], root, None,
                             os.environ)
    finally:
        writer.join()
    assert done.returncode == 0 and looks
    looks.clear()
    writer = threading.Timer(5.0, lambda: os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)))
    monkeypatch.setattr(watch, "_held", lambda pid: held(pid, False))
    writer.start()
    try:
        with pytest.raises(GitBlocked) as exc:
            watch.run(["git", "config", "--file", str(fifo), "--list"], root, None,
                          os.environ)
    finally:
        writer.cancel()
    assert exc.value.found == [(Path("/dev/urandom"), "a character device")]


def test_a_git_command_reading_a_device_is_stopped_naming_it(tmp_path):
    """git reading a character device (here a terminal with nothing to read; /dev/zero
    would be read without end) is stopped, naming the device."""
    root = make_project(tmp_path / "repo")
    leader, follower = os.openpty()
    try:
        tty = os.ttyname(follower)
        with pytest.raises(GitBlocked) as exc:
            watch.run(["git", "config", "--file", tty, "--list"], root, None, os.environ)
    finally:
        os.close(leader)
        os.close(follower)
    assert (Path(tty), "a character device") in exc.value.found


def test_a_stopped_git_leaves_no_lock_file(tmp_path):
    """update-ref stuck appending to a reflog that is a FIFO: stopped with SIGTERM first,
    so git removes the ref's lock file, and the next update of that ref is not refused."""
    root = make_project(tmp_path / "repo")
    head = git(root, "rev-parse", "HEAD").strip()
    log = root / ".git" / "logs" / "refs" / "heads" / "new"
    _fifo(log)
    with pytest.raises(GitBlocked):
        watch.run(["git", "update-ref", "refs/heads/new", head], root, None, os.environ)
    assert not (root / ".git" / "refs" / "heads" / "new.lock").exists()


@pytest.fixture
def uncontained(monkeypatch):
    """Test runs as on a machine that cannot contain them (docs/gates.md, "What a test run
    can write"): where they can, the code under test gets EROFS in .git and makes nothing
    (tests/test_contained_runs.py); these tests are of the watch behind that."""
    from andon.contain import netless
    monkeypatch.setattr(netless, "_contain_cached", (False, "off for this test"))


@pytest.mark.parametrize("place", ["refs/heads/evil", "HEAD"])
def test_code_under_test_that_makes_one_fails_the_gate_that_ran_it(tmp_path, place,
                                                                    uncontained):
    """The agent's code makes the FIFO itself when the tests import it (during the ``suite``
    gate's runs, in a clone, by absolute path): the run ends without hanging, the gate that
    ran the code fails with an ``outside-worktree`` finding naming the file, nothing is
    merged."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    target = root / ".git" / place
    FIFOS.append(target)

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", textwrap.dedent(f"""

            import os as _os
            import stat as _stat
            _t = {str(target)!r}
            try:
                _made = _stat.S_ISFIFO(_os.lstat(_t).st_mode)
            except OSError:
                _made = False
            if not _made:
                try:
                    _os.unlink(_t)
                except OSError:
                    pass
                _os.mkfifo(_t)
            """), append=True)
        return "done"

    report, store = _run(root, agent)

    assert report.exit_status == EXIT_HALTED, report.message
    assert report.merged == []
    attempt = store.attempts("P1")[0]
    rows = store.gate_results(attempt["id"])
    failing = [g for g in rows if g["status"] != "pass"]
    assert len(failing) == 1 and failing[0]["gate"] not in ("scope", "red"), [
        (g["gate"], g["status"], g["summary"]) for g in rows]
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [("outside-worktree", f".git/{place}")]
    assert "FIFO" in found[0]["message"] and "code under test" in found[0]["message"]


@pytest.mark.parametrize("place", [".gitignore", "src/calc/.gitignore"])
def test_one_in_the_agents_own_worktree_is_a_worktree_andon_cannot_read(tmp_path, place):
    """A sandboxed agent cannot reach ``.git``, but its own worktree is its to write: a FIFO
    named ``.gitignore`` there would hang the snapshot's ``git add --all``. The stage left a
    worktree andon cannot read: ``scope`` fails with ``unreadable-worktree`` naming it, and
    the run ends; the user's repository holds nothing blocking, so andon still works."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})

    def agent(ctx):
        honest_mul(ctx)
        _fifo(ctx.worktree / place)
        return "done"

    report, store = _run(root, agent)

    assert report.merged == []
    failing = _failing(store)
    assert [(g["gate"], g["failure_layer"]) for g in failing] == [("scope", "permission")]
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [("unreadable-worktree", place)]
    assert "FIFO" in found[0]["message"]
    assert andon(root, "status").returncode == 0


def test_a_fifo_where_no_look_goes_still_ends_the_run_naming_it(tmp_path):
    """The agent adds an include to .git/config naming a FIFO outside the repository: no
    stat look covers it, but andon's next git command (the config watch after the stage)
    is stopped by the watch; the run ends, the packet blocks, and the evidence names the
    FIFO."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    fifo = tmp_path / "include.fifo"

    def agent(ctx):
        honest_mul(ctx)
        _fifo(fifo)
        with open(root / ".git" / "config", "a") as f:
            f.write(f"[include]\n\tpath = {fifo}\n")
        return "done"

    report, store = _run(root, agent)

    assert report.merged == []
    assert store.packet("P1")["state"] == "blocked"
    failing = _failing(store)
    assert len(failing) == 1 and f"{fifo} is a FIFO" in failing[0]["summary"], failing


def test_code_under_test_that_blocks_the_object_store_fails_its_gate_naming_it(tmp_path,
                                                                              uncontained):
    """The code under test makes .git/objects/pack/multi-pack-index a FIFO (git opens it to
    read any object; no stat look goes into objects/): the gate's next git command is
    stopped by the watch and the gate fails, naming the file."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    target = root / ".git" / "objects" / "pack" / "multi-pack-index"
    FIFOS.append(target)

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", f"\n\nimport os as _os\nif not _os.path.exists("
              f"{str(target)!r}):\n    _os.mkfifo({str(target)!r})\n", append=True)
        return "done"

    report, store = _run(root, agent)

    assert report.merged == []
    failing = _failing(store)
    assert len(failing) == 1, failing
    found = failing[0]["evidence"]["findings"]
    assert ("outside-worktree", ".git/objects/pack/multi-pack-index") in [
        (f["kind"], f["path"]) for f in found]


def test_a_nested_repository_whose_head_blocks_is_a_worktree_andon_cannot_read(tmp_path):
    """Inside its own worktree (no absolute path, so a sandboxed agent can too), the agent
    makes a repository whose HEAD is a FIFO: git reads that HEAD to tell a nested
    repository from a folder, so the snapshot would hang; it is unreadable-worktree."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})

    def agent(ctx):
        honest_mul(ctx)
        nested = ctx.worktree / "vendored"
        nested.mkdir()
        git(nested, "init", "-q")
        _fifo(nested / ".git" / "HEAD")
        return "done"

    report, store = _run(root, agent)

    assert report.merged == []
    failing = _failing(store)
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [
        ("unreadable-worktree", "vendored/.git/HEAD")]


def test_the_config_watch_reading_one_file_alone_is_watched_too(tmp_path):
    """When git cannot read a repository's configuration, the outside-worktree watch asks
    for each config file on its own (guard._git_config_marker): that git command is
    watched as well, so a global config including a FIFO stops it, naming the FIFO."""
    from andon.contain import guard

    fifo = tmp_path / "include.fifo"
    _fifo(fifo)
    config = tmp_path / "gitconfig"
    config.write_text(f"[include]\n\tpath = {fifo}\n")
    out: dict = {}

    def ask():  # in a thread with a deadline: unwatched, it would hang the suite
        try:
            out["marker"] = guard._git_config_marker(config, includes=True)
        except GitBlocked as exc:
            out["error"] = exc
    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(DEADLINE_S)
    assert not t.is_alive(), f"still asking after {DEADLINE_S} s: it hangs"
    assert out["error"].found == [(fifo, "a FIFO")], out


def test_a_fifo_where_the_agents_blob_will_be_stored_fails_scope_naming_it(tmp_path):
    """The agent knows the bytes it writes, so it knows their blob's id: it makes a FIFO
    where git will store that object (``.git/objects/ab/cdef…``). git then takes the object
    for stored and writes nothing, and the first command that reads the blob (scope's look
    at the changed files' first bytes) would wait on it for ever. The run ends, the attempt
    fails naming the file, nothing is merged."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    where: list[Path] = []

    def agent(ctx):
        honest_mul(ctx)
        sha = git(ctx.worktree, "hash-object", "src/calc/ops.py").strip()
        target = root / ".git" / "objects" / sha[:2] / sha[2:]
        _fifo(target)
        where.append(target)
        return "done"

    report, store = _run(root, agent)

    assert report.merged == []
    failing = _failing(store)
    assert len(failing) == 1, failing
    shown = where[0].relative_to(root).as_posix()
    assert failing[0]["gate"] == "scope", failing
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [("outside-worktree", shown)]
    assert "FIFO" in found[0]["message"] and "by the agent" in found[0]["message"]


@pytest.mark.parametrize("what", ["fifo", "zero"])
@pytest.mark.parametrize("name", ["packets/P2/packet.md", "andon.toml"])
def test_andons_own_inputs_made_a_fifo_are_named_not_waited_on(tmp_path, name, what):
    """By absolute path, the agent makes another packet's packet.md (or andon.toml) a FIFO or
    a link to /dev/zero. The run ends; every andon command after it reads its inputs
    without waiting and says which file is not one it can read (exit 2), rather than
    hanging or reading without end."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                             "P2": mul_packet("P2")})
    target = root / name

    def agent(ctx):
        honest_mul(ctx)
        target.unlink()
        if what == "fifo":
            _fifo(target)
        else:
            target.symlink_to("/dev/zero")
        return "done"

    with pytest.raises(UsageError) as stopped:  # before P2's attempt: its inputs changed
        _run(root, agent)
    assert f"{name} (modified)" in str(stopped.value)
    status = within_deadline(lambda: andon(root, "status", timeout=DEADLINE_S), DEADLINE_S)
    assert status.returncode in (0, 2), status.stderr  # the board, or the config's error
    for args in (("check",), ("run", "--agent", "command", "--command", "true")):
        done = within_deadline(lambda a=args: andon(root, *a, timeout=DEADLINE_S), DEADLINE_S)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        said = " ".join((done.stdout + done.stderr).split())
        kind = "is a FIFO" if what == "fifo" else "is a link to a character device"
        assert name in said and kind in said, said
