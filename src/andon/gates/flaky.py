"""``flaky`` gate: the tests that judge this change give the same answer in any order.

The planted tests and the tests near the change run ``[gates.flaky] runs`` times in a fresh
clone of the candidate, each run in a random order with its own seed (andon's shuffle plugin).
A test whose outcome differs between runs (or that is missing from one) is a ``flaky`` finding
naming the test id and the seeds of each outcome: the gate fails, and nothing is retried.
A test that fails in every run is a ``failing-test`` finding. With ``[test] jobs`` above 1
the runs are dealt into lanes, each in a fresh clone of its own, at the same time
(gates/lanes.py).

"Near the change" is kept simple: a collectable test file (``test_*.py``, ``*_test.py``) of the
candidate is near when it imports a changed module (``import a.b``, ``from a.b import c``,
``from a import b``; the module name is the file's path under its ``[test] pythonpath`` dir) or
lies in the same directory as a changed file.

The shuffle plugin never resets ``random``'s global seed between tests, so every run is also the
"seeds not reset between tests" case: a test that depends on the random state another test left
(or on being first) shows up as a flip.
"""

from __future__ import annotations

import ast
import random
from collections import defaultdict
from contextlib import ExitStack
from pathlib import PurePosixPath

from ..runners.pytest import collectable
from .base import Finding, GateContext, GateResult, forged_result, fresh_clone
from .changed import changed_code_files
from .lanes import Planned, deal, jobs, run_lanes

NAME = "flaky"


def module_name(path: str, pythonpath: list[str]) -> str:
    for root in pythonpath:
        root = root.strip("/")
        if root in ("", ".") or not path.startswith(root + "/"):
            continue
        path = path[len(root) + 1:]
        break
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def nearby_tests(ctx: GateContext, changed: list[str]) -> list[str]:
    assert ctx.candidate_sha
    tree = [e.path for e in ctx.repo.entries(ctx.candidate_sha)]
    packets = ctx.config.andon.packets_dir.strip("/") + "/"
    modules = {module_name(p, ctx.config.test.pythonpath) for p in changed}
    dirs = {str(PurePosixPath(p).parent) for p in changed}
    near = []
    for path in tree:
        if not path or not collectable(path) or path.startswith(packets):
            continue
        if str(PurePosixPath(path).parent) in dirs:
            near.append(path)
            continue
        source = (ctx.repo.file_bytes(ctx.candidate_sha, path) or b"").decode(errors="replace")
        if imported_modules(source) & modules:
            near.append(path)
    return near


def skip_reason(ctx: GateContext) -> str | None:
    """Why the gate does not apply (opt-in: off for the packet's tier), or None."""
    settings = ctx.config.gates.flaky
    return None if settings.runs_for(ctx.packet.tier) else settings.off_reason(NAME)


def run(ctx: GateContext) -> GateResult:
    """Nearby and planted tests in random orders (see :func:`skip_reason`)."""
    settings = ctx.config.gates.flaky
    assert ctx.candidate_sha
    changed = changed_code_files(ctx)
    planted = ctx.planted_tests()
    tests = sorted(set(planted) | set(nearby_tests(ctx, changed)))
    details: dict = {"tests": tests, "planted": planted}
    if not tests:
        return GateResult(NAME, "skipped", "not run: no planted test and no test near the "
                          "change", details=details)
    rng = random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < settings.runs:
        s = rng.randrange(1, 2**31)
        if s not in seeds:
            seeds.append(s)
    details["seeds"] = seeds
    plan = [Planned(f"flaky-{i}", select=tests, seed=seed, slot=i - 1)
            for i, seed in enumerate(seeds, start=1)]
    dealt = deal(plan, jobs(ctx.config))
    details["lanes"] = [[p.name for p in part] for part in dealt]
    with ExitStack() as stack:
        lanes = [(stack.enter_context(fresh_clone(
            ctx.repo, ctx.candidate_sha,
            f"flaky-{ctx.packet.id}" + (f"-{i}" if len(dealt) > 1 else ""))), part)
            for i, part in enumerate(dealt, start=1)]
        made = run_lanes(ctx, lanes, agent_code=True)  # every run: outcomes are compared
    runs = [made[p.name] for p in plan]
    for r in runs:
        if forged := forged_result(NAME, r, runs, details):
            return forged
    broken = [r for r in runs if r.report_problem]
    if broken:
        r = broken[0]
        return GateResult(NAME, "fail", f"flaky run {r.name} (seed {r.seed}) wrote no usable "
                          f"report: {r.report_problem}", "code",
                          [Finding("no-report", f"{r.report_problem} (seed {r.seed})")], runs,
                          details)
    by_test: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    files: dict[str, str | None] = {}
    for r in runs:
        for tid in {t for run in runs for t in run.results}:
            res = r.results.get(tid)
            by_test[tid]["missing" if res is None else res.outcome].append(r.seed or 0)
            if res is not None:
                files[tid] = res.file
    findings = []
    for tid, outcomes in sorted(by_test.items()):
        if len(outcomes) > 1:
            said = "; ".join(f"{o} with seeds {', '.join(map(str, s))}"
                             for o, s in sorted(outcomes.items()))
            findings.append(Finding("flaky", f"{tid} flips between runs: {said}",
                                    path=files.get(tid), test_id=tid))
        elif set(outcomes) & {"failed", "error"}:
            findings.append(Finding("failing-test", f"{tid} {next(iter(outcomes))} in every "
                                    "run", path=files.get(tid), test_id=tid))
    details["outcomes"] = {t: {o: s for o, s in v.items()} for t, v in sorted(by_test.items())}
    if findings:
        first = findings[0].message
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        return GateResult(NAME, "fail", f"{first}{more}", "code", findings, runs, details)
    return GateResult(NAME, "pass", f"{len(by_test)} tests in {len(tests)} files gave the same "
                      f"outcome in {len(runs)} random orders (seeds "
                      f"{', '.join(map(str, seeds))})", runs=runs, details=details)
