"""``red`` gate: before any agent runs, the planted tests fail on the base — every time.

The planted tests run ``gates.red_runs`` times (default 3) on the plant commit. A planted test
that passes already tests nothing; one that is red only sometimes is flaky; either way the
packet itself is wrong (layer ``specification``) and is blocked. A planted module that does
not even import on the base (its function does not exist yet) is red as a whole; its tests
are then judged one by one in the ``suite`` gate.
"""

from __future__ import annotations

from .base import Finding, GateContext, GateResult

RED = ("failed", "error")


def run(ctx: GateContext) -> GateResult:
    tests = ctx.planted_tests()
    if not tests:
        return GateResult("red", "skipped", "the packet plants no test files: nothing is "
                          "known to fail before the change")
    n = ctx.config.gates.red_runs
    runs = [ctx.suite(ctx.worktree, f"red-{i}", select=tests) for i in range(1, n + 1)]
    for r in runs:
        if r.report_problem:
            return GateResult("red", "error", f"{r.name}: {r.report_problem}", "environment",
                              [Finding("no-report", r.report_problem)], runs)
    findings: list[Finding] = []
    outcomes: dict[str, list[str]] = {}
    files: dict[str, str | None] = {}
    for r in runs:
        for f in tests:
            if not any(res.file == f for res in r.results.values()):
                findings.append(Finding("collects-nothing",
                                        f"planted file {f} ran no tests on the base", path=f))
        for res in r.results.values():
            if res.file in tests:
                outcomes.setdefault(res.id, []).append(res.outcome)
                files[res.id] = res.file
    for test_id, seen in sorted(outcomes.items()):
        if len(seen) < n:
            findings.append(Finding("flaky", f"{test_id} ran in only {len(seen)} of {n} runs",
                                    files[test_id], test_id))
        elif all(o == "passed" for o in seen):
            findings.append(Finding("already-passes", f"{test_id} passes on the base: it "
                                    "tests nothing the packet asks for", files[test_id], test_id))
        elif any(o not in RED for o in seen):
            findings.append(Finding("flaky", f"{test_id} is red only sometimes on the base "
                                    f"({', '.join(seen)})", files[test_id], test_id))
    findings = list({f.key(): f for f in findings}.values())
    if findings:
        return GateResult("red", "fail", f"planted tests are not reliably red on the base: "
                          f"{findings[0].message}", "specification", findings, runs)
    # "::tests.test_x" is pytest's record of a module that did not import; its real test
    # ids appear only once the code exists, and the suite gate judges them by file.
    red_ids = {i for i in outcomes if not i.startswith("::")}
    unimportable = len(outcomes) - len(red_ids)
    what = f"{len(red_ids)} planted test(s)" + (
        f" and {unimportable} planted module(s) that do not import yet" if unimportable else "")
    return GateResult("red", "pass", f"{what}: red in {n} of {n} runs",
                      runs=runs, details={"red_ids": sorted(red_ids)})
