"""``preflight`` gate: before anything runs, the full suite passes on the integration head.

Run in a fresh clone of that commit. If any test fails or errors, or no report is written, or
the verdict channel reads the run as forged (the project's own code does something andon takes
for forging: every attempt would be judged forged for it), the run stops with layer
``environment`` and nothing changes. The ids that passed are the
PASS_TO_PASS baseline for attempts based on that tree; results are cached by tree sha.
"""

from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..git.repo import Repo
from . import env_cause
from .base import Finding, GateContext, GateResult, fenced, fresh_clone, run_project_suite

NAME = "preflight"


def skip_reason(ctx: GateContext) -> str | None:
    """Always applies: a run never starts on a head whose suite was not seen to pass."""
    return None


def run(repo: Repo, config: Config, sha: str, evidence_dir: Path,
        env_digest: str | None = None) -> GateResult:
    """The full suite on ``sha`` (the integration head) in a fresh clone; evidence in
    ``evidence_dir``. Called by the runner once per run, before any packet: there is no
    packet, worktree or attempt yet, so it takes what it needs instead of a GateContext
    (``env_digest``: the tests' environment, for ``[test] setup``'s cache)."""
    with fresh_clone(repo, sha, NAME) as cwd:
        r = run_project_suite(config, cwd, evidence_dir, NAME, env_digest=env_digest,
                              readonly=fenced(repo))
        why = env_cause.cause(r, cwd)
    if r.report_problem:
        # not "wrote no usable report": a failed set-up or an import probe means it never ran
        return GateResult(NAME, "error", f"the suite on {sha[:10]} gave no results: "
                          f"{r.report_problem}", "environment",
                          [Finding("no-report", r.report_problem)], [r])
    bad = [x for x in r.results.values() if x.outcome in ("failed", "error")]
    if bad and why:
        kind, line, fix = why
        return GateResult(NAME, "fail", f"{len(bad)} test(s) cannot run on {sha[:10]} "
                          f"for a reason of the environment: {line}; {fix}", "environment",
                          [Finding(kind, f"{line}; {fix}", bad[0].file, bad[0].id)], [r])
    if bad:
        findings = [Finding("baseline-failure", f"{x.id} {x.outcome}: {x.brief}",
                            x.file, x.id) for x in bad]
        return GateResult(NAME, "fail", f"{len(bad)} test(s) fail on the integration "
                          f"head {sha[:10]} before any agent ran: {bad[0].id}", "environment",
                          findings, [r])
    if r.forged:
        # trusted code: what the channel finds here is a misreading of the project, and it
        # would be found in every attempt's run too, blamed on the agent
        findings = [Finding("channel-on-base", w) for w in r.forged]
        return GateResult(NAME, "fail", f"the verdict channel reads the suite's own run on "
                          f"{sha[:10]} as forged ({r.forged[0]}): every attempt would be judged "
                          "forged for it. The project's code does something andon takes for "
                          "a forged report; the run's evidence shows what (please report it)",
                          "environment", findings, [r])
    passed = r.ids_with("passed")
    if not passed:
        said = _usage_error(r.log_path) if r.exit_status == PYTEST_USAGE_ERROR else None
        reason = f"pytest says: {said} (check [test] command)" if said else \
            "the test command collects nothing"
        return GateResult(NAME, "fail", f"no test passed on {sha[:10]}: {reason}", "environment",
                          [Finding("no-tests", said or "0 tests passed")], [r])
    # honest about what is not checked: a skipped test holds no attempt to anything (humanize
    # skips its 144 translation tests when the .mo files its build makes are missing)
    skipped = r.ids_with("skipped")
    also = f"; {len(skipped)} skipped, held to nothing: {_first(skipped)}" if skipped else ""
    return GateResult(NAME, "pass", f"{len(passed)} tests passed on {sha[:10]}{also}",
                      runs=[r], details={"passed_ids": sorted(passed),
                                         "skipped_ids": sorted(skipped)})


def _first(ids: set[str], n: int = 3) -> str:
    shown = sorted(ids)[:n]
    return ", ".join(shown) + (f" and {len(ids) - n} more" if len(ids) > n else "")


PYTEST_USAGE_ERROR = 4  # pytest's exit status for a command line it cannot use


def _usage_error(log: Path) -> str | None:
    """pytest's own line for a command line it cannot use (``ERROR: file or directory not
    found: tests_nope``), from the run's log; None when there is none."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((ln.removeprefix("ERROR: ").strip() for ln in lines
                 if ln.startswith("ERROR: ")), None)
