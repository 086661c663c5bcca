"""One run of an experiment: one (packet, condition, repeat), one attempt (or one per retry),
judged by the gates and review of ``andon run``, never merged.

The attempt runs as ``andon validate``'s do (:mod:`andon.validate`): in a clone of the
repository at the experiment's base commit, with a store of its own, the packets it
``requires`` applied first (plant and reference solution). Nothing the user owns changes; the
run's evidence (prompts, transcripts, gate logs) is kept under the experiment's folder.

Outcome (docs/experiments.md, "Outcomes"):

- ``resolved``: every gate passed (and every review accepted);
- ``error``: the harness, the environment or the agent's provider failed — the first failing
  gate is in layer ``harness`` or ``environment`` (the ``agent`` gate: the agent could not work
  at all), or andon itself failed around the attempt. Such a run says nothing about the
  condition; it is reported apart and retried on request (``--retry-errors``);
- ``unresolved``: anything else, the run's ``budget`` stop included (spending too much is the
  condition's failure, not the harness's).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import budget as budget_mod
from ..agents import EXTERNAL, Agent, AgentRun, StageContext, external_class, make_agent
from ..attempt import Attempt
from ..config import Config
from ..gates.base import GateResult
from ..git.repo import Repo
from ..packet import Packet
from ..retry import previous_failure
from ..store import Store, now
from ..usage import totals
from ..validate import _requires_order
from .observe import observe
from .spec import Condition, Spec
from .tooltime import tool_seconds

ERROR_LAYERS = ("harness", "environment")
_current = threading.local()


@dataclass(frozen=True)
class RunKey:
    """Which run: the packet (``task``), the condition and the repeat (0-based)."""

    task: str
    condition: str
    repeat: int

    @property
    def slug(self) -> str:
        return f"{self.task}.{self.condition}.{self.repeat}"


def current_run() -> tuple[RunKey, int, Condition] | None:
    """(run, experiment seed, condition) of the run this thread is carrying out, for agents
    that run inside andon (the demo's seeded agents); None outside a run."""
    return getattr(_current, "run", None)


class MeteredAgent(Agent):
    """Wraps a condition's agent: adds up each stage's usage and stops the run before a
    stage once the per-run budget (USD or input + output tokens) is spent."""

    def __init__(self, inner: Agent, max_usd: float | None, max_tokens: int | None):
        self.inner, self.max_usd, self.max_tokens = inner, max_usd, max_tokens
        self.name, self.network, self.command = inner.name, inner.network, inner.command
        self.cost = 0.0
        self.tokens = 0

    def run(self, ctx: StageContext) -> AgentRun:
        over = []
        if self.max_usd is not None and self.cost >= self.max_usd:
            over.append(f"{self.cost:.4f} USD of {self.max_usd} USD")
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            over.append(f"{self.tokens} tokens of {self.max_tokens}")
        if over:
            raise budget_mod.Exceeded(GateResult(
                "budget", "fail", f"the experiment's per-run budget is spent ({'; '.join(over)})"
                f": the {ctx.stage} stage did not start", "harness",
                details={"cost_usd": self.cost, "tokens": self.tokens}))
        run = self.inner.run(ctx)
        if run.usage is not None:
            self.cost += run.usage.cost_usd or 0.0
            self.tokens += (run.usage.input_tokens or 0) + (run.usage.output_tokens or 0)
        return run


def condition_config(config: Config, spec: Spec, cond: Condition) -> Config:
    """andon.toml's settings with the condition's: model and extra arguments in
    ``[agents.<adapter>]``, prompt template or folder in ``[agent]`` (absolute paths)."""
    agent = config.agent.model_copy(update={
        k: str(spec.path(v)) for k, v in (("prompt_template", cond.prompt_template),
                                          ("prompt_dir", cond.prompt_dir)) if v})
    agent = agent.model_copy(update={"env_passthrough": [*agent.env_passthrough, *cond.env]})
    agents = dict(config.agents)
    name = cond.agent.partition(":")[0]
    if cond.model or cond.extra_args or cond.env:
        from ..config.model import AgentSettings
        if name in EXTERNAL:
            s = agents.get(name) or AgentSettings()
            agents[name] = s.model_copy(update={
                "model": cond.model or s.model,
                "extra_args": [*(s.extra_args or []), *cond.extra_args],
                "env_passthrough": [*(s.env_passthrough or []), *cond.env]})
    return config.model_copy(update={"agent": agent, "agents": agents})


def build_agent(spec: Spec, cond: Condition, config: Config, reviewer: bool = False) -> Agent:
    """The condition's adapter (or reviewer), as ``andon run --agent`` would build it; the
    condition's ``env`` is given to it. Raises InvalidValue (adapter unknown or unusable)."""
    which = (cond.reviewer or cond.agent) if reviewer else cond.agent
    command = cond.command
    if reviewer and cond.reviewer_command:  # a command reviewer of its own
        which, command = cond.reviewer or "command", cond.reviewer_command
    if command and cond.env and which.partition(":")[0] == "command":
        import shlex
        command = "".join(f"export {k}={shlex.quote(v)}; " for k, v in cond.env.items()) \
            + command
    name = which.partition(":")[0]
    if cond.env and name in EXTERNAL:
        # the CLI is looked for on the condition's PATH when it gives one
        agent = make_agent("command", "true", config)  # the [agent] network check, once
        cli = external_class(name)(config.agents.get(name), config.prices,
                                   {**os.environ, **cond.env})
        cli.network = agent.network
        return cli
    return make_agent(which, command, config)


@dataclass
class RunInputs:
    """What every run of one experiment shares."""

    repo: Repo
    config: Config
    spec: Spec
    packets: dict[str, Packet]
    base_sha: str
    baseline: set[str]
    root: Path            # the experiment's folder: evidence/<run>/, tmp/<run>/
    agent_factory: Callable[[Condition, bool], Agent] | None = None


def execute(inputs: RunInputs, key: RunKey) -> dict[str, Any]:
    """Carry out one run; its record (``outcome``, ``gates``, ``usage``, ``observations``,
    times, transcripts, ``attempts``; docs/experiments.md). Never raises for what happened
    inside the run: andon failing around it is an ``error`` outcome with the traceback."""
    started, t0 = now(), time.monotonic()
    tmp = inputs.root / "tmp" / key.slug
    ev = inputs.root / "evidence" / key.slug
    for d in (tmp, ev):
        shutil.rmtree(d, ignore_errors=True)  # a run killed before it finished left these
    ev.mkdir(parents=True)
    cond = inputs.spec.condition(key.condition)
    _current.run = (key, inputs.spec.seed, cond)
    store: Store | None = None
    try:
        clone = Repo(inputs.repo.clone_at(inputs.base_sha, tmp / "repo"))
        store = Store(tmp / "store.db")
        record = _attempts(inputs, key, cond, clone, store, ev)
    except Exception as exc:  # noqa: BLE001 — andon failing is the run's error, recorded
        (ev / "harness-error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        record = harness_error(f"andon failed around the run: {type(exc).__name__}: {exc}")
    finally:
        _current.run = None
        if store is not None:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    record.update(started_at=started, wall_s=round(time.monotonic() - t0, 3),
                  evidence_dir=str(ev))
    return record


def harness_error(summary: str) -> dict[str, Any]:
    """The record of a run that andon failed around (outcome ``error``, layer
    ``harness``); the caller adds the times and the evidence folder."""
    return {"outcome": "error", "gates": [], "stage_runs": [], "attempts": 0,
            "failure": {"gate": "harness", "layer": "harness", "summary": summary}}


def _attempts(inputs: RunInputs, key: RunKey, cond: Condition, clone: Repo, store: Store,
              ev: Path) -> dict[str, Any]:
    packet = inputs.packets[key.task]
    config = condition_config(inputs.config, inputs.spec, cond)
    base = inputs.base_sha
    # what the packet needed: the files its reference solution and its plant touch
    needed = set(packet.solution_blobs()) | set(packet.plant_blobs()) \
        if packet.solution_files else None
    for dep in _requires_order(packet, inputs.packets):
        required = inputs.packets.get(dep)
        if required is not None and required.solution_files:
            base = clone.plant(base, {**required.plant_blobs(), **required.solution_blobs()},
                               f"experiment: {dep} (plant and reference solution)")
    make = inputs.agent_factory or (lambda c, review: build_agent(inputs.spec, c, config,
                                                                  review))
    b = inputs.spec.budget
    worker = MeteredAgent(make(cond, False), b.run_usd, b.run_tokens)
    reviewer = MeteredAgent(make(cond, True), None, None) if cond.reviewer else worker
    store.upsert_packet(packet.id, packet.slug, str(packet.source), packet.content_sha,
                        packet.model_dump(mode="json", by_alias=True))
    gates: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    result = None
    row: dict[str, Any] = {}
    for n in range(1 + cond.retries):
        row = store.new_attempt(packet.id, worker.name, 0)
        wt = clone.root.parent / f"wt{n}"
        a_ev = ev / f"attempt-{row['n']}"
        a_ev.mkdir(parents=True)
        store.update_attempt(row["id"], branch=f"andon/{packet.id}/{row['n']}",
                             worktree=str(wt), base_sha=base, evidence_dir=str(a_ev))
        row = store.attempt(row["id"])
        attempt = Attempt(clone, config, store, packet, row,
                          lambda stage: reviewer if stage.startswith("review") else worker,
                          inputs.baseline, previous_failure(store, packet.id, packet), wt, a_ev,
                          lambda g: None, lambda state, kind: None)
        if cond.stages:
            attempt.stages = list(cond.stages)
        try:
            result = attempt.run()
        finally:
            clone.remove_worktree(wt)
        gates += [{"attempt": row["n"], "gate": g.gate, "status": g.status, "layer": g.layer,
                   "summary": g.summary,
                   "findings": [{"kind": f.kind, "message": f.message[:300], "path": f.path,
                                 "test_id": f.test_id} for f in g.findings]}
                  for g in result.gates]
        runs += [{"attempt": row["n"], **{k: s[k] for k in (
            "stage", "agent", "exit_status", "timed_out", "duration_s", "transcript_path",
            "claim", "usage")}} for s in store.stage_runs(row["id"])]
        failure = result.failure
        if failure is None or _is_error(failure) or n == cond.retries:
            break
        # what the next attempt's prompt shows (retry.previous_failure reads failed
        # attempts); the packet's own state machine is not involved: nothing merges here
        store.update_attempt(row["id"], state="failed", ended_at=now(),
                             failure_layer=failure.layer, reason=failure.summary)
    assert result is not None  # at least one attempt ran
    failure = result.failure
    outcome = "resolved" if failure is None else "error" if _is_error(failure) \
        else "unresolved"
    changed = None
    if result.candidate_sha:
        changed = _changed_lines(clone, row["plant_sha"] or base, result.candidate_sha)
    events = [e["kind"] for e in store.events(packet.id)]
    usage = totals([s["usage"] for s in runs])
    turns = [s["usage"].get("turns") for s in runs if s["usage"]]
    return {
        "outcome": outcome, "attempts": len({g["attempt"] for g in gates} | {1}),
        "failure": None if failure is None else {
            "gate": failure.gate, "layer": failure.layer, "summary": failure.summary},
        "gates": gates, "stage_runs": runs,
        "usage": {**usage, "turns": sum(t for t in turns if t) if any(turns) else None,
                  "cost_sources": sorted({s["usage"].get("cost_source", "unknown")
                                          for s in runs if s["usage"]})},
        "agent_s": round(sum(s["duration_s"] or 0 for s in runs), 3),
        "tool_s": _tool_s(runs),
        "transcripts": [s["transcript_path"] for s in runs],
        "observations": observe(outcome, gates, runs, changed,
                                needed, events),
    }


def _tool_s(runs: list[dict[str, Any]]) -> float | None:
    """Seconds in tool calls over the stage runs' transcripts (experiments/tooltime.py);
    None when any stage has no transcript that says."""
    paths = [s["transcript_path"] for s in runs]
    if not paths or None in paths:
        return None
    try:
        return tool_seconds(Path(p) for p in paths)
    except Exception:  # noqa: BLE001 — a measurement never turns a run into an error
        return None


def _is_error(failure: GateResult) -> bool:
    return failure.gate != "budget" and (failure.layer in ERROR_LAYERS
                                         or failure.status == "error")


def _changed_lines(repo: Repo, base: str, head: str) -> dict[str, int]:
    """Path → lines added + removed between two commits (a binary file counts 1)."""
    out: dict[str, int] = {}
    for line in repo.git("diff", "--numstat", "--no-renames", base, head).splitlines():
        added, removed, path = line.split("\t", 2)
        out[path] = (int(added) + int(removed)) if added != "-" else 1
    return out

