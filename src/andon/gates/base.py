"""What every gate returns, and the context it runs in.

A gate is a mechanical check the harness runs itself. Its result is ``pass``, ``fail``,
``error`` (the check itself could not run properly) or ``skipped`` (not run, and why), with
a failure layer (``code``, ``test``, ``environment``, ``permission``, ``harness``,
``verifier``, ``specification``) and evidence: the suite runs it made (argv, cwd, exit
status, seconds, output tail, log path) and findings (what exactly is wrong, and where).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from .. import clone_setup, origin, plain_file, reaper, tempdir
from ..config import Config
from ..contain.channel import plan as plan_start
from ..contain.verdict import Integrity
from ..contain.watch import Watch
from ..git.repo import Repo
from ..packet import Packet
from ..runners.pytest import SuiteRun, run_suite
from ..runners.rootdir import pinned_args

Status = Literal["pass", "fail", "error", "skipped"]
Layer = Literal["code", "test", "environment", "permission", "harness", "verifier",
                "specification"]


@dataclass(frozen=True)
class Finding:
    """One concrete thing wrong: ``kind`` (e.g. ``tamper``, ``forbidden-path``,
    ``fail-to-pass``, ``regression``), and where: a repo-relative ``path`` and/or a test id."""

    kind: str
    message: str
    path: str | None = None
    test_id: str | None = None
    line: int | None = None  # 1-based line in ``path``, when the finding points at one

    def key(self) -> str:
        return f"{self.kind}|{self.path or ''}|{self.test_id or ''}"


@dataclass
class GateResult:
    gate: str
    status: Status
    summary: str
    layer: Layer | None = None
    findings: list[Finding] = field(default_factory=list)
    runs: list[SuiteRun] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Never silently: a run that should have been cut off the network but was not says
        # so in the summary, not only in its evidence.
        if (note := network_note(self.runs)) and note not in self.summary:
            self.summary += f" ({note})"

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "skipped")

    def evidence(self) -> dict[str, Any]:
        return {
            "findings": [f.__dict__ for f in self.findings],
            "runs": [r.to_evidence() for r in self.runs],
            **self.details,
        }

    def fingerprint(self) -> str:
        """Stable hash of this failure: gate, findings' kinds/paths/test ids, and the summary
        with numbers, hex ids and temp paths taken out (they change between runs)."""
        summary = re.sub(r"/\S+|0x[0-9a-f]+|\d+(\.\d+)?", "#", self.summary.lower())
        material = "\n".join([self.gate, summary, *sorted(f.key() for f in self.findings)])
        return hashlib.sha256(material.encode()).hexdigest()[:16]


@dataclass
class GateContext:
    """Everything a gate may look at. Shas are full commit ids."""

    repo: Repo
    config: Config
    packet: Packet
    worktree: Path
    evidence_dir: Path
    base_sha: str
    plant_sha: str
    candidate_sha: str | None = None
    atdd_sha: str | None = None      # the atdd stage's commit, when the packet has one
    baseline_passed: set[str] = field(default_factory=set)
    red_ids: set[str] = field(default_factory=set)
    atdd_tests: list[str] = field(default_factory=list)  # test files the atdd stage wrote
    # the atdd agent ran in this worktree during this attempt (red: its tests are the
    # agent's, and the worktree may hold more than its commit, so nothing is cached)
    atdd_just_ran: bool = False
    # False while git still writes the worktree (attempt.py): red then runs in a clone
    worktree_ready: bool = True
    # PASS_TO_PASS ids shown flaky on the base during this attempt (gates/flaky_base.py)
    flaky_on_base: dict[str, dict] = field(default_factory=dict)
    steady_on_base: dict[str, int] = field(default_factory=dict)  # id -> base runs all passed
    store: Any = None  # the Store, for the results cache (gates/cache.py); None: no cache
    # the tests' environment as the run found it (envprint.digest); None: red is not cached
    env_digest: str | None = None
    # hermetic runs the suite gate made beside its own, by candidate sha (gates/joint.py)
    ahead: dict[str, Any] = field(default_factory=dict)

    def fenced(self) -> list[Path]:
        """The folders this attempt's test runs may not write (:func:`fenced`)."""
        return fenced(self.repo, self.worktree.parent)

    def planted_tests(self) -> list[str]:
        """Test files that must go from red to green: planted ones and the atdd stage's."""
        return sorted(set(planted_tests(self.packet)) | set(self.atdd_tests))

    def suite(self, cwd: Path, name: str, select: list[str] | None = None,
              seed: int | None = None, agent_code: bool = False,
              own_files: Sequence[str] = (), profile: str = "normal",
              slot: int = 0) -> SuiteRun:
        """Run the project's test command in ``cwd`` the harness's way, with a fresh HOME.
        ``agent_code``: the run judges the agent's code, so canary tests go beside the planted
        ones and the planted tests (and ``own_files``) must be defined where they stand.
        ``profile``: see ``run_suite`` ("plain": the process looks like ordinary Python);
        ``slot``: the run's place in a set of repeated runs (see ``run_suite``)."""
        if not agent_code:
            return run_project_suite(self.config, cwd, self.evidence_dir, name, select, seed,
                                     profile=profile, slot=slot, env_digest=self.env_digest,
                                     readonly=self.fenced())
        planted = self.planted_tests()
        run = run_project_suite(self.config, cwd, self.evidence_dir, name, select, seed,
                                canaries=planted, own_files=[*planted, *own_files],
                                profile=profile, slot=slot, env_digest=self.env_digest,
                                readonly=self.fenced())
        self.check_wrappers(run, cwd)
        return run

    def check_wrappers(self, run: SuiteRun, cwd: Path) -> None:
        """Add a forged reason to ``run`` (of agent code in ``cwd``) for each planted test
        called through a wrapper whose file under ``cwd`` differs from the planted tree
        (``atdd_sha`` or ``plant_sha``): a decorator helper the packet lets the agent edit can
        return without calling the test. Strict: any change to that file counts, as a new
        line in it can rebind what the wrapper calls. Files outside ``cwd`` (the standard
        library, site-packages) are the scope gate's (``outside-worktree``)."""
        if run.integrity is None:
            return
        trusted = self.atdd_sha or self.plant_sha
        for tid, files in sorted(run.integrity.wrappers.items()):
            for rel in sorted({r for f in files if (r := _inside(cwd, f)) is not None}):
                if self.repo.file_bytes(trusted, rel) != _file_bytes(cwd, [rel])[rel]:
                    run.integrity.forged.append(
                        f"{tid}: its test function is called through a wrapper in {rel}, "
                        "which this attempt changed (a planted test must be called by code "
                        "the agent did not write)")
                    break


class Gate(Protocol):
    """The shape of a gate module (``scope``, ``red``, ``flaky`` ...): its ``NAME`` as
    recorded, ``skip_reason(ctx)`` — why it does not apply to this attempt (off in
    ``andon.toml``, nothing to check), or None — and ``run(ctx)``, called only when it
    applies. :func:`andon.gates.judge` is the one place that turns a skip reason into a
    ``skipped`` result."""

    NAME: str

    def skip_reason(self, ctx: GateContext) -> str | None: ...

    def run(self, ctx: GateContext) -> GateResult: ...


def network_note(runs: list[Any]) -> str:
    """``"network not cut: <reason>"`` when one of ``runs`` (SuiteRun, ToolRun, or their
    evidence dicts) asked for no network and did not get it; else ``""``."""
    for r in runs:
        state = (r.get("network") if isinstance(r, dict) else getattr(r, "network", "")) or ""
        if state.startswith("not cut"):
            return f"network {state}"
    return ""


def forged_result(gate: str, run: SuiteRun, runs: list[SuiteRun],
                  details: dict[str, Any] | None = None) -> GateResult | None:
    """A failing result with ``forged-report`` findings (layer ``permission``: the report of
    ``run`` is not the runner's own, see contain/verdict.py), or None when it shows no sign."""
    if not run.forged:
        return None
    # Canary ids are random: they stay in the message, never in the finding's key, so that
    # the same forgery twice has the same fingerprint (and blocks).
    canary = [w for w in run.forged if w.startswith("canary ")]
    other = [w for w in run.forged if not w.startswith("canary ")]
    findings = [Finding("forged-report", why, test_id=_test_id_in(why)) for why in other]
    if canary:  # one finding however many canaries there were (their number is random too)
        findings.append(Finding("forged-report", "; ".join(canary)))
    first = other[0] if other else f"{len(canary)} canary test(s) got the wrong outcome"
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return GateResult(gate, "fail", f"the test report of run {run.name} was forged: "
                      f"{first}{more}", "permission", findings, runs, details or {})


def _test_id_in(why: str) -> str | None:
    first = why.split(" ", 1)[0].rstrip(":")
    return first if "::" in first else None


def fenced(repo: Repo, worktree_root: Path | None = None) -> list[Path]:
    """The folders a harness test run may not write (``run_suite``'s ``readonly``): the
    user's checkout, its git directory, the agents' worktree root, the harness's own tree
    folder (every other attempt's worktree and clones: tempdir.harness_dir), the user's home
    (their git config, shell start-up files, a venv kept there), andon's own installation
    (its package and its venv: the next run's wrapper is read from there), and as root
    ``/etc``, ``/usr`` and ``/opt`` too (the system's git config and site-packages) — each
    unless it is the system temp dir itself or ``/``. The run's own tree, HOME and TMPDIR
    stay writable."""
    system = os.path.realpath(tempfile.gettempdir())
    folders = [repo.root, repo.git_dir, worktree_root, Path(tempdir.harness_dir()),
               Path(pwd.getpwuid(os.getuid()).pw_dir), Path(__file__).resolve().parents[1],
               Path(sys.prefix)]
    if os.geteuid() == 0:
        folders += [Path("/etc"), Path("/usr"), Path("/opt")]
    return [f for f in folders if f is not None and os.path.realpath(f) not in (system, "/")]


def planted_tests(packet: Packet) -> list[str]:
    """Planted paths that pytest would collect as test files (``test_*.py``, ``*_test.py``)."""
    return [p for p in sorted(packet.plant_files)
            if re.fullmatch(r"(test_.*|.*_test)\.py", p.rsplit("/", 1)[-1])]


def run_project_suite(config: Config, cwd: Path, evidence_dir: Path, name: str,
                      select: list[str] | None = None, seed: int | None = None,
                      canaries: list[str] | None = None,
                      own_files: Sequence[str] = (), profile: str = "normal",
                      slot: int = 0, env_digest: str | None = None,
                      readonly: Sequence[Path] = ()) -> SuiteRun:
    """Run the project's test command in ``cwd`` with the harness's flags (``run_suite``
    gives each run a fresh, throwaway HOME and TMPDIR, and no network unless ``[test]
    network = "on"``). ``canaries``: the planted test files, for a run of agent code (None:
    trusted code, no canaries); see ``run_suite``. In such a run, an ``own_files`` file whose
    bytes under ``cwd`` differ after the run from before it, or which was written, replaced or
    opened for writing while it ran (set-up included: :class:`~andon.contain.watch.Watch`), is
    a forged reason (``SuiteRun.forged``). ``slot``: the run's place in a set of repeated
    runs (0 for a run made once): runs of different slots never share a fork server, so
    never a hash seed (contain/forkserver.py). ``env_digest``: the tests' environment as the
    results cache names it, for ``[test] setup``'s cache (clone_setup.py; None: not used).
    ``readonly``: the folders the run may not write (:func:`fenced`)."""
    with Watch(cwd, list(own_files) if canaries is not None else []) as watch:
        run = _run_project_suite(config, cwd, evidence_dir, name, select, seed, canaries,
                                 own_files, profile, slot, env_digest, readonly)
        written = watch.changes()
    if watch.problem and run.integrity is not None:
        run.integrity.notes.append(f"planted files not watched: {watch.problem}")
    if written:  # rewritten while it ran, perhaps put back before it ended
        run.integrity = run.integrity or Integrity("not used (no report)")
        run.integrity.forged += [w for w in written if w not in run.integrity.forged]
    return run


def _run_project_suite(config: Config, cwd: Path, evidence_dir: Path, name: str,
                       select: list[str] | None, seed: int | None,
                       canaries: list[str] | None, own_files: Sequence[str],
                       profile: str, slot: int, env_digest: str | None,
                       readonly: Sequence[Path]) -> SuiteRun:
    before = _file_bytes(cwd, own_files) if canaries is not None else {}  # before any setup
    # The packets folder holds planted tests for work not done yet: never the project's suite.
    argv = [*config.test_argv(), f"--ignore={config.andon.packets_dir}"]
    # The same rootdir and config file in every run, whatever is selected (runners/rootdir.py):
    # otherwise a selected file deep in a monorepo gets ids the full-suite runs never use.
    argv += pinned_args(cwd, plan_start(argv).args)
    setup = clone_setup.ensure(config, cwd, evidence_dir, name, env_digest,
                               agent_code=canaries is not None)
    # The tests are not run in a clone that is not set up, or whose tests would import an
    # installed copy of the code: they would fail, or pass, for reasons of their own.
    if setup is not None and setup.problem:
        return SuiteRun(name=name, argv=setup.argv, cwd=str(cwd),
                        exit_status=setup.exit_status, timed_out=False,
                        duration_s=setup.duration_s,
                        log_path=setup.log_path or evidence_dir / f"{name}.setup.log",
                        junit_path=evidence_dir / f"{name}.junit.xml",
                        output_tail=setup.output_tail, results={},
                        report_problem=setup.problem, seed=seed,
                        setup=setup.to_evidence())
    if wrong := origin.check(config, cwd):
        log = evidence_dir / f"{name}.log"
        evidence_dir.mkdir(parents=True, exist_ok=True)
        plain_file.write(log, wrong + "\n")
        return SuiteRun(name=name, argv=argv, cwd=str(cwd), exit_status=None, timed_out=False,
                        duration_s=0.0, log_path=log,
                        junit_path=evidence_dir / f"{name}.junit.xml", output_tail=wrong,
                        results={}, report_problem=wrong, seed=seed,
                        setup=setup.to_evidence() if setup is not None else None)
    run = run_suite(
        argv, cwd, evidence_dir, name, select=select or (), random_seed=seed,
        pythonpath=[cwd / p for p in config.test.pythonpath], timeout_s=config.test.timeout_s,
        plugins=config.test.plugins, network=config.test.network, canaries=canaries,
        own_files=own_files, profile=profile,  # type: ignore[arg-type]
        fork_server=config.test.fork_server, slot=slot, readonly=readonly,
    )
    run.setup = setup.to_evidence() if setup is not None else None
    # a planted or hidden test file rewritten while it ran (by a package __init__, the code
    # under test): the tests that ran were not the ones the packet wrote, whatever passed
    changed = [f"{p} changed on disk during the run (a planted or hidden test file)"
               for p, data in before.items() if _file_bytes(cwd, [p])[p] != data]
    if changed:
        run.integrity = run.integrity or Integrity("not used (no report)")
        run.integrity.forged += changed
    return run


def _inside(cwd: Path, file: str) -> str | None:
    """``file`` (absolute, a code object's ``co_filename``) relative to ``cwd``, or None."""
    try:
        return Path(file).resolve().relative_to(cwd.resolve()).as_posix()
    except (OSError, ValueError):
        return None


def _file_bytes(cwd: Path, paths: Sequence[str]) -> dict[str, bytes | None]:
    """Repo-relative ``paths`` → their bytes under ``cwd`` (None: no such regular file —
    the code under test may have put a FIFO or a link in one's place: plain_file.py)."""
    found: dict[str, bytes | None] = {}
    for p in paths:
        try:
            found[p] = plain_file.read(cwd / p)
        except OSError:
            found[p] = None
    return found


@contextmanager
def fresh_clone(repo: Repo, sha: str, label: str) -> Iterator[Path]:
    """A throwaway clone of ``repo`` checked out at ``sha``, outside every worktree: nothing
    the agent left behind (ignored files, caches) exists in it. Deleted afterwards, in the
    background (:mod:`andon.reaper`)."""
    # a neutral name: the code under test runs in the clone and sees its path
    tmp = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
    try:
        yield repo.clone_at(sha, tmp / "repo")
    finally:
        reaper.discard(tmp)
