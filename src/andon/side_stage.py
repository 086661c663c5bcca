"""One agent stage outside any attempt that answers with one JSON document.

The interview (``andon grill``) and the context labeller (``andon context --label-with``)
ask an agent adapter a question whose answer is a document, not a change. Such a stage goes
through the same adapters, usage accounting and sandbox plan as every stage of an attempt
(``sandbox.stage_plan``, as a reviewer: its working folder read-only, only the folder of its
answer writable). The agent writes its document to ``$ANDON_REVIEW_FILE`` (the review
stages' variable, so every adapter already passes it) or ends its reply with it (the last
fenced ``json`` block, else the whole reply: ``review.contract.extract_json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import plain_file, sandbox
from .agents.base import Agent, AgentRun, StageContext
from .config import Config
from .packet import Packet
from .review.contract import extract_json

# an answer document is a few kilobytes; past this it is not read
ANSWER_MAX = 1 << 20


@dataclass(frozen=True)
class Answer:
    """What the stage left: the adapter's record and the raw document text ('' for none)."""

    run: AgentRun
    document: str


def ask(agent: Agent, config: Config, repo_root: Path, packet: Packet, stage: str, n: int,
        workdir: Path, prompt: str, answer_file: Path, evidence: Path) -> Answer:
    """Run ``agent`` once in ``workdir`` (read-only to it) with ``prompt``; its document is
    read from ``answer_file`` (a file in a folder beside ``workdir``, the one it may write;
    the prompt is written beside it) or from its reply. ``evidence`` (outside the agent's
    sight) gets the prompt, the transcript and the document as ``answer.json``. Never raises
    for what the agent did (a crash, a timeout, silence: recorded in the run, and an empty
    document is the caller's to judge)."""
    io = answer_file.parent
    io.mkdir(parents=True, exist_ok=True)
    answer_file.unlink(missing_ok=True)
    given = io / "prompt.md"
    plain_file.write(given, prompt)
    evidence.mkdir(parents=True, exist_ok=True)
    plain_file.write(evidence / "prompt.md", prompt)
    plan = sandbox.stage_plan(agent.sandbox, config, repo_root, stage, workdir,
                              workdir.parent, given, answer_file, [], agent.command)
    run = agent.run(StageContext(packet, stage, n, workdir, prompt, given, evidence,
                                 config.agent.timeout_s, answer_file, plan))
    try:  # the agent's to write: a link or a FIFO there is not read (plain_file.py)
        raw = plain_file.read_text(answer_file, ANSWER_MAX)
    except OSError:
        raw = extract_json(run.claim or "")
    plain_file.write(evidence / "answer.json", raw)
    return Answer(run, raw)
