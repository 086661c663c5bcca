"""``andon validate``: each packet judged with its reference solution as the agent.

A packet is worth running only if its planted tests tell a good change from a bad one: red on
the base, every time, and green with a known-good change (as SWE-bench validates its tasks with
gold patches). Here that change is the packet's ``solution/`` tree, and the agent is
:class:`ReferenceAgent`, which copies it into the worktree. Everything else is one ordinary
attempt (:class:`andon.attempt.Attempt`): plant, ``red``, the agent's stages, every gate after
implement — with the review stages left out (a reviewer says nothing about the packet).

Nothing the user owns changes: the attempts run in a temporary clone of the repository at the
integration head (``git clone --shared``: objects are read from the user's store, never written
there), with a store of their own, in a temporary folder removed afterwards (kept with
``keep``). No branch, no working-tree file, no row of ``.andon/andon.db`` is touched; no
validation record is stored (run ``andon validate`` again to know again).

A packet that ``requires`` others is validated where ``andon run`` would run it: on the head
with the plant and solution of each required packet (transitively, dependencies first) applied
as commits. A required packet without a solution is named in ``not_applied``; the packet is
then validated on what could be applied.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agents import Agent, AgentRun, StageContext
from .attempt import REVIEW_STAGES, Attempt
from .config import Config
from .errors import AndonError
from .gates import preflight
from .gates.base import Finding, GateResult
from .git.repo import Repo
from .packet import Packet, path_matches
from .store import Store, StoreProtocol

# a packet invalid before any gate ran is named by one of these instead of a gate
NO_SOLUTION, NO_TESTS, SETUP = "solution", "red", "setup"
FIRST_FINDINGS = 5


class ReferenceAgent(Agent):
    """The agent of a validation: writes the packet's ``solution/`` files into the worktree.

    With an ``atdd`` stage, that stage writes only the solution's files under
    ``test_paths`` and ``implement`` writes the rest; without one, ``implement`` writes all.
    A file is replaced whole (bytes and executable bit, as loaded with the packet).
    """

    name = "reference"  # runs inside andon, like the scripted agent: network stays "on"

    def __init__(self, packet: Packet, test_paths: Sequence[str]):
        self.packet, self.test_paths = packet, list(test_paths)
        self.refused: list[str] = []  # "solution/<rel>: why", files not written

    def _refusal(self, worktree: Path, rel: str) -> str | None:
        """Why ``rel`` must not be written into ``worktree``, or None. A ``.git`` component
        is a path no commit can hold (and writes git's own files); a folder on the way that is
        a symbolic link would carry the write outside the worktree."""
        parts = rel.split("/")
        if ".git" in parts:
            return "a path with a .git component, which no commit can hold"
        for i in range(1, len(parts)):
            folder = worktree.joinpath(*parts[:i])
            if folder.is_symlink():
                return (f"{'/'.join(parts[:i])} is a symbolic link in the repository: the "
                        "file would be written where it points, not in the worktree")
        return None

    def run(self, ctx: StageContext) -> AgentRun:
        started = time.monotonic()
        written = []
        for rel, (data, executable) in self.packet.solution_blobs().items():
            if ctx.stage == "atdd" and not path_matches(rel, self.test_paths):
                continue
            why = self._refusal(ctx.worktree, rel)
            if why is not None:
                self.refused.append(f"solution/{rel}: {why}")
                continue
            target = ctx.worktree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.write_bytes(data)
            target.chmod(0o755 if executable else 0o644)
            written.append(rel)
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        claim = f"wrote the reference solution's {len(written)} file(s): {', '.join(written)}"
        transcript.write_text(claim + "\n", encoding="utf-8")
        return AgentRun(agent=self.name, exit_status=0, timed_out=False,
                        duration_s=time.monotonic() - started, transcript_path=transcript,
                        claim=claim)


@dataclass
class Validation:
    """The verdict on one packet. ``failed_gate`` is the first gate that did not pass (or
    ``solution``: no ``solution/``; ``red`` with no gate run: no planted tests; ``setup``: the
    required packets could not be applied); ``findings`` its first findings."""

    packet_id: str
    valid: bool
    summary: str
    failed_gate: str | None = None
    layer: str | None = None
    findings: list[Finding] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)
    seconds: float = 0.0
    evidence_dir: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """The keys of ``andon validate --json`` per packet (docs/validate.md)."""
        return {
            "id": self.packet_id, "valid": self.valid, "failed_gate": self.failed_gate,
            "layer": self.layer, "summary": self.summary,
            "findings": [{"kind": f.kind, "message": f.message, "path": f.path,
                          "test_id": f.test_id, "line": f.line} for f in self.findings],
            "gates": [{"gate": g.gate, "status": g.status, "layer": g.layer,
                       "summary": g.summary} for g in self.gates],
            "applied": self.applied, "not_applied": self.not_applied,
            "seconds": round(self.seconds, 3),
            "evidence_dir": str(self.evidence_dir) if self.evidence_dir else None,
        }


@dataclass
class Report:
    """Every packet's validation, in order; ``preflight`` set (and nothing validated) when the
    base does not pass its own suite."""

    base_sha: str
    red_runs: int
    validations: list[Validation] = field(default_factory=list)
    preflight: GateResult | None = None
    kept: Path | None = None

    @property
    def ok(self) -> bool:
        return self.preflight is None and all(v.valid for v in self.validations)


def _requires_order(packet: Packet, by_id: dict[str, Packet]) -> list[str]:
    """The ids ``packet`` requires, transitively, dependencies before dependants."""
    order: list[str] = []

    def visit(pid: str) -> None:
        for dep in by_id[pid].requires if pid in by_id else []:
            if dep not in order:
                visit(dep)
                order.append(dep)
    visit(packet.id)
    return order


def _with_red_runs(config: Config, runs: int) -> Config:
    gates = config.gates.model_copy(update={"red_runs": max(config.gates.red_runs, runs)})
    return config.model_copy(update={"gates": gates})


class Validator:
    """Validate packets of one repository from ``base_sha`` (the integration head).

    ``packets`` are all the packets (required ones are looked up there); ``on_gate(id,
    result)`` hears each gate as it ends, ``on_packet(validation)`` each verdict. ``runs``: the
    planted tests run at least this many times on the base (``red``), so a flaky planted test
    shows even where andon.toml asks for one red run. ``keep``: leave the temporary folder
    (clone, store, evidence) and name it in the report.
    """

    def __init__(self, repo: Repo, config: Config, packets: Sequence[Packet], base_sha: str,
                 runs: int = 3, keep: bool = False,
                 on_gate: Callable[[str, GateResult], None] = lambda pid, g: None,
                 on_packet: Callable[[Validation], None] = lambda v: None,
                 say: Callable[[str], None] = lambda s: None):
        self.repo, self.base_sha, self.keep = repo, base_sha, keep
        self.config = _with_red_runs(config, runs)
        self.by_id = {p.id: p for p in packets}
        self.on_gate, self.on_packet, self.say = on_gate, on_packet, say

    def run(self, ids: Sequence[str]) -> Report:
        """Validate the packets ``ids`` in order. Raises AndonError (UsageError, GitError)
        when the temporary clone cannot be made; the user's repository is unchanged."""
        report = Report(self.base_sha, self.config.gates.red_runs)
        # a neutral name: the code under test sees the path of its clone
        tmp = Path(tempfile.mkdtemp(prefix="v-"))
        store: StoreProtocol | None = None
        try:
            clone = Repo(self.repo.clone_at(self.base_sha, tmp / "repo"))
            store = Store(tmp / "store.db")
            ev = tmp / "evidence"
            pf_dir = ev / "_preflight"
            pf_dir.mkdir(parents=True)
            self.say(f"preflight: the full suite on {self.base_sha[:10]}")
            pf = preflight.run(clone, self.config, self.base_sha, pf_dir)
            self.on_gate("", pf)
            if pf.status != "pass":
                report.preflight = pf
                return report
            baseline = set(pf.details.get("passed_ids", []))
            for pid in ids:
                v = self._one(clone, store, self.by_id[pid], baseline, tmp)
                report.validations.append(v)
                self.on_packet(v)
        finally:
            if store is not None:
                store.close()
            if self.keep:
                report.kept = tmp
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        return report

    def _one(self, clone: Repo, store: StoreProtocol, packet: Packet, baseline: set[str],
             tmp: Path) -> Validation:
        started = time.monotonic()
        v = self._judge(clone, store, packet, baseline, tmp)
        v.seconds = time.monotonic() - started
        return v

    def _judge(self, clone: Repo, store: StoreProtocol, packet: Packet, baseline: set[str],
               tmp: Path) -> Validation:
        if not packet.solution_files:
            return Validation(packet.id, False, "no reference solution: the packet has no "
                              "solution/ folder (its files mirror the repository root, like "
                              "plant/)", NO_SOLUTION, "specification")
        if packet.tests == "none":
            return Validation(packet.id, False, 'tests = "none": no planted test tells a '
                              "resolved change from an unresolved one", NO_TESTS,
                              "specification")
        base, applied, missing = self.base_sha, [], []
        try:
            stages = self.config.stages_of(packet.stages, packet.tier)
            for dep in _requires_order(packet, self.by_id):
                required = self.by_id.get(dep)
                if required is None or not required.solution_files:
                    missing.append(dep)
                    continue
                base = clone.plant(base, {**required.plant_blobs(), **required.solution_blobs()},
                                   f"validate: {dep} (plant and reference solution), "
                                   f"required by {packet.id}")
                applied.append(dep)
        except AndonError as exc:
            return Validation(packet.id, False, f"cannot apply what the packet requires: {exc}",
                              SETUP, "specification", applied=applied, not_applied=missing)
        if missing:
            self.say(f"{packet.id}: requires {', '.join(missing)}, which has no reference "
                     "solution: validated without it")
        ev = tmp / "evidence" / packet.id
        ev.mkdir(parents=True)
        wt = tmp / "wt" / packet.id
        store.upsert_packet(packet.id, packet.slug, str(packet.source), packet.content_sha,
                            packet.model_dump(mode="json", by_alias=True))
        row = store.new_attempt(packet.id, ReferenceAgent.name, 0)
        store.update_attempt(row["id"], branch=f"andon/{packet.id}/{row['n']}",
                             worktree=str(wt), base_sha=base, evidence_dir=str(ev))
        agent = ReferenceAgent(packet, self.config.stages.test_paths)
        attempt = Attempt(clone, self.config, store, packet, store.attempt(row["id"]),
                          lambda stage: agent, baseline, None, wt, ev,
                          lambda g: self.on_gate(packet.id, g), lambda state, kind: None)
        # the gates of `andon run`, without its reviewers: a reviewer judges an agent's
        # change, and here the change is the packet's own
        attempt.stages = [s for s in stages if s not in REVIEW_STAGES]
        try:
            result = attempt.run()
        finally:
            clone.remove_worktree(wt)
        kept = ev if self.keep else None
        if agent.refused:
            # the solution as given cannot be a change in this repository, whatever the gates
            # made of the files that were written
            return Validation(packet.id, False, "the reference solution cannot be written: "
                              + "; ".join(agent.refused), NO_SOLUTION, "specification", [],
                              result.gates, applied, missing, evidence_dir=kept)
        failure = result.failure
        if failure is not None:
            return Validation(packet.id, False, failure.summary, failure.gate, failure.layer,
                              failure.findings[:FIRST_FINDINGS], result.gates, applied, missing,
                              evidence_dir=kept)
        # the last red: with an atdd stage, the first is skipped (nothing planted) and the
        # second judges the tests the atdd stage wrote
        red = next((g for g in reversed(result.gates) if g.gate == "red"), None)
        if red is None or red.status != "pass":
            # an atdd packet whose solution writes no test: nothing was red before the change
            why = red.summary if red is not None else "red did not run"
            return Validation(packet.id, False, f"nothing is red on the base: {why}", "red",
                              "specification", [], result.gates, applied, missing,
                              evidence_dir=kept)
        passed = sum(g.status == "pass" for g in result.gates)
        skipped = sum(g.status == "skipped" for g in result.gates)
        return Validation(packet.id, True, f"red on the base, green with the reference "
                          f"solution: {passed} gate(s) passed, {skipped} skipped", None, None, [],
                          result.gates, applied, missing, evidence_dir=kept)
