"""Budgets: stop spending when an attempt, a packet or a run has cost or taken too much.

``[budgets.attempt]``, ``[budgets.packet]`` and ``[budgets.run]`` in andon.toml each take
``max_cost_usd`` (USD, the sum of the stage runs' ``usage.cost_usd``) and ``max_wall_s``
(seconds, the sum of the stage runs' wall time: how long agents ran, not the gates). A run
is one ``andon run``: the stage runs started since it began. A packet counts every attempt
it ever had, across unblocks.

The attempt checks before each stage run (``starting``: no budget left when spent ≥ limit)
and after it (exceeded when spent > limit). A stop is a ``budget`` gate result, ``fail``,
layer ``harness``, saying which budget, what was spent and the limit; the attempt ends there
with its evidence (transcripts, the candidate commit) kept, and the runner blocks the packet,
which halts the line until a person raises the budget (``andon unblock``).

A cost limit needs known costs: if a stage run in the scope has an unknown cost (the agent
reported none and its model has no price), the cost budget cannot be kept and the work stops
too, saying so — add a price in ``[prices."<model>"]`` or set the agent's ``model``.
"""

from __future__ import annotations

from typing import Any

from .config import Budget, Budgets
from .errors import AndonError
from .gates.base import GateResult
from .store import StoreProtocol


class Exceeded(AndonError):
    """Raised inside an attempt when a stage may not start: no budget left."""

    def __init__(self, result: GateResult):
        super().__init__(result.summary)
        self.result = result


def check(store: StoreProtocol, budgets: Budgets, attempt: dict[str, Any], run_started: str | None,
          starting: bool) -> GateResult | None:
    """The first budget that stops this work, as a failed ``budget`` gate result, or None.

    ``attempt`` is the attempt's store row (``id``, ``packet_id``); ``run_started`` the ISO
    time the current ``andon run`` began (None: no run budget is checked); ``starting`` True
    before a stage run, False after one.
    """
    scopes: list[tuple[str, Budget, Any]] = [
        ("attempt", budgets.attempt, lambda: store.stage_runs(attempt["id"])),
        ("packet", budgets.packet, lambda: [s for a in store.attempts(attempt["packet_id"])
                                            for s in store.stage_runs(a["id"])]),
        ("run", budgets.run, lambda: _since(store, run_started)),
    ]
    for scope, limit, runs_of in scopes:
        if limit.max_cost_usd is None and limit.max_wall_s is None:
            continue
        if scope == "run" and run_started is None:
            continue
        runs = runs_of()
        stop = judge(scope, limit, runs, starting)
        if stop is not None:
            return stop
    return None


def _since(store: StoreProtocol, started: str | None) -> list[dict[str, Any]]:
    return [s for p in store.packets() for a in store.attempts(p["id"])
            for s in store.stage_runs(a["id"]) if started and s["started_at"] >= started]


def judge(scope: str, limit: Budget, runs: list[dict[str, Any]], starting: bool
          ) -> GateResult | None:
    """Whether ``runs`` (stage runs: ``usage.cost_usd`` USD, ``duration_s`` seconds) are over
    ``limit``: a failed ``budget`` gate result naming ``scope``, what was spent and the
    limit, or None. ``starting``: judged before one more run (no budget left when spent ≥
    limit), else after one (exceeded when spent > limit). Also used by the stages outside an
    attempt (the plan rounds, the interview), each counted as one attempt."""
    costs = [(s.get("usage") or {}).get("cost_usd") for s in runs]
    known = [c for c in costs if c is not None]
    unknown = len(costs) - len(known)
    cost, wall = float(sum(known)), float(sum(s.get("duration_s") or 0.0 for s in runs))
    over = (lambda spent, cap: spent >= cap) if starting else (lambda spent, cap: spent > cap)
    details = {"scope": scope, "cost_usd": cost, "wall_s": wall, "stage_runs": len(runs),
               "unknown_cost_runs": unknown, "max_cost_usd": limit.max_cost_usd,
               "max_wall_s": limit.max_wall_s}
    if limit.max_cost_usd is not None and unknown:
        return _stop(f"{scope} budget max_cost_usd ${limit.max_cost_usd:g} cannot be kept: the "
                     f"cost of {unknown} of {len(runs)} stage run(s) is unknown (no cost "
                     "reported, no price for the model); add [prices.\"<model>\"] or set the "
                     "agent's model in andon.toml", {**details, "kind": "cost-unknown"})
    if limit.max_cost_usd is not None and over(cost, limit.max_cost_usd):
        verb = "no budget left to start a stage" if starting else "exceeded"
        return _stop(f"{scope} budget {verb}: agents cost ${cost:.4f}, max_cost_usd is "
                     f"${limit.max_cost_usd:g}", {**details, "kind": "cost"})
    if limit.max_wall_s is not None and over(wall, limit.max_wall_s):
        verb = "no time left to start a stage" if starting else "exceeded"
        return _stop(f"{scope} budget {verb}: agents ran {wall:.1f} s, max_wall_s is "
                     f"{limit.max_wall_s:g} s", {**details, "kind": "wall"})
    return None


def _stop(summary: str, details: dict[str, Any]) -> GateResult:
    return GateResult("budget", "fail", summary, "harness", details=details)
