"""``andon demo --plan``: from a feature request to merged packets, with no API key.

A scripted planner (a ``scripted`` adapter, through the same planning stage as any agent)
drafts two packets for :file:`feature_request.md` on the demo project. In round 1 it forgets
that both change ``src/ledger/loader.py`` and leaves them unordered; the checks return that
problem, and round 2 fixes it (the loop, shown). The demo then accepts the drafts (recorded,
``by = "the demo"``), runs them through the ordinary loop with scripted implementers and the
evaluating reviewer, and shows the board.

First, the interview: the scripted interviewer (``demo/interviewer.py``) asks about the
feature request's one-way doors, every recommendation is accepted (``andon grill
--non-interactive``), and the decisions file is committed on its own branch; it is given to
the planner beside the feature request. :func:`run_plan_demo` takes ``decisions`` to skip
the interview with a decisions file of your own."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from ..agents import ScriptedAgent, StageContext
from ..config import load_config
from ..git.repo import Repo
from ..packet import check_packets
from ..plan import drafts
from ..plan.session import run_plan
from ..report import board
from ..runner import Runner
from ..state import open_store
from . import GIT_ENV, build_project
from .agents import evaluating_reviewer
from .interviewer import run_interview

REQUEST = Path(__file__).with_name("feature_request.md")

TOTAL_IN = '''

def total_in(rows: list[dict]) -> float:
    """The sum of the positive amounts of ``rows``."""
    return sum(r["amount"] for r in rows if r["amount"] > 0)
'''
TOTAL_OUT = '''

def total_out(rows: list[dict]) -> float:
    """The sum of the negative amounts of ``rows``, as a positive number."""
    return -sum(r["amount"] for r in rows if r["amount"] < 0)
'''
ROWS = '[{"amount": 5.0}, {"amount": -2.0}, {"amount": 3.0}]'


def _test(name: str, want: str) -> str:
    return (f"from ledger.loader import {name}\n\n\ndef test_{name}():\n"
            f"    assert {name}({ROWS}) == {want}\n\n\ndef test_{name}_empty():\n"
            f"    assert {name}([]) == 0\n")


def _draft(pid: str, name: str, want: str, requires: list[str]) -> dict:
    return {"id": pid, "slug": name.replace("_", "-"), "title": f"{name}(rows)",
            "goal": f"`{name}(rows)` in ledger.loader returns {want} for the sample rows",
            "allowed_paths": ["src/ledger/loader.py"], "requires": requires,
            "invariants": [{"id": f"{pid}-1", "critical": True,
                            "assert": f"{name}([]) == 0"}],
            "forbidden_shortcuts": ["returning the test's expected values",
                                    "changing load_rows or the tests"],
            "planted_tests": {f"tests/test_{name}.py": _test(name, want)}}


def scripted_planner(ctx: StageContext) -> str:
    """Round 1: two drafts touching the same file, unordered (a mistake the checks find);
    round 2 on: S02 requires S01. Writes the plan document to the plan file."""
    second = _draft("S02", "total_out", "2.0", [] if ctx.attempt == 1 else ["S01"])
    doc = {"packets": [_draft("S01", "total_in", "8.0", []), second],
           "summary": "two thin slices, one figure each"}
    text = json.dumps(doc, indent=2)
    if ctx.review_file is not None:
        ctx.review_file.write_text(text)
    return f"```json\n{text}\n```"


def _implementer(ctx: StageContext) -> str:
    code = TOTAL_IN if ctx.packet.id == "S01" else TOTAL_OUT
    loader = ctx.worktree / "src/ledger/loader.py"
    loader.write_text(loader.read_text() + code)
    return "implemented"


def run_plan_demo(out: Console, where: Path | None = None, decisions: Path | None = None
                  ) -> int:
    """Build the demo project without its packets, plan from the feature request (and
    ``decisions`` when given), accept, run, show the board. 0 when every step went as
    expected."""
    root = where or Path(tempfile.mkdtemp(prefix="andon-demo-plan-")) / "ledger"
    say = lambda s: out.print(s, markup=False, soft_wrap=True)  # noqa: E731
    out.print(f"[bold]andon demo --plan[/] — building the example project in {root}")
    build_project(root)
    repo = Repo(root)
    for folder in sorted((root / "packets").iterdir()):
        if folder.is_dir():
            shutil.rmtree(folder)  # the hand-written packets: this demo plans its own
    (root / "docs").mkdir()
    shutil.copyfile(REQUEST, root / "docs" / "feature_request.md")
    repo.git("add", "-A")
    repo.git("-c", f"user.name={GIT_ENV['GIT_AUTHOR_NAME']}", "-c",
             f"user.email={GIT_ENV['GIT_AUTHOR_EMAIL']}", "commit", "-q", "-m",
             "feature request: a statement summary")
    if decisions is None:  # the interview first, as andon grill --non-interactive would
        out.print("[bold]interview[/] (the scripted interviewer; every recommendation "
                  "accepted)")
        decisions = run_interview(root, root / "docs" / "feature_request.md")
        say(f"decisions: {decisions} (committed on its own branch, andon/grill/*; the "
            "checkout is untouched)")
    paths = ["docs/feature_request.md", str(decisions)]
    config = load_config(root)
    store = open_store(repo, config)
    try:
        planned = run_plan(repo, config, store, ScriptedAgent(scripted_planner), paths, 3, say)
        for r in planned.rounds:
            out.print(f"round {r.n}: prompt {r.prompt_file}", markup=False, soft_wrap=True)
        if not planned.ok or len(planned.rounds) != 2:
            out.print(f"[red]demo: planning did not end as expected: {planned.problems}[/]")
            return 1
        first = store.events(kind="plan-round")[0]["data"]["problems"]
        out.print("round 1 problems (returned to the planner): " + "; ".join(first),
                  markup=False, soft_wrap=True)
        found, _ = check_packets(root / "packets", root)
        for p in found:
            drafts.accept(store, p, "the demo", [], False)
            say(f"{p.id}: accepted by the demo")
    finally:
        store.close()
    reviewer, worker = ScriptedAgent(evaluating_reviewer), ScriptedAgent(_implementer)
    runner = Runner(repo, config, open_store(repo, config),
                    lambda p, stage: reviewer if stage.startswith("review") else worker,
                    echo=say)
    try:
        runner.run()
        out.print()
        out.print(board(runner.store, config))
        states = {p["id"]: p["state"] for p in runner.store.packets()}
    finally:
        runner.store.close()
    ok = states == {"S01": "done", "S02": "done"}
    out.print("[green]demo --plan: drafted, checked, fixed in round 2, accepted, merged[/]"
              if ok else f"[red]demo --plan: unexpected states {states}[/]")
    return 0 if ok else 1
