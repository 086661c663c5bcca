"""``atdd-scope`` gate: the atdd stage changed test paths only.

The same check as :mod:`andon.gates.scope` on the atdd stage's commit (plant commit → atdd
commit), with every non-test path out of scope.
"""

from __future__ import annotations

from .base import GateContext, GateResult
from .scope import check

NAME = "atdd-scope"


def skip_reason(ctx: GateContext) -> str | None:
    """Always applies: every atdd commit is checked."""
    return None


def run(ctx: GateContext) -> GateResult:
    """The atdd stage's change: test paths only."""
    assert ctx.atdd_sha
    return check(ctx, NAME, ctx.plant_sha, ctx.atdd_sha, frozen_tests=False, only_tests=True)
