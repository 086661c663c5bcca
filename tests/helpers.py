"""Builders shared by the end-to-end tests: real git repositories with real pytest suites.

``make_project`` writes a tiny package (``src/calc``) with passing tests, an andon.toml and
the given packets, commits it on ``main`` and returns its root. ``runner_for`` builds an
in-process Runner with scripted agents; ``andon`` runs the real CLI in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from andon.agents import ScriptedAgent, StageContext
from andon.config import DEFAULT_TOML, load_config
from andon.runner import Runner, open_store
from andon.workspace import Repo

GIT_ENV = {"GIT_AUTHOR_NAME": "Test User", "GIT_AUTHOR_EMAIL": "user@example.com",
           "GIT_COMMITTER_NAME": "Test User", "GIT_COMMITTER_EMAIL": "user@example.com"}

CALC = '''\
def add(a, b):
    return a + b


def div(a, b):
    return a / b
'''

CALC_TESTS = '''\
from calc.ops import add, div


def test_add():
    assert add(2, 3) == 5


def test_div():
    assert div(6, 3) == 2
'''

# A packet whose planted test fails on the base: calc.ops has no `mul` yet.
MUL_TEST = '''\
from calc.ops import mul


def test_mul():
    assert mul(3, 4) == 12


def test_mul_zero():
    assert mul(0, 9) == 0
'''

MUL_CODE = "\n\ndef mul(a, b):\n    return a * b\n"


def packet_md(pid: str, slug: str = "work", goal: str = "Do the work.", **fields: object) -> str:
    """A packet.md text; extra fields are written as TOML (strings, ints, bools, lists)."""
    def toml(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(toml(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = ["+++", f'id = "{pid}"', f'slug = "{slug}"', f"goal = {toml(goal)}"]
    lines += [f"{k} = {toml(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n+++\n\n## Context\n\nA test packet.\n"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout


def make_project(root: Path, packets: Mapping[str, tuple[str, Mapping[str, str]]] = (),
                 files: Mapping[str, str] | None = None, config: str = DEFAULT_TOML) -> Path:
    """Write and commit a project at ``root``; ``packets`` maps folder name →
    (packet.md text, {planted relpath: text}). ``files`` adds or overrides project files."""
    base = {
        "src/calc/__init__.py": "",
        "src/calc/ops.py": CALC,
        "tests/test_ops.py": CALC_TESTS,
        ".gitignore": "__pycache__/\n*.pyc\n",
        "andon.toml": config,
    }
    base.update(files or {})
    for rel, text in base.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "packets").mkdir(parents=True, exist_ok=True)
    for folder, (md, plant) in dict(packets).items():
        d = root / "packets" / folder
        d.mkdir(parents=True)
        (d / "packet.md").write_text(md)
        for rel, text in plant.items():
            (d / "plant" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "plant" / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def mul_packet(pid: str = "P1", **fields: object) -> tuple[str, dict[str, str]]:
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "multiply", "calc.ops.mul multiplies.", **fields), {
        f"tests/test_mul_{pid.lower()}.py": MUL_TEST}


def write(ctx: StageContext, rel: str, text: str, append: bool = False) -> None:
    path = ctx.worktree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        text = path.read_text() + text
    path.write_text(text)


def honest_mul(ctx: StageContext) -> str:
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    return "implemented mul; all tests pass"


def runner_for(root: Path, agents: Mapping[str, Callable[[StageContext], str | None]]
               | Callable[[StageContext], str | None], echo=None) -> Runner:
    """An in-process Runner; ``agents`` is one behaviour or a dict packet id → behaviour."""
    repo = Repo(root)
    config = load_config(root)
    store = open_store(repo)
    if callable(agents):
        pick = lambda p: ScriptedAgent(agents)  # noqa: E731
    else:
        table = {k: ScriptedAgent(v) for k, v in agents.items()}
        pick = lambda p: table[p.id]  # noqa: E731
    return Runner(repo, config, store, pick, echo=echo or (lambda s: None))


def andon(root: Path, *args: str, env: Mapping[str, str] | None = None,
          timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real CLI (`python -m andon`) in a subprocess against ``root``."""
    return subprocess.run([sys.executable, "-m", "andon", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **GIT_ENV, "COLUMNS": "200", **(env or {})})
