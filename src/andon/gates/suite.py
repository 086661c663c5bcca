"""``suite`` gate: the full suite in the attempt's worktree, read per test id.

Resolved means (as in SWE-bench's grading): every planted test passes (FAIL_TO_PASS) and
every test that passed on the base still passes (PASS_TO_PASS). A skipped, xfailed, missing or
uncollected expected test is a failure, and so is any failing or erroring test at all: the
integration branch must pass its full suite at every commit.

**Plain first** (issue 19 kinds "harness detected", issue 18 fail-fast). Before the full suite,
the planted (FAIL_TO_PASS) tests run alone under the *plain profile* (runners/pytest.py
``PLAIN_PROFILE``: no faulthandler, the real ``sys.stdout``, plain asserts, exception hooks left
alone), through the same verdict channel. If one of them does not pass there, the full suite is
not run ("suite not run: the planted tests failed first"): the same files run once more under the
normal profile, and a test that passes in one profile and not in the other is a
``profile-dependent`` finding (layer ``permission``: the code tells a pytest run from real use),
while a test that fails in both is the ordinary ``fail-to-pass`` (layer ``code``). A planted test
that passed plain and not in the full suite is run once more under the usual profile with the
plain run's selection: ``profile-dependent`` if it fails there too, else the other tests made the
difference and it is the ordinary ``fail-to-pass``. The
``hermetic`` gate does the same with the planted and hidden tests in its fresh clone before its
full runs (``plain_first``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..runners.pytest import SuiteRun, collectable
from . import flaky_base, joint
from .base import Finding, GateContext, GateResult, forged_result
from .changed import implement_base

NAME = "suite"
NOT_RUN = "suite not run: the planted tests failed first"


def judge(run: SuiteRun, planted: list[str], red_ids: set[str],
          baseline_passed: set[str]) -> list[Finding]:
    """Everything wrong with one full-suite run, as findings (empty list = resolved)."""
    if run.report_problem:
        return [Finding("no-report", run.report_problem)]
    found: list[Finding] = []
    results = run.results
    for test_id in sorted(red_ids | baseline_passed):
        result = results.get(test_id)
        kind = "fail-to-pass" if test_id in red_ids else "pass-to-pass"
        if result is None:
            found.append(Finding(kind, f"{test_id} did not run (missing or not collected)",
                                 test_id=test_id))
        elif result.outcome != "passed":
            found.append(Finding(kind, f"{test_id} {result.outcome}: {result.brief}",
                                 test_id=test_id))
    for f in planted:
        in_file = [r for r in results.values() if r.file == f]
        if not in_file:
            found.append(Finding("fail-to-pass", f"planted test file {f} ran no tests", path=f))
    reported = {x.test_id for x in found}
    for r in results.values():
        if r.outcome in ("failed", "error") and r.id not in reported:
            kind = "fail-to-pass" if r.file in planted else "failing-test"
            found.append(Finding(kind, f"{r.id} {r.outcome}: {r.brief}",
                                 test_id=r.id, path=r.file))
        elif r.outcome == "skipped" and r.file in planted and r.id not in reported:
            found.append(Finding("fail-to-pass", f"planted test {r.id} was skipped",
                                 test_id=r.id, path=r.file))
    return found


def summarise(findings: list[Finding], where: str) -> str:
    first = findings[0].message
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{where}: {first}{more}"


def _outcomes(run: SuiteRun, files: list[str], ids: set[str]) -> dict[str, str]:
    """Outcome of each test of ``files`` and of each id in ``ids`` ("missing": not in the
    report); a run without a usable report gives "no report" for ``ids``."""
    if run.report_problem:
        return {i: "no report" for i in ids}
    got = {i: "missing" for i in ids}
    got.update({r.id: r.outcome for r in run.results.values() if r.file in files or r.id in ids})
    return got


def differ(plain: SuiteRun, normal: SuiteRun, files: list[str], ids: set[str],
           hidden: Sequence[str] = ()) -> list[Finding]:
    """``profile-dependent`` findings: tests of ``files`` (or ids in ``ids``) that passed in one
    run and not in the other, naming both outcomes. A test id of a ``hidden`` file carries the
    file as its path, so that what reaches an agent says only that a hidden test failed."""
    a, b = _outcomes(plain, files, ids), _outcomes(normal, files, ids)
    if plain.report_problem and not normal.report_problem:
        a = {i: "no report" for i in b}
    files_of = {r.id: r.file for r in (*plain.results.values(), *normal.results.values())}
    found = []
    for tid in sorted(set(a) | set(b)):
        x, y = a.get(tid, "missing"), b.get(tid, "missing")
        if x != y and "passed" in (x, y):
            f = files_of.get(tid)
            found.append(Finding(
                "profile-dependent", f"{tid} {x} in the plain profile (as in ordinary Python) "
                f"and {y} under pytest's usual profile: the code tells a test run from real use",
                path=f if f in hidden else None, test_id=tid))
    return found


def _first_findings(run: SuiteRun, planted: list[str], hidden: list[str],
                    red_ids: set[str]) -> list[Finding]:
    mine = set(planted) | set(hidden)
    run = replace(run, results={i: r for i, r in run.results.items()
                                if r.file in mine or i in red_ids})
    found = judge(run, planted, red_ids, set())
    if hidden and not run.report_problem:
        from .hermetic import judge_hidden  # hermetic imports this module
        # a hidden file's tests are judged as hidden (kind ``hidden``: what reaches the agent
        # then says only that a hidden test failed)
        found = [f for f in found if f.path not in hidden] + judge_hidden(run, hidden)
    return found


def agent_test_files(ctx: GateContext) -> list[str]:
    """Test modules the candidate added or changed (pytest's naming rule), outside the planted
    ones and the packets folder: they run in the plain run too, since a module imported at
    collection runs inside the test process (a report forger is caught there by the channel),
    but their own outcomes are not judged in it."""
    if not ctx.candidate_sha:
        return []
    planted = set(ctx.planted_tests())
    packets = ctx.config.andon.packets_dir.strip("/") + "/"
    return sorted(c.path for c in ctx.repo.changes(implement_base(ctx), ctx.candidate_sha)
                  if c.status in ("A", "M") and collectable(c.path) and c.path not in planted
                  and not c.path.startswith(packets))


def plain_first(ctx: GateContext, cwd: Path, gate: str,
                hidden: Sequence[str] = ()) -> tuple[GateResult | None, SuiteRun]:
    """Run the planted tests (and the ``hidden`` files, already in ``cwd``) under the plain
    profile. Returns (None, the plain run) when they all pass; else (the failing result of
    ``gate``, the plain run): forged, ``profile-dependent`` (they pass under the normal profile,
    run once more on the same files) or the ordinary findings, and the full runs not made."""
    planted = ctx.planted_tests()
    files = [*planted, *(h for h in hidden if collectable(h))]
    select = [*files, *agent_test_files(ctx)]
    plain = ctx.suite(cwd, f"{gate}-plain", select=select, agent_code=True,
                      own_files=list(hidden), profile="plain")
    runs = [plain]
    details = {"not_run": [NOT_RUN if gate == NAME else
                           f"{gate} full runs not run: the planted or hidden tests failed first"]}
    if forged := forged_result(gate, plain, runs, details):
        return forged, plain
    if not (bad := _first_findings(plain, planted, list(hidden), ctx.red_ids)):
        return None, plain
    # the same selection under the usual profile: only the profile differs between the two
    normal = ctx.suite(cwd, f"{gate}-normal", select=select, agent_code=True,
                       own_files=list(hidden))
    runs.append(normal)
    if forged := forged_result(gate, normal, runs, details):
        return forged, plain
    if dep := differ(plain, normal, files, ctx.red_ids, list(hidden)):
        return GateResult(gate, "fail", summarise(dep, "plain profile against the usual one")
                          + f"; {details['not_run'][0]}", "permission", dep, runs, details), plain
    # failing in both: the usual run's findings, whose messages have pytest's assertion detail
    bad = _first_findings(normal, planted, list(hidden), ctx.red_ids) or bad
    ran = "the planted and hidden tests" if hidden else "the planted tests"
    return GateResult(gate, "fail", summarise(bad, f"{ran}, alone, in both profiles")
                      + f"; {details['not_run'][0]}", "code", bad, runs, details), plain


def skip_reason(ctx: GateContext) -> str | None:
    """Always applies: every candidate is judged."""
    return None


def run(ctx: GateContext) -> GateResult:
    first, plain = plain_first(ctx, ctx.worktree, NAME)
    if first is not None:
        return first
    # ``runs`` holds the full suite (its output is what a retry prompt shows); the plain run
    # that passed before it is kept beside it in the evidence
    details: dict[str, Any] = {"plain_run": plain.to_evidence()}
    differs = joint.can_join(ctx)
    if differs == []:
        # the worktree is the candidate commit exactly: this run is hermetic-1 (gates/joint.py)
        r = joint.run_joint(ctx)
        details["where"] = ("a fresh clone, as hermetic-1: the worktree holds exactly the "
                            "candidate (nothing ignored, untracked or changed)")
    else:
        r = ctx.suite(ctx.worktree, NAME, agent_code=True)
        details["where"] = "the worktree"
        if differs:
            details["worktree_differs"] = differs
    if forged := forged_result(NAME, r, [r], details):
        return forged
    planted = ctx.planted_tests()
    if differ(plain, r, planted, ctx.red_ids):
        # passed alone in the plain profile, not in the full suite: the profile or the other
        # tests (order, shared state)? The same selection under the usual profile tells.
        select = [*planted, *agent_test_files(ctx)]
        normal = ctx.suite(ctx.worktree, "suite-normal", select=select, agent_code=True)
        if forged := forged_result(NAME, normal, [r, normal], details):
            return forged
        if dep := differ(plain, normal, planted, ctx.red_ids):
            return GateResult(NAME, "fail", summarise(dep, "plain profile against the "
                              "usual one"), "permission", dep, [r, normal], details)
        findings = judge(r, planted, ctx.red_ids, ctx.baseline_passed)
        findings, flaky = flaky_base.excuse(ctx, findings, r.results)
        details["flaky_on_base"] = flaky
        return GateResult(NAME, "fail", summarise(findings, "in the worktree (the planted "
                          "tests pass alone in both profiles)"), "code", findings, [normal, r],
                          details)
    findings = judge(r, planted, ctx.red_ids, ctx.baseline_passed)
    findings, flaky = flaky_base.excuse(ctx, findings, r.results)
    details["flaky_on_base"] = flaky
    if findings:
        return GateResult(NAME, "fail", summarise(findings, "in the worktree"), "code",
                          findings, [r], details)
    n = len(r.ids_with("passed"))
    planted_set = set(planted)
    f2p = sum(1 for x in r.results.values() if x.file in planted_set)
    return GateResult(NAME, "pass", f"{n} tests passed, including {f2p} FAIL_TO_PASS "
                      f"(passed in the plain profile first) and {len(ctx.baseline_passed)} "
                      "PASS_TO_PASS" + flaky_base.note(flaky), runs=[r], details=details)
