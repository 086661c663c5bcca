"""One planning round: the planner agent is asked for a plan document through the adapter
the CLI names — the same adapters, prompt templates (``plan.md.j2``, overridable in ``[agent]
prompt_dir``), sandbox levels and usage records as every stage of an attempt. The agent works
in a plain export of the base (no ``.git``; any file it changes there is refused) and writes
its document to the file named by ``$ANDON_REVIEW_FILE`` or at the end of its reply."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import plain_file, reaper, sandbox
from ..agents import Agent, StageContext
from ..config import Config
from ..git.repo import Repo, manifest
from ..packet import Packet
from ..prompt import render_prompt, template_for
from ..review.contract import extract_json
from .contract import SCHEMA, PlanDocument, PlanRejected, parse

STAGE = "plan"
# a plan document is tens of kilobytes; past this it is not read
PLAN_MAX = 4 << 20


@dataclass(frozen=True)
class Document:
    """A spec or decisions file the planner reads: its repo-relative ``path``, a ``title``."""

    path: str
    title: str
    text: str


@dataclass
class Round:
    """What one planning round gave: the document (None if it broke the contract, then
    ``errors`` says how), the agent's run as recorded (``run``: agent, exit status, seconds,
    usage as a dict, transcript path), and the prompt file it was given."""

    n: int
    document: PlanDocument | None
    errors: list[str] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=dict)
    prompt_file: Path | None = None


def _stage_packet(spec: Path) -> Packet:
    # adapters take a packet (its id goes into ANDON_PACKET_ID): the plan stage's stands in
    return Packet(id="PLAN", slug="plan", goal="draft packets from a spec", source=spec,
                  dir=None, body="", content_sha="plan")


def ask(repo: Repo, config: Config, agent: Agent, base: str, documents: list[Document],
        existing: list[str], problems: list[str], n: int, evidence: Path) -> Round:
    """Run round ``n`` of the planner ``agent`` on an export of ``base``; ``problems`` (the
    previous round's) go into the prompt as evidence. The prompt, the transcript and the
    document are kept under ``evidence`` (``round-N/``). Never raises for what the agent
    did: a crash, silence or a broken document is a Round with ``errors``."""
    ev = evidence / f"round-{n}"
    ev.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="andon-plan-"))
    try:
        tree, out = tmp / "tree", tmp / "out"
        out.mkdir()
        expected = repo.export(base, tree)
        plan_file = out / "plan.json"
        prompt_dir = repo.root / config.agent.prompt_dir if config.agent.prompt_dir else None
        packet = _stage_packet(repo.root / documents[0].path)
        prompt = render_prompt(packet, n, config.andon.packets_dir, None,
                               template_for(STAGE, prompt_dir, None), stage=STAGE,
                               documents=documents, existing=existing, problems=problems,
                               round=n, review_file=str(plan_file),
                               schema=json.dumps(SCHEMA, indent=2))
        prompt_file = ev / "plan.prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        given = out / "plan.prompt.md"  # beside the document: the folder the agent may write
        given.write_text(prompt, encoding="utf-8")
        plan = sandbox.stage_plan(agent.sandbox, config, repo.root, STAGE, tree, tmp, given,
                                  plan_file, [], agent.command)
        run = agent.run(StageContext(packet, STAGE, n, tree, prompt, given, ev,
                                     config.agent.timeout_s, plan_file, plan))
        record = {"agent": run.agent, "exit_status": run.exit_status,
                  "timed_out": run.timed_out, "duration_s": run.duration_s,
                  "usage": run.usage.to_dict() if run.usage else None,
                  "transcript": str(run.transcript_path), "sandbox": run.sandbox}
        after = manifest(tree)
        changed = sorted(p for p in expected.keys() | after.keys()
                         if expected.get(p) != after.get(p))
        if changed:
            return Round(n, None, [f"the planner changed files, which it may not: "
                                   f"{', '.join(changed[:5])}"], record, prompt_file)
        # the whole reply, not the claim (its last lines): a plan is longer than that
        # both the planner's to write (the document even in the sandbox): a link or a FIFO
        # there is not read (plain_file.py)
        try:
            said = plain_file.read_text(run.transcript_path)
        except OSError:
            said = run.claim or ""
        try:
            raw = plain_file.read_text(plan_file, PLAN_MAX)
        except OSError:
            raw = extract_json(said)
        plain_file.write(ev / "plan.json", raw)
        try:
            return Round(n, parse(raw), [], record, prompt_file)
        except PlanRejected as exc:
            return Round(n, None, exc.errors, record, prompt_file)
    finally:
        reaper.discard(tmp)  # deleted in the background, however deep the planner nested
