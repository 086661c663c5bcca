"""``andon validate [IDS]``: each packet with its reference solution as the agent, through the
real gates (:mod:`andon.validate`); a table or ``--json``, and an exit status for scripts."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from ..errors import AndonError, PacketError
from ..exits import EXIT_PREFLIGHT
from ..safe_text import markup_safe, visible
from . import common
from .common import config_or_fail, fail, repo_or_fail

if TYPE_CHECKING:
    from ..gates.base import GateResult
    from ..validate import Report, Validation

EXIT_INVALID = 1


@click.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--json", "as_json", is_flag=True, help="The verdicts as JSON on stdout.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Run the planted tests at least this many times on the base (red), so a "
                   "flaky planted test shows; [gates] red_runs when higher.")
@click.option("--keep", is_flag=True,
              help="Keep the temporary clone, store and evidence, and print where they are.")
@click.pass_context
def validate(ctx: click.Context, ids: tuple[str, ...], as_json: bool, runs: int,
             keep: bool) -> None:
    """Run each packet (all, or the IDs given) with its reference solution (solution/ beside
    plant/) as the agent: red on the base, then every gate of `andon run`, review skipped.
    A packet whose planted tests already pass, are flaky, or whose solution fails a gate is
    invalid, with the gate's evidence.

    Runs in a temporary clone: no branch, file or store row of this repository changes.
    Exits 0 if every packet is valid, 1 if any is invalid, 2 on bad input, 3 when the base
    fails its own suite (nothing validated).
    """
    from ..baseline import integration_head
    from ..packet import load_packets

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    try:
        packets = load_packets(repo.root / config.andon.packets_dir, repo.root)
    except PacketError as exc:
        for p in exc.problems:
            common.err.print(visible(p), soft_wrap=True, markup=False)
        fail(f"{len(exc.problems)} problem(s) in the packets; nothing ran (see `andon check`)")
    known = [p.id for p in packets]
    unknown = [i for i in ids if i not in known]
    if unknown:
        fail(f"unknown packet id(s): {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    common.trees_in_temp(repo, config)
    try:
        # where `andon run` would start an attempt: the integration head (or the base branch)
        head = integration_head(repo, config)
        report = _run(repo, config, packets, head, list(dict.fromkeys(ids)) or known, runs, keep)
    except AndonError as exc:
        fail(str(exc))
    if as_json:
        common.out.print(json.dumps(_document(report), indent=2), markup=False,
                         highlight=False, soft_wrap=True)
    else:
        _table(report)
    if report.kept:
        common.err.print(f"kept: {visible(report.kept)} (clone, store, evidence)", markup=False,
                         soft_wrap=True)
    if report.preflight is not None:
        common.err.print(f"preflight failed on {head[:10]}: {visible(report.preflight.summary)}; "
                         "nothing was validated", markup=False, soft_wrap=True)
        sys.exit(EXIT_PREFLIGHT)
    sys.exit(0 if report.ok else EXIT_INVALID)


def _run(repo, config, packets, head: str, ids: list[str], runs: int, keep: bool) -> Report:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..validate import Validator

    # progress and gate lines on stderr: stdout stays one table or one JSON document
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=common.err, transient=True) as progress:
        task = progress.add_task("validating", total=len(ids))

        def on_gate(pid: str, g: GateResult) -> None:
            progress.console.print(visible(f"{pid or 'base'}: {g.gate}: {g.status}: {g.summary}"),
                                   markup=False, soft_wrap=True, highlight=False)

        def on_packet(v: Validation) -> None:
            progress.advance(task)
            verdict = "valid" if v.valid else f"INVALID at {v.failed_gate}"
            progress.console.print(visible(f"{v.packet_id}: {verdict} ({v.seconds:.1f} s)"),
                                   markup=False, highlight=False)
            progress.update(task, description=f"validated {v.packet_id}")

        return Validator(repo, config, packets, head, runs, keep, on_gate, on_packet,
                         lambda s: progress.console.print(visible(s, lines=True), markup=False,
                                                          soft_wrap=True, highlight=False)
                         ).run(ids)


def _document(report: Report) -> dict:
    """``--json``: one document; keys in docs/validate.md."""
    pf = report.preflight
    return {"ok": report.ok, "base": report.base_sha, "red_runs": report.red_runs,
            "preflight": None if pf is None else {"status": pf.status, "summary": pf.summary},
            "packets": [v.to_json() for v in report.validations],
            "kept": str(report.kept) if report.kept else None}


def _table(report: Report) -> None:
    from rich.table import Table

    table = Table(title=f"validate: base {report.base_sha[:10]}, planted tests red "
                        f"{report.red_runs}x", title_justify="left")
    for name in ("packet", "verdict", "gate", "evidence"):
        table.add_column(name, overflow="fold")
    for v in report.validations:
        lines = [v.summary] + [f"- {f.kind}: {f.message}" for f in v.findings]
        if v.applied:
            lines.append(f"(on the head with {', '.join(v.applied)} applied)")
        if v.not_applied:
            lines.append(f"(required, no solution, not applied: {', '.join(v.not_applied)})")
        # the evidence quotes the code under test: one visible line per finding
        table.add_row(markup_safe(v.packet_id), "valid" if v.valid else "[red]invalid[/]",
                      markup_safe(v.failed_gate or ""),
                      "\n".join(markup_safe(line) for line in lines))
    common.out.print(table)
    bad = [v.packet_id for v in report.validations if not v.valid]
    if report.validations:
        common.out.print(f"{len(report.validations) - len(bad)} valid, {len(bad)} invalid"
                         + visible(f": {', '.join(bad)}" if bad else ""), markup=False)


__all__ = ["validate"]
