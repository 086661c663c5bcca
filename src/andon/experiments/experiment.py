"""``andon experiment run``: every (packet, condition, repeat) of an experiment file, in a
seeded interleaved order, resumable, within budget.

- **Packets** (:func:`select_packets`): ids and globs over ids from the packets folder, or
  folders of packets; none named: every packet.
- **Validity**: each packet goes through ``andon validate`` first (the result cached per
  packet content and base tree in the results cache); an invalid packet is refused (a
  UsageError naming it and why) unless ``allow_invalid``.
- **Order** (:func:`plan`): repeat by repeat; within a repeat the packets in a seeded random
  order, and for each packet the conditions in a seeded random order, so that drift of the
  provider or the machine over time falls on every condition alike. Raising ``repeats``
  appends whole blocks: the runs already planned keep their place.
- **Resume**: a run is recorded whole when it ends (one transaction); running the same file
  again runs only what has no record. A run killed half-way left no record and runs again.
  The base commit is the one recorded by the experiment's first run.
- **Budget**: a run is not started once the recorded runs have spent ``total_usd`` or
  ``total_tokens``; the runs in flight then finish (and may pass it by their own spend).
- **Concurrency**: up to ``concurrency`` runs at once, each in a forked process of its own
  (:mod:`andon.experiments.pool`), started in the plan's order; only this process writes
  the store, each run in one transaction when it ends. A run whose process died is an
  ``error`` (andon failed around it); runs in flight when this process is killed have no
  record and run again.
"""

from __future__ import annotations

import fnmatch
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents import Agent
from ..baseline import integration_head
from ..config import STATE_DIR, Config
from ..contain import procgroup
from ..errors import UsageError
from ..gates import preflight
from ..git.repo import Repo
from ..packet import Packet, load_packets
from ..store import Store, StoreProtocol, now
from ..validate import Validator
from .execute import RunInputs, RunKey, execute, harness_error
from .pool import run_pool
from .spec import Condition, Spec, line_of


def select_packets(spec: Spec, repo: Repo, config: Config) -> tuple[list[Packet],
                                                                     dict[str, Packet]]:
    """(the experiment's packets in file order, every packet by id — required ones are
    looked up there). Raises UsageError for a name matching nothing, PacketError for
    invalid packet files."""
    every = {p.id: p for p in load_packets(repo.root / config.andon.packets_dir, repo.root)}
    if not spec.packets:
        return list(every.values()), every
    chosen: dict[str, Packet] = {}
    for entry in spec.packets:
        folder = spec.source.parent / entry
        if "/" in entry and folder.is_dir():
            found = load_packets(folder, repo.root)
            every.update({p.id: p for p in found})
        else:
            found = [p for pid, p in every.items() if fnmatch.fnmatchcase(pid, entry)]
        if not found:
            line = line_of(spec.source, ["packets"])
            raise UsageError(f"{spec.source}{f':{line}' if line else ''}: packets entry "
                             f"{entry!r} matches no packet; known: {', '.join(every) or 'none'}")
        chosen.update({p.id: p for p in found})
    return list(chosen.values()), every


def plan(tasks: list[str], conditions: list[str], repeats: int, seed: int) -> list[RunKey]:
    """Every run in the order they start (module docstring); the same inputs, the same
    order."""
    order: list[RunKey] = []
    for r in range(repeats):
        rng = random.Random(f"{seed}:{r}")
        for task in rng.sample(tasks, len(tasks)):
            order += [RunKey(task, c, r) for c in rng.sample(conditions, len(conditions))]
    return order


@dataclass
class Progress:
    """What :meth:`Experiment.run` did: runs recorded now, skipped (done before), not
    started (budget), and why it stopped early, if it did."""

    planned: int = 0
    recorded: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    stopped: str | None = None


class Experiment:
    """One experiment file on one repository, its runs in ``store``."""

    def __init__(self, repo: Repo, config: Config, store: StoreProtocol, spec: Spec,
                 agent_factory: Callable[[Condition, bool], Agent] | None = None,
                 say: Callable[[str], None] = lambda s: None):
        self.repo, self.config, self.store, self.spec = repo, config, store, spec
        self.agent_factory, self.say = agent_factory, say
        self.root = repo.root / STATE_DIR / "experiments" / spec.name

    def base_sha(self) -> str:
        """The base of every run: recorded by the first run of this experiment."""
        row = self.store.experiment(self.spec.name)
        if row and row["spec"].get("base_sha"):
            return str(row["spec"]["base_sha"])
        return integration_head(self.repo, self.config)

    def _record_spec(self, base: str, planned: int) -> None:
        self.store.upsert_experiment(self.spec.name, str(self.spec.source), {
            **self.spec.model_dump(mode="json"), "base_sha": base, "planned": planned})

    def check_validity(self, packets: list[Packet], every: dict[str, Packet], base: str,
                       allow_invalid: bool) -> dict[str, dict[str, Any]]:
        """Each packet's validation (``valid``, ``summary``, ``failed_gate``), from the cache
        or by validating now. Raises UsageError naming the invalid ones unless
        ``allow_invalid``."""
        tree = self.repo.resolve(f"{base}^{{tree}}")
        out: dict[str, dict[str, Any]] = {}
        todo = []
        for p in packets:
            hit = self.store.cached(f"validate:{p.content_sha}:{tree}")
            if hit is not None:
                out[p.id] = hit["data"]
            else:
                todo.append(p.id)
        if todo:
            self.say(f"validating {len(todo)} packet(s) with their reference solutions")
            report = Validator(self.repo, self.config, list(every.values()), base).run(todo)
            if report.preflight is not None:
                raise UsageError(f"the base {base[:10]} fails its own suite: "
                                 f"{report.preflight.summary}; nothing ran")
            for v in report.validations:
                data = {"valid": v.valid, "summary": v.summary, "failed_gate": v.failed_gate}
                self.store.set_cached(f"validate:{every[v.packet_id].content_sha}:{tree}",
                                      "validate", data, {"base": base})
                out[v.packet_id] = data
        bad = [f"{pid} ({d['failed_gate']}: {d['summary']})" for pid, d in out.items()
               if not d["valid"]]
        if bad and not allow_invalid:
            raise UsageError("invalid packet(s), which cannot tell a good agent from a bad "
                             "one: " + "; ".join(bad) + ". Fix them (`andon validate`) or "
                             "run with --allow-invalid")
        return out

    def spent(self) -> tuple[float, int]:
        """(USD, input + output tokens) of every recorded run, superseded ones included."""
        usd, tokens = 0.0, 0
        for r in self.store.experiment_runs(self.spec.name, superseded=True):
            u = r["data"].get("usage") or {}
            usd += u.get("cost_usd") or 0.0
            tokens += (u.get("input_tokens") or 0) + (u.get("output_tokens") or 0)
        return usd, tokens

    def over_budget(self) -> str | None:
        b = self.spec.budget
        usd, tokens = self.spent()
        if b.total_usd is not None and usd >= b.total_usd:
            return f"total budget spent: {usd:.4f} USD of {b.total_usd} USD"
        if b.total_tokens is not None and tokens >= b.total_tokens:
            return f"total budget spent: {tokens} tokens of {b.total_tokens}"
        return None

    def run(self, allow_invalid: bool = False, retry_errors: bool = False,
            on_run: Callable[[RunKey, dict[str, Any], int, int], None] = lambda *a: None
            ) -> Progress:
        """Run what is missing (module docstring); ``on_run(key, record, done, planned)``
        hears each run as it is recorded.

        Raises:
            UsageError: a packet entry matches nothing, invalid packets (without
                ``allow_invalid``), the base fails its own suite.
            PacketError: invalid packet files.
        """
        packets, every = select_packets(self.spec, self.repo, self.config)
        base = self.base_sha()
        self.check_validity(packets, every, base, allow_invalid)
        keys = plan([p.id for p in packets], [c.name for c in self.spec.conditions],
                    self.spec.repeats, self.spec.seed)
        self._record_spec(base, len(keys))
        done = {}
        for r in self.store.experiment_runs(self.spec.name):
            done[(r["task"], r["condition"], r["repeat"])] = r
        todo = [k for k in keys if (k.task, k.condition, k.repeat) not in done
                or (retry_errors and done[(k.task, k.condition, k.repeat)]["outcome"]
                    == "error")]
        progress = Progress(planned=len(keys), skipped=len(keys) - len(todo))
        if not todo:
            return progress
        self._clear_tmp()
        inputs = RunInputs(self.repo, self.config, self.spec, every, base,
                           self._baseline(base), self.root, self.agent_factory)

        def may_start() -> bool:
            progress.stopped = progress.stopped or self.over_budget()
            return progress.stopped is None

        started: dict[RunKey, tuple[str, float]] = {}

        def work(key: RunKey) -> dict[str, Any]:
            return execute(inputs, key)

        def before_fork(key: RunKey) -> None:
            started[key] = (now(), time.monotonic())
            if type(self.store) is Store:  # no SQLite connection crosses a fork
                self.store.db.close()

        def after_fork() -> None:
            if type(self.store) is Store:
                self.store.reopen()

        for key, ended in run_pool(todo, work, self.spec.concurrency, may_start,
                                   before_fork=before_fork, after_fork=after_fork,
                                   abandoned=self._abandoned):
            record = ended.get("value") or self._died(key, ended, *started[key])
            old = done.get((key.task, key.condition, key.repeat))
            self.store.add_experiment_run(self.spec.name, key.task, key.condition, key.repeat,
                                          record["outcome"], record, record["started_at"],
                                          old["id"] if old else None)
            progress.recorded.append(record)
            on_run(key, record, progress.skipped + len(progress.recorded), len(keys))
        return progress

    def _clear_tmp(self) -> None:
        """What runs of a killed experiment left: processes still working in their clones
        (started in sessions of their own, so a kill of the process group missed them) and
        the clones themselves."""
        tmp = self.root / "tmp"
        if tmp.exists():
            procgroup.kill_working_under(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)

    def _abandoned(self, key: RunKey) -> None:
        """A run killed in flight (Ctrl-C, an exception here): what it started, its clone."""
        tmp = self.root / "tmp" / key.slug
        procgroup.kill_working_under(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)

    def _died(self, key: RunKey, ended: dict[str, Any], started_at: str,
              t0: float) -> dict[str, Any]:
        """The record of a run whose process raised or died without a record: an
        ``error`` (andon failed around the run), the traceback kept as evidence."""
        self._abandoned(key)
        ev = self.root / "evidence" / key.slug
        ev.mkdir(parents=True, exist_ok=True)
        (ev / "harness-error.txt").write_text(ended.get("traceback") or ended["error"],
                                              encoding="utf-8")
        record = harness_error(f"the run's process failed: {ended['error']}")
        record.update(started_at=started_at, wall_s=round(time.monotonic() - t0, 3),
                      evidence_dir=str(ev))
        return record

    def _baseline(self, base: str) -> set[str]:
        """Tests passing on the base: preflight once, in a clone, before the first run."""
        tmp = Path(tempfile.mkdtemp(prefix="x-"))
        try:
            clone = Repo(self.repo.clone_at(base, tmp / "repo"))
            pf_dir = self.root / "evidence" / "_preflight"
            shutil.rmtree(pf_dir, ignore_errors=True)
            pf_dir.mkdir(parents=True)
            pf = preflight.run(clone, self.config, base, pf_dir)
            if pf.status != "pass":
                raise UsageError(f"the base {base[:10]} fails its own suite: {pf.summary}; "
                                 "nothing ran")
            return set(pf.details.get("passed_ids", []))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
