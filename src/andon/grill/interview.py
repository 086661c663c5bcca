"""The interview: phases ``ask`` → ``review`` → ``write`` → done, one question at a time,
the log saved after every step, so that running the same command again after a crash, a
kill -9 or Ctrl-C resumes where it stopped and never asks an answered question again.

A person answers through an :data:`Answerer`: it gets the question and returns the answer
and whether it is their own correction (True) or the recommendation accepted (False).
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..agents.base import Agent
from ..config import STATE_DIR, Config
from ..errors import UsageError
from ..git.repo import Repo
from . import log as logfile
from .log import AgentRunRecord, Answer, InterviewLog
from .protocol import Done, Question, Written
from .record import commit_decisions, glossary_terms, glossary_with, next_number, render_decisions
from .turn import Material, TurnAsker

Answerer = Callable[[Question, int, str], tuple[str, bool]]
NEXT = {"ask": "review", "review": "write"}
TEXT_CAP = 100_000  # characters of the glossary or DESIGN.md shown to the agent


def accept_all(question: Question, n: int, phase: str) -> tuple[str, bool]:
    """The ``--non-interactive`` answerer: every recommendation accepted."""
    return question.recommended, False


def slug_of(feature: Path) -> str:
    """``docs/Search Box.md`` → ``search-box``: the file's stem, lowercase words and '-'."""
    slug = re.sub(r"[^a-z0-9]+", "-", feature.stem.lower()).strip("-")
    return slug[:60].strip("-") or "feature"


@dataclass(frozen=True)
class Result:
    """Where the interview's outcome is: the branch and commit, the decisions file on the
    branch (repository-relative) and its copy beside the log, the log, what the agent used."""

    branch: str
    commit: str
    decisions_path: str
    decisions_copy: Path
    log_path: Path
    runs: int
    usage: dict[str, Any]


class Interview:
    """One interview about ``feature`` in ``repo``, its log in
    ``.andon/grill/<slug>/log.json``. ``event(kind, data)`` records in the store (optional);
    ``say`` prints progress.

    Raises (from the constructor):
        UsageError: the feature file is missing or empty, its log is unreadable, the log
            belongs to another feature file, or the feature changed since the log began
            (``restart`` starts over instead).
    """

    def __init__(self, repo: Repo, config: Config, agent: Agent, feature: Path, *,
                 slug: str | None = None, restart: bool = False,
                 event: Callable[[str, dict[str, Any]], None] | None = None,
                 say: Callable[[str], None] = lambda s: None):
        self.repo, self.config, self.agent, self.say = repo, config, agent, say
        self.event = event or (lambda kind, data: None)
        feature = feature.resolve()
        if not feature.is_file():
            raise UsageError(f"{feature}: no such feature file")
        data = feature.read_bytes()
        if not data.strip():
            raise UsageError(f"{feature}: the feature file is empty; write the request first")
        self.feature_text = data.decode("utf-8", errors="replace")
        rel = (feature.relative_to(repo.root).as_posix()
               if feature.is_relative_to(repo.root) else str(feature))
        self.slug = slug or slug_of(feature)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,59}", self.slug):
            raise UsageError(f"--slug must be lowercase words joined by '-', got {self.slug!r}")
        self.dir = repo.root / STATE_DIR / "grill" / self.slug
        self.log_path = self.dir / "log.json"
        sha = hashlib.sha256(data).hexdigest()
        self._lock = _hold(self.dir / "lock")
        if restart and self.log_path.exists():
            self.log_path.unlink()
        found = logfile.load(self.log_path)
        if found is not None and found.feature != rel:
            raise UsageError(f"{self.log_path} is the interview about {found.feature}, not "
                             f"{rel}: name this one with --slug")
        if found is not None and found.feature_sha != sha and found.phase != "done":
            raise UsageError(f"{rel} changed since its interview began ({len(found.answers)} "
                             f"answers in {self.log_path}); to start over: andon grill "
                             f"{rel} --restart")
        self.log = found or InterviewLog(id=secrets.token_hex(8), slug=self.slug, feature=rel,
                                         feature_sha=sha, started_at=_now())
        self.resumed = found is not None
        self._workdir: Path | None = None

    def run(self, answer: Answerer) -> Result:
        """Carry the interview to its end and return where its outcome is. The log is
        saved after every answer and every phase change; a KeyboardInterrupt (or any
        exception) leaves it as last saved.

        Raises:
            AgentFailed: the agent gave no valid document for a turn.
            UsageError: the branch exists from another interview.
        """
        log = self.log
        logfile.save(log, self.log_path)
        try:
            while log.phase != "done":
                if log.phase == "write":
                    self._write()
                    continue
                if log.pending is None:
                    if log.questions_in(log.phase) >= self.config.grill.max_questions:
                        self._advance(f"{self.config.grill.max_questions} questions in phase "
                                      f"{log.phase} ([grill] max_questions): moved on")
                        continue
                    doc = self._asker().ask(log)
                    if isinstance(doc, Done):
                        self._advance(None)
                        continue
                    assert isinstance(doc, Question)
                    log.pending = doc
                    logfile.save(log, self.log_path)
                n = len(log.answers) + 1
                given, corrected = answer(log.pending, n, log.phase)
                log.answers.append(Answer(phase=log.phase, question=log.pending,
                                          answer=given, corrected=corrected, at=_now()))
                log.pending = None
                logfile.save(log, self.log_path)
        finally:
            if self._workdir is not None:
                shutil.rmtree(self._workdir.parent, ignore_errors=True)
            self.close()
        return self.result()

    def close(self) -> None:
        """Let another process run this interview (``run`` does it when it ends)."""
        self._lock.close()

    def result(self) -> Result:
        """The outcome of a finished interview (``log.phase == "done"``)."""
        log = self.log
        assert log.branch and log.commit and log.decisions_path and log.decisions_copy
        return Result(log.branch, log.commit, log.decisions_path, Path(log.decisions_copy),
                      self.log_path, len(log.runs), usage_total(log))

    def _advance(self, note: str | None) -> None:
        if note:
            self.log.notes.append(note)
        self.log.phase = NEXT[self.log.phase]  # type: ignore[assignment]
        logfile.save(self.log, self.log_path)
        self.say({"review": "asked: now re-reading the answers for contradictions (review)",
                  "write": "reviewed: now writing the decisions"}[self.log.phase])

    def _write(self) -> None:
        log, grill = self.log, self.config.grill
        if log.written is None:
            doc = self._asker().ask(log)
            assert isinstance(doc, Written)
            log.written = doc
            logfile.save(log, self.log_path)
        if log.decisions_path is None:
            # fixed before the commit: a resume after a crash in between takes the same NNN
            n = next_number(self.repo, "HEAD", grill.decisions_dir.strip("/"))
            log.decisions_path = f"{grill.decisions_dir.strip('/')}/{n:03d}-{log.slug}.md"
            logfile.save(log, self.log_path)
        name = log.decisions_path.rsplit("/", 1)[-1]
        number = int(name.split("-", 1)[0])
        text = render_decisions(log, log.written, number, _title(self.feature_text, log.slug))
        files = {log.decisions_path: text}
        glossary = glossary_with(self._head_text(grill.glossary), log.written,
                                 log.decisions_path)
        if glossary is not None:
            files[grill.glossary] = glossary
        log.branch, log.commit = commit_decisions(
            self.repo, log, files, f"decisions: {name.removesuffix('.md')}")
        copy = self.dir / name
        copy.write_text(text, encoding="utf-8")
        log.decisions_copy = str(copy)
        log.phase = "done"
        logfile.save(log, self.log_path)
        self.event("grill-written", {"slug": log.slug, "feature": log.feature,
                                     "branch": log.branch, "commit": log.commit,
                                     "decisions": log.decisions_path,
                                     "answers": len(log.answers),
                                     "corrected": sum(a.corrected for a in log.answers),
                                     "usage": usage_total(log)})

    def _asker(self) -> TurnAsker:
        if self._workdir is None:
            tmp = Path(tempfile.mkdtemp(prefix=f"andon-grill-{self.slug}-"))
            self._workdir = tmp / "tree"
            self.repo.export("HEAD", self._workdir)
        glossary = self._head_text(self.config.grill.glossary)
        design = self._head_text("DESIGN.md") or self._head_text("docs/DESIGN.md") or ""
        material = Material(self.log.feature, self.feature_text, self.config.grill.glossary,
                            _cap(glossary or ""), _cap(design), glossary_terms(glossary))
        return TurnAsker(self.agent, self.config, self.repo.root, self._workdir,
                         self.dir / "runs", material, self._record)

    def _record(self, run: AgentRunRecord) -> None:
        self.log.runs.append(run)
        logfile.save(self.log, self.log_path)
        self.event("grill-run", {"slug": self.log.slug, **run.model_dump(mode="json")})

    def _head_text(self, path: str) -> str | None:
        data = self.repo.file_bytes("HEAD", path)
        return data.decode("utf-8", errors="replace") if data is not None else None


def usage_total(log: InterviewLog) -> dict[str, Any]:
    """The interview agent's runs summed: tokens and cost where every run reported them
    (None when any run did not: an unknown is not a zero), and wall seconds."""
    total: dict[str, Any] = {"runs": len(log.runs),
                             "wall_s": round(sum(r.duration_s for r in log.runs), 3)}
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        values = [(r.usage or {}).get(key) for r in log.runs]
        numbers = [v for v in values if isinstance(v, (int, float))]
        total[key] = round(sum(numbers), 6) if values and len(numbers) == len(values) else None
    return total


def _title(text: str, slug: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or slug
    return slug


def _cap(text: str) -> str:
    if len(text) <= TEXT_CAP:
        return text
    return text[:TEXT_CAP] + f"\n\n[andon: cut at {TEXT_CAP} characters]"


def _hold(path: Path) -> IO[str]:
    """An exclusive lock on ``path`` for this process's lifetime (the OS drops it when the
    process dies, kill -9 included): two terminals must not interleave one interview's log.
    UsageError when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UsageError(f"another andon grill is running this interview ({path} is "
                         "locked); answer there, or wait until it ends") from None
    return f


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
