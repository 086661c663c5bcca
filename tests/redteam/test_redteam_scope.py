"""Scope table (scenarios_scope.py): code no diff shows and test packages that run first are
``scope`` findings; their honest neighbours are merged. Below the table, which
``__init__.py`` counts as running nothing."""

from __future__ import annotations

import pytest

from andon.gates.scope import RUNNER_CONFIG, only_docstring
from andon.runners.rootdir import CONFIG_NAMES

from scenarios import play, verdict
from scenarios_scope import SO, build_scope, can_build

CASES = build_scope()


@pytest.mark.parametrize("scenario", CASES, ids=[s.name for s in CASES])
def test_scope_scenario(scenario, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # the user's git attributes
    if scenario.where == SO and can_build():
        pytest.skip(f"cannot build an extension module here: {can_build()}")
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why} gates={outcome.gates}"
    if scenario.honest:
        assert outcome.state == "done"


@pytest.mark.parametrize("text, inert", [
    (b"", True), (b"\n# a comment\n", True), (b'"""Tests of calc."""\n', True),
    (b'"""doc"""\nimport os\n', False), (b"from calc import ops\n", False),
    (b"x = (\n", False),  # does not parse: judged as code
    (b"# coding: utf-7\n+AGk-mport os\n", False),  # read as Python reads it: `import os`
    (b"\0", False),
    (b"x = " + b"-" * 200_000 + b"1\n", False),  # the parser's MemoryError, not a crash
])
def test_an_init_module_is_inert_only_when_nothing_in_it_runs(text, inert):
    assert only_docstring(text) is inert


def test_every_pytest_config_file_is_runner_config_but_pyproject():
    """One list of pytest's config names: a name pytest reads is one scope flags by name;
    pyproject.toml is judged by its [tool.pytest…] table alone."""
    assert {".pytest.ini", "pytest.toml", ".pytest.toml"} <= set(CONFIG_NAMES)
    assert set(CONFIG_NAMES) - {"pyproject.toml"} <= set(RUNNER_CONFIG)
    assert "pyproject.toml" not in RUNNER_CONFIG
