"""A planted test file whose module name clashes with an existing test (issue 9, case
basename-clash) is a packet problem found before any agent runs: by `andon check` and by the
red gate (layer specification), naming both files and the fixes. Real repositories and runs."""

from __future__ import annotations

from andon.exits import EXIT_OK
from andon.gates.clash import clashes, import_mode, module_name

from helpers import (
    MUL_TEST,
    andon,
    config_toml,
    honest_mul,
    make_project,
    mul_packet,
    packet_md,
    runner_for,
)

UNIT = "tests/unit/test_ops.py"


def clash_packet():
    return packet_md("P1", "mul", "mul", allowed_paths=["src/calc/**"], max_attempts=2), {
        UNIT: MUL_TEST}


def test_red_blocks_the_clash_before_any_agent_runs(tmp_path):
    """tests/unit/test_ops.py beside tests/test_ops.py, no __init__.py: red fails with layer
    specification naming both files; the agent is never called."""
    root = make_project(tmp_path / "repo", {"P1": clash_packet()})
    calls = []
    runner = runner_for(root, lambda ctx: calls.append(1) or "done")
    runner.run()
    rows = runner.store.gate_results(runner.store.attempts("P1")[0]["id"])
    red = rows[0]
    assert (red["gate"], red["status"], red["failure_layer"]) == ("red", "fail",
                                                                   "specification")
    f = red["evidence"]["findings"][0]
    assert (f["kind"], f["path"]) == ("basename-clash", UNIT)
    assert "tests/test_ops.py" in f["message"] and "--import-mode=importlib" in f["message"]
    assert "__init__.py" in f["message"]
    assert calls == [] and len(rows) == 1
    assert runner.store.packet("P1")["state"] == "blocked"


def test_check_reports_the_clash_with_the_packet_file(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": clash_packet()})
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "packets/P1/packet.md" in r.stdout and "tests/test_ops.py" in r.stdout
    assert UNIT in r.stdout


def test_importlib_mode_in_the_command_lets_the_honest_agent_merge(tmp_path):
    """The honest counterpart: with --import-mode=importlib both files are collected, check
    is clean and the correct `mul` is merged."""
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         test_command=["python", "-m", "pytest", "--import-mode=importlib"])
    root = make_project(tmp_path / "repo", {"P1": clash_packet()}, config=config)
    assert andon(root, "check").returncode == 0
    report = runner_for(root, honest_mul).run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message


def test_packages_make_distinct_names_and_no_finding():
    tree = ["tests/__init__.py", "tests/test_ops.py", "tests/unit/__init__.py"]
    assert module_name("tests/unit/test_ops.py", {"tests", "tests/unit"}) == \
        "tests.unit.test_ops"
    assert clashes(tree, [UNIT]) == []
    # only one folder a package: tests/unit/test_ops.py is "unit.test_ops", no clash either
    assert clashes(["tests/test_ops.py", "tests/unit/__init__.py"], [UNIT]) == []
    # two packages named alike in different places do clash
    tree = ["a/tests/__init__.py", "a/tests/test_x.py", "b/tests/__init__.py"]
    found = clashes(tree, ["b/tests/test_x.py"])
    assert [f.path for f in found] == ["b/tests/test_x.py"]


def test_files_the_suite_never_collects_do_not_count():
    """testpaths, the command's own paths, the packets folder, norecursedirs and python_files
    decide what the suite collects: a same-named file outside it is no clash."""
    tree = ["docs/examples/test_ops.py", "packets/P9/plant/tests/test_ops.py",
            "build/test_ops.py", ".tox/x/test_ops.py"]
    assert clashes(tree, ["tests/test_ops.py"], ini={"testpaths": ["tests"]}) == []
    assert clashes(tree[1:], ["tests/test_ops.py"]) == []
    assert clashes(["docs/examples/test_ops.py"], ["tests/test_ops.py"],
                   args=["tests"]) == []
    assert clashes(["docs/test_ops.py"], ["tests/test_ops.py"]) != []
    assert clashes(["docs/test_ops.py"], ["tests/test_ops.py"],
                   ini={"python_files": ["check_*.py"]}) == []
    assert import_mode(["--import-mode", "importlib"]) == "importlib"
    assert clashes(["docs/test_ops.py"], ["tests/test_ops.py"],
                   args=["--import-mode=importlib"]) == []


def test_an_ordinary_packet_is_not_flagged(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    assert andon(root, "check").returncode == 0
