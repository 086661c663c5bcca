"""The comparison of conditions on one run table: a baseline A against a candidate B (or
against every other condition), paired task by task.

Reads a :class:`~andon.experiments.runs.RunTable` only (a CSV today, the store later) and
returns plain dataclasses; :func:`as_dict` turns them into the JSON document that
docs/experiments.md describes. Nothing here prints or writes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from ..errors import UsageError
from ..suggest import hint
from . import observed, stats
from .runs import RunTable

RATIO_METRICS = ("cost_usd", "input_tokens", "output_tokens", "total_tokens", "wall_s",
                 "tool_s")
PAIRING_RULE = (
    "A task is compared when both conditions have at least one run on it that did not end "
    "in error; other tasks are dropped and listed with the reason. The paired table and "
    "McNemar's test use each condition's first such run of a task (lowest repeat), so the "
    "pairs are independent as the test assumes. Resolve rates, pass@k and pass^k use every "
    "such run of the compared tasks. A ratio B/A uses, per task, the mean of each "
    "condition's non-error runs that have the value, only where both means are present "
    "and > 0. Error runs are excluded from every rate and counted apart.")


class ComparisonError(UsageError):
    """The comparison asked for cannot be made (unknown or identical conditions)."""


@dataclass
class Cell:
    """One condition on one task: ``runs`` in all, ``errors`` among them, ``valid`` the rest
    of which ``resolved`` resolved; ``first_resolved`` is the outcome of the lowest-repeat
    valid run (None without one); ``metrics`` the mean of each metric over the valid runs
    that have it (None when none has)."""

    runs: int = 0
    errors: int = 0
    valid: int = 0
    resolved: int = 0
    first_resolved: bool | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)

    @property
    def fraction(self) -> float | None:
        return self.resolved / self.valid if self.valid else None


@dataclass
class Rate:
    """A resolve rate: ``resolved`` of ``runs`` valid runs (``errors`` excluded), ``rate``
    in [0, 1] with its Wilson interval ``low``..``high`` (all None without a valid run)."""

    condition: str
    resolved: int
    runs: int
    errors: int
    rate: float | None
    low: float | None
    high: float | None
    tasks: int = 0


@dataclass
class PairedTable:
    """Tasks resolved by both, only A, only B, neither (first valid run of each), the exact
    McNemar p on the discordant ones, and the Holm-adjusted p when several candidates are
    compared with one baseline (Holm 1979; None for a single comparison)."""

    both: int
    only_a: int
    only_b: int
    neither: int
    p_value: float
    p_holm: float | None = None


@dataclass
class Ratio:
    """Per-task ratios B/A of one metric: ``tasks`` used (both present and > 0), ``missing``
    compared tasks without a usable pair, ``b_higher`` tasks with ratio > 1; the median, the
    quartiles and the bootstrap interval of the median (None when no task was usable)."""

    metric: str
    tasks: int
    missing: int
    b_higher: int
    median: float | None = None
    q1: float | None = None
    q3: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass
class PassK:
    """pass@k and pass^k of one condition, averaged over the ``tasks`` with >= k valid runs."""

    k: int
    tasks: int
    pass_at_k: float
    pass_hat_k: float


@dataclass
class Repeats:
    """With repeats, per condition: pass@k and pass^k for k = 1..max valid runs, and the
    consistency of the compared tasks with >= 2 valid runs (resolved in every run, in some,
    in none)."""

    condition: str
    pass_k: list[PassK]
    always: int
    sometimes: int
    never: int


@dataclass
class TaskRow:
    """One compared task: both cells and the ratio B/A of each metric (None if unusable)."""

    task: str
    a: Cell
    b: Cell
    ratios: dict[str, float | None]


@dataclass
class Pair:
    """Baseline ``a`` against candidate ``b`` (see :data:`PAIRING_RULE`)."""

    a: str
    b: str
    tasks: int
    dropped: list[tuple[str, str]]
    rate_a: Rate
    rate_b: Rate
    table: PairedTable
    ratios: list[Ratio]
    repeats: list[Repeats] | None
    rows: list[TaskRow]
    regressions: list[str]
    cost_increases: list[str]


@dataclass
class Comparison:
    """Every pair of one comparison, the per-condition summaries over all runs, and what
    was used to make it (``seed``, ``resamples``, ``confidence``)."""

    source: str
    baseline: str
    conditions: list[Rate]
    pairs: list[Pair]
    seed: int
    resamples: int
    confidence: float
    ignored_columns: list[str]
    pairing_rule: str = PAIRING_RULE
    observations: list[dict] = field(default_factory=list)  # observed.summarise


def _cells(table: RunTable) -> dict[str, dict[str, Cell]]:
    """condition → task → Cell, tasks in order of first appearance."""
    grouped: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for run in table.runs:
        grouped[run.condition][run.task].append(run)
    out: dict[str, dict[str, Cell]] = {}
    for cond, tasks in grouped.items():
        out[cond] = {}
        for task, runs in tasks.items():
            valid = sorted((r for r in runs if r.valid), key=lambda r: r.repeat)
            cell = Cell(runs=len(runs), errors=len(runs) - len(valid), valid=len(valid),
                        resolved=sum(r.outcome == "resolved" for r in valid))
            if valid:
                cell.first_resolved = valid[0].outcome == "resolved"
            for metric in RATIO_METRICS:
                if metric == "total_tokens":  # input already includes the cache (andon.usage)
                    known = [r.metrics["input_tokens"] + r.metrics["output_tokens"]
                             for r in valid if r.metrics["input_tokens"] is not None
                             and r.metrics["output_tokens"] is not None]
                else:
                    known = [v for r in valid if (v := r.metrics[metric]) is not None]
                cell.metrics[metric] = sum(known) / len(known) if known else None
            out[cond][task] = cell
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _rate(condition: str, cells: list[Cell], confidence: float) -> Rate:
    resolved = sum(c.resolved for c in cells)
    runs = sum(c.valid for c in cells)
    errors = sum(c.errors for c in cells)
    if runs == 0:
        return Rate(condition, 0, 0, errors, None, None, None, len(cells))
    ci = stats.wilson_interval(resolved, runs, confidence)
    return Rate(condition, resolved, runs, errors, resolved / runs, ci.low, ci.high, len(cells))


def _drop_reason(a: str, b: str, ca: Cell | None, cb: Cell | None) -> str | None:
    reasons = []
    for name, cell in ((a, ca), (b, cb)):
        if cell is None:
            reasons.append(f"no run of {name}")
        elif cell.valid == 0:
            reasons.append(f"every run of {name} errored ({cell.errors})")
    return "; ".join(reasons) or None


def _ratio(metric: str, rows: list[TaskRow], resamples: int, seed: int,
           confidence: float) -> Ratio:
    values = [v for r in rows if (v := r.ratios[metric]) is not None]
    out = Ratio(metric, len(values), len(rows) - len(values), sum(v > 1 for v in values))
    if values:
        spread = stats.median_iqr(values)
        ci = stats.bootstrap_median_ci(values, resamples=resamples, seed=seed,
                                       confidence=confidence)
        out.median, out.q1, out.q3 = spread.median, spread.q1, spread.q3
        out.ci_low, out.ci_high = ci.low, ci.high
    return out


def _repeats(condition: str, cells: list[Cell]) -> Repeats:
    top = max((c.valid for c in cells), default=0)
    pass_k = []
    for k in range(1, top + 1):
        usable = [c for c in cells if c.valid >= k]
        pass_k.append(PassK(k, len(usable),
                            _mean([stats.pass_at_k(c.valid, c.resolved, k) for c in usable]),
                            _mean([stats.pass_hat_k(c.valid, c.resolved, k) for c in usable])))
    multi = [c for c in cells if c.valid >= 2]
    return Repeats(condition, pass_k,
                   always=sum(c.resolved == c.valid for c in multi),
                   sometimes=sum(0 < c.resolved < c.valid for c in multi),
                   never=sum(c.resolved == 0 for c in multi))


def _pair(a: str, b: str, cells: dict[str, dict[str, Cell]], resamples: int, seed: int,
          confidence: float, top: int) -> Pair:
    tasks = list(dict.fromkeys([*cells[a], *cells[b]]))
    rows, dropped = [], []
    for task in tasks:
        ca, cb = cells[a].get(task), cells[b].get(task)
        reason = _drop_reason(a, b, ca, cb)
        if reason or ca is None or cb is None:
            dropped.append((task, reason or "no run"))
            continue
        ratios = {}
        for metric in RATIO_METRICS:
            va, vb = ca.metrics[metric], cb.metrics[metric]
            ratios[metric] = vb / va if va is not None and vb is not None and va > 0 \
                and vb > 0 else None
        rows.append(TaskRow(task, ca, cb, ratios))
    first = [(bool(r.a.first_resolved), bool(r.b.first_resolved)) for r in rows]
    only_a = sum(x and not y for x, y in first)
    only_b = sum(y and not x for x, y in first)
    table = PairedTable(both=sum(x and y for x, y in first), only_a=only_a, only_b=only_b,
                        neither=sum(not x and not y for x, y in first),
                        p_value=stats.mcnemar_exact(only_a, only_b).p_value)
    with_repeats = any(r.a.valid > 1 or r.b.valid > 1 for r in rows)
    repeats = [_repeats(a, [r.a for r in rows]), _repeats(b, [r.b for r in rows])] \
        if with_repeats else None
    # a kept task has a valid run in each condition, so both fractions are numbers
    worse = sorted((r for r in rows if (r.b.fraction or 0.0) < (r.a.fraction or 0.0)),
                   key=lambda r: ((r.b.fraction or 0.0) - (r.a.fraction or 0.0), r.task))
    dearer = sorted((r for r in rows if (r.ratios["cost_usd"] or 0) > 1),
                    key=lambda r: (-(r.ratios["cost_usd"] or 0.0), r.task))
    return Pair(a, b, len(rows), dropped,
                _rate(a, [r.a for r in rows], confidence),
                _rate(b, [r.b for r in rows], confidence),
                table, [_ratio(m, rows, resamples, seed, confidence) for m in RATIO_METRICS],
                repeats, rows, [r.task for r in worse[:top]], [r.task for r in dearer[:top]])


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment (Holm 1979, *Scand. J. Statist.* 6(2), 65–70) of m
    p-values, in their given order: the i-th smallest is multiplied by m − i + 1, made
    non-decreasing, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def compare(table: RunTable, baseline: str, candidate: str | None = None, *,
            resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
            top: int = 10) -> Comparison:
    """Compare ``candidate`` with ``baseline`` on ``table`` (every other condition when
    ``candidate`` is None), task by task (:data:`PAIRING_RULE`).

    ``resamples`` and ``seed`` drive the bootstrap intervals of the median ratios (one
    seed for every metric and pair, so the same inputs give the same report); ``top`` caps
    the regression lists. Raises :class:`ComparisonError` for an unknown condition, a
    candidate equal to the baseline, or a table with no other condition.
    """
    conditions = table.conditions()
    for name, what in ((baseline, "baseline"), (candidate, "candidate")):
        if name is not None and name not in conditions:
            raise ComparisonError(f"{table.source}: no condition {name!r} (the {what}); "
                                  + hint(name, conditions, "the conditions are"))
    if candidate == baseline:
        raise ComparisonError(f"the candidate is the baseline ({baseline!r}): "
                              "nothing to compare")
    others = [candidate] if candidate else [c for c in conditions if c != baseline]
    if not others:
        raise ComparisonError(f"{table.source}: only condition {baseline!r}; a comparison "
                              "needs at least two")
    if resamples < 1:
        raise ComparisonError(f"resamples: expected >= 1, got {resamples}")
    cells = _cells(table)
    pairs = [_pair(baseline, b, cells, resamples, seed, confidence, top) for b in others]
    if len(pairs) > 1:
        for pair, p in zip(pairs, holm([p.table.p_value for p in pairs]), strict=True):
            pair.table.p_holm = p
    summaries = [_rate(c, list(cells[c].values()), confidence) for c in conditions]
    return Comparison(table.source, baseline, summaries, pairs, seed, resamples, confidence,
                      list(table.ignored_columns),
                      observations=observed.summarise(table, confidence))


def as_dict(comparison: Comparison) -> dict:
    """The comparison as JSON-ready data (keys in docs/experiments.md); NaN never appears."""
    data = _plain(comparison)
    for pair, raw in zip(comparison.pairs, data["pairs"], strict=True):
        raw["dropped"] = [{"task": t, "reason": why} for t, why in pair.dropped]
        for row in raw["rows"]:
            for side in ("a", "b"):
                cell = row[side]
                cell["fraction"] = cell["resolved"] / cell["valid"] if cell["valid"] else None
    return data


def _plain(value):
    """Dataclasses to dicts, tuples to lists, NaN and infinities to None (``asdict`` deep-
    copies every leaf, five times slower on a few thousand rows)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
