"""One turn of the interview: the prompt, the interview agent, its document validated.

The agent runs in a plain export of the repository's HEAD (no ``.git``, so it can read the
code but commits nothing and never touches the user's checkout), with the prompt on stdin
and in ``$ANDON_PROMPT_FILE``; it writes its document to ``$ANDON_REVIEW_FILE`` (the
variable review stages use) or ends its reply with it. A document that breaks the protocol
is evidence: the agent is asked again with the errors in its prompt, up to
``[grill] max_asks`` times; then :class:`AgentFailed`. Every run is recorded in the log
(usage as the adapter reported it) and as a ``grill-run`` event in the store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import budget, side_stage
from ..agents.base import Agent
from ..config import Config
from ..errors import AndonError
from ..packet import Packet
from ..prompt import render_prompt, template_for
from .log import AgentRunRecord, InterviewLog
from .protocol import (
    SCHEMAS,
    Done,
    Phase,
    Question,
    TurnRejected,
    Written,
    parse_turn,
)

STAGE = "grill"


class AgentFailed(AndonError):
    """The interview agent gave no valid turn document in ``[grill] max_asks`` asks;
    ``errors`` are the last document's problems. The log is left as it was before the turn."""

    def __init__(self, message: str, errors: list[str]):
        self.errors = errors
        super().__init__(message)


@dataclass(frozen=True)
class Material:
    """What every turn shows the agent besides the log: the feature text and path, and the
    glossary and DESIGN.md texts of HEAD ('' when absent), and the glossary's terms."""

    feature_path: str
    feature_text: str
    glossary_path: str
    glossary_text: str
    design_text: str
    glossary_terms: tuple[str, ...]


@dataclass
class TurnAsker:
    """Asks the interview agent for one turn; ``record(run)`` stores each run's record."""

    agent: Agent
    config: Config
    repo_root: Path
    workdir: Path            # the export of HEAD the agent runs in
    evidence: Path           # .andon/grill/<slug>/runs
    material: Material
    record: Callable[[AgentRunRecord], None]

    def ask(self, log: InterviewLog) -> Question | Done | Written:
        """The agent's next valid document for ``log.phase``.

        Raises:
            AgentFailed: no valid document after ``[grill] max_asks`` asks.
        """
        phase: Phase = log.phase  # type: ignore[assignment]  # never "done" here
        turn = len(log.answers) + 1 if phase != "write" else 0
        errors: list[str] = []
        asks = self.config.grill.max_asks
        for ask in range(1, asks + 1):
            ev = self.evidence / f"{len(log.runs) + 1:03d}-{phase}-{turn}-ask{ask}"
            ev.mkdir(parents=True, exist_ok=True)
            # its answer lives beside the export, the one folder it may write under the
            # sandbox (the checkout, so .andon/, is hidden from it)
            turn_file = self.workdir.parent / "io" / "turn.json"
            prompt = self._prompt(log, phase, turn_file, errors)
            answer = side_stage.ask(self.agent, self.config, self.repo_root, self._packet(log),
                                    STAGE, turn or 1, self.workdir, prompt, turn_file, ev)
            run, raw = answer.run, answer.document
            try:
                doc = parse_turn(raw, phase, log.asked(), self.material.glossary_terms)
                errors = []
            except TurnRejected as exc:
                errors = exc.errors
            self.record(AgentRunRecord(
                phase=phase, turn=turn, ask=ask, agent=run.agent, exit_status=run.exit_status,
                timed_out=run.timed_out, duration_s=round(run.duration_s, 3),
                evidence_dir=str(ev), usage=run.usage.to_dict() if run.usage else None,
                errors=errors))
            # the whole interview is one attempt for [budgets.attempt], as the plan rounds are
            stop = budget.judge("attempt", self.config.budgets.attempt,
                                [r.model_dump() for r in log.runs], False)
            if stop is not None:
                raise AgentFailed(f"the interview stopped: {stop.summary}; the answers so far "
                                  "are kept (raise [budgets.attempt] in andon.toml, then "
                                  "andon grill again)", [stop.summary])
            if not errors:
                return doc
        raise AgentFailed(f"the interview agent gave no valid {phase} document in {asks} "
                          f"asks; last problems: {'; '.join(errors)} (evidence in "
                          f"{self.evidence})", errors)

    def _prompt(self, log: InterviewLog, phase: Phase, turn_file: Path,
                errors: list[str]) -> str:
        m = self.material
        schema = (SCHEMAS["write"] if phase == "write"
                  else {"oneOf": [SCHEMAS["question"], SCHEMAS["done"]]})
        state = {"phase": phase, "feature": m.feature_path,
                 "glossary_terms": list(m.glossary_terms),
                 "answers": [a.model_dump(mode="json") for a in log.answers]}
        prompt_dir = self.config.agent.prompt_dir
        template = template_for(STAGE, self.repo_root / prompt_dir if prompt_dir else None,
                                None)
        return render_prompt(
            self._packet(log), 1, self.config.andon.packets_dir, template_path=template,
            stage=STAGE, phase=phase, feature_path=m.feature_path,
            feature_text=m.feature_text, glossary_path=m.glossary_path,
            glossary_text=m.glossary_text, design_text=m.design_text, answers=log.answers,
            turn_file=str(turn_file), schema=json.dumps(schema, indent=2),
            retry_errors=errors, state=json.dumps(state, indent=2))

    def _packet(self, log: InterviewLog) -> Packet:
        # Adapters are written for packets (ids in the environment, names of files); the
        # interview is none, so it gets a stand-in naming the feature.
        text = self.material.feature_text
        return Packet.model_validate({
            "id": "grill", "slug": log.slug, "goal": f"interview about {log.feature}",
            "source": self.repo_root / log.feature, "dir": None, "body": text,
            "content_sha": hashlib.sha256(text.encode()).hexdigest()})

