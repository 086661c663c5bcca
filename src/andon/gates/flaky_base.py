"""A PASS_TO_PASS test that fails on a candidate: the agent's doing, or flaky on the base?

A test that fails one run in four blocks most honest attempts when each attempt runs the full
suite about five times (SWE-bench/SWE-bench#167: SWE-bench validates its PASS_TO_PASS lists by
running the gold patch repeatedly and drops tests that do not pass every time). andon checks the
one test against the base instead, when it fails:

**The rule.** A ``pass-to-pass`` finding (a test that passed on the base in preflight and now
*failed or errored*, not one that went missing) whose test file the candidate did not change is
re-run, with its file, on a fresh clone of the base commit, up to ``[gates] base_reruns`` times
(default 10; stop at the first failure). If it fails there at least once, it is **flaky on the
base**: the finding is taken out of the gate's judgement (not counted against the agent) and
reported in the gate's ``flaky_on_base`` evidence and summary (layer ``environment``: a problem
of the repository, not of the packet). If it passes every base re-run, the failure stays the
agent's.

**Why that distinguishes them.** Only evidence from code the agent never touched can excuse a
failure. "It passes when re-run on the candidate" proves nothing: an agent that makes a test fail
only sometimes (a counter, a clock, a random draw in its code) also passes re-runs. On the base
that test never fails, so it is still rejected. An honest attempt with a test flaky at rate p on
the base is wrongly blamed with probability (1-p)^base_reruns (0.056 at p = 0.25 and 10 runs);
an agent that makes an already flaky test *more* flaky is excused — the documented limit. A test
whose flakiness needs the whole suite (order, shared state) may not fail when run with its file
alone: it then stays the agent's (the safe side). Known flaky ids are remembered for the rest of
the attempt, so later runs do not re-run them again.

**Order.** A failure in a shuffled run (``seed`` given) may need the tests that ran before it
(platformdirs 4.3.6: one test reloads a module under a mocked ``sys.platform`` and leaves it
broken for later tests), which its file alone never reproduces. So first the shuffled run's
own order is replayed once on a fresh clone of the base: every test it ran whose file the base
has and the candidate did not change, named one by one in the order they ran (pytest runs
node ids in the order given). A test failing there is order-dependent on the base, excused as
above (``failed_on_base_run`` = ``"same order"``, ``base_log`` the ``base-order-N`` log). The
candidate's own tests and changed files are not in the replay, so an order dependence the agent
brought (its code or its tests polluting the others) passes there and stays the agent's.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Finding, GateContext, fresh_clone

KIND = "pass-to-pass"
# the node ids of a replay go on one command line (Linux allows about 2 MB in all)
MAX_ORDER_CHARS = 1_000_000


def excuse(ctx: GateContext, findings: list[Finding], results: dict,
           seed: int | None = None) -> tuple[list[Finding], list[dict]]:
    """Split ``findings`` (of one full-suite run whose results by id are ``results``, in the
    order they ran; ``seed``: the run was shuffled with it) into the ones that stand and the
    flaky-on-base records ``{"test_id", "file", "message", "failed_on_base_run", "base_log"}``
    taken out of them (see the module docstring)."""
    candidates = {}
    for f in findings:
        r = results.get(f.test_id or "")
        if (f.test_id and f.kind == KIND and r is not None and r.outcome in ("failed", "error")
                and r.file):
            candidates[f.test_id] = r
    if not candidates:
        return findings, []
    changed = _changed(ctx)
    candidates = {i: r for i, r in candidates.items() if r.file not in changed}
    if seed is not None and (todo := {i: r for i, r in candidates.items()
                                      if i not in ctx.flaky_on_base}):
        ctx.flaky_on_base.update(_replay_on_base(ctx, results, todo, changed))
    unknown = {i: r for i, r in candidates.items()
               if i not in ctx.flaky_on_base and i not in ctx.steady_on_base}
    if unknown:
        failed, runs = _rerun_on_base(ctx, unknown)
        ctx.flaky_on_base.update(failed)
        ctx.steady_on_base.update({i: runs for i in unknown if i not in failed})
    flaky = {i for i in candidates if i in ctx.flaky_on_base}
    kept = []
    for f in findings:
        if f.test_id in flaky:
            continue
        if f.test_id in candidates and (n := ctx.steady_on_base.get(f.test_id, 0)):
            f = replace(f, message=f"{f.message} [passed {n} of {n} re-runs on the base: "
                                   "the failure is the change's]")
        kept.append(f)
    records = [{"test_id": i, "file": candidates[i].file,
                "message": candidates[i].brief, **ctx.flaky_on_base[i]}
               for i in sorted(flaky)]
    return kept, records


def note(records: list[dict]) -> str:
    """The summary suffix for ``records`` ("" when there are none)."""
    if not records:
        return ""
    ids = ", ".join(r["test_id"] for r in records[:3]) + (" …" if len(records) > 3 else "")
    return (f"; not counted: {len(records)} PASS_TO_PASS test(s) flaky on the base "
            f"(environment: {ids})")


def _changed(ctx: GateContext) -> set[str]:
    if not ctx.candidate_sha:
        return set()
    return {c.path for c in ctx.repo.changes(ctx.base_sha, ctx.candidate_sha)}


def _rerun_on_base(ctx: GateContext, tests: dict) -> tuple[dict[str, dict], int]:
    """Re-run the files of ``tests`` on a fresh clone of the base: the ids that failed there
    (with the run and its log), and the number of runs made."""
    n = ctx.config.gates.base_reruns
    if n <= 0:
        return {}, 0
    files = sorted({r.file for r in tests.values()})
    found: dict[str, dict] = {}
    with fresh_clone(ctx.repo, ctx.base_sha, "base-rerun") as cwd:
        for i in range(1, n + 1):
            done = len(list(ctx.evidence_dir.glob("base-rerun-*.log")))
            run = ctx.suite(cwd, f"base-rerun-{done + 1}", select=files, slot=i - 1)
            for test_id in tests:
                got = run.results.get(test_id)
                if test_id not in found and got is not None and got.outcome in ("failed",
                                                                                 "error"):
                    found[test_id] = {"failed_on_base_run": i, "base_log": str(run.log_path)}
            if len(found) == len(tests):
                break
    return found, i


def _nodeid(r) -> str:
    """The pytest node id of a result (id ``<module.Class>::<name>``, file ``a/b.py``)."""
    classname, name = r.id.split("::", 1)
    module = r.file[:-3].replace("/", ".")
    inner = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
    return "::".join([r.file, *([inner.replace(".", "::")] if inner else []), name])


def _replay_on_base(ctx: GateContext, results: dict, tests: dict,
                    changed: set[str]) -> dict[str, dict]:
    """Run on a fresh clone of the base the tests of ``results`` it has, in their order (see
    the module docstring); the ids of ``tests`` that failed there, with the run's log."""
    with fresh_clone(ctx.repo, ctx.base_sha, "base-order") as cwd:
        order = list(dict.fromkeys(
            _nodeid(r) for r in results.values() if r.file and r.file.endswith(".py")
            and r.file not in changed and (cwd / r.file).is_file()))
        if sum(len(n) + 1 for n in order) > MAX_ORDER_CHARS:
            return {}  # too long a command line: not replayed, the failure stays the agent's
        done = len(list(ctx.evidence_dir.glob("base-order-*.log")))
        run = ctx.suite(cwd, f"base-order-{done + 1}", select=order)
    return {i: {"failed_on_base_run": "same order", "base_log": str(run.log_path)}
            for i in tests if (got := run.results.get(i)) is not None
            and got.outcome in ("failed", "error")}
