"""Test ids are the same in every gate whatever paths a run selects (issue 9, case
rootdir-monorepo): a monorepo whose sub-package has its own pyproject.toml, and a project whose
only pytest config is tests/pytest.ini. Real git repositories, real pytest runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from andon.exits import EXIT_OK
from andon.runners.pytest import parse_junit
from andon.runners.rootdir import NO_CONFIG, locate, pinned_args

from helpers import config_toml, make_project, packet_md, runner_for, write

MUL = "from pkgmod import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
BASE = "from pkgmod import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
ADD = "def add(a, b):\n    return a + b\n"

LAYOUTS = {
    # a root pyproject.toml and a sub-package with its own (no pytest table in either)
    "monorepo": ({"pyproject.toml": '[project]\nname = "ws"\nversion = "0"\n',
                  "pkg/pyproject.toml": '[project]\nname = "pkg"\nversion = "0"\n',
                  "pkg/src/pkgmod/__init__.py": ADD, "pkg/tests/test_base.py": BASE},
                 "pkg/tests/test_mul.py", "pkg/src/pkgmod/__init__.py", "pkg/src"),
    # the only pytest config sits in tests/
    "testsini": ({"tests/pytest.ini": "[pytest]\n", "src/pkgmod/__init__.py": ADD,
                  "tests/test_base.py": BASE},
                 "tests/test_mul.py", "src/pkgmod/__init__.py", "src"),
}


def _project(tmp_path: Path, layout: str) -> tuple[Path, str, str]:
    files, planted, src, pp = LAYOUTS[layout]
    config = config_toml(red_runs=2, hermetic_runs=1).replace(
        'pythonpath = ["src"]', f'pythonpath = ["{pp}"]')
    packet = packet_md("P1", allowed_paths=[f"{src.rsplit('/', 1)[0]}/**"])
    root = make_project(tmp_path / "repo", {"P1": (packet, {planted: MUL})},
                        {**files, "tests/test_ops.py": "def test_nothing():\n    pass\n"}
                        if layout == "monorepo" else files, config)
    return root, planted, src


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_honest_agent_is_merged_and_ids_match_in_every_gate(tmp_path, layout):
    """Red passes (the planted file ran and failed on the base), the honest `mul` is merged,
    and every run of every gate names the planted test with the same id and file."""
    root, planted, src = _project(tmp_path, layout)

    def honest(ctx):
        write(ctx, src, "\n\ndef mul(a, b):\n    return a * b\n", append=True)
        return "done"
    runner = runner_for(root, honest)
    report = runner.run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message
    rows = runner.store.gate_results(runner.store.attempts("P1")[0]["id"])
    by_gate = {g["gate"]: g for g in rows}
    assert by_gate["red"]["status"] == "pass", by_gate["red"]["summary"]
    assert "1 planted module(s)" in by_gate["red"]["summary"]
    module = planted[:-3].replace("/", ".")
    for g in ("red", "suite", "hermetic"):
        for run in by_gate[g]["evidence"]["runs"]:
            mine = [r for r in parse_junit(Path(run["junit_path"])).values()
                    if "mul" in r.id]
            assert mine and all(r.file == planted for r in mine), (g, mine)
            want = f"::{module}" if g == "red" else f"{module}::test_mul"
            assert [r.id for r in mine] == [want], (g, mine)


def test_locate_follows_pytest_and_never_leaves_the_clone(tmp_path):
    """The config pytest would use for the full suite: a pytest table wins over a bare
    pyproject.toml; with none, the first pyproject.toml; a tests/pytest.ini is not seen from
    the root (pytest does not see it either), but is when the command names tests/; a config
    above the clone is never taken."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # outside the clone
    clone = tmp_path / "clone"
    (clone / "tests").mkdir(parents=True)
    assert locate(clone) is None
    (clone / "tests" / "pytest.ini").write_text("[pytest]\n")
    assert locate(clone) is None
    assert locate(clone, ["tests", "-k", "x"]) == clone / "tests" / "pytest.ini"
    (clone / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert locate(clone) == clone / "pyproject.toml"
    (clone / "tox.ini").write_text("[pytest]\ntestpaths = tests\n")
    assert locate(clone) == clone / "tox.ini"
    (clone / "pyproject.toml").write_text('[tool.pytest.ini_options]\nx = "1"\n')
    assert locate(clone) == clone / "pyproject.toml"


def test_pinned_args_respect_what_the_command_already_sets(tmp_path):
    """Without a config: -c /dev/null and confcutdir = the clone; the project's own
    -c/--rootdir/--confcutdir are never overridden."""
    assert pinned_args(tmp_path) == [f"--rootdir={tmp_path}", "-c", NO_CONFIG,
                                     f"--confcutdir={tmp_path}"]
    assert pinned_args(tmp_path, ["-c", "x.ini", "--rootdir=.", "--confcutdir", "."]) == []
