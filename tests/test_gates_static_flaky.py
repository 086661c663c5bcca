"""End to end: the ``static`` and ``flaky`` gates on real repositories, with real ruff, mypy and
pytest subprocesses, through the runner; outcomes read back from the store."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from andon.config import DEFAULT_TOML
from andon.gates.static import parse_output

from helpers import CALC, FAST, MUL_TEST, make_project, mul_packet, runner_for, write

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent))
needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (pip install -e "
                                "'.[test]')")


def gate_of(root: Path, agent, gate: str) -> tuple[dict, dict]:
    runner = runner_for(root, agent)
    runner.run()
    a = runner.store.attempts("P1")[0]
    rows = {g["gate"]: g for g in runner.store.gate_results(a["id"])}
    return rows[gate], a


def project(tmp_path: Path, extra_config: str, files=None, plant=MUL_TEST) -> Path:
    md, _ = mul_packet("P1", max_attempts=1)
    return make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": plant})},
                        files, FAST + extra_config)


def agent_writing(code: str):
    def agent(ctx) -> str:
        write(ctx, "src/calc/ops.py", code, append=True)
        return "done"
    return agent


# -- static -------------------------------------------------------------------------------

def test_static_without_commands_is_skipped_saying_so(tmp_path):
    root = project(tmp_path, "")
    g, a = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "static")
    assert g["status"] == "skipped"
    assert "no static commands configured" in g["summary"]
    assert a["state"] == "merged"


RUFF_CONFIG = '\n[gates.static]\ncommands = [["ruff", "check", "--output-format=json", ' \
              '"--no-cache", "--isolated"]]\n'


@needs_ruff
def test_ruff_finding_on_a_changed_line_fails_old_debt_is_only_a_note(tmp_path):
    """The base already has an unused import (line 1): old debt, kept as a note. The agent adds
    another unused import inside its change: a `static` finding naming file, line and code."""
    files = {"src/calc/ops.py": "import sys\n\n\n" + CALC}
    root = project(tmp_path, RUFF_CONFIG, files)
    dirty = "\n\ndef mul(a, b):\n    import os\n    return a * b\n"
    g, a = gate_of(root, agent_writing(dirty), "static")
    assert (g["status"], g["failure_layer"]) == ("fail", "code"), g["summary"]
    ops = (root / "src/calc/ops.py").read_text().splitlines()  # the base
    line = len(ops) + 4  # "", "", "def mul", "    import os"
    [f] = g["evidence"]["findings"]
    assert (f["kind"], f["path"]) == ("static", f"src/calc/ops.py:{line}")
    assert "F401" in f["message"] and "os" in f["message"]
    notes = g["evidence"]["notes"]
    assert [(n["path"], n["line"], n["code"]) for n in notes] == [("src/calc/ops.py", 1, "F401")]
    assert g["evidence"]["runs"][0]["argv"][-1] == "src/calc/ops.py"
    assert a["state"] != "merged"


@needs_ruff
def test_ruff_clean_change_passes_with_the_old_debt_noted(tmp_path):
    files = {"src/calc/ops.py": "import sys\n\n\n" + CALC}
    root = project(tmp_path, RUFF_CONFIG, files)
    g, a = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "static")
    assert g["status"] == "pass", g["summary"]
    assert "1 findings on unchanged lines kept as notes" in g["summary"]
    assert a["state"] == "merged"


def test_mypy_error_on_the_change_fails_the_gate(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    config = ('\n[gates.static]\ncommands = [["python", "-m", "mypy", "--no-error-summary", '
              '"--ignore-missing-imports"]]\n')
    root = project(tmp_path, config)
    typed = "\n\ndef mul(a: int, b: int) -> str:\n    return a * b\n"  # tests pass; types lie
    g, _ = gate_of(root, agent_writing(typed), "static")
    assert g["status"] == "fail", g["summary"]
    [f] = g["evidence"]["findings"]
    assert f["path"].startswith("src/calc/ops.py:")
    assert "return-value" in f["message"] and "mypy" in f["message"]


def test_unknown_output_is_one_finding_with_its_tail_and_a_missing_tool_is_an_error(tmp_path):
    config = ('\n[gates.static]\ncommands = [["python", "-c", '
              '"import sys; print(\'custom-linter: 2 problems\'); '
              'print(\'see line 4\', file=sys.stderr); sys.exit(3)"]]\n')
    root = project(tmp_path / "a", config)
    g, _ = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "static")
    assert g["status"] == "fail"
    [f] = g["evidence"]["findings"]
    assert "exited 3" in f["message"] and "custom-linter: 2 problems" in f["message"]
    assert "see line 4" in f["message"]  # its stderr too

    root = project(tmp_path / "b", '\n[gates.static]\ncommands = [["no-such-linter-xyz"]]\n')
    g, _ = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "static")
    assert (g["status"], g["failure_layer"]) == ("error", "environment"), g["summary"]
    assert "no-such-linter-xyz could not run" in g["summary"]


def test_parse_output_forms(tmp_path):
    ruff = (f'[{{"filename": "{tmp_path}/src/a.py", "location": {{"row": 3, "column": 1}}, '
            '"code": "F401", "message": "`os` imported but unused"}]')
    assert parse_output(ruff, tmp_path) == [
        {"path": "src/a.py", "line": 3, "code": "F401", "message": "`os` imported but unused"}]
    mypy = ('src/a.py:7: error: Incompatible return value type (got "int", expected "str")  '
            '[return-value]\nsrc/a.py:7: note: see docs\n')
    assert parse_output(mypy, tmp_path) == [
        {"path": "src/a.py", "line": 7, "code": "return-value",
         "message": 'Incompatible return value type (got "int", expected "str")'}]
    flake = "./src/a.py:2:1: E302 expected 2 blank lines, found 1\n"
    assert parse_output(flake, tmp_path) == [
        {"path": "src/a.py", "line": 2, "code": "E302",
         "message": "expected 2 blank lines, found 1"}]
    assert parse_output("all good\n", tmp_path) is None
    assert parse_output("[]", tmp_path) == []


# -- flaky --------------------------------------------------------------------------------

# The second test leaves a file behind in the checkout: it passes on the first run in a clone
# and fails on every later one. The suite and the one hermetic run each see it once and pass.
LEAKY = MUL_TEST + '''

def test_first_run_only():
    # passes on the first two runs in a clone (the worktree's plain-first run and its full
    # suite, hermetic's one run), fails from the third on: only repeats in one clone see it
    from pathlib import Path
    marker = Path("leftover-from-a-test")
    count = int(marker.read_text()) if marker.exists() else 0
    marker.write_text(str(count + 1))
    assert count < 2
'''


def test_flaky_off_by_default(tmp_path):
    root = project(tmp_path, "")
    g, _ = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "flaky")
    assert g["status"] == "skipped" and "[gates.flaky] enabled = false" in g["summary"]


def test_a_test_that_flips_between_runs_fails_naming_the_test_and_the_seeds(tmp_path):
    root = project(tmp_path, "\n[gates.flaky]\nenabled = true\nruns = 3\n", plant=LEAKY)
    g, a = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "flaky")
    assert (g["status"], g["failure_layer"]) == ("fail", "code"), g["summary"]
    ev = g["evidence"]
    [f] = ev["findings"]
    tid = "tests.test_mul_p1::test_first_run_only"
    assert (f["kind"], f["test_id"], f["path"]) == ("flaky", tid, "tests/test_mul_p1.py")
    seeds = ev["seeds"]
    assert len(seeds) == 3 == len(set(seeds)) == len(ev["runs"])
    assert [r["seed"] for r in ev["runs"]] == seeds
    assert ev["outcomes"][tid] == {"passed": seeds[:2], "failed": seeds[2:]}
    assert f"passed with seeds {seeds[0]}" in f["message"]
    assert a["state"] != "merged"


def test_stable_tests_pass_and_the_nearby_tests_are_chosen_by_import_and_directory(tmp_path):
    """tests/test_ops.py imports calc.ops (changed): near. tests/unrelated/test_other.py
    imports nothing changed and lies elsewhere: not run. src/calc/test_inline.py lies beside
    the changed file: near."""
    files = {"tests/unrelated/test_other.py": "def test_other():\n    assert True\n",
             "src/calc/test_inline.py": "def test_inline():\n    assert 1 + 1 == 2\n"}
    root = project(tmp_path, "\n[gates.flaky]\nenabled = true\nruns = 2\n", files)
    g, a = gate_of(root, agent_writing("\n\ndef mul(a, b):\n    return a * b\n"), "flaky")
    assert g["status"] == "pass", g["summary"]
    ev = g["evidence"]
    assert ev["tests"] == ["src/calc/test_inline.py", "tests/test_mul_p1.py",
                           "tests/test_ops.py"]
    ids = set(ev["outcomes"])
    assert "tests.test_ops::test_add" in ids and "tests.test_mul_p1::test_mul" in ids
    assert not any("test_other" in i for i in ids)
    assert all(set(o) == {"passed"} for o in ev["outcomes"].values())
    assert a["state"] == "merged"


# -- settings -----------------------------------------------------------------------------

def test_gate_settings_are_validated_with_file_and_line(tmp_path):
    from andon.config import load_config
    from andon.errors import ConfigError
    for body, where, what in [
            ("[gates.mutation]\nmin_score = 1.5\n", "gates.mutation.min_score",
             "less than or equal"),
            ("[gates.flaky]\nrnus = 3\n", "gates.flaky.rnus", "unknown key"),
            ("[gates.flaky]\nruns = 1\n", "gates.flaky.runs", "greater than or equal"),
            ("[gates.static]\ncommands = \"ruff\"\n", "gates.static.commands", "expected a list")]:
        (tmp_path / "andon.toml").write_text(DEFAULT_TOML + "\n" + body)
        with pytest.raises(ConfigError) as err:
            load_config(tmp_path)
        line = len(DEFAULT_TOML.splitlines()) + 3
        assert f"andon.toml:{line}: {where}: " in str(err.value), str(err.value)
        assert what in str(err.value)
    (tmp_path / "andon.toml").write_text(DEFAULT_TOML
                                         + '\n[gates.mutation]\ntiers = ["critical"]\n')
    m = load_config(tmp_path).gates.mutation
    assert (m.runs_for("critical"), m.runs_for(None), m.runs_for("minor")) == (True, False, False)
