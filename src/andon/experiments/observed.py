"""Observations per condition (docs/experiments.md, "Observations"): for each observation a
run table carries, the share of a condition's valid runs in which it was seen at least once,
with its Wilson interval (Wilson 1927, as the resolve rates), and the total count. Error runs
and runs where the observation was not made (None) are left out of both."""

from __future__ import annotations

from typing import Any

from .observe import OBSERVATIONS
from .runs import RunTable
from .stats import wilson_interval


def summarise(table: RunTable, confidence: float = 0.95) -> list[dict[str, Any]]:
    """One row per (condition, observation) present in ``table``: ``condition``,
    ``observation``, ``runs`` (valid runs where it was made), ``seen`` (runs where it was
    > 0), ``rate``, ``low``, ``high`` (Wilson), ``total`` (the sum of the counts)."""
    out = []
    for condition in table.conditions():
        runs = [r for r in table.runs if r.condition == condition and r.valid]
        for name in OBSERVATIONS:
            values = [r.observations[name] for r in runs
                      if r.observations.get(name) is not None]
            if not values:
                continue
            seen = sum(1 for v in values if v and v > 0)
            ci = wilson_interval(seen, len(values), confidence)
            out.append({"condition": condition, "observation": name, "runs": len(values),
                        "seen": seen, "rate": seen / len(values), "low": ci.low,
                        "high": ci.high, "total": sum(v or 0 for v in values)})
    return out
