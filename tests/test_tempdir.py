"""``[andon] temp_dir``: where andon makes the trees it throws away (andon/tempdir.py).

The choice is made on real filesystems: this machine's ``/dev/shm`` (a tmpfs) and the suite's
temp folders (on the disk here). The end-to-end tests run ``andon run`` as a real process
without ``$TMPDIR`` and read, from the evidence, where the agent's worktree and the gates'
clone were: the agent prints its working directory, a test of the project prints its own.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from andon import tempdir
from andon.config import load_config
from andon.errors import ConfigError, UsageError

from helpers import GIT_ENV, MUL_CODE, fast, make_project, mul_packet

SHM = Path("/dev/shm")
SYSTEM = Path(os.environ.get("ANDON_TESTS_SYSTEM_TMPDIR", "/tmp"))


def _tmpfs_here() -> bool:
    return SHM.is_dir() and tempdir.filesystem_type(SHM) == "tmpfs"


needs_tmpfs = pytest.mark.skipif(not _tmpfs_here(), reason="no tmpfs at /dev/shm here")


@pytest.fixture
def shm():
    """A fresh folder on the tmpfs, standing for /dev/shm (the private folder goes in it)."""
    d = Path(tempfile.mkdtemp(dir=SHM))
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


@pytest.fixture
def disk():
    """A fresh folder in the system temp dir, standing for it when it is on disk (the
    suite's own temp folders are on the tmpfs where andon would put its trees)."""
    d = Path(tempfile.mkdtemp(dir=SYSTEM))
    if tempdir.filesystem_type(d) == "tmpfs":
        pytest.skip(f"{SYSTEM} is a tmpfs here: no disk to move away from")
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


@needs_tmpfs
def test_auto_moves_the_trees_to_a_private_tmpfs_folder_when_the_temp_dir_is_on_disk(
        disk, shm):
    c = tempdir.choose("auto", 10 << 20, 2, shm=shm, system=disk, tmpdir_set=False)
    assert c.path == shm / f"tmp-{os.getuid()}"
    assert c.why == f"tmpfs: {disk} is on disk"
    st = c.path.lstat()
    assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700
    # the same answer again: the folder made the first time is this user's and private
    assert tempdir.choose("auto", 0, 1, shm=shm, system=disk, tmpdir_set=False).path == c.path


@needs_tmpfs
def test_auto_keeps_the_temp_dir_the_environment_chose_or_one_already_in_memory(disk, shm):
    assert tempdir.choose("auto", 0, shm=shm, system=disk, tmpdir_set=True) == \
        tempdir.Choice(disk, "$TMPDIR")
    in_memory = tempdir.choose("auto", 0, shm=shm, system=shm, tmpdir_set=False)
    assert in_memory == tempdir.Choice(shm, f"{shm} is a tmpfs")
    assert not (shm / f"tmp-{os.getuid()}").exists()


@needs_tmpfs
def test_auto_stays_on_disk_when_the_tmpfs_has_too_little_room(disk, shm):
    free = tempdir.free_bytes(shm)
    # four trees per worker and a floor of 1 GiB must fit: a tree of a quarter of the free
    # space, with two workers, does not
    c = tempdir.choose("auto", free // 4, 2, shm=shm, system=disk, tmpdir_set=False)
    assert c.path == disk
    assert f"{shm} has too little room" in c.why and "needed" in c.why
    assert not (shm / f"tmp-{os.getuid()}").exists()


def test_auto_stays_on_disk_without_a_tmpfs(disk):
    not_tmpfs = disk / "shm"
    not_tmpfs.mkdir()
    for shm in (not_tmpfs, disk / "missing"):
        c = tempdir.choose("auto", 0, shm=shm, system=disk, tmpdir_set=False)
        assert c == tempdir.Choice(disk, f"{disk}: no tmpfs at {shm}")


@needs_tmpfs
@pytest.mark.parametrize("planted", ["open to others", "a symbolic link", "a file"])
def test_a_private_folder_someone_else_could_reach_is_never_used(disk, shm, planted):
    """Whoever made ``tmp-<uid>`` first on the shared tmpfs could read or swap the trees in
    it: andon uses the folder only when it is a directory of this user's, mode 0700."""
    folder = shm / f"tmp-{os.getuid()}"
    if planted == "open to others":
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    elif planted == "a symbolic link":
        (shm / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(shm / "elsewhere")
    else:
        folder.write_text("")
    c = tempdir.choose("auto", 0, shm=shm, system=disk, tmpdir_set=False)
    assert c.path == disk
    assert "is not a private folder of this user" in c.why


def test_system_and_a_path_are_taken_as_given(tmp_path):
    assert tempdir.choose("system", 0, system=tmp_path) == \
        tempdir.Choice(tmp_path, '[andon] temp_dir = "system"')
    named = tmp_path / "a" / "b"
    assert tempdir.choose(str(named), 0) == tempdir.Choice(named, "[andon] temp_dir")
    assert named.is_dir()


def test_a_path_that_cannot_be_a_folder_is_a_usage_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match=r"temp_dir .*file/sub: cannot make it a folder"):
        tempdir.choose(str(tmp_path / "file" / "sub"), 0)
    with pytest.raises(UsageError, match=r'must be "auto", "system" or an absolute path'):
        tempdir.choose("relative/dir", 0)


def test_andon_toml_names_the_line_of_a_bad_temp_dir(tmp_path):
    (tmp_path / "andon.toml").write_text('[andon]\npackets_dir = "packets"\ntemp_dir = "tmp"\n')
    with pytest.raises(ConfigError, match=r"andon.toml:3: andon.temp_dir: .*\"auto\", "
                                          r"\"system\" or an absolute path"):
        load_config(tmp_path)
    (tmp_path / "andon.toml").write_text('[andon]\ntemp_dir = "system"\n')
    assert load_config(tmp_path).andon.temp_dir == "system"
    (tmp_path / "andon.toml").write_text("")
    assert load_config(tmp_path).andon.temp_dir == "auto"


def test_mount_points_are_matched_whole_and_unescaped(tmp_path):
    mounts = ("/dev/vda / ext4 rw 0 0\n"
              "tmpfs /dev/shm tmpfs rw 0 0\n"
              "tmpfs /mnt/with\\040space tmpfs rw 0 0\n")
    assert tempdir.filesystem_type(Path("/dev/shm/x"), mounts) == "tmpfs"
    assert tempdir.filesystem_type(Path("/dev/shmother"), mounts) == "ext4"
    assert tempdir.filesystem_type(Path("/mnt/with space/a"), mounts) == "tmpfs"
    assert tempdir.filesystem_type(Path("/mnt/with"), mounts) == "ext4"


def test_the_tree_size_is_the_sum_of_the_committed_files(tmp_path):
    from andon.git.repo import Repo
    root = make_project(tmp_path / "p", files={"big.bin": "x" * 100_000})
    listed = subprocess.run(["git", "ls-tree", "-r", "-l", "HEAD"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    assert tempdir.tree_bytes(Repo(root)) == sum(int(ln.split()[3]) for ln in listed.splitlines())
    assert tempdir.tree_bytes(Repo(root)) > 100_000
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    assert tempdir.tree_bytes(Repo(empty, require_commit=False)) == 0


# -- andon run, a real process without $TMPDIR --------------------------------------------

WHERE_TEST = "import os\n\n\ndef test_where():\n    print('TESTED-IN=' + os.getcwd())\n"


def _agent(tmp_path: Path) -> str:
    """An honest agent, outside the repository, that says where it worked."""
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho WORKED-IN=$(pwd)\ncat >> src/calc/ops.py <<'EOF'\n"
                      f"{MUL_CODE}\nEOF\n")
    script.chmod(0o755)
    return str(script)


def _without_tmpdir() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "TMPDIR"}, **GIT_ENV}


def _system_temp_dir() -> str:
    """Python's temp dir in a process without $TMPDIR (TEMP, TMP, else /tmp, …)."""
    return subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                          env=_without_tmpdir(), capture_output=True, text=True,
                          check=True).stdout.strip()


def _run_without_tmpdir(root: Path, agent: str) -> str:
    """``andon run`` with $TMPDIR unset; returns every text file of its evidence, joined."""
    env = _without_tmpdir()
    proc = subprocess.run(
        [sys.executable, "-m", "andon", "-C", str(root), "run", "--command", agent,
         "--reviewer-command", "printf '%s' '{\"verdicts\": [], \"findings\": [], "
         "\"decision\": \"accept\"}' > \"$ANDON_REVIEW_FILE\""],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    texts = []
    for f in (root / ".andon").rglob("*"):
        if f.is_file() and f.suffix in (".log", ".txt", ".jsonl", ".xml", ".md", ""):
            texts.append(f.read_text(errors="replace"))
    return "\n".join(texts)


def _project(tmp_path: Path, setting: str | None) -> Path:
    config = fast()
    if setting is not None:
        assert 'temp_dir = "auto"' in config
        config = config.replace('temp_dir = "auto"', f'temp_dir = "{setting}"', 1)
    return make_project(tmp_path / "p", {"P1": mul_packet("P1")}, config=config,
                        files={"tests/test_where.py": WHERE_TEST})


@needs_tmpfs
def test_run_puts_the_gate_clones_on_the_tmpfs_and_the_worktree_where_agents_see_it(tmp_path):
    """The suite's runs in fresh clones (and every test run's HOME and TMPDIR) are on the
    private tmpfs folder; the agent's worktree stays in the system temp dir, where agent CLIs
    that mount a fresh /dev for their own sandbox (Codex) still find it."""
    if tempdir.filesystem_type(Path(_system_temp_dir())) == "tmpfs":
        pytest.skip("the system temp dir is a tmpfs here: auto keeps it")
    root = _project(tmp_path, None)
    text = _run_without_tmpdir(root, _agent(tmp_path))
    private = f"{SHM}/tmp-{os.getuid()}/"
    system = _system_temp_dir().rstrip("/") + "/"
    worked = [ln.split("WORKED-IN=")[1] for ln in text.splitlines() if "WORKED-IN=" in ln]
    tested = [ln.split("TESTED-IN=")[1] for ln in text.splitlines() if "TESTED-IN=" in ln]
    assert worked and all(p.startswith(system) for p in worked), worked
    worktree = worked[0].strip()
    in_clones = [p for p in tested if p.startswith(private)]
    assert in_clones, tested  # the hermetic run, in a fresh clone
    assert all(p.startswith(private) or p.strip() == worktree for p in tested), tested
    # the agent ran in the sandbox the machine gives, and could work there
    show = json.loads(subprocess.run(
        [sys.executable, "-m", "andon", "-C", str(root), "show", "P1", "--json"],
        capture_output=True, text=True, check=True).stdout)
    assert show["packet"]["state"] == "done"
    implement = next(s for s in show["attempts"][-1]["stages"] if s["stage"] == "implement")
    from andon.sandbox import probe
    if probe.capabilities().fs[0]:
        assert implement["usage"]["notes"][0].startswith("sandbox fs"), implement["usage"]
    # the run cleaned up after itself: nothing of its clones is left in the private folder
    assert not any(Path(p.strip()).exists() for p in in_clones)


def test_run_keeps_the_trees_in_the_system_temp_dir_when_told(tmp_path):
    root = _project(tmp_path, "system")
    text = _run_without_tmpdir(root, _agent(tmp_path))
    system = _system_temp_dir().rstrip("/") + "/"
    for marker in ("WORKED-IN=", "TESTED-IN="):
        seen = [ln.split(marker)[1] for ln in text.splitlines() if marker in ln]
        assert seen and all(p.startswith(system) for p in seen), (marker, seen)


def test_doctor_says_where_the_trees_go(tmp_path):
    root = _project(tmp_path, "system")
    proc = subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "doctor", "--json"],
                          env=_without_tmpdir(), capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["temp_dir"] == {
        "path": _system_temp_dir(), "why": '[andon] temp_dir = "system"'}
    text = subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "doctor"],
                          env=_without_tmpdir(), capture_output=True, text=True,
                          check=True).stdout
    assert f'temp dir: {_system_temp_dir()} ([andon] temp_dir = "system")' in text
