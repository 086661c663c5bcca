"""The comparison for people (a rich terminal report) and for scripts (JSON).

Reads a :class:`~andon.experiments.compare.Comparison` only; the tables' numbers are formatted here
(and reused by ``html.py``), so the terminal and the HTML page say the same thing.
"""

from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table

from ..safe_text import markup_safe
from .compare import Comparison, Pair, Rate, TaskRow, as_dict

METRIC_LABELS = {"cost_usd": "cost", "input_tokens": "input tokens",
                 "output_tokens": "output tokens", "total_tokens": "total tokens",
                 "wall_s": "wall time", "tool_s": "tool time"}


def render_json(comparison: Comparison) -> str:
    """The comparison as one JSON document (keys in docs/experiments.md), indented."""
    return json.dumps(as_dict(comparison), indent=2, allow_nan=False)


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def times(x: float | None) -> str:
    return "–" if x is None else f"×{x:.2f}"


def p_text(p: float | None) -> str:
    if p is None:
        return "–"
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}" if p < 0.01 else f"{p:.3f}"


def rate_text(r: Rate) -> str:
    """``12/20 = 60.0% [38.7%, 78.1%]`` (Wilson), or why there is no rate."""
    if r.runs == 0:
        return f"no valid run ({r.errors} errors)"
    return f"{r.resolved}/{r.runs} = {pct(r.rate)} [{pct(r.low)}, {pct(r.high)}]"


def fraction(resolved: int, valid: int) -> str:
    return f"{resolved}/{valid}" if valid else "–"


def ordered_rows(pair: Pair) -> list[TaskRow]:
    """Rows worst first: the biggest drop in resolve fraction, then the highest cost ratio,
    then by task."""
    def key(r: TaskRow):
        drop = (r.b.resolved / r.b.valid) - (r.a.resolved / r.a.valid)
        return (drop, -(r.ratios["cost_usd"] or 0.0), r.task)
    return sorted(pair.rows, key=key)


def dropped_summary(pair: Pair, shown: int = 5) -> list[str]:
    """One line per reason: how many tasks, and the first few."""
    by_reason: dict[str, list[str]] = {}
    for task, why in pair.dropped:
        by_reason.setdefault(why, []).append(task)
    lines = []
    for why, tasks in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        more = f", … {len(tasks) - shown} more" if len(tasks) > shown else ""
        lines.append(f"{len(tasks)} × {why}: {', '.join(tasks[:shown])}{more}")
    return lines


def render_terminal(comparison: Comparison, console: Console, task_rows: int = 20) -> None:
    """Print the report: the settings and pairing rule, every condition, then each pair
    (rates, the paired table and McNemar, the ratios, repeats, the per-task table limited
    to ``task_rows`` rows — 0 for all — and the worst regressions)."""
    c = comparison
    console.print(f"[bold]Comparison[/bold] of {markup_safe(c.source)}: baseline "
                  f"[bold]{markup_safe(c.baseline)}[/bold]; bootstrap seed {c.seed}, "
                  f"{c.resamples} resamples, {round(100 * c.confidence)}% intervals")
    if c.ignored_columns:
        console.print(f"ignored columns: {markup_safe(', '.join(c.ignored_columns))}")
    console.print(f"[dim]Pairing: {markup_safe(c.pairing_rule)}[/dim]\n")
    conds = Table(title="Conditions (all runs; error runs excluded from the rate)",
                  box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("condition", "tasks", "valid runs", "errors", "resolved", "rate",
                 "95% CI (Wilson)"):
        conds.add_column(name, justify="left" if name == "condition" else "right")
    for r in c.conditions:
        conds.add_row(markup_safe(r.condition), str(r.tasks), str(r.runs), str(r.errors),
                      str(r.resolved), pct(r.rate),
                      f"[{pct(r.low)}, {pct(r.high)}]" if r.runs else "–")
    console.print(conds)
    if c.observations:
        obs = Table(title="Observations (share of valid runs where seen; Wilson 95% CI)",
                    box=box.SIMPLE_HEAD, title_justify="left")
        for name in ("condition", "observation", "runs", "seen", "rate", "95% CI", "total"):
            obs.add_column(name, justify="left" if name in ("condition", "observation")
                           else "right")
        for o in c.observations:
            obs.add_row(markup_safe(o["condition"]), o["observation"], str(o["runs"]),
                        str(o["seen"]), pct(o["rate"]), f"[{pct(o['low'])}, {pct(o['high'])}]",
                        str(o["total"]))
        console.print(obs)
    for pair in c.pairs:
        _pair(pair, console, task_rows)


def _pair(pair: Pair, console: Console, task_rows: int) -> None:
    a, b = markup_safe(pair.a), markup_safe(pair.b)
    console.rule(f"[bold]{b}[/bold] against [bold]{a}[/bold]")
    console.print(f"{pair.tasks} tasks compared, {len(pair.dropped)} dropped")
    for line in dropped_summary(pair):
        console.print(f"  dropped {markup_safe(line)}")
    console.print(f"resolve rate {a}: {rate_text(pair.rate_a)}, errors {pair.rate_a.errors}")
    console.print(f"resolve rate {b}: {rate_text(pair.rate_b)}, errors {pair.rate_b.errors}")
    t = pair.table
    console.print("Paired outcomes (first valid run per task):")
    grid = Table(box=box.SIMPLE_HEAD)
    grid.add_column("")
    grid.add_column(f"{b} resolved", justify="right")
    grid.add_column(f"{b} not", justify="right")
    grid.add_row(f"{a} resolved", f"{t.both} both", f"{t.only_a} only {a}")
    grid.add_row(f"{a} not", f"{t.only_b} only {b}", f"{t.neither} neither")
    console.print(grid)
    holm = f", Holm-adjusted {p_text(t.p_holm)}" if t.p_holm is not None else ""
    console.print(f"exact McNemar on {t.only_a + t.only_b} discordant tasks: "
                  f"p = {p_text(t.p_value)}{holm}\n")
    ratios = Table(title=f"Per-task ratios {b}/{a} (only where both are present and > 0)",
                   box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("metric", "tasks", f"{b} higher", "median", "IQR", "95% CI of median"):
        ratios.add_column(name, justify="left" if name == "metric" else "right")
    for r in pair.ratios:
        ratios.add_row(METRIC_LABELS[r.metric], f"{r.tasks} of {r.tasks + r.missing}",
                       str(r.b_higher), times(r.median),
                       f"{times(r.q1)} – {times(r.q3)}" if r.tasks else "–",
                       f"[{times(r.ci_low)}, {times(r.ci_high)}]" if r.tasks else "–")
    console.print(ratios)
    if pair.repeats:
        _repeats(pair, console)
    _tasks(pair, console, task_rows)


def _repeats(pair: Pair, console: Console) -> None:
    assert pair.repeats is not None  # called only for a pair with repeats
    ra, rb = pair.repeats
    table = Table(title="With repeats (mean over tasks with ≥ k valid runs)",
                  box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("k", f"pass@k {ra.condition}", f"pass@k {rb.condition}",
                 f"pass^k {ra.condition}", f"pass^k {rb.condition}",
                 f"tasks {ra.condition} / {rb.condition}"):
        table.add_column(markup_safe(name), justify="right")
    by_k = {p.k: p for p in rb.pass_k}
    for pa in ra.pass_k:
        pb = by_k.get(pa.k)
        table.add_row(str(pa.k), pct(pa.pass_at_k), pct(pb.pass_at_k if pb else None),
                      pct(pa.pass_hat_k), pct(pb.pass_hat_k if pb else None),
                      f"{pa.tasks} / {pb.tasks if pb else 0}")
    console.print(table)
    for r in (ra, rb):
        console.print(f"consistency {markup_safe(r.condition)} (tasks with ≥ 2 valid runs): "
                      f"{r.always} resolved every time, {r.sometimes} sometimes, "
                      f"{r.never} never")
    console.print()


def _tasks(pair: Pair, console: Console, task_rows: int) -> None:
    rows = ordered_rows(pair)
    shown = rows if task_rows == 0 else rows[:task_rows]
    a, b = markup_safe(pair.a), markup_safe(pair.b)
    title = "Per task, worst first" + (f" ({len(shown)} of {len(rows)}; --tasks 0 for all, "
                                       "--json or --html for every task)"
                                       if len(shown) < len(rows) else "")
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("task", f"{a} resolved", f"{b} resolved", f"{a} errors", f"{b} errors",
                 "cost", "tokens", "wall"):
        table.add_column(name, justify="left" if name == "task" else "right")
    for r in shown:
        table.add_row(markup_safe(r.task), fraction(r.a.resolved, r.a.valid),
                      fraction(r.b.resolved, r.b.valid), str(r.a.errors), str(r.b.errors),
                      times(r.ratios["cost_usd"]), times(r.ratios["total_tokens"]),
                      times(r.ratios["wall_s"]))
    console.print(table)
    regress = pair.regressions
    console.print(f"worst regressions (resolved more often by {a}): "
                  + (markup_safe(", ".join(regress)) if regress else "none"))
    console.print("biggest cost increases: "
                  + (markup_safe(", ".join(f"{t} {times(_cost(pair, t))}"
                                      for t in pair.cost_increases))
                     if pair.cost_increases else "none") + "\n")


def _cost(pair: Pair, task: str) -> float | None:
    return next(r.ratios["cost_usd"] for r in pair.rows if r.task == task)
