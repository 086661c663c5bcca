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
import stat
import textwrap
import threading
from pathlib import Path

import pytest

from andon.exits import EXIT_HALTED
from andon.store import Store

from helpers import andon, honest_mul, make_project, mul_packet, runner_for, write

DEADLINE_S = 60.0
FIFOS: list[Path] = []


@pytest.fixture(autouse=True)
def _unblock():
    yield
    for fifo in FIFOS:
        try:  # a git blocked opening it for reading goes on (end of file) once a writer opens
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    FIFOS.clear()


def _fifo(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    FIFOS.append(path)


def _run(root: Path, agent):
    """A run of ``agent`` (made and ended in a thread with a deadline: a hang fails the test
    instead of the suite); its report, and the store read afresh (SQLite's objects stay in
    the thread that made them; Store itself, since a Repo asks git)."""
    out: dict = {}

    def target():
        try:
            runner = runner_for(root, agent)
            out["report"] = runner.run()
            runner.store.close()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(DEADLINE_S)
    assert not t.is_alive(), f"andon run still running after {DEADLINE_S} s: it hangs"
    if "error" in out:
        raise out["error"]
    return out["report"], Store(root / ".andon" / "andon.db")


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


def test_a_char_device_or_socket_is_named_as_what_it_is(tmp_path, monkeypatch):
    """Not only FIFOs: a link to a character device (``/dev/zero``: git would read for ever)
    and a socket are named as such by the check, which reads no file's content."""
    from andon.git_files import blocking

    root = make_project(tmp_path / "repo")
    git_dir = root / ".git"
    (git_dir / "refs" / "heads" / "zero").symlink_to("/dev/zero")
    import socket
    s = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(git_dir / "refs" / "tags")  # a socket's path holds 107 bytes at most
    s.bind("sock")
    try:
        found = dict(blocking(git_dir, git_dir))
    finally:
        s.close()
    assert found == {git_dir / "refs" / "heads" / "zero": "a link to a character device",
                     git_dir / "refs" / "tags" / "sock": "a socket"}


@pytest.mark.parametrize("place", ["refs/heads/evil", "HEAD"])
def test_code_under_test_that_makes_one_fails_the_gate_that_ran_it(tmp_path, place):
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
    attempt = store.attempts("P1")[0]
    failing = [g for g in store.gate_results(attempt["id"]) if g["status"] != "pass"]
    assert [(g["gate"], g["failure_layer"]) for g in failing] == [("scope", "permission")]
    found = failing[0]["evidence"]["findings"]
    assert [(f["kind"], f["path"]) for f in found] == [("unreadable-worktree", place)]
    assert "FIFO" in found[0]["message"]
    assert andon(root, "status").returncode == 0
