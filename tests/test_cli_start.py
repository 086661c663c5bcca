"""The CLI loads only what the command it was given uses (issue 18).

`andon --help` and `andon status` took 0.8-1.0 s each, nearly all of it imports: every
command module pulled in the runner, the gates, pydantic's models of every contract and
jinja2, whatever was asked (benchmarks/cli_start.py measures the times). Here the
modules a real `python -m andon` process holds after each command are listed, not timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import GIT_ENV, make_project, packet_md

# The modules a command imported, printed as JSON after it ran (in a process of its own).
LIST_MODULES = (
    "import json, runpy, sys\n"
    "sys.argv = ['andon', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('andon', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write('\\n' + json.dumps(sorted(sys.modules)))\n")

# What carries out work: none of it is needed to print help or read the board.
THE_WORK = ("andon.runner", "andon.attempt", "andon.gates", "andon.review", "andon.grill",
            "andon.plan", "andon.context.analyse", "andon.context.tokens", "andon.experiments",
            "andon.web", "andon.demo", "andon.contain.envprint", "jinja2")
# What only reading andon.toml or packets needs.
READING = ("pydantic", "andon.config.model", "andon.packet.model", "andon.store")
# What only printing through rich, or opening the repository, needs: not help (click prints it).
PRINTING = ("rich", "andon.git.repo", "andon.worktrees")
# What only running agents needs: not the board, whose andon.toml names sandbox settings.
AGENTS = ("andon.agents", "andon.sandbox", "andon.store.postgres")


def modules_after(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    proc = subprocess.run([sys.executable, "-c", LIST_MODULES, "-C", str(root), *args],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **GIT_ENV, "COLUMNS": "200"})
    *_, listed = proc.stderr.rsplit("\n", 1)
    return proc, set(json.loads(listed))


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return make_project(tmp_path_factory.mktemp("cli-start") / "p",
                        {"P1-add": (packet_md("P1", "add"), {"tests/test_add.py":
                                                             "def test_add():\n    assert 0\n"})})


def all_commands() -> list[tuple[str, ...]]:
    """Every command and subcommand of the CLI, as the words that name it."""
    import click

    from andon.cli import main

    found: list[tuple[str, ...]] = []

    def walk(group: click.Group, words: tuple[str, ...]) -> None:
        for name, cmd in sorted(group.commands.items()):
            found.append((*words, name))
            if isinstance(cmd, click.Group):
                walk(cmd, (*words, name))

    walk(main, ())
    return found


def test_top_level_help_imports_no_work_and_no_reading(project):
    proc, modules = modules_after(project, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "andon status" in proc.stdout  # the help is the whole help
    assert loaded(modules, THE_WORK + READING + PRINTING) == []


@pytest.mark.parametrize("words", all_commands(), ids=" ".join)
def test_help_of_every_command_imports_no_work(project, words):
    proc, modules = modules_after(project, *words, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout
    assert loaded(modules, THE_WORK + PRINTING) == []


@pytest.mark.parametrize("args", [("status",), ("status", "--json")], ids=" ".join)
def test_reading_commands_import_no_work(project, args):
    proc, modules = modules_after(project, *args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert loaded(modules, THE_WORK + AGENTS) == []
