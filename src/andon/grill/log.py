"""The interview's log on disk: ``.andon/grill/<slug>/log.json``, written whole and atomically
after every change (a temporary file, fsync, rename), so a kill -9 at any moment leaves
either the log before the change or the log after it — never half of one.

The log is the interview's only state: resuming reads it and carries on; a question that was
asked but not answered (``pending``) is shown again without asking the agent again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..errors import UsageError
from .protocol import Phase, Question, Written

LOG_VERSION = 1


class Answer(BaseModel):
    """One answered question: the agent's question, and what the person settled on."""

    phase: Literal["ask", "review"]
    question: Question
    answer: str
    corrected: bool          # True: the person typed their own answer instead of Enter
    at: str                  # ISO-8601 UTC


class AgentRunRecord(BaseModel):
    """One run of the interview agent (one ask of one turn): what the harness observed."""

    phase: Phase
    turn: int
    ask: int
    agent: str
    exit_status: int | None
    timed_out: bool
    duration_s: float
    evidence_dir: str
    usage: dict[str, Any] | None
    errors: list[str] = []   # why its document was rejected; empty when it was valid


class InterviewLog(BaseModel):
    """Everything the interview has settled so far (``log.json``)."""

    version: int = LOG_VERSION
    id: str                  # random; the commit's trailer, to know our own commit again
    slug: str
    feature: str             # repository-relative path of the feature file
    feature_sha: str         # sha256 of its bytes when the interview began
    started_at: str
    phase: Phase | Literal["done"] = "ask"
    answers: list[Answer] = []
    pending: Question | None = None
    written: Written | None = None
    runs: list[AgentRunRecord] = []
    notes: list[str] = []
    decisions_path: str | None = None   # repository-relative, on the branch
    decisions_copy: str | None = None   # absolute: the copy kept beside this log
    branch: str | None = None
    commit: str | None = None

    def asked(self) -> dict[str, str]:
        """Every topic of the log (answered or pending) → its phase."""
        topics: dict[str, str] = {a.question.topic: a.phase for a in self.answers}
        if self.pending is not None:
            topics[self.pending.topic] = self.phase
        return topics

    def questions_in(self, phase: str) -> int:
        return sum(1 for a in self.answers if a.phase == phase)


def load(path: Path) -> InterviewLog | None:
    """The log at ``path``, or None when there is none.

    Raises:
        UsageError: the file exists but is not a log this version of andon wrote (named
            with what is wrong, and how to start over).
    """
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("version") != LOG_VERSION:
            raise UsageError(f"{path}: log version {data.get('version')!r}, expected "
                             f"{LOG_VERSION}; start over with --restart")
        return InterviewLog.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise UsageError(f"{path}: not an interview log ({str(exc).splitlines()[0]}); "
                         "start over with --restart") from None


def save(log: InterviewLog, path: Path) -> None:
    """Write ``log`` to ``path`` atomically (temporary file in the same folder, fsync,
    rename), so a reader — or a resume after kill -9 — sees the old log or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".log-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(log.model_dump_json(indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # the rename itself survives a crash only once the folder is synced
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
