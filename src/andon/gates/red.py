"""``red`` gate: before any agent runs, the planted tests fail on the base — every time.

The planted tests run ``gates.red_runs`` times (default 3) on the plant commit. A planted test
that passes already tests nothing; one that is red only sometimes is flaky; either way the
packet itself is wrong (layer ``specification``) and is blocked. A planted module that does
not even import on the base (its function does not exist yet) is red as a whole; its tests
are then judged one by one in the ``suite`` gate.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from .. import plain_file
from . import clash, lanes
from .base import Finding, GateContext, GateResult, fresh_clone, planted_tests
from .cache import red_key

NAME = "red"
RED = ("failed", "error")


def skip_reason(ctx: GateContext) -> str | None:
    """Why the gate does not apply (no planted test file, none written by atdd), or None."""
    if not ctx.planted_tests():
        return "the packet plants no test files: nothing is known to fail before the change"
    return None


def run(ctx: GateContext) -> GateResult:
    """The files that must be red are ``ctx.planted_tests()`` (planted, and the atdd stage's).

    ``ctx.atdd_just_ran`` (the atdd agent ran in this worktree during this attempt): its
    tests (``ctx.atdd_tests``) must also cover each invariant they name with more than one
    test, a fault in them alone is the agent's (layer ``test``), and nothing is cached, since
    the worktree may hold more than its commit. Otherwise a pass is kept in the results
    cache (gates/cache.py ``red_key``) and a later attempt with the same key records the
    cached pass (``details["cached"]``) and runs nothing. A failure is never cached: it is
    run again, in case it was the machine's."""
    tests = ctx.planted_tests()
    n = ctx.config.gates.red_runs
    # The cache before anything else: a pass was kept only when the clash check below had
    # found nothing, and the key names every input of that check.
    key = red_key(ctx, tests, n) if not ctx.atdd_just_ran and ctx.store is not None else None
    if key and (hit := ctx.store.cached(key)) and hit["kind"] == NAME:
        return GateResult(NAME, "pass", f"cached, no test run: {hit['data']['summary']} "
                          f"(same base, planted and hidden files, test settings and "
                          f"tests' environment; run "
                          f"{hit['created_at'][:19]})",
                          details={"red_ids": hit["data"]["red_ids"], "cached": True,
                                   "cache_key": key})
    if ctx.worktree_ready:
        return _run_in(ctx, ctx.worktree, tests, n, key)
    # no agent has run yet and the worktree is still being written: a clone holds the same
    # commit (and, as the worktree, nothing else)
    with fresh_clone(ctx.repo, ctx.atdd_sha or ctx.plant_sha, f"red-{ctx.packet.id}") as here:
        return _run_in(ctx, here, tests, n, key)


def _run_in(ctx: GateContext, home: Path, tests: list[str], n: int, key: str | None
            ) -> GateResult:
    """The gate's runs in ``home`` (the worktree, or a clone of the commit red judges); a
    pass is kept under ``key`` (None: not cached)."""
    written_by_atdd: Sequence[str] = ctx.atdd_tests if ctx.atdd_just_ran else ()
    cacheable = not ctx.atdd_just_ran
    # before any run: a clash is not visible on the base (see clash.py)
    if found := clash.of_packet(ctx.repo, ctx.plant_sha, ctx.config, home, tests,
                                sorted(ctx.packet.hidden_files)):
        spec = not written_by_atdd or any(f.path not in written_by_atdd for f in found)
        return GateResult(NAME, "fail", found[0].message, "specification" if spec else "test",
                          found)
    runs = lanes.red_runs(ctx, home, tests, n, at_the_same_time=cacheable)
    for r in runs:
        if r.report_problem:
            return GateResult(NAME, "error", f"{r.name}: {r.report_problem}", "environment",
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
            findings.append(Finding("already-passes", f"{test_id} passes on the base in every "
                                    "run: a planted test must fail before the change (one that "
                                    "must keep passing belongs in the suite, committed)",
                                    files[test_id], test_id))
        elif any(o not in RED for o in seen):
            findings.append(Finding("flaky", f"{test_id} is red only sometimes on the base "
                                    f"({', '.join(seen)})", files[test_id], test_id))
    if written_by_atdd:
        findings += _invariant_coverage(ctx, written_by_atdd,
                                        {i: files[i] for i in outcomes
                                         if files[i] in written_by_atdd})
    findings = list({f.key(): f for f in findings}.values())
    if findings:
        # A planted test that is not red means the packet is wrong (specification: blocked);
        # when only the atdd stage's tests are at fault, the atdd agent erred (test: retried).
        planted = set(planted_tests(ctx.packet))
        spec = any(f.path in planted for f in findings) or not written_by_atdd
        what = "planted tests" if spec else "the atdd stage's tests"
        how = "red" if all(f.kind == "already-passes" for f in findings) else "reliably red"
        return GateResult(NAME, "fail", f"{what} are not {how} on the base: "
                          f"{findings[0].message}", "specification" if spec else "test",
                          findings, runs)
    # "::tests.test_x" is pytest's record of a module that did not import; its real test
    # ids appear only once the code exists, and the suite gate judges them by file.
    red_ids = {i for i in outcomes if not i.startswith("::")}
    unimportable = len(outcomes) - len(red_ids)
    what = f"{len(red_ids)} planted test(s)" + (
        f" and {unimportable} planted module(s) that do not import yet" if unimportable else "")
    result = GateResult(NAME, "pass", f"{what}: red in {n} of {n} runs",
                        runs=runs, details={"red_ids": sorted(red_ids), "cached": False})
    if key:
        ctx.store.set_cached(key, NAME, {"red_ids": sorted(red_ids), "summary": result.summary},
                             {"runs": [r.to_evidence() for r in runs]})
    return result


def _invariant_coverage(ctx: GateContext, files: Sequence[str],
                        ids: dict[str, str | None]) -> list[Finding]:
    """Each invariant the atdd tests name (in a test's name, docstring or body) must be named
    by more than one test: an ordinary case, a boundary, a rejected input. ``ids`` maps the
    atdd tests' ids on the base to their files."""
    functions: dict[str, dict[str, str]] = {}  # file -> function name -> source
    f: str | None
    for f in files:
        # as committed, not as the worktree has it now: a test file can put a FIFO or a link
        # in its own place as it ends (plain_file.py)
        if ctx.atdd_sha:
            data = ctx.repo.file_bytes(ctx.atdd_sha, f)
        else:
            try:
                data = plain_file.read(ctx.worktree / f, 1 << 24)
            except OSError:
                data = None
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        functions[f] = {node.name: ast.get_source_segment(text, node) or ""
                        for node in ast.walk(tree)
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    sources: dict[str, str] = {}  # test id -> its function's source
    for test_id, f in ids.items():
        defined = functions.get(f or "", {})
        if test_id.startswith("::"):
            # A module that does not import on the base is one result, "::<module>": count
            # the test functions its source defines instead.
            sources.update({f"{test_id[2:]}::{name}": src for name, src in defined.items()
                            if name.startswith("test")})
        else:
            sources[test_id] = defined.get(test_id.split("::")[-1].split("[")[0], "")
    found = []
    for inv in ctx.packet.invariants:
        naming = [i for i, src in sources.items() if inv.id in src]
        if len(naming) == 1:
            found.append(Finding("thin-coverage", f"invariant {inv.id} is covered by only one "
                                 f"test ({naming[0]}); write an ordinary case, a boundary and a "
                                 "rejected input", test_id=naming[0]))
    if ctx.packet.invariants and not any(
            inv.id in src for inv in ctx.packet.invariants for defined in functions.values()
            for src in defined.values()):
        found.append(Finding("thin-coverage", "no test written by the atdd stage names an "
                             "invariant id of the packet"))
    return found
