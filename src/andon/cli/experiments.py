"""Experiments: ``compare`` a baseline condition with a candidate (or with every other
condition) on a table of runs, as a terminal report, JSON or one self-contained HTML file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import UsageError
from ..safe_text import visible
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


@click.group()
def experiment() -> None:
    """Run an experiment file (conditions × packets × repeats), see its progress, export its
    runs (docs/experiments.md)."""


def _store_and_spec(ctx: click.Context, path: str):
    from ..experiments.spec import load_spec
    from ..state import open_store
    repo = common.repo_or_fail(ctx.find_root())
    config = common.config_or_fail(repo)
    try:
        spec = load_spec(path)
    except UsageError as exc:
        fail(str(exc))
    return repo, config, open_store(repo), spec


@experiment.command("run")
@click.argument("path", metavar="EXPERIMENT.toml")
@click.option("--allow-invalid", is_flag=True,
              help="Run packets that `andon validate` marks invalid (reported, not refused).")
@click.option("--retry-errors", is_flag=True,
              help="Run again every run whose outcome is error (the old one is kept, "
                   "superseded).")
@click.pass_context
def experiment_run(ctx: click.Context, path: str, allow_invalid: bool,
                   retry_errors: bool) -> None:
    """Run every (packet, condition, repeat) of EXPERIMENT.toml that has no result yet, in a
    seeded interleaved order, each an attempt from the same base commit judged by the gates
    of `andon run` and never merged. Running it again resumes; raising repeats adds runs.

    Exits 0 when every planned run has a result, 1 when the total budget stopped it early,
    2 on bad input (invalid file, unknown packet, invalid packets without --allow-invalid).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..errors import AndonError
    from ..experiments.experiment import Experiment
    repo, config, store, spec = _store_and_spec(ctx, path)
    common.trees_in_temp(repo, config, spec.concurrency)
    exp = Experiment(repo, config, store, spec,
                     say=lambda s: common.err.print(visible(s, lines=True), markup=False,
                                                    soft_wrap=True))
    # no refresh thread: runs are forked processes, and a fork copies only the forking
    # thread (a lock the refresher held would stay held in the child)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=common.err, transient=True, auto_refresh=False) as bar:
        task = bar.add_task(f"experiment {spec.name}", total=None)

        def heard(key, record, done, planned) -> None:
            bar.update(task, completed=done, total=planned, refresh=True)
            # the failure's summary quotes the code under test
            bar.console.print(visible(f"{key.task} {key.condition} #{key.repeat}: "
                                      f"{record['outcome']}"
                                      + (f" ({record['failure']['gate']}: "
                                         f"{record['failure']['summary'][:100]})"
                                         if record.get("failure") else "")),
                              markup=False, soft_wrap=True)
        try:
            progress = exp.run(allow_invalid, retry_errors, heard)
        except AndonError as exc:
            fail(str(exc))
    common.out.print(f"experiment {spec.name}: {len(progress.recorded)} run(s) now, "
                     f"{progress.skipped} done before, {progress.planned} planned",
                     markup=False)
    if progress.stopped:
        common.err.print(f"stopped: {visible(progress.stopped)}", markup=False)
        sys.exit(1)


@experiment.command("status")
@click.argument("path", metavar="EXPERIMENT.toml|NAME")
@click.option("--json", "as_json", is_flag=True, help="The status as JSON on stdout.")
@click.pass_context
def experiment_status(ctx: click.Context, path: str, as_json: bool) -> None:
    """Progress of a stored experiment: runs done of planned, outcomes per condition, spend
    against the budget, an ETA."""
    from ..experiments.stored import status
    store, name = _stored(ctx, path)
    data = status(store, name)
    if data is None:
        fail(f"no experiment {name!r} in the store; run `andon experiment run` first")
    if as_json:
        common.out.print(json.dumps(data, indent=2), markup=False, highlight=False,
                         soft_wrap=True)
        return
    b = data["budget"]
    common.out.print(f"experiment {name}: {data['done']}/{data['planned']} runs "
                     f"({data['resolved']} resolved, {data['unresolved']} unresolved, "
                     f"{data['error']} error); ETA "
                     + ("–" if data["eta_s"] is None else f"{data['eta_s']:.0f} s"),
                     markup=False)
    common.out.print(f"spent {data['spent_usd']:.4f} USD"
                     + (f" of {b['total_usd']}" if b.get("total_usd") else "")
                     + f", {data['spent_tokens']} tokens"
                     + (f" of {b['total_tokens']}" if b.get("total_tokens") else ""),
                     markup=False)
    for cond, counts in data["conditions"].items():
        common.out.print(f"  {cond}: " + ", ".join(f"{v} {k}" for k, v in counts.items()),
                         markup=False)


@experiment.command("export")
@click.argument("path", metavar="EXPERIMENT.toml|NAME")
@click.option("--csv", "csv_path", metavar="FILE", help="Write the runs as CSV to FILE.")
@click.option("--json", "json_path", metavar="FILE", help="Write the runs as JSON to FILE.")
@click.pass_context
def experiment_export(ctx: click.Context, path: str, csv_path: str | None,
                      json_path: str | None) -> None:
    """One row per run (columns in docs/experiments.md), as CSV on stdout or to --csv FILE,
    and/or JSON to --json FILE. `andon compare FILE.csv` reads the CSV as it is."""
    from ..experiments.stored import export_rows, to_csv
    store, name = _stored(ctx, path)
    if store.experiment(name) is None:
        fail(f"no experiment {name!r} in the store; run `andon experiment run` first")
    rows = export_rows(store, name)
    try:
        if json_path:
            Path(json_path).write_text(json.dumps({"experiment": name, "runs": rows},
                                                  indent=2), encoding="utf-8")
        if csv_path:
            Path(csv_path).write_text(to_csv(rows), encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write the export: {exc}")
    if not csv_path and not json_path:
        common.out.print(to_csv(rows), markup=False, highlight=False, soft_wrap=True, end="")


def _stored(ctx: click.Context, path: str):
    """The store and the experiment's name: a file's ``name`` (or stem), or a bare name."""
    from ..state import open_store
    repo = common.repo_or_fail(ctx.find_root())
    name = path
    if path.endswith(".toml"):
        from ..experiments.spec import load_spec
        try:
            name = load_spec(path).name
        except UsageError as exc:
            fail(str(exc))
    return open_store(repo), name
