"""Red team of `andon validate` (validate.py, cli/validate.py, docs/validate.md): reference
solutions that try to write outside the temporary clone or into git's own files, and packet
ids that are paths. Real repositories, the real CLI in a subprocess."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from test_validate import GOOD_OPS, _state, add_solution, by_id, validate

from andon.git.repo import Repo
from andon.state import open_store

from helpers import andon, git, make_project, mul_packet


def state(root: Path) -> dict:
    """The user's repository as test_validate compares it (the store made first)."""
    open_store(Repo(root)).close()
    return _state(root)


def test_a_packet_id_that_is_a_path_is_a_usage_error_and_nothing_runs(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    before = state(root)
    for bad in ("packets/P1", "../P1", str(root / "packets" / "P1"), "P1/"):
        proc = andon(root, "validate", bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert "unknown packet id(s)" in proc.stderr
    assert _state(root) == before


def test_a_solution_writing_through_a_committed_symlinked_folder_stays_inside(tmp_path):
    """The project commits `src/calc/out` -> an absolute folder outside the repository; the
    solution names `src/calc/out/evil.py`. Writing it would write outside the clone (into the
    user's file system); validate must not, and the state stays unchanged."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", allowed_paths=["src/calc/**"])})
    os.symlink(outside, root / "src" / "calc" / "out")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a link")
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS, "src/calc/out/evil.py": "x = 1\n"})
    before = state(root)
    proc, doc = validate(root)
    assert list(outside.iterdir()) == []
    assert _state(root) == before
    assert proc.returncode == 1
    p1 = by_id(doc)["P1"]
    assert (p1["valid"], p1["failed_gate"], p1["layer"]) == (False, "solution", "specification")
    assert "solution/src/calc/out/evil.py: src/calc/out is a symbolic link" in p1["summary"]


def test_a_solution_file_named_git_does_not_replace_the_worktree_link(tmp_path):
    """`solution/.git` (a file) and `solution/src/calc/.git`: paths git can never commit, so
    no agent could make that change; validate must say the packet is wrong, not crash, and
    leave the user's repository as it was."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", allowed_paths=["**"])})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS, ".git": "gitdir: /nowhere\n"},
                 commit=False)
    before = state(root)
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p1 = by_id(doc)["P1"]
    assert (p1["valid"], p1["failed_gate"]) == (False, "solution")
    assert "solution/.git" in p1["summary"] and ".git component" in p1["summary"]
    assert _state(root) == before
    assert (root / ".git").is_dir()


def test_a_solution_file_under_git_dir_is_rejected(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", allowed_paths=["**"])})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS,
                              ".git/hooks/post-commit": "#!/bin/sh\ntouch /tmp/x\n"},
                 commit=False)
    before = state(root)
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p1 = by_id(doc)["P1"]
    assert (p1["valid"], p1["failed_gate"]) == (False, "solution")
    assert "solution/.git/hooks/post-commit: a path with a .git component" in p1["summary"]
    assert _state(root) == before


def test_a_base_failing_its_own_suite_exits_3_with_preflight_and_validates_nothing(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        files={"tests/test_broken.py": "def test_broken():\n    assert False\n"})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    before = state(root)
    proc, doc = validate(root)
    assert proc.returncode == 3, proc.stderr
    assert doc["ok"] is False and doc["packets"] == []
    assert doc["preflight"]["status"] == "fail" and doc["preflight"]["summary"]
    assert "nothing was validated" in proc.stderr
    assert state(root) == before


def test_json_keys_and_keep_are_as_documented(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    proc, doc = validate(root, "--keep", "--runs", "2")
    assert proc.returncode == 0, proc.stderr
    assert set(doc) == {"ok", "base", "red_runs", "preflight", "kept", "packets"}
    assert doc["red_runs"] == 2 and doc["preflight"] is None
    kept = Path(doc["kept"])
    assert kept.is_dir() and not kept.is_relative_to(root)
    [p1] = doc["packets"]
    assert set(p1) == {"id", "valid", "failed_gate", "layer", "summary", "findings", "gates",
                       "applied", "not_applied", "seconds", "evidence_dir"}
    assert Path(p1["evidence_dir"]).is_dir()
    assert Path(p1["evidence_dir"]).is_relative_to(kept)
    shutil.rmtree(kept)


def test_the_users_object_store_gets_no_object(tmp_path):
    """The clone is `--shared`: it reads the user's objects; every commit validate makes (the
    plant, the candidate, required packets) must go to the clone's own store."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet(
        "P2", requires=["P1"])})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    add_solution(root, "P2", {"src/calc/ops.py": GOOD_OPS + "\n# P2\n"})

    def objects() -> list[str]:
        store = root / ".git" / "objects"
        return sorted(str(p.relative_to(store)) for p in store.rglob("*"))

    before = objects()
    proc, doc = validate(root)
    assert doc["packets"], proc.stderr
    assert objects() == before
