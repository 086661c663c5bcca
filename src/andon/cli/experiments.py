"""Experiments: ``compare`` a baseline condition with a candidate (or with every other
condition) on a table of runs, as a terminal report, JSON or one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from . import common
from .common import fail


@click.command()
@click.argument("runs", metavar="RUNS.csv")
@click.option("--baseline", "-a", required=True, metavar="A",
              help="The condition to compare against.")
@click.option("--candidate", "-b", metavar="B",
              help="The condition to compare; every other condition when omitted.")
@click.option("--json", "as_json", is_flag=True, help="The comparison as JSON on stdout.")
@click.option("--html", "html_path", metavar="FILE",
              help="Also write the report with its plots to FILE (self-contained, offline).")
@click.option("--resamples", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Bootstrap resamples for the interval of each median ratio.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the bootstrap (printed with the report).")
@click.option("--tasks", "task_rows", type=click.IntRange(min=0), default=20,
              show_default=True, help="Per-task rows in the terminal report (0: all).")
def compare(runs: str, baseline: str, candidate: str | None, as_json: bool,
            html_path: str | None, resamples: int, seed: int, task_rows: int) -> None:
    """Compare conditions task by task on a CSV of runs (one row per task, condition and
    repeat; columns in docs/experiments.md): resolve rates with Wilson intervals, the paired
    table with the exact McNemar test, per-task cost, token and time ratios with bootstrap
    intervals, pass@k and pass^k with repeats, the worst regressions.

    Exits 0 with a report, 2 on bad input (naming the file, line and column).
    """
    # Imported here: scipy.stats takes longer to import than the rest of andon together,
    # and no other command needs it.
    from ..experiments.compare import compare as build_comparison
    from ..experiments.html import render_html
    from ..experiments.render import render_json, render_terminal
    from ..experiments.runs import read_csv

    try:
        table = read_csv(runs)
        result = build_comparison(table, baseline, candidate, resamples=resamples, seed=seed)
    except UsageError as exc:
        fail(str(exc))
        return
    if html_path:
        try:
            Path(html_path).write_text(render_html(result), encoding="utf-8")
        except OSError as exc:
            fail(f"--html {html_path}: cannot write the report: {exc}")
        common.err.print(f"wrote {html_path}", markup=False, highlight=False)
    if as_json:
        common.out.print(render_json(result), markup=False, highlight=False, soft_wrap=True)
    else:
        render_terminal(result, common.out, task_rows)
