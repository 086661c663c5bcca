"""Several machines on one queue (issue 12), simulated: worker processes each with its own
clone, HOME and working folder, one bare repository as the remote, one PostgreSQL server
(tests/pgcluster.py), through the real CLI (``andon worker``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_workers import assert_every_commit_green, mod_packet, squashes

from andon.store import connect

from helpers import ACCEPT_REVIEW_COMMAND, GIT_ENV, git, make_project, unblock, within_deadline

IDS = ["P1", "P2", "P3", "P4"]
HONEST = ("printf 'VALUE = 1\\n' > "
          "src/calc/mod_$(printf %s \"$ANDON_PACKET_ID\" | tr A-Z a-z).py")


def remote_repo(tmp_path: Path, ids: list[str] = IDS, config: str | None = None,
                requires: dict[str, list[str]] | None = None) -> Path:
    """The project (packets ``ids``, each with its ``requires``; andon.toml ``config``,
    default the helpers' fast one), pushed to a bare repository: the remote every machine
    clones."""
    needs = requires or {}
    src = make_project(tmp_path / "origin-src",
                       {p: mod_packet(p, **({"requires": needs[p]} if p in needs else {}))
                        for p in ids}, **({"config": config} if config else {}))
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    return bare


def start_worker(tmp_path: Path, name: str, url: str, bare: Path, *extra: str,
                 command: str = HONEST, env: dict[str, str] | None = None,
                 log: Path | None = None) -> subprocess.Popen:
    """One "machine": its own HOME, working folder and clone of ``bare``; ``env`` added to
    its environment; its output to ``log`` if given (else a pipe)."""
    home = tmp_path / name / "home"
    home.mkdir(parents=True)
    cwd = tmp_path / name / "cwd"
    cwd.mkdir()
    full = {**os.environ, **GIT_ENV, "HOME": str(home), "COLUMNS": "200", **(env or {})}
    full.pop("ANDON_STORE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "andon", "worker", "--store", url, "--remote", str(bare),
         "--dir", str(tmp_path / name / "clone"), "--agent", "command", "--command", command,
         "--reviewer-command", ACCEPT_REVIEW_COMMAND, *extra],
        cwd=cwd, env=full, stdout=open(log, "w") if log else subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


@pytest.mark.e2e
@pytest.mark.waits
def test_two_machines_drain_a_queue_once(tmp_path: Path, pg_store_target):
    bare = remote_repo(tmp_path)
    url = pg_store_target.target
    procs = [start_worker(tmp_path, f"m{i}", url, bare) for i in (1, 2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n----\n".join(outs)
    store = connect(Path("/nonexistent"), url)
    try:
        for pid in IDS:
            assert store.packet(pid)["state"] == "done", pid
            attempts = store.attempts(pid)
            assert [a["state"] for a in attempts] == ["merged"], (pid, attempts)
            assert [e["kind"] for e in store.events(pid)].count("merged") == 1
        holders = {e["data"]["worker"].rsplit(":", 1)[0]
                   for e in store.events() if e["kind"] == "leased"}
    finally:
        store.close()
    assert len(holders) == 2, f"one machine did all the work: {holders}"
    # one squash commit per packet on the remote's integration branch, each green
    assert Counter(p for _, p in squashes(bare)) == dict.fromkeys(IDS, 1)
    assert assert_every_commit_green(bare, tmp_path) == len(IDS) + 1
    pushed = git(bare, "for-each-ref", "--format=%(refname)", "refs/andon/attempts")
    assert sorted(pushed.split()) == [f"refs/andon/attempts/{p}/1" for p in IDS]


def test_two_pushes_from_the_same_old_value_only_one_wins(tmp_path: Path):
    """The compare-and-swap on the remote's integration branch: two mergers that read the
    same head and each built a commit on it cannot both move the branch; the loser is told
    (RefMoved) and has the winner's head in its clone to merge onto again."""
    from andon.git.repo import RefMoved
    from andon.remote import Remote, clone

    bare = remote_repo(tmp_path)
    a = clone(str(bare), tmp_path / "a", "andon/integration")
    b = clone(str(bare), tmp_path / "b", "andon/integration")
    ref = "refs/heads/andon/integration"
    old = git(bare, "rev-parse", ref).strip()
    assert a.resolve(ref) == b.resolve(ref) == old
    ra, rb = (Remote(str(bare), "andon/integration", None) for _ in "ab")
    tree = git(a.root, "rev-parse", f"{old}^{{tree}}").strip()
    mine = git(a.root, "commit-tree", tree, "-p", old, "-m", "a").strip()
    theirs = git(b.root, "commit-tree", tree, "-p", old, "-m", "b").strip()
    ra.push(a, mine, old)
    with pytest.raises(RefMoved):
        rb.push(b, theirs, old)
    assert git(bare, "rev-parse", ref).strip() == mine
    assert b.resolve(ref) == mine  # the loser fetched the winner's head
    with pytest.raises(RefMoved):  # nor can anyone create the branch over it
        rb.push(b, theirs, None)


@pytest.mark.parametrize("name", ["m1:2", "two words", " "])
def test_a_bad_machine_name_is_refused_before_anything(tmp_path: Path, name: str):
    """`--machine` names the machine in lease holders (machine:pid:wN): a name with the
    separator or spaces is refused with exit 2, naming the option, and nothing is cloned."""
    bare = tmp_path / "absent.git"
    clone_dir = tmp_path / "clone"
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "andon", "worker", "--store", "postgresql://u:p@127.0.0.1:1/x",
         "--remote", str(bare), "--dir", str(clone_dir), "--machine", name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--machine" in r.stderr and "ANDON_MACHINE" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not clone_dir.exists()


def test_a_fifo_in_the_shared_remote_is_named_not_waited_on(tmp_path: Path):
    """Anyone who can write the shared remote (an agent without the sandbox, on a machine
    that reaches it by path) can make one of its refs a FIFO: every machine's next fetch
    would wait on it for ever. The fetch is stopped and the error names the file."""
    from andon.errors import StoreError
    from andon.remote import Remote, clone

    bare = remote_repo(tmp_path)
    a = clone(str(bare), tmp_path / "a", "andon/integration")
    fifo = bare / "refs" / "heads" / "evil"
    os.mkfifo(fifo)
    try:
        remote = Remote(str(bare), "andon/integration", None)
        with pytest.raises(StoreError) as caught:
            within_deadline(lambda: remote.fetch(a), 60)
        assert f"{fifo} is a FIFO" in str(caught.value)
    finally:
        unblock([fifo])
