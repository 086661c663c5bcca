"""``andon demo``: a realistic example project run end to end with scripted agents.

Builds a small git repository (a CSV loader for bank statements, with its own tests) and eight
packets, then runs the real harness on it — worktrees, planted tests, gates, squash merges —
with scripted agents: honest ones, one that edits a planted test, one that writes a forbidden
path, and one that makes the same mistake twice and halts the line. Exits 0 only if every
packet ends the way the demo expects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from .. import sandbox, tempdir
from ..agents import ScriptedAgent
from ..config import CONFIG_NAME, DEFAULT_TOML, PACKETS_CONFTEST, load_config
from ..git.repo import Repo
from ..report import board
from ..runner import Runner
from ..safe_text import visible
from ..state import open_store
from .agents import BEHAVIOURS, evaluating_reviewer
from .project import FILES, PACKETS
from .solutions import SOLUTIONS

# packet -> (final state, what the demo shows with it)
EXPECTED = {
    "B01": ("done", "honest agent: merged on the first attempt"),
    "B02": ("done", "honest agent (requires B01): merged"),
    "B03": ("done", "attempt 1 edited the planted test → rejected as tamper (or, in the "
                    "sandbox, the OS refused the edit and the planted test failed); the "
                    "evidence went into the next prompt and attempt 2 was merged"),
    "B04": ("done", "attempt 1 deselected tests in pyproject.toml → rejected (forbidden path); "
                    "attempt 2 merged"),
    "B05": ("done", "attempt 1 passed every test but the reviewer found its critical "
                    "invariant violated → revise; attempt 2 merged"),
    "B06": ("done", "human gate: every check passed, it waited for a person, the demo "
                    "approved it and it merged"),
    "B07": ("blocked", "the same failing test twice → no new evidence → blocked; the line "
                       "halted"),
    "B08": ("ready", "never started: the line was halted by B07"),
}

GIT_ENV = {"GIT_AUTHOR_NAME": "Demo User", "GIT_AUTHOR_EMAIL": "demo@example.com",
           "GIT_COMMITTER_NAME": "Demo User", "GIT_COMMITTER_EMAIL": "demo@example.com"}


def build_project(root: Path, worktree_root: Path | None = None) -> Path:
    """Write the example repository at ``root`` (must not exist) and commit it on ``main``;
    ``worktree_root`` goes into its andon.toml when given."""
    root.mkdir(parents=True)
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / CONFIG_NAME).write_text(DEFAULT_TOML if worktree_root is None else DEFAULT_TOML
                                    .replace("[andon]\n", f"[andon]\nworktree_root = "
                                             f"{json.dumps(str(worktree_root))}\n", 1))
    (root / "packets").mkdir()
    (root / "packets" / "conftest.py").write_text(PACKETS_CONFTEST)
    for folder, (packet_md, plant) in PACKETS.items():
        (root / "packets" / folder).mkdir(parents=True)
        (root / "packets" / folder / "packet.md").write_text(packet_md)
        for rel, text in plant.items():
            target = root / "packets" / folder / "plant" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for rel, text in SOLUTIONS[folder].items():  # `andon validate` runs these
            target = root / "packets" / folder / "solution" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    # a committed reference solution would be in every agent's worktree
    with open(root / ".gitignore", "a") as gitignore:
        gitignore.write("packets/*/solution/\n")
    env = {**os.environ, **GIT_ENV}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "ledger: CSV loader with tests; eight packets"]):
        subprocess.run(argv, cwd=root, env=env, check=True)
    return root


def demo_runner(root: Path, echo, agent=None) -> Runner:
    """A Runner on the demo project at ``root`` with its scripted agents and reviewer; with
    ``agent`` (e.g. the real Claude Code), that agent does every packet's work stages."""
    repo = Repo(root)
    agents = {pid: agent or ScriptedAgent(fn) for pid, fn in BEHAVIOURS.items()}
    reviewer = ScriptedAgent(evaluating_reviewer)
    config = load_config(root)
    return Runner(repo, config, open_store(repo, config),
                  lambda p, stage: reviewer if stage.startswith("review") else agents[p.id],
                  echo=echo)


def run_demo(out: Console, where: Path | None = None, agent: str | None = None,
             approve: bool = True) -> int:
    """Build the demo and run it; ``agent`` ``"claude-code"`` runs its packets through the
    real Claude Code against the scripted model server (:mod:`andon.demo.real_cli`).
    ``approve`` False leaves B06 awaiting a person (``andon demo --serve``: approve it in
    the page)."""
    if agent not in (None, "scripted", "claude-code"):
        out.print(f"[red]andon demo --agent: expected scripted or claude-code, got {agent!r}[/]")
        return 2

    def echo(s: str) -> None:  # --agent claude-code runs a real agent: its text is shown inert
        out.print(visible(s, lines=True), markup=False, soft_wrap=True)

    root = where or Path(tempfile.mkdtemp(prefix="andon-demo-")) / "ledger"
    if agent != "claude-code":
        out.print(f"[bold]andon demo[/] — building an example project in {root}")
        build_project(root)
        tempdir.use(Repo(root), load_config(root).andon.temp_dir)
        runner = demo_runner(root, echo)
        return _run(out, root, runner, approve)
    from . import real_cli
    claude = real_cli.find_claude(dict(os.environ))
    if claude is None:
        out.print("[red]andon demo --agent claude-code: no `claude` on PATH (nor in andon's "
                  ".tools/; scripts/test installs the pinned version there)[/]")
        return 2
    worktrees = (root.parent / "worktrees").resolve()
    out.print(f"[bold]andon demo[/] — building an example project in {root}; its packets go "
              f"through the real Claude Code ({claude}) against a scripted model server")
    build_project(root, worktrees)
    tempdir.use(Repo(root), load_config(root).andon.temp_dir)
    server = real_cli.start(root, worktrees)
    try:
        config = load_config(root)
        cli_agent = real_cli.claude_agent(claude, server.url, root.parent / "home",
                                          config.agents.get("claude-code"), config.prices)
        # built here, not by make_agent: the level [agent] sandbox asks for is set the same way
        cli_agent.sandbox = sandbox.level_for(config)
        runner = demo_runner(root, echo, cli_agent)
        return _run(out, root, runner, approve)
    finally:
        server.stop()


def _run(out: Console, root: Path, runner: Runner, approve: bool = True) -> int:
    store, config = runner.store, runner.config
    report = runner.run()
    if report.preflight is not None:  # the example's own suite did not pass: say why, stop
        out.print(visible(report.message, lines=True), markup=False, soft_wrap=True)
        for r in report.preflight.runs:
            out.print(visible(f"evidence: {r.log_path}\n{r.output_tail}", lines=True),
                      markup=False, soft_wrap=True)
        out.print("[red]demo: the example project's own suite does not pass here[/]")
        return 1
    expected = dict(EXPECTED)
    if not approve:
        expected["B06"] = ("awaiting_human", "human gate: every check passed; it waits for "
                                             "you: approve or reject it in the page")
    elif (store.packet("B06") or {}).get("state") == "awaiting_human":
        out.print("B06 is awaiting a person; the demo approves it (`andon approve B06`)")
        runner.approve("B06", who="the demo")
    out.print()
    out.print(board(store, config))
    out.print()
    ok = True
    states = {p["id"]: p["state"] for p in store.packets()}
    for pid, (want, story) in expected.items():
        got = states.get(pid)
        mark = "[green]as expected[/]" if got == want else f"[red]UNEXPECTED: {got}[/]"
        ok &= got == want
        out.print(f"{pid} {want:8} {mark} — {story}", soft_wrap=True)
    halted_ok = report.halted_by == "B07"
    ok &= halted_ok
    out.print()
    if report.message:
        out.print(visible(report.message, lines=True), markup=False, soft_wrap=True)
    a = f"{how_to_call()} -C {root}"
    b07 = next((root / config.andon.packets_dir).glob("B07-*/packet.md"), "B07's packet.md")
    out.print(f"\nthe repository: {root}\nthe evidence:   {root / '.andon' / 'evidence'}\n"
              f"look closer:    {a} status\n"
              f"                {a} show B03   (the tampered planted test)\n"
              f"                {a} show B04   (the forbidden path)\n"
              f"                {a} show B05   (the reviewer's verdicts)\n"
              f"                {a} show B07   (why the line halted)\n"
              # the scripted agents live only in this command: the rest of the queue is
              # for an agent of the reader's own, after the packet that halted is sharpened
              f"go on:          sharpen {b07} (what failed: show B07), then\n"
              f"                {a} unblock B07\n"
              f"                {a} run --agent claude-code   (B07 and B08 with your own agent; "
              "`doctor` lists those installed)", markup=False, soft_wrap=True)
    out.print("[green]demo: every outcome as expected[/]" if ok else
              "[red]demo: some outcomes were not as expected[/]")
    return 0 if ok else 1


def how_to_call() -> str:
    """The command a person types to run this andon again: ``andon`` when that name on
    ``PATH`` is the script that started this process, else that script's absolute path (the
    README installs into a ``.venv`` that is not on ``PATH``), else ``<python> -m andon``."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None or script.name != "andon" or not script.is_file():
        return f"{sys.executable} -m andon"
    on_path = shutil.which("andon")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "andon"
    return str(script.absolute())
