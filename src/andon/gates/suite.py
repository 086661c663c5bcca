"""``suite`` gate: the full suite in the attempt's worktree, read per test id.

Resolved means (as in SWE-bench's grading): every planted test passes (FAIL_TO_PASS) and
every test that passed on the base still passes (PASS_TO_PASS). A skipped, xfailed, missing or
uncollected expected test is a failure, and so is any failing or erroring test at all: the
integration branch must pass its full suite at every commit.
"""

from __future__ import annotations

from ..runners.pytest import SuiteRun
from . import flaky_base
from .base import Finding, GateContext, GateResult, forged_result


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
            found.append(Finding(kind, f"{test_id} {result.outcome}: {result.message[:200]}",
                                 test_id=test_id))
    for f in planted:
        in_file = [r for r in results.values() if r.file == f]
        if not in_file:
            found.append(Finding("fail-to-pass", f"planted test file {f} ran no tests", path=f))
    reported = {x.test_id for x in found}
    for r in results.values():
        if r.outcome in ("failed", "error") and r.id not in reported:
            kind = "fail-to-pass" if r.file in planted else "failing-test"
            found.append(Finding(kind, f"{r.id} {r.outcome}: {r.message[:200]}",
                                 test_id=r.id, path=r.file))
        elif r.outcome == "skipped" and r.file in planted and r.id not in reported:
            found.append(Finding("fail-to-pass", f"planted test {r.id} was skipped",
                                 test_id=r.id, path=r.file))
    return found


def summarise(findings: list[Finding], where: str) -> str:
    first = findings[0].message
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{where}: {first}{more}"


def run(ctx: GateContext) -> GateResult:
    r = ctx.suite(ctx.worktree, "suite", agent_code=True)
    if forged := forged_result("suite", r, [r]):
        return forged
    findings = judge(r, ctx.planted_tests(), ctx.red_ids, ctx.baseline_passed)
    findings, flaky = flaky_base.excuse(ctx, findings, r.results)
    if findings:
        return GateResult("suite", "fail", summarise(findings, "in the worktree"), "code",
                          findings, [r], {"flaky_on_base": flaky})
    n = len(r.ids_with("passed"))
    planted = set(ctx.planted_tests())
    f2p = sum(1 for x in r.results.values() if x.file in planted)
    return GateResult("suite", "pass", f"{n} tests passed, including {f2p} FAIL_TO_PASS and "
                      f"{len(ctx.baseline_passed)} PASS_TO_PASS" + flaky_base.note(flaky),
                      runs=[r], details={"flaky_on_base": flaky})
