"""``andon demo --experiment``: the staged controls of the mechanical-coding workflow (issue
17, conditions A-H in ``andon/experiments/conditions/staged.toml``) compared on the demo
packets with scripted agents, no API key, ending with the HTML report.

The agents are seeded: in each run the agent does the packet's work (writes its reference
solution) with the condition's ``success_rate``; otherwise it writes a change that leaves the
planted tests failing and says it is done — or, when its prompt offers the abstention branch
(conditions D-H), often says plainly that it could not. Broad prompts (A, B) sometimes touch a
file the packet does not need; one run in about forty fails at the "provider" (an ``error``).
Every one of these is then judged by the real gates, so the report's numbers are the
harness's, not the script's. Token counts grow with the prompt and the stages; the cost is
reported at a fixed example price.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console

from ..agents import Agent, AgentRun, ScriptedAgent, StageContext
from ..config import CONFIG_NAME, load_config
from ..experiments.execute import current_run
from ..experiments.experiment import Experiment
from ..experiments.spec import Condition, load_spec
from ..git.repo import Repo
from ..state import open_store
from ..usage import Usage
from . import GIT_ENV, build_project
from .agents import LOADER, evaluating_reviewer

SPEC = Path(__file__).resolve().parent.parent / "experiments" / "conditions" / "staged.toml"
PRICE_IN, PRICE_OUT = 3e-6, 15e-6   # USD per token: an example price, reported as the cost
ERROR_RATE = 0.025


class SeededAgent(Agent):
    """The demo's agent for one condition (module docstring); ``success_rate`` in [0, 1]."""

    name = "seeded"

    def __init__(self, success_rate: float):
        self.success_rate = success_rate

    def run(self, ctx: StageContext) -> AgentRun:
        started = time.monotonic()
        run = current_run()
        key = run[0].slug if run else "outside"
        seed = run[1] if run else 0
        rng = random.Random(f"{seed}:{key}:{ctx.stage}:{ctx.attempt}")
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        status, claim = 0, act(ctx, rng, self.success_rate)
        if claim is None:
            status, claim = 1, "ConnectionError: 503 from the model provider"
        transcript.write_text(claim + "\n", encoding="utf-8")
        if status:  # the provider answered nothing: no tokens, no cost (the `agent` gate)
            return AgentRun(self.name, status, False, time.monotonic() - started, transcript,
                            claim, Usage(model="demo-model", input_tokens=0, output_tokens=0,
                                         cost_usd=0.0, cost_source="reported"))
        turns = rng.randint(2, 8)
        input_tokens = (len(ctx.prompt) // 4 + 2_000) * turns
        output_tokens = rng.randint(300, 1_500) * (turns // 2 + 1)
        usage = Usage(model="demo-model", input_tokens=input_tokens,
                      output_tokens=output_tokens, turns=turns,
                      cost_usd=round(input_tokens * PRICE_IN + output_tokens * PRICE_OUT, 6),
                      cost_source="reported", wall_s=time.monotonic() - started)
        return AgentRun(self.name, status, False, time.monotonic() - started, transcript,
                        claim, usage)


def act(ctx: StageContext, rng: random.Random, success_rate: float) -> str | None:
    """Change the worktree as the seeded agent does; its final message (ending with the
    status line its prompt asks for, if any), or None for a provider failure (nothing
    changed)."""
    message = _act(ctx, rng, success_rate)
    if message is None or "`STATUS: done`" not in ctx.prompt:
        return message
    return message + ("\nSTATUS: abstain" if message.startswith("I could not")
                      else "\nSTATUS: done")


def _act(ctx: StageContext, rng: random.Random, success_rate: float) -> str | None:
    if rng.random() < ERROR_RATE:
        return None
    broad = "## Where you may write" not in ctx.prompt
    retry = "previous attempt failed" in ctx.prompt.lower()
    # a retry shown the harness's evidence does better than a fresh try
    if rng.random() < (min(1.0, success_rate + 0.2) if retry else success_rate):
        for rel, (data, _) in ctx.packet.solution_blobs().items():
            target = ctx.worktree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if broad and rng.random() < 0.4:  # tidies up a file nobody asked about
            (ctx.worktree / "src/ledger/notes.py").write_text("# cleaned up while here\n")
        return "Implemented the change; all tests pass."
    if "I could not" in ctx.prompt and rng.random() < 0.6:
        return "I could not make the planted tests pass inside the writable scope."
    loader = ctx.worktree / LOADER
    text = loader.read_text()
    loader.write_text(re.sub(r"(def load_rows)", "# handles the new format\n\\1", text, count=1))
    return "Done! The change is in and every test passes."


def seeded(ctx: StageContext) -> str:
    """``scripted:andon.demo.experiment:seeded``: the seeded agent through the scripted
    adapter (no usage reported), for running staged.toml with ``andon experiment run``."""
    run = current_run()
    rate = run[2].success_rate if run and run[2].success_rate is not None else 0.5
    rng = random.Random(f"{run[1] if run else 0}:{run[0].slug if run else ''}:{ctx.attempt}")
    claim = act(ctx, rng, rate)
    if claim is None:
        raise ConnectionError("503 from the model provider")
    return claim


def agent_for(cond: Condition, review: bool) -> Agent:
    """The demo's agents: the evaluating reviewer for review stages, else a seeded agent."""
    if review:
        return ScriptedAgent(evaluating_reviewer)
    return SeededAgent(cond.success_rate if cond.success_rate is not None else 0.5)


def fast_config(root: Path) -> None:
    """One red and one hermetic run, no random-order run: the demo stays quick."""
    path = root / CONFIG_NAME
    text = path.read_text()
    for key, value in (("red_runs", "1"), ("hermetic_runs", "1"),
                       ("hermetic_random_order", "false")):
        text = re.sub(rf"^{key} = \S+", f"{key} = {value}", text, count=1, flags=re.M)
    path.write_text(text)
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "commit", "-q", "-am", "demo experiment: fast gates"], cwd=root,
                   env=env, check=True)


def run_experiment_demo(out: Console, where: Path | None = None,
                        packets: list[str] | None = None,
                        conditions: list[str] | None = None,
                        repeats: int | None = None, concurrency: int | None = None) -> int:
    """Build the demo project, run the staged experiment on it, print the comparison against
    A and write the HTML report and the runs CSV beside the project. ``packets``,
    ``conditions`` and ``repeats`` narrow the shipped experiment (the tests use them);
    ``concurrency`` replaces its concurrency.
    Exits 0 when every planned run has a result and the report is written."""
    from ..experiments.compare import compare
    from ..experiments.html import render_html
    from ..experiments.render import render_terminal
    from ..experiments.stored import export_rows, run_table, to_csv
    from ..experiments.stored import status as experiment_status

    root = where or Path(tempfile.mkdtemp(prefix="andon-demo-")) / "ledger"
    out.print(f"[bold]andon demo --experiment[/] — the staged controls A–H on the demo "
              f"packets, scripted agents; project in {root}")
    build_project(root)
    fast_config(root)
    spec = load_spec(SPEC)
    if packets:
        spec.packets = packets
    if conditions:
        spec.conditions = [c for c in spec.conditions if c.name in conditions]
    if repeats:
        spec.repeats = repeats
    if concurrency:
        spec.concurrency = concurrency
    repo = Repo(root)
    store = open_store(repo)
    exp = Experiment(repo, load_config(root), store, spec, agent_for,
                     say=lambda s: out.print(s, markup=False))

    out.print(f"{spec.concurrency} run(s) at a time; each line: runs done/planned and the "
              "time left, estimated from the runs so far", markup=False)

    def heard(key, record, done, planned) -> None:
        eta = (experiment_status(store, spec.name) or {}).get("eta_s")
        left = ("done" if done >= planned else
                f"about {_duration(eta)} left" if eta is not None else "")
        out.print(f"[{done}/{planned}] {key.task} {key.condition} #{key.repeat}: "
                  f"{record['outcome']}" + (f" — {left}" if left else ""), markup=False)
    progress = exp.run(on_run=heard)
    table = run_table(store, spec.name)
    result = compare(table, spec.conditions[0].name, resamples=2_000, seed=spec.seed)
    render_terminal(result, out, 10)
    html = root.parent / "experiment.html"
    html.write_text(render_html(result), encoding="utf-8")
    csv_path = root.parent / "experiment-runs.csv"
    csv_path.write_text(to_csv(export_rows(store, spec.name)), encoding="utf-8")
    out.print(f"report: {html}\nruns: {csv_path} (`andon compare {csv_path} --baseline A`)")
    store.close()
    done = progress.skipped + len(progress.recorded)
    return 0 if done == progress.planned and progress.stopped is None else 1


def _duration(seconds: float) -> str:
    """``seconds`` for people: ``40 s``, ``3 min 10 s``."""
    s = round(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s"
