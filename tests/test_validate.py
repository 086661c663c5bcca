"""`andon validate`: each packet run with its reference solution (``solution/``) as the agent
through the real gates — red on the base, then every gate of `andon run`, review skipped —
in temporary clones, leaving the user's branches, working tree and store as they were.

Real git repositories in temp dirs, real pytest subprocesses (the CLI in a subprocess)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from andon.git.repo import Repo
from andon.state import open_store

from helpers import (
    CALC,
    MUL_CODE,
    andon,
    config_toml,
    git,
    make_project,
    mul_packet,
    packet_md,
)

GOOD_OPS = CALC + MUL_CODE
WRONG_OPS = CALC + "\n\ndef mul(a, b):\n    return a + b\n"

# Passes on the base already: calc.ops.add exists and works.
ALREADY_PASSES = '''\
from calc.ops import add


def test_add_again():
    assert add(1, 1) == 2
'''


def add_solution(root: Path, folder: str, files: dict[str, str], commit: bool = True) -> None:
    for rel, text in files.items():
        target = root / "packets" / folder / "solution" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if commit:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"reference solution of {folder}")


def validate(root: Path, *args: str):
    proc = andon(root, "validate", "--json", *args)
    assert proc.stdout.strip(), proc.stderr
    return proc, json.loads(proc.stdout)


def by_id(doc: dict) -> dict[str, dict]:
    return {p["id"]: p for p in doc["packets"]}


def test_a_packet_whose_solution_passes_every_gate_is_valid(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    proc, doc = validate(root)
    assert proc.returncode == 0, proc.stderr
    p1 = by_id(doc)["P1"]
    assert p1["valid"] is True and p1["failed_gate"] is None
    gates = [g["gate"] for g in p1["gates"]]
    assert gates[0] == "red" and "suite" in gates and "hermetic" in gates
    assert "review" not in gates  # review is skipped
    assert doc["ok"] is True and doc["base"] == git(root, "rev-parse", "HEAD").strip()


def test_planted_tests_that_already_pass_make_the_packet_invalid_at_red(tmp_path):
    md, _ = mul_packet("P1")
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_add2.py": ALREADY_PASSES})})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p1 = by_id(doc)["P1"]
    assert p1["valid"] is False and p1["failed_gate"] == "red"
    assert p1["findings"][0]["kind"] == "already-passes"
    assert "test_add_again" in p1["findings"][0]["message"]
    assert doc["ok"] is False


def test_a_wrong_solution_is_invalid_at_suite_with_the_failing_tests(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    add_solution(root, "P1", {"src/calc/ops.py": WRONG_OPS})
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p1 = by_id(doc)["P1"]
    assert p1["failed_gate"] == "suite" and p1["layer"] == "code"
    assert any("test_mul" in (f["test_id"] or "") for f in p1["findings"])
    text = andon(root, "validate")
    assert text.returncode == 1 and "invalid" in text.stdout and "suite" in text.stdout


def test_solutions_the_scope_gate_rejects_are_invalid_and_an_atdd_packet_validates(tmp_path):
    mul_test = "from calc.ops import mul\n\n\ndef test_mul_p3():\n    assert mul(2, 5) == 10\n"
    root = make_project(tmp_path / "repo", {
        "P1": mul_packet("P1"), "P2": mul_packet("P2"),
        # no planted test: its atdd stage writes one (here: the solution's test file)
        "P3": (packet_md("P3", "m", "mul", allowed_paths=["src/calc/**", "tests/**"],
                         stages=["atdd", "implement"]), {})})
    # outside allowed_paths
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS, "README.md": "notes\n"})
    # a cheating "solution": the planted test made to pass by rewriting it
    add_solution(root, "P2", {"src/calc/ops.py": GOOD_OPS,
                              "tests/test_mul_p2.py": "def test_mul():\n    pass\n"})
    add_solution(root, "P3", {"src/calc/ops.py": GOOD_OPS, "tests/test_mul_p3.py": mul_test})
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p1, p2, p3 = (by_id(doc)[i] for i in ("P1", "P2", "P3"))
    assert p1["failed_gate"] == "scope" and p1["layer"] == "permission"
    assert [f["path"] for f in p1["findings"]] == ["README.md"]
    assert p2["failed_gate"] == "scope"
    assert [(f["kind"], f["path"]) for f in p2["findings"]] == [("tamper", "tests/test_mul_p2.py")]
    assert p3["valid"] is True, p3
    assert [g["gate"] for g in p3["gates"]][:3] == ["red", "atdd-scope", "red"]


def test_a_flaky_planted_test_makes_the_packet_invalid(tmp_path):
    counter = tmp_path / "runs.txt"
    # fails on the 1st, 3rd … run, passes on the 2nd, 4th …: red only sometimes
    flips = (f"import pathlib\n\nCOUNTER = pathlib.Path({str(counter)!r})\n\n\n"
             "def test_flips():\n"
             "    n = int(COUNTER.read_text()) if COUNTER.exists() else 0\n"
             "    COUNTER.write_text(str(n + 1))\n"
             "    assert n % 2 == 1\n")
    md, _ = mul_packet("P1")
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_flips.py": flips})},
                        config=config_toml(red_runs=1, hermetic_runs=1,
                                           hermetic_random_order=False))
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    # the configured single red run could not see it: validate runs red at least --runs times
    proc, doc = validate(root, "--runs", "3")
    assert proc.returncode == 1, proc.stderr
    p1 = by_id(doc)["P1"]
    assert p1["failed_gate"] == "red"
    assert p1["findings"][0]["kind"] == "flaky"


def test_a_packet_without_a_solution_is_reported_not_run(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    p2 = by_id(doc)["P2"]
    assert p2["valid"] is False and p2["failed_gate"] == "solution" and p2["gates"] == []
    assert by_id(doc)["P1"]["valid"] is True


def test_ids_choose_packets_and_an_unknown_id_is_a_usage_error(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    proc = andon(root, "validate", "P1")  # the terminal table
    assert proc.returncode == 0, proc.stderr
    assert "│ P1 " in proc.stdout and "P2" not in proc.stdout
    assert "1 valid, 0 invalid" in proc.stdout
    bad = andon(root, "validate", "P9")
    assert bad.returncode == 2 and "P9" in bad.stderr and "P1" in bad.stderr


def test_requires_are_applied_with_their_solutions_first(tmp_path):
    # P2's test imports a helper that P1 plants: without P1 applied first it could never pass
    cases = "SQUARES = [(3, 9), (-2, 4)]\n"
    p1_plant = {"tests/mul_cases.py": cases,
                "tests/test_mul_p1.py": "from calc.ops import mul\n\n\ndef test_mul():\n"
                                        "    assert mul(3, 4) == 12\n"}
    square = ("from calc.ops import square\nfrom mul_cases import SQUARES\n\n\n"
              "def test_square():\n    assert all(square(a) == b for a, b in SQUARES)\n")
    p1_md = packet_md("P1", "m", "mul", allowed_paths=["src/calc/**"])
    p2_md = packet_md("P2", "sq", "square", allowed_paths=["src/calc/**"], requires=["P1"])
    root = make_project(tmp_path / "repo", {"P1": (p1_md, p1_plant),
                                            "P2": (p2_md, {"tests/test_square.py": square})})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    add_solution(root, "P2", {"src/calc/ops.py": GOOD_OPS + "\n\ndef square(a):\n"
                                                            "    return mul(a, a)\n"})
    proc, doc = validate(root)
    assert proc.returncode == 0, proc.stderr
    assert by_id(doc)["P2"]["applied"] == ["P1"] and by_id(doc)["P1"]["applied"] == []


def _state(root: Path) -> dict:
    repo = Repo(root)
    db = root / ".andon" / "andon.db"
    con = sqlite3.connect(db)
    tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    rows = {t: con.execute(f"select * from {t}").fetchall() for t in tables}
    con.close()
    return {"status": git(root, "status", "--porcelain", "--untracked-files=all",
                          "--ignored"),
            "refs": git(root, "for-each-ref"), "head": git(root, "rev-parse", "HEAD"),
            "worktrees": repo.list_worktrees(), "rows": rows,
            "andon": sorted(str(p.relative_to(root)) for p in (root / ".andon").rglob("*"))}


def test_validate_changes_no_branch_no_file_and_no_store_row(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")})
    add_solution(root, "P1", {"src/calc/ops.py": GOOD_OPS})
    # an uncommitted solution (git-ignored or not: as the user likes) is read as it is
    add_solution(root, "P2", {"src/calc/ops.py": WRONG_OPS}, commit=False)
    store = open_store(Repo(root))
    store.upsert_packet("P1", "multiply", "packets/P1/packet.md", "sha", {})
    store.close()
    before = _state(root)
    proc, doc = validate(root)
    assert proc.returncode == 1, proc.stderr
    assert by_id(doc)["P2"]["failed_gate"] == "suite"  # the uncommitted solution was used
    assert _state(root) == before


def test_a_bad_solution_folder_stops_validate_before_anything_runs(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    (root / "packets" / "P1" / "solution").mkdir()
    proc = andon(root, "validate")
    assert proc.returncode == 2
    assert "packets/P1/solution: solution/ exists but contains no files" in proc.stderr
