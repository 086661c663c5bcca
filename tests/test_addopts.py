"""The project's ``addopts`` may narrow a run (``-k``, ``-x``, ``--deselect``, paths), so every
harness run passes ``-o addopts=``; but some options in it widen what runs or how strictly
(``--doctest-modules``: zipp's doctests, the only tests of some of its functions). Those are
kept (runners/rootdir.py ``kept_addopts``): a change that breaks only a doctest was merged."""

from __future__ import annotations

import json

import pytest

from andon.runners.rootdir import kept_addopts

from helpers import CALC, andon, make_project, mul_packet

DOCTESTED = CALC + '''

def square(x):
    """The square of ``x``.

    >>> square(3)
    9
    """
    return x * x
'''


@pytest.mark.parametrize("name, text", [
    ("pytest.ini", "[pytest]\naddopts = {opts}\n"),
    ("tox.ini", "[pytest]\naddopts = {opts}\n"),
    ("setup.cfg", "[tool:pytest]\naddopts = {opts}\n"),
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "{opts}"\n'),
    ("pytest.toml", "[pytest]\naddopts = {list}\n"),
])
def test_the_options_that_widen_a_run_are_kept_and_the_rest_dropped(tmp_path, name, text):
    opts = ("-x -q --doctest-modules -k 'not slow' --doctest-glob=*.rst --maxfail 2 "
            "--strict-markers -p no:warnings tests/unit --deselect tests/t.py::x "
            "-W error::DeprecationWarning --doctest-continue-on-failure -m fast --strict-config "
            "--import-mode=importlib")
    words = json.dumps(opts.replace("'not slow'", "not_slow").split())
    path = tmp_path / name
    path.write_text(text.format(opts=opts, list=words))
    want = ["--doctest-modules", "--doctest-glob=*.rst", "--strict-markers",
            "-W", "error::DeprecationWarning", "--doctest-continue-on-failure",
            "--strict-config", "--import-mode=importlib"]
    assert kept_addopts(path) == want


def test_no_config_file_or_no_addopts_keeps_nothing(tmp_path):
    assert kept_addopts(None) == []
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    assert kept_addopts(tmp_path / "pytest.ini") == []


def _project(tmp_path):
    return make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files={
        "src/calc/ops.py": DOCTESTED,
        "pytest.ini": "[pytest]\naddopts = --doctest-modules\ntestpaths = src tests\n"})


def test_a_change_that_breaks_only_a_doctest_is_not_merged(tmp_path):
    root = _project(tmp_path)
    broken = DOCTESTED.replace("return x * x", "return x * x + 1") + "\n\ndef mul(a, b):\n" \
        "    return a * b\n"
    agent = f"cat > src/calc/ops.py <<'EOF'\n{broken}EOF"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 1, r.stdout + r.stderr
    att = json.loads(andon(root, "show", "P1", "--json").stdout)["attempts"][0]
    bad = next(g for g in att["gates"] if g["status"] == "fail")
    assert bad["gate"] == "suite", bad
    assert any("square" in (f.get("test_id") or "") and f["kind"] == "pass-to-pass"
               for f in bad["evidence"]["findings"]), bad["evidence"]["findings"]


def test_an_honest_change_beside_a_doctest_is_merged(tmp_path):
    root = _project(tmp_path)
    agent = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_project_that_imports_its_tests_with_importlib_is_not_refused(tmp_path):
    """Two tests/*/test_util.py without __init__.py pass under the project's own
    `--import-mode=importlib`; with addopts dropped they clashed under prepend and preflight
    refused the project (red-team adv2 F8)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files={
        "pytest.ini": "[pytest]\naddopts = --import-mode=importlib\ntestpaths = tests\n",
        "tests/a/test_util.py": "def test_util():\n    assert True\n",
        "tests/b/test_util.py": "def test_util():\n    assert True\n"})
    agent = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py"
    r = andon(root, "run", "--agent", "command", "--command", agent)
    assert r.returncode == 0, r.stdout + r.stderr
