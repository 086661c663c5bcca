"""A packet without planted tests (issue 9): nothing would be red before the agent and
FAIL_TO_PASS would be empty, so a comment-only change could merge. Such a packet needs an
explicit opt-in — ``tests = "none"`` in its front matter, or an ``atdd`` stage that writes
the tests — and ``tests = "none"`` waits for a person unless ``gate`` says otherwise.

Real git repositories, the real CLI in a subprocess, real pytest runs.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from helpers import MUL_CODE, SHIPPED, andon, git, make_project, mul_packet, packet_md

HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
COMMENT_ONLY = "printf '# fixed\\n' >> src/calc/ops.py"


def bare(pid: str = "P1", **fields) -> tuple[str, dict]:
    """A packet that plants nothing."""
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "multiply", "calc.ops.mul multiplies.", **fields), {}


def attempts(root: Path) -> int:
    db = root / ".andon" / "andon.db"
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
    finally:
        con.close()


def test_check_reports_a_packet_without_tests_or_opt_in_with_file_and_line(tmp_path):
    """Before: `andon check` said "1 packet(s) OK". Now a problem at the packet file, saying
    how to opt in; exit 2."""
    root = make_project(tmp_path / "repo", {"P1": bare()})
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    where = f"{root / 'packets/P1/packet.md'}:1: "
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(where))
    assert "plants no test files" in line and 'tests = "none"' in line and "atdd" in line
    data = json.loads(andon(root, "check", "--json").stdout)
    assert data["ok"] is False and len(data["problems"]) == 1


def test_run_refuses_a_packet_without_tests_or_opt_in_and_nothing_runs(tmp_path):
    """Before: red was skipped and a comment-only change merged "including 0 FAIL_TO_PASS".
    Now `andon run` refuses (exit 2), claims nothing and moves no ref."""
    root = make_project(tmp_path / "repo", {"P1": bare()})
    r = andon(root, "run", "--agent", "command", "--command", COMMENT_ONLY)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "plants no test files" in r.stderr and "nothing ran" in r.stderr
    assert attempts(root) == 0


def test_opting_in_with_tests_none_waits_for_a_person_by_default(tmp_path):
    """``tests = "none"``: check passes with a warning naming the packet; the run gates it
    and then waits for a person instead of merging a change no test checks."""
    root = make_project(tmp_path / "repo", {"P1": bare(tests="none")})
    c = andon(root, "check")
    assert c.returncode == 0, c.stdout + c.stderr
    assert "P1" in c.stderr and "no tests" in c.stderr and "human" in c.stderr
    r = andon(root, "run", "--agent", "command", "--command", COMMENT_ONLY)
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(andon(root, "status", "--json").stdout)
    assert [p["state"] for p in status["packets"]] == ["awaiting_human"]


def test_tests_none_with_an_explicit_auto_gate_merges(tmp_path):
    """The person who writes ``gate = "auto"`` beside ``tests = "none"`` gets what they asked."""
    root = make_project(tmp_path / "repo", {"P1": bare(tests="none", gate="auto")})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "merged as" in r.stdout


def test_an_atdd_stage_is_an_opt_in(tmp_path):
    """A packet whose stages include atdd gets its tests from that stage: no problem."""
    root = make_project(tmp_path / "repo", {"P1": bare(stages=["atdd", "implement"])})
    r = andon(root, "check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_atdd_stage_from_the_tier_is_an_opt_in_too(tmp_path):
    config = SHIPPED + '\n[stages.tiers]\nthorough = ["atdd", "implement"]\n'
    root = make_project(tmp_path / "repo", {"P1": bare(tier="thorough")}, config=config)
    r = andon(root, "check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_tests_none_beside_planted_tests_is_a_contradiction(tmp_path):
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", tests="none",
                   allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_x.py": "def test_x():\n"
                                                              "    assert True\n"})})
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert 'tests = "none"' in r.stdout and "tests/test_x.py" in r.stdout


def test_an_unknown_tests_value_is_reported_with_its_line(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": bare(tests="nope")})
    r = andon(root, "check")
    assert r.returncode == 2
    assert f"{root / 'packets/P1/packet.md'}:5: tests must be 'planted' or 'none'" in r.stdout


def test_a_done_packet_without_tests_does_not_stop_later_runs(tmp_path):
    """A packet merged before this rule (or whose plant/ was removed since) never runs
    again: `andon run` does not refuse the queue because of it."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    assert andon(root, "run", "--agent", "command", "--command", HONEST).returncode == 0
    shutil.rmtree(root / "packets/P1/plant")
    git(root, "commit", "-qam", "P1 is done; its test now lives in tests/")
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "plants no test files" not in r.stderr
