"""End to end: the ``mutation`` gate with real mutmut, real pytest, real git repositories.

A packet asks for ``calc.ops.discount``. With planted tests that call it but assert nothing real,
the mutants of ``discount`` survive: the score is low and the gate fails, listing the survivors
with their diffs. With planted tests that pin every branch, the gate passes. Either way the
user's checkout and the attempt's worktree are byte-identical before and after (mutmut works in
a throwaway clone). Without mutmut, or switched off, the gate is ``skipped`` with the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from andon.gates import mutation
from andon.git.repo import Repo, manifest

from helpers import CALC, FAST, make_project, packet_md, runner_for, write

CODE = '''

def discount(price, percent):
    if percent < 0 or percent > 100:
        raise ValueError("percent must be between 0 and 100")
    return round(price * (100 - percent) / 100, 2)
'''

WEAK_TEST = '''\
from calc.ops import discount


def test_discount_runs():
    discount(200, 25)
    discount(80, 0)
    assert True
'''

STRONG_TEST = '''\
import pytest

from calc.ops import discount


def test_values():
    assert discount(200, 25) == 150
    assert discount(19.99, 10) == 17.99
    assert discount(80, 0) == 80
    assert discount(80, 100) == 0


def test_out_of_range():
    for bad in (-1, 101):
        with pytest.raises(ValueError, match="percent must be between 0 and 100"):
            discount(10, bad)
'''

HAS_MUTMUT = mutation.mutmut_version(sys.executable)[0] is not None
needs_mutmut = pytest.mark.skipif(not HAS_MUTMUT, reason="mutmut is not installed here "
                                  "(pip install -e '.[test]' installs it)")


def discount_project(tmp_path: Path, planted: str, settings: str = "enabled = true") -> Path:
    md = packet_md("P1", "discount", "calc.ops.discount takes a percentage off.",
                   allowed_paths=["src/calc/**"], max_attempts=1)
    config = FAST.replace("keep_worktrees = false", "keep_worktrees = true\n"
                          f'worktree_root = "{tmp_path / "worktrees"}"')
    config += f"\n[gates.mutation]\n{settings}\n"
    return make_project(tmp_path / "repo", {"P1": (md, {"tests/test_discount.py": planted})},
                        config=config)


def honest_discount(ctx) -> str:
    write(ctx, "src/calc/ops.py", CODE, append=True)
    return "done"


def user_files(root: Path) -> dict[str, str]:
    return {k: v for k, v in manifest(root).items()
            if not k.startswith((".git/", ".andon/"))}


def run_gate(root: Path) -> tuple[dict, dict]:
    """Run P1 with the honest agent; return (mutation gate row, attempt row), after checking
    that the checkout and the kept worktree are byte-identical to what they should be."""
    before = user_files(root)
    runner = runner_for(root, honest_discount)
    runner.run()
    a = runner.store.attempts("P1")[0]
    rows = {g["gate"]: g for g in runner.store.gate_results(a["id"])}
    assert user_files(root) == before
    worktree = Path(a["worktree"])
    export = root.parent / "candidate-export"
    expected = Repo(root).export(a["candidate_sha"], export)
    assert {k: v for k, v in manifest(worktree).items() if k.split("/")[0] != ".git"} == expected
    return rows, a


@needs_mutmut
def test_tests_without_real_assertions_score_low_and_fail_with_survivor_diffs(tmp_path):
    root = discount_project(tmp_path, WEAK_TEST)
    rows, a = run_gate(root)
    assert [g for g in rows if rows[g]["status"] not in ("pass", "skipped")] == ["mutation"]
    g = rows["mutation"]
    ev = g["evidence"]
    assert (g["status"], g["failure_layer"]) == ("fail", "test"), g["summary"]
    assert ev["targets"] == {"src/calc/ops.py": ["x_discount"]}
    assert ev["executed"] >= 10 and ev["score"] < 0.6
    assert ev["score"] == round(ev["killed"] / ev["executed"], 4)
    assert "mutation score" in g["summary"] and "floor 60%" in g["summary"]
    survivors = [f for f in ev["findings"] if f["kind"] == "surviving-mutant"]
    assert len(survivors) == ev["executed"] - ev["killed"]
    def_line = len(CALC.splitlines()) + 3  # the base, two blank lines, then `def discount`
    for f in survivors:  # each points at the line its mutant changed
        path, line = f["path"].split(":")
        assert path == "src/calc/ops.py" and def_line < int(line) <= def_line + 3, f
        assert "x_discount__mutmut_" in f["message"]
        name = f["message"].split()[0]
        old, new = f["message"].split(": ", 1)[1].split(" → ")
        diff = ev["survivor_diffs"][name]  # the whole diff, as `mutmut show` prints it
        assert diff.startswith("--- src/calc/ops.py\n+++ src/calc/ops.py\n@@")
        assert f"\n-    {old}" in diff or f"\n-        {old}" in diff, (old, diff)
        assert new.strip() in diff and old != new
    assert "equivalent mutants" in ev["note"]
    assert ev["runs"][0]["argv"][1:4] == ["-m", "mutmut", "run"]
    assert a["state"] != "merged"


@needs_mutmut
def test_a_well_tested_change_passes(tmp_path):
    root = discount_project(tmp_path, STRONG_TEST)
    rows, a = run_gate(root)
    g = rows["mutation"]
    ev = g["evidence"]
    assert g["status"] == "pass", (g["summary"], ev.get("statuses"))
    assert ev["score"] >= 0.6 and ev["executed"] >= 10
    assert set(ev["statuses"]) == {k for k in ev["statuses"] if "x_discount__mutmut_" in k}
    assert a["state"] == "merged"


@needs_mutmut
def test_tier_switches_it_on_and_the_score_floor_is_configurable(tmp_path):
    """Not enabled, but the packet's tier is listed: it runs; min_score 0 lets weak tests
    through (the floor is the user's choice), and the survivors are still listed."""
    md = packet_md("P1", "discount", "calc.ops.discount takes a percentage off.",
                   allowed_paths=["src/calc/**"], tier="critical")
    config = FAST + ('\n[stages.tiers]\ncritical = ["implement", "review"]\n'
                     '\n[gates.mutation]\ntiers = ["critical"]\nmin_score = 0.0\n')
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_discount.py": WEAK_TEST})},
                        config=config)
    runner = runner_for(root, honest_discount)
    runner.run()
    a = runner.store.attempts("P1")[0]
    g = {r["gate"]: r for r in runner.store.gate_results(a["id"])}["mutation"]
    assert g["status"] == "pass", g["summary"]
    assert "survived" in g["summary"] and g["evidence"]["findings"]


def test_off_by_default_is_skipped_with_the_reason(tmp_path):
    root = discount_project(tmp_path, STRONG_TEST, settings="min_score = 0.5")
    runner = runner_for(root, honest_discount)
    runner.run()
    a = runner.store.attempts("P1")[0]
    g = {r["gate"]: r for r in runner.store.gate_results(a["id"])}["mutation"]
    assert g["status"] == "skipped"
    assert "[gates.mutation] enabled = false" in g["summary"]
    assert a["state"] == "merged"


def test_without_mutmut_the_gate_is_not_run_never_passed(tmp_path):
    """An interpreter that cannot import mutmut (a fresh venv with nothing installed) and one
    that does not exist: both are `skipped`, saying why."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    for python in (venv / "bin" / "python", tmp_path / "no-such-python"):
        root = discount_project(tmp_path / python.name, STRONG_TEST,
                             settings=f'enabled = true\npython = "{python}"')
        runner = runner_for(root, honest_discount)
        runner.run()
        a = runner.store.attempts("P1")[0]
        g = {r["gate"]: r for r in runner.store.gate_results(a["id"])}["mutation"]
        assert g["status"] == "skipped", g["summary"]
        assert g["summary"].startswith("not run: ")
        assert str(python) in g["summary"]
        assert "pip install 'andon[mutation]'" in g["summary"]


def test_changed_functions_are_found_from_changed_lines():
    from andon.gates.changed import changed_functions
    src = ("def a():\n    return 1\n\n\nclass K:\n    @staticmethod\n    def m():\n"
           "        return 2\n\n\ndef b():\n    return 3\n")
    assert changed_functions(src, {2}) == ["x_a"]
    assert changed_functions(src, {6}) == ["xǁKǁm"]
    assert changed_functions(src, {11, 12}) == ["x_b"]
    assert changed_functions(src, {3, 4}) == []


def test_existing_mutmut_config_is_replaced_in_the_clone(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.mutmut]\nsource_paths = ["lib"]\n'
        'only_mutate = ["*"]\n\n[tool.pytest.ini_options]\naddopts = "-x"\n')
    mutation.write_mutmut_config(tmp_path, ["src"], ["src/calc/ops.py"], [])
    import tomllib
    data = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert data["tool"]["mutmut"]["source_paths"] == ["src"]
    assert data["tool"]["mutmut"]["only_mutate"] == ["src/calc/ops.py"]
    assert data["tool"]["pytest"]["ini_options"]["addopts"] == "-x"
    assert data["project"]["name"] == "x"


@needs_mutmut
def test_a_run_that_does_not_finish_in_time_is_an_error_not_a_pass(tmp_path):
    root = discount_project(tmp_path, STRONG_TEST, settings="enabled = true\ntimeout_s = 0.2")
    rows, a = run_gate(root)
    g = rows["mutation"]
    assert (g["status"], g["failure_layer"]) == ("error", "environment"), g["summary"]
    assert "did not finish within 0.2 s" in g["summary"]
    assert g["evidence"]["runs"][0]["timed_out"] is True
    assert a["state"] != "merged"


def test_timeouts_no_tests_and_unknown_codes_count_as_survivors(tmp_path):
    """The score's arithmetic on mutmut's own .meta data: only killed (1, 3) and caught by a
    type checker (37) count as killed; survived, no tests, timeout, suspicious and an unknown
    code are survivors; mutants of functions that were not changed are not counted."""
    import json
    meta = tmp_path / "mutants" / "src" / "calc" / "ops.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"calc.ops.x_f__mutmut_1": 1, "calc.ops.x_f__mutmut_2": 3,
             "calc.ops.x_f__mutmut_3": 37, "calc.ops.x_f__mutmut_4": 0,
             "calc.ops.x_f__mutmut_5": 33, "calc.ops.x_f__mutmut_6": 36,
             "calc.ops.x_f__mutmut_7": 35, "calc.ops.x_f__mutmut_8": 77,
             "calc.ops.x_other__mutmut_1": 0}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    results = mutation.read_results(tmp_path, {"src/calc/ops.py": ["x_f"]})
    assert "calc.ops.x_other__mutmut_1" not in results and len(results) == 8
    killed = [k for k, v in results.items() if v in mutation.KILLED_CODES]
    assert len(killed) == 3
    assert [mutation.status_of(results[f"calc.ops.x_f__mutmut_{i}"]) for i in range(4, 9)] == [
        "survived", "no tests", "timeout", "suspicious", "suspicious"]


@needs_mutmut
def test_a_root_conftest_fixture_reaches_the_tests_under_mutmut(tmp_path):
    """mutmut copies tests/ and pyproject.toml into its mutants/ folder, not a root
    conftest.py; andon names it in also_copy, so fixtures defined there still work."""
    md = packet_md("P1", "discount", "calc.ops.discount takes a percentage off.",
                   allowed_paths=["src/calc/**"], max_attempts=1)
    conftest = ("import pytest\n\n\n@pytest.fixture\ndef cases():\n"
                "    return [(200, 25, 150), (80, 0, 80), (80, 100, 0), (19.99, 10, 17.99)]\n")
    planted = STRONG_TEST + ("\n\ndef test_cases(cases):\n    for price, pct, want in cases:\n"
                             "        assert discount(price, pct) == want\n")
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_discount.py": planted})},
                        files={"conftest.py": conftest},
                        config=FAST + "\n[gates.mutation]\nenabled = true\n")
    runner = runner_for(root, honest_discount)
    runner.run()
    a = runner.store.attempts("P1")[0]
    g = {r["gate"]: r for r in runner.store.gate_results(a["id"])}["mutation"]
    assert g["status"] == "pass", g["summary"]
    assert g["evidence"]["executed"] >= 10
