"""Gates run by the harness, never by the agent. One module per gate; see ``base.py``.

Every gate module has the shape :class:`~andon.gates.base.Gate`: ``NAME``, ``skip_reason(ctx)``
and ``run(ctx)``; :func:`judge` runs one, recording a gate that does not apply as ``skipped``
with its reason. ``AFTER_IMPLEMENT`` is the order in which gates judge the implement stage's
candidate; the first that fails ends the attempt (the rest are not run). ``red`` and
``atdd-scope`` run earlier, from the attempt; ``preflight`` from the runner, once per run,
before any packet (so with no GateContext); ``agent`` judges a stage's agent run, and is
recorded only when that agent could not work at all.
"""

from __future__ import annotations

from ..errors import GitBlocked
from . import atdd_scope, flaky, hermetic, mutation, patterns, red, scope, static, suite
from .base import Gate, GateContext, GateResult

AFTER_IMPLEMENT: list[Gate] = [
    scope,
    patterns,
    suite,
    hermetic,
    static,      # the project's linters, on the changed lines
    flaky,       # opt-in: nearby tests in random orders
    mutation,    # opt-in: slowest last
]

__all__ = ["AFTER_IMPLEMENT", "Gate", "atdd_scope", "judge", "red"]


def judge(gate: Gate, ctx: GateContext) -> GateResult:
    """``gate``'s result on ``ctx``: ``skipped`` with its reason when it does not apply
    (nothing run), else what its ``run`` returns. The one code path for skipping a gate.
    A git command of the gate's stopped because it was stuck on a file git would wait on for
    ever (git/watch.py: the agent made it where no look after its stage goes, or the code
    under test did, by absolute path) is the gate's ``outside-worktree`` failure naming it."""
    reason = gate.skip_reason(ctx)
    if reason is not None:
        return GateResult(gate.NAME, "skipped", reason)
    try:
        return gate.run(ctx)
    except GitBlocked as exc:
        # which of the two made it is not known: the gate that met it need not run code
        result = scope.blocked(gate.NAME, f"before or during the {gate.NAME} gate (by the "
                               "agent, or by the code under test in a gate's test runs)",
                               ctx.repo.root, exc.found)
        if result is None:
            raise
        return result
