"""One review stage of an attempt: a fresh export of the candidate's files (no .git; without
the tests for ``review-correctness``; :mod:`andon.review.export`), the reviewer agent,
validation of its document (asked again on a broken one, up to ``[stages] review_max_asks``),
and the decision of :mod:`andon.review.contract`. Any file the reviewer changes or ref it
moves is tamper."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import plain_file, reaper
from ..agents.base import AgentRun, last_line
from ..config import Config
from ..gates.base import Finding, GateResult, Layer
from ..git.repo import Repo
from ..packet import Packet, path_matches
from ..store import StoreProtocol
from .contract import (
    NO_DOCUMENT,
    SCHEMA,
    ReviewOutcome,
    ReviewRejected,
    decide,
    extract_json,
    holds_document,
    validate,
)
from .export import export_tree

# a review document is a few kilobytes; past this the file is not read
REVIEW_FILE_MAX = 1 << 20


@dataclass(frozen=True)
class ReviewInput:
    """What a review stage needs from its attempt, and no more: the stage knows nothing of
    :mod:`andon.attempt` (which builds this), so the two do not import each other.

    ``run_agent(stage, worktree=, review_file=, evidence_dir=, prompt_vars=)`` runs the
    reviewer agent the attempt's way (prompt, budget, guard) and returns its run.
    """

    repo: Repo
    config: Config
    packet: Packet
    store: StoreProtocol
    attempt_id: int
    start_stage: str | None      # where the attempt started; a broken review sends it back there
    stages: list[str]            # the packet's stages, in order
    plant_sha: str
    candidate_sha: str
    evidence_dir: Path
    red_gates: list[str]         # the attempt's gates that are not green, by name
    run_agent: Callable[..., AgentRun]
    worktree: Path | None = None  # the candidate's files there are linked into the export


class Reviewer:
    """One review stage: a fresh export of the candidate's files, the reviewer agent,
    validation of its document (asked again on a broken one), and the decision."""

    def __init__(self, given: ReviewInput, stage: str):
        self.a, self.stage = given, stage

    def run(self) -> GateResult:
        a, stage = self.a, self.stage
        repo, cand = a.repo, a.candidate_sha
        # A plain export, not a worktree: no .git inside, so review-correctness cannot
        # `git show` the tests it must not see, and no reviewer can commit anything.
        tmp = Path(tempfile.mkdtemp(prefix=f"andon-{a.packet.id}-{stage}-"))
        wt = tmp / "tree"
        try:
            # the packets folder holds every packet's planted (and hidden) files, too
            packets = a.config.andon.packets_dir.strip("/")
            planted = [f"{packets}/**/plant/**", f"{packets}/**/hidden/**"]

            def test_like(p: str) -> bool:
                return (p in a.packet.plant_files
                        or path_matches(p, a.config.stages.test_paths)
                        or path_matches(p, planted))

            hide = stage == "review-correctness"
            exported = export_tree(repo, cand, wt, keep=lambda p: not (hide and test_like(p)),
                                   linked_from=a.worktree)
            diff = self._diff(test_like, with_tests=not hide)
            stages = [s for s in a.stages if s in ("atdd", "implement")]
            errors: list[str] = []
            for ask in range(1, a.config.stages.review_max_asks + 1):
                # beside the export, outside the checkout; kept in the evidence afterwards
                review_file = tmp / f"{stage}.review.json"
                review_file.unlink(missing_ok=True)
                run = a.run_agent(stage, worktree=wt, review_file=review_file,
                                  evidence_dir=a.evidence_dir if ask == 1
                                  else a.evidence_dir / f"{stage}-ask{ask}",
                                  prompt_vars={
                    "diff": diff, "schema": json.dumps(SCHEMA, indent=2),
                    "review_file": str(review_file), "revise_stages": stages,
                    "retry_errors": errors})
                changed = exported.changed()  # by stat; only changed entries are read
                if changed:
                    return GateResult(stage, "fail", f"the {stage} reviewer changed files: "
                                      f"{', '.join(changed)}", "permission",
                                      [Finding("tamper", f"reviewer changed {p}", path=p)
                                       for p in changed])
                # the reviewer wrote it: a FIFO or a link there is neither waited on nor
                # followed (plain_file.py)
                unread = None
                try:
                    written: bytes | None = plain_file.read(review_file, REVIEW_FILE_MAX)
                except FileNotFoundError:
                    written = None
                except OSError as exc:
                    written, unread = None, f"$ANDON_REVIEW_FILE was not read: {exc}"
                raw = (written.decode("utf-8", errors="replace") if written is not None
                       else extract_json(run.claim or ""))
                if written is not None:
                    kept = a.evidence_dir if ask == 1 else a.evidence_dir / f"{stage}-ask{ask}"
                    kept.mkdir(parents=True, exist_ok=True)
                    plain_file.write(kept / review_file.name, written)
                try:
                    if unread:
                        raise ReviewRejected([unread])
                    if written is None and not holds_document(run.claim or ""):
                        raise ReviewRejected([NO_DOCUMENT + _how_it_ended(run)])
                    doc = validate(raw, a.packet, self._line_count, stages)
                except ReviewRejected as exc:
                    errors = exc.errors
                    a.store.add_review(a.attempt_id, stage, ask, raw, errors)
                    continue
                out = decide(doc, a.packet, a.red_gates)
                a.store.add_review(a.attempt_id, stage, ask, raw, [], doc.model_dump(),
                                   doc.decision, out.decision, out.revise_stage,
                                   out.downgraded_because)
                return self._result(out)
            return GateResult(stage, "fail", f"no valid review after {ask} asks: "
                              f"{'; '.join(errors)}", "verifier",
                              [Finding("invalid-review", e) for e in errors],
                              details={"revise_stage": a.start_stage or "implement"})
        finally:
            reaper.discard(tmp)  # deleted in the background

    def _result(self, out: ReviewOutcome) -> GateResult:
        doc = out.document
        verdicts = {v.invariant: v.verdict for v in doc.verdicts}
        details: dict[str, Any] = {"revise_stage": out.revise_stage, "verdicts": verdicts,
                   "downgraded_because": out.downgraded_because}
        if out.decision == "accept":
            return GateResult(self.stage, "pass", f"accepted; verdicts: "
                              f"{_verdict_summary(verdicts)}", details=details)
        findings = [Finding("violated" if v.verdict == "violated" else v.verdict,
                            f"invariant {v.invariant} {v.verdict}: {v.reason}",
                            path=v.evidence) for v in doc.verdicts if v.verdict != "held"]
        findings += [Finding(f.severity, f.message, path=f.location) for f in doc.findings
                     if f.severity in ("blocker", "major")]
        # a reviewer that gives no summary: its verdicts say what to fix, not just "revise"
        why = ("; ".join(out.downgraded_because) or doc.summary
               or f"the reviewer asks for a revision; verdicts: {_verdict_summary(verdicts)}")
        layer: Layer = "test" if out.revise_stage == "atdd" else "code"
        return GateResult(self.stage, "fail", f"revise → {out.revise_stage}: {why}", layer,
                          findings, details=details)

    def _diff(self, test_like: Callable[[str], bool], with_tests: bool) -> str:
        a = self.a
        base = a.plant_sha
        paths = [c.path for c in a.repo.changes(base, a.candidate_sha)]
        code = [p for p in paths if not test_like(p)]
        tests = [p for p in paths if test_like(p)] if with_tests else []
        parts = []
        for group in (code, tests):  # the code first, the tests last
            if group:
                parts.append(a.repo.diff(base, a.candidate_sha, group))
        return "\n".join(parts).strip() or "(no change)"

    def _line_count(self, path: str) -> int | None:
        data = self.a.repo.file_bytes(self.a.candidate_sha, path)
        if data is None:
            return None
        return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _how_it_ended(run: AgentRun) -> str:
    """`` (it exited 127: <its last line>)`` for a reviewer that failed, else ``""``: what it
    printed last says why it wrote nothing (a tool not found, a traceback)."""
    if run.exit_status in (0, None):
        return ""
    said = last_line(run.claim)
    return f" (it exited {run.exit_status}" + (f": {said})" if said else ")")


def _verdict_summary(verdicts: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in verdicts.items()) or "no invariants"
