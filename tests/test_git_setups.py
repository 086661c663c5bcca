"""Real repositories' git set-ups: submodules in every clone andon makes, and git's own
refusals (ownership, bare repository, no commits, a missing base branch, a stale lock)
passed through with git's message and remedy, exit 2, and nothing in the store changed.

Real git repositories in tmp_path and the real CLI in a subprocess (issue 9; cases
``submodules`` and ``dubious-ownership``).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from andon.errors import UsageError
from andon.git.repo import Repo

from helpers import GIT_ENV, MUL_CODE, andon, git, make_project, mul_packet

HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
UNITS = "def km(m):\n    return m / 1000\n"
OPS_WITH_UNITS = ("from units import km\n\n\ndef add(a, b):\n    return a + b\n\n\n"
                  "def div(a, b):\n    return a / b\n\n\ndef dist(m):\n    return km(m)\n")
DIST_TEST = "from calc.ops import dist\n\n\ndef test_dist():\n    assert dist(2000) == 2\n"


def counts(root: Path) -> tuple[int, int]:
    """(attempts, events) in the store; (0, 0) when there is no store."""
    db_path = root / ".andon" / "andon.db"
    if not db_path.exists():
        return (0, 0)
    db = sqlite3.connect(db_path)
    try:
        return tuple(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("attempts", "events"))
    finally:
        db.close()


def allow_file(root: Path, *args: str) -> str:
    return git(root, "-c", "protocol.file.allow=always", *args)


def units_repo(where: Path) -> Path:
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    (where / "units.py").write_text(UNITS)
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "units")
    return where


def project_with_submodule(tmp_path: Path) -> Path:
    """The user's project: ``vendor/units`` is a submodule its code imports."""
    lib = units_repo(tmp_path / "units")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        files={"src/calc/ops.py": OPS_WITH_UNITS,
                               "tests/test_dist.py": DIST_TEST},
                        config=_config_with_pythonpath())
    allow_file(root, "submodule", "add", "-q", str(lib), "vendor/units")
    git(root, "commit", "-q", "-m", "vendor units")
    return root


def _config_with_pythonpath() -> str:
    from helpers import SHIPPED
    text = SHIPPED.replace('pythonpath = ["src"]', 'pythonpath = ["src", "vendor/units"]')
    assert text != SHIPPED
    return text


# -- submodules --------------------------------------------------------------------------


def test_a_project_whose_tests_import_a_submodule_merges_an_honest_agent(tmp_path):
    """Case submodules: the preflight clone, the agent's worktree and the hermetic clone all
    have vendor/units checked out, so the honest agent is merged (before: exit 3,
    ModuleNotFoundError in the preflight log)."""
    root = project_with_submodule(tmp_path)
    # what the agent saw goes to its transcript: under the sandbox (the default) a file it
    # wrote outside its worktree would land in its private /tmp
    agent = f"cat vendor/units/units.py && {HONEST}"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "merged as" in r.stdout
    seen = (root / ".andon/evidence/P1/1/implement.transcript.log").read_text()
    assert UNITS in seen, seen
    merged = git(root, "ls-tree", "andon/integration", "vendor/units").split()
    assert merged[:3] == ["160000", "commit", git(root, "rev-parse", "HEAD:vendor/units").strip()]


def test_clones_check_out_the_commit_the_base_records_not_the_submodules_newest(tmp_path):
    """A commit made inside the user's submodule checkout but not recorded in the
    superproject is not what the clone gets: the recorded commit is."""
    root = project_with_submodule(tmp_path)
    sub = root / "vendor" / "units"
    (sub / "units.py").write_text("def km(m):\n    return 'newer'\n")
    git(sub, "commit", "-q", "-am", "newer, unrecorded")
    repo = Repo(root)
    clone = repo.clone_at("HEAD", tmp_path / "clone")
    assert (clone / "vendor/units/units.py").read_text() == UNITS
    wt = repo.add_worktree(tmp_path / "wt", "andon/P1/1", "HEAD")
    assert (wt / "vendor/units/units.py").read_text() == UNITS
    # the worktree leads nowhere back: no remote in the submodule, no path to the user's repo
    assert git(wt / "vendor" / "units", "remote").strip() == ""
    for f in (wt / ".git").rglob("*"):
        if f.is_file() and f.suffix not in (".pack", ".idx"):
            assert str(root) not in f.read_text(errors="replace"), f


def test_a_nested_submodule_is_checked_out_too(tmp_path):
    """--recursive: a submodule of a submodule comes from the user's nested .git/modules."""
    inner = units_repo(tmp_path / "inner")
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q", "-b", "main")
    (outer / "README").write_text("outer\n")
    git(outer, "add", "-A")
    allow_file(outer, "submodule", "add", "-q", str(inner), "deep")
    git(outer, "commit", "-q", "-m", "outer with deep")
    root = make_project(tmp_path / "repo")
    allow_file(root, "submodule", "add", "-q", str(outer), "vendor/outer")
    allow_file(root, "submodule", "update", "--init", "--recursive", "-q")
    git(root, "commit", "-q", "-m", "vendor outer")
    # the sources are gone: only the user's .git/modules can supply them (no network)
    for d in (inner, outer):
        subprocess.run(["rm", "-rf", str(d)], check=True)
    clone = Repo(root).clone_at("HEAD", tmp_path / "clone")
    assert (clone / "vendor/outer/deep/units.py").read_text() == UNITS


def test_an_uninitialised_submodule_is_refused_up_front_naming_it(tmp_path):
    """A checkout made without --recurse-submodules has no .git/modules: andon says which
    submodule and how to fetch it, exits 2, and runs nothing (no preflight, no attempt)."""
    origin = project_with_submodule(tmp_path)
    root = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(origin), str(root)], check=True,
                   env={**GIT_ENV, "PATH": "/usr/bin:/bin"})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "vendor/units" in r.stderr and "git submodule update --init --recursive" in r.stderr
    assert "preflight" not in r.stdout
    assert counts(root)[0] == 0


# -- git's refusals ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [("check",), ("status",),
                                     ("run", "--agent", "command", "--command", "true")])
def test_dubious_ownership_is_shown_with_gits_message_and_remedy(tmp_path, command):
    """Case dubious-ownership: git refuses a checkout owned by another user; andon passes
    git's words on (safe.directory), exits 2, and writes nothing."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    r = andon(root, *command, env={"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "dubious ownership" in r.stdout + r.stderr
    assert "git config --global --add safe.directory" in r.stdout + r.stderr
    assert "not inside a git work tree" not in r.stdout + r.stderr
    assert not (root / ".andon").exists()


def test_repo_errors_name_the_kind_and_keep_gits_words(tmp_path):
    """Not a repository, a bare repository, no commits yet: each message says what git said
    and what to do."""
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match=r"not inside a git work tree: .*not a git repository"):
        Repo(plain)
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "b.git")], check=True)
    with pytest.raises(UsageError, match=r"bare repository.*must be run in a work tree"):
        Repo(tmp_path / "b.git")
    (tmp_path / "empty").mkdir()
    git(tmp_path / "empty", "init", "-q")
    with pytest.raises(UsageError, match=r"no commits yet.*git commit"):
        Repo(tmp_path / "empty")
    with pytest.raises(UsageError, match=r"does not exist"):
        Repo(tmp_path / "nowhere")


def test_a_missing_base_branch_names_the_branches_there_are(tmp_path):
    from helpers import SHIPPED
    config = SHIPPED.replace('# base_branch = "main"', 'base_branch = "develop"')
    assert config != SHIPPED
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'develop'" in r.stderr and "main" in r.stderr and "base_branch" in r.stderr
    assert counts(root)[0] == 0


@pytest.mark.parametrize("lock", ["packed-refs.lock", "refs/heads/andon/integration.lock"])
def test_a_stale_git_lock_stops_the_run_before_anything_is_claimed(tmp_path, lock):
    """A lock file a crashed git left behind: git's own message (remove the file) is shown,
    exit 2, no attempt claimed, no preflight run; once removed, the run works."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    git(root, "branch", "andon/integration", "main")
    (root / ".git" / lock).write_text("")
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 2, r.stdout + r.stderr
    assert lock.rsplit("/", 1)[-1] in r.stderr and "remove the file manually" in r.stderr
    assert "preflight" not in r.stdout
    assert counts(root)[0] == 0
    (root / ".git" / lock).unlink()
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_a_submodule_name_leading_out_of_git_modules_is_never_followed(tmp_path):
    """.gitmodules names a submodule '../../elsewhere': its objects are not looked for
    outside .git/modules (git refuses such names too); andon refuses the repository."""
    root = project_with_submodule(tmp_path)
    elsewhere = units_repo(tmp_path / "elsewhere")
    gm = (root / ".gitmodules").read_text()
    (root / ".gitmodules").write_text(gm.replace('[submodule "vendor/units"]',
                                                 '[submodule "../../../elsewhere/.git"]'))
    git(root, "commit", "-q", "-am", "odd name")
    out = root / ".git" / "modules" / "../../../elsewhere/.git"
    assert out.resolve() == (elsewhere / ".git").resolve()
    with pytest.raises(UsageError, match=r"vendor/units \(not initialised"):
        Repo(root).clone_at("HEAD", tmp_path / "clone")
