"""``andon plan SPEC [DECISIONS...]``: rounds of the planner until its drafts pass every
mechanical check (:mod:`andon.plan.checks`) or the rounds run out. Each round's drafts are
written to the packets folder with ``status = "draft"`` and registered in the store as
drafts; each problem goes back to the planner as evidence for the next round; what remains
is the person's to see. Nothing is ever accepted here (``andon plan --accept``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import budget
from ..agents import Agent
from ..baseline import integration_head
from ..config import Config
from ..errors import UsageError
from ..git.repo import Repo
from ..packet import Packet, check_packets
from ..state import state_dir
from ..store import StoreProtocol, now
from . import checks, drafts, stage
from .contract import DraftPacket, PlanRejected, render
from .red import planted_red


@dataclass
class Outcome:
    """How the planning ended: ``ok`` when the last round's drafts have no problem;
    ``drafts`` the ids written, ``problems`` what remains, ``rounds`` the rounds run."""

    ok: bool
    drafts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rounds: list[stage.Round] = field(default_factory=list)
    evidence: Path | None = None


def documents(repo: Repo, paths: Sequence[str]) -> list[stage.Document]:
    """The spec and decisions files, read. Raises UsageError for one that is missing."""
    out = []
    for i, given in enumerate(paths):
        path = Path(given)
        full = path if path.is_absolute() else Path.cwd() / path
        if not full.is_file() and (repo.root / path).is_file():
            full = repo.root / path
        if not full.is_file():
            raise UsageError(f"{given}: no such file (the spec and decisions files are read "
                             "from the current directory or the repository root)")
        try:
            rel = full.resolve().relative_to(repo.root.resolve()).as_posix()
        except ValueError:
            rel = str(full)
        out.append(stage.Document(rel, "Spec" if i == 0 else "Decisions",
                                  full.read_text(encoding="utf-8", errors="replace")))
    return out


def from_packet(p: Packet) -> DraftPacket:
    """A packet file read back as a draft, for the checks (``andon plan --accept``)."""
    return DraftPacket.model_validate({
        "id": p.id, "slug": p.slug, "title": p.title, "goal": p.goal,
        "allowed_paths": p.allowed_paths, "requires": p.requires,
        "invariants": [{"id": i.id, "critical": i.critical, "assert": i.assert_}
                       for i in p.invariants],
        "planted_tests": {k: v.decode("utf-8", errors="replace")
                          for k, (v, _) in p.plant_blobs().items()}})


def check_all(repo: Repo, config: Config, base: str, ds: Sequence[DraftPacket],
              files: dict[str, Path], existing: Sequence[str]) -> list[str]:
    """Every rule of :mod:`andon.plan.checks` on the drafts ``ds`` (``files``: id → packet
    file written), in rule order. The planted tests run only when the rest is clean of
    problems that stop them from meaning anything (tests the agent may edit)."""
    packets_dir = repo.root / config.andon.packets_dir
    tracked = repo.git("ls-tree", "-r", "-z", "--name-only", base).split("\0")
    out = checks.validation(packets_dir, repo.root, files)
    out += checks.requires_graph(ds, existing)
    out += checks.overlaps_ordered(ds, [f for f in tracked if f])
    out += checks.has_invariant(ds)
    out += checks.bounded_scope(ds, config.plan)
    out += checks.tests_not_allowed(ds, config.stages.test_paths)
    out += planted_red(repo, config, base, ds)
    return out


def _existing(packets_dir: Path, repo_root: Path) -> dict[str, Packet]:
    found, _ = check_packets(packets_dir, repo_root)
    return {p.id: p for p in found}


def _write(packets_dir: Path, ds: Sequence[DraftPacket], ready: set[str],
           problems: list[str]) -> dict[str, Path]:
    """Each draft as ``<packets>/<id>/packet.md`` (+ ``plant/``), replacing an earlier
    draft of that id; never a packet that is not a draft (a problem instead)."""
    files: dict[str, Path] = {}
    for d in ds:
        if d.id in ready:
            problems.append(f"{d.id}: a packet with this id exists and is not a draft: choose "
                            "another id")
            continue
        bad = [p for p in d.planted_tests if p.startswith("/") or ".." in p.split("/")
               or not p.strip()]
        if bad:
            problems.append(f"{d.id}: planted test paths must be relative to the repository "
                            f"root, got {', '.join(map(repr, bad))}")
            continue
        try:
            text = render(d)
        except PlanRejected as exc:
            problems += exc.errors
            continue
        folder = packets_dir / d.id
        if folder.exists():
            shutil.rmtree(folder)
        (folder / "plant").mkdir(parents=True)
        (folder / "packet.md").write_text(text, encoding="utf-8")
        for rel, body in d.planted_tests.items():
            target = folder / "plant" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        files[d.id] = folder / "packet.md"
    return files


def run_plan(repo: Repo, config: Config, store: StoreProtocol, agent: Agent,
             paths: Sequence[str], rounds: int = 3,
             say: Callable[[str], None] = lambda s: None) -> Outcome:
    """Plan from the spec and decisions ``paths`` with ``agent``, up to ``rounds`` rounds.

    Raises:
        UsageError: a file is missing, or there is no base commit.
    """
    if rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {rounds}")
    docs = documents(repo, paths)
    base = integration_head(repo, config)
    packets_dir = repo.root / config.andon.packets_dir
    packets_dir.mkdir(exist_ok=True)
    (state_dir(repo) / "plan").mkdir(parents=True, exist_ok=True)
    stamp = now().replace(":", "").replace("-", "")[:15]
    evidence = Path(tempfile.mkdtemp(prefix=f"{stamp}-", dir=state_dir(repo) / "plan"))
    store.event("plan-started", data={"spec": [d.path for d in docs], "agent": agent.name,
                                      "rounds": rounds, "base": base})
    outcome = Outcome(False, evidence=evidence)
    problems: list[str] = []
    written: dict[str, Path] = {}
    for n in range(1, rounds + 1):
        before = _existing(packets_dir, repo.root)
        ready = {pid for pid, p in before.items() if p.status != "draft"}
        say(f"round {n}: asking the {agent.name} planner")
        r = stage.ask(repo, config, agent, base, docs, sorted(ready), problems, n, evidence)
        outcome.rounds.append(r)
        if r.document is None:
            problems = r.errors
        else:
            for old in set(written) - {d.id for d in r.document.packets}:
                shutil.rmtree(written[old].parent, ignore_errors=True)  # dropped this round
            problems = []
            written = _write(packets_dir, r.document.packets, ready, problems)
            ds = [d for d in r.document.packets if d.id in written]
            problems += check_all(repo, config, base, ds, written, sorted(ready))
            fresh = _existing(packets_dir, repo.root)
            for pid in written:
                if pid in fresh:
                    drafts.register(store, fresh[pid], n)
        store.event("plan-round", data={"round": n, **r.run, "drafts": sorted(written),
                                        "problems": problems})
        say(f"round {n}: {len(written)} draft(s), {len(problems)} problem(s)")
        spent = [{"usage": x.run.get("usage"), "duration_s": x.run.get("duration_s", 0.0)}
                 for x in outcome.rounds]
        stop = budget.judge("attempt", config.budgets.attempt, spent, False)
        if not problems or stop is not None:
            if stop is not None and problems:
                problems.append(f"planning stopped: {stop.summary}")
            break
    outcome.ok, outcome.drafts, outcome.problems = not problems, sorted(written), problems
    store.event("plan-ended", data={"ok": outcome.ok, "drafts": outcome.drafts,
                                    "problems": problems, "rounds": len(outcome.rounds)})
    return outcome
