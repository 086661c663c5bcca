"""What one run of a project's tests did, as the harness observed it (``SuiteRun``): the record
every runner adapter returns and every gate reads (its evidence: ``to_evidence``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..contain.verdict import Integrity
from .junit import OUTCOMES, Outcome, TestResult


@dataclass
class SuiteRun:
    """What one run of the suite did, as the harness observed it."""

    name: str
    argv: list[str]
    cwd: str
    exit_status: int | None  # None when killed by the timeout; -N when ended by signal N
    timed_out: bool
    duration_s: float  # wall seconds
    log_path: Path  # whole stdout+stderr, interleaved
    junit_path: Path
    output_tail: str  # last ~60 lines of the log
    results: dict[str, TestResult]  # by id, in report order; empty when the report is unusable
    report_problem: str | None  # None when the report was read fine; else why not
    seed: int | None  # shuffle seed, when the order was shuffled
    # "cut": ran in its own network namespace (loopback only); "on": [test] network = "on";
    # "not cut: <reason>": "off" was asked for but this machine cannot (see netless.py)
    network: str = "on"
    # "read-only: <folders>": ran contained (netless.py: a pid and mount namespace of its own,
    # those folders read-only); "not contained: <reason>"; "": nothing asked it
    contained: str = ""
    wrapper: list[str] = field(default_factory=list)  # argv prefix that ran ``argv``, if any
    # is the report the runner's own? (contain/verdict.py); None for runs made before it existed
    integrity: Integrity | None = None
    setup: dict | None = None  # the [test] setup of this clone, when it ran before (clone_setup)
    profile: str = "normal"  # "plain": PLAIN_PROFILE was added (see run_suite)
    # UTC wall clock when the suite process started, ISO 8601 (ms): with duration_s it places
    # the run in time, so runs made at the same time ([test] jobs) can be told apart
    started_at: str | None = None
    # how its process started: "fork server" (contain/forkserver.py), "fresh", or "fresh: "
    # and why it could not be forked
    start: str = "fresh"

    @property
    def forged(self) -> list[str]:
        """Why this run's report cannot be believed (empty: no sign of forgery)."""
        return list(self.integrity.forged) if self.integrity else []

    def ids_with(self, *outcomes: Outcome) -> set[str]:
        """Ids of the results whose outcome is one of ``outcomes``."""
        return {r.id for r in self.results.values() if r.outcome in outcomes}

    def by_file(self, files: Iterable[str]) -> dict[str, TestResult]:
        """Results whose test file is one of ``files`` (repo-relative paths), by id."""
        wanted = {PurePosixPath(f).as_posix() for f in files}
        return {i: r for i, r in self.results.items() if r.file in wanted}

    def to_evidence(self) -> dict:
        """JSON-serialisable record of the run; results appear as counts per outcome."""
        counts = Counter(r.outcome for r in self.results.values())
        return {
            "name": self.name,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "exit_status": self.exit_status,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 3),
            "log_path": str(self.log_path),
            "junit_path": str(self.junit_path),
            "output_tail": self.output_tail,
            "counts": {o: counts.get(o, 0) for o in OUTCOMES},
            "report_problem": self.report_problem,
            "seed": self.seed,
            "network": self.network,
            "contained": self.contained,
            "wrapper": list(self.wrapper),
            "integrity": self.integrity.to_evidence() if self.integrity else None,
            "setup": self.setup,
            "profile": self.profile,
            "started_at": self.started_at,
            "start": self.start,
        }
