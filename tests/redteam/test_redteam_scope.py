"""Scope table (scenarios_scope.py): code no diff shows and test packages that run first are
``scope`` findings; their honest neighbours are merged. Below the table, which
``__init__.py`` counts as running nothing."""

from __future__ import annotations

import pytest

from andon.gates.native import HEAD_BYTES, heads, native_format
from andon.gates.scope import RUNNER_CONFIG, only_docstring
from andon.git.repo import Repo
from andon.runners.rootdir import CONFIG_NAMES

from scenarios import git, play, verdict
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


@pytest.mark.parametrize("head, want", [
    (b"\x7fELF\x02\x01\x01\0", "ELF"),
    (b"MZ\x90\x00\x03\x00", "PE"),
    (b"\xfe\xed\xfa\xce\0\0", "Mach-O"), (b"\xce\xfa\xed\xfe\0\0", "Mach-O"),
    (b"\xfe\xed\xfa\xcf\0\0", "Mach-O"), (b"\xcf\xfa\xed\xfe\0\0", "Mach-O"),
    (b"\xca\xfe\xba\xbe\0\0\0\x02", "Mach-O universal binary or Java class"),
    (b"\xca\xfe\xba\xbf\0\0\0\x02", "Mach-O universal binary"),
    (b"MZ\tMozambique\n", None),  # text: a PE header holds NUL bytes
    (b"\x89PNG\r\n\x1a\n\0\0", None), (b"", None), (b"\x7fEL", None),
    (b"import ctypes\n", None),
])
def test_compiled_code_is_known_by_its_first_bytes(head, want):
    found = native_format(head)
    assert found is None if want is None else (found or "").startswith(want), found


def test_heads_reads_the_first_bytes_of_each_blob_in_one_pass(tmp_path):
    """After a blob larger than the pipe, the next answer is still the next file's."""
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    big = b"\x7fELF" + b"x" * (3 << 20)
    names = {"big.bin": big, "odd\nname": b"MZ\0\0", "small.txt": b"hi\n", "empty": b""}
    for name, data in names.items():
        (root / name).write_bytes(data)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "x")
    got = heads(Repo(root), "HEAD", list(names))
    assert got == {name: data[:HEAD_BYTES] for name, data in names.items()}
