"""``andon demo``: a realistic example project run end to end with scripted agents.

Builds a small git repository (a CSV loader for bank statements, with its own tests) and eight
packets, then runs the real harness on it — worktrees, planted tests, gates, squash merges —
with scripted agents: honest ones, one that edits a planted test, one that writes a forbidden
path, and one that makes the same mistake twice and halts the line. Exits 0 only if every
packet ends the way the demo expects.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from rich.console import Console

from ..agents import ScriptedAgent
from ..config import CONFIG_NAME, DEFAULT_TOML, PACKETS_CONFTEST, load_config
from ..report import board
from ..runner import Runner, open_store
from ..workspace import Repo
from .agents import BEHAVIOURS, evaluating_reviewer
from .project import FILES, PACKETS

# packet -> (final state, what the demo shows with it)
EXPECTED = {
    "B01": ("done", "honest agent: merged on the first attempt"),
    "B02": ("done", "honest agent (requires B01): merged"),
    "B03": ("done", "attempt 1 edited the planted test → rejected as tamper; the evidence went "
                    "into the next prompt and attempt 2 was merged"),
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


def build_project(root: Path) -> Path:
    """Write the example repository at ``root`` (must not exist) and commit it on ``main``."""
    import os
    root.mkdir(parents=True)
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / CONFIG_NAME).write_text(DEFAULT_TOML)
    (root / "packets").mkdir()
    (root / "packets" / "conftest.py").write_text(PACKETS_CONFTEST)
    for folder, (packet_md, plant) in PACKETS.items():
        (root / "packets" / folder).mkdir(parents=True)
        (root / "packets" / folder / "packet.md").write_text(packet_md)
        for rel, text in plant.items():
            target = root / "packets" / folder / "plant" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    env = {**os.environ, **GIT_ENV}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "ledger: CSV loader with tests; eight packets"]):
        subprocess.run(argv, cwd=root, env=env, check=True)
    return root


def demo_runner(root: Path, echo) -> Runner:
    """A Runner on the demo project at ``root`` with its scripted agents and reviewer."""
    repo = Repo(root)
    agents = {pid: ScriptedAgent(fn) for pid, fn in BEHAVIOURS.items()}
    reviewer = ScriptedAgent(evaluating_reviewer)
    return Runner(repo, load_config(root), open_store(repo),
                  lambda p, stage: reviewer if stage.startswith("review") else agents[p.id],
                  echo=echo)


def run_demo(out: Console, where: Path | None = None) -> int:
    root = where or Path(tempfile.mkdtemp(prefix="andon-demo-")) / "ledger"
    out.print(f"[bold]andon demo[/] — building an example project in {root}")
    build_project(root)
    runner = demo_runner(root, lambda s: out.print(s, markup=False, soft_wrap=True))
    store, config = runner.store, runner.config
    report = runner.run()
    if report.preflight is not None:  # the example's own suite did not pass: say why, stop
        out.print(report.message, markup=False, soft_wrap=True)
        for r in report.preflight.runs:
            out.print(f"evidence: {r.log_path}\n{r.output_tail}", markup=False, soft_wrap=True)
        out.print("[red]demo: the example project's own suite does not pass here[/]")
        return 1
    if (store.packet("B06") or {}).get("state") == "awaiting_human":
        out.print("B06 is awaiting a person; the demo approves it (`andon approve B06`)")
        runner.approve("B06", who="the demo")
    out.print()
    out.print(board(store, config))
    out.print()
    ok = True
    states = {p["id"]: p["state"] for p in store.packets()}
    for pid, (want, story) in EXPECTED.items():
        got = states.get(pid)
        mark = "[green]as expected[/]" if got == want else f"[red]UNEXPECTED: {got}[/]"
        ok &= got == want
        out.print(f"{pid} {want:8} {mark} — {story}", soft_wrap=True)
    halted_ok = report.halted_by == "B07"
    ok &= halted_ok
    out.print()
    if report.message:
        out.print(report.message, markup=False, soft_wrap=True)
    out.print(f"\nthe repository: {root}\nthe evidence:   {root / '.andon' / 'evidence'}\n"
              f"look closer:    andon -C {root} status\n"
              f"                andon -C {root} show B03   (the tampered planted test)\n"
              f"                andon -C {root} show B04   (the forbidden path)\n"
              f"                andon -C {root} show B05   (the reviewer's verdicts)\n"
              f"                andon -C {root} show B07   (why the line halted)", markup=False,
              soft_wrap=True)
    out.print("[green]demo: every outcome as expected[/]" if ok else
              "[red]demo: some outcomes were not as expected[/]")
    return 0 if ok else 1
