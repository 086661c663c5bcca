"""The terminal summary of a context report (rich). Agent text is printed as text: every
string from the transcript goes through :func:`andon.safe_text.markup_safe` (controls, bidi
and zero-width characters shown as escapes, markup escaped)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..safe_text import markup_safe


def summary(report: dict[str, Any], console: Console, top: int = 5) -> None:
    """Print ``report`` (``analyse.analyse``): totals, final composition, turns, duplicates,
    reads, largest items."""
    main = report["threads"][0]
    rep = report["reported"]
    console.print(f"[bold]{markup_safe(report['path'])}[/bold]: {report['format']}, model "
                  f"{markup_safe(report['model'] or 'unknown')}, {len(main['turns'])} turns, "
                  f"{report['requests']} requests with usage")
    console.print(f"local count {report['local_tokens']:,} tokens ({report['encoding']}); "
                  f"peak context {main['peak']:,}"
                  + (f" of a {report['context_window']:,} window" if report["context_window"]
                     else ""))
    if rep:
        shown = {k: v for k, v in rep.items() if k.endswith("tokens") or k == "cost_usd"}
        console.print("reported: " + markup_safe(", ".join(f"{k} {v}" for k, v in shown.items())))
    acc = report["accuracy"]
    if acc.get("turns_compared"):
        console.print(f"local / reported input over {acc['turns_compared']} turns: "
                      f"{acc['local_over_reported']:.1%} (the rest is not in the transcript "
                      "or counted by another tokenizer)")
    for p in report["problems"][:5]:
        console.print(f"[yellow]skipped[/yellow] {markup_safe(p)}")
    comp = Table(title="final context by component (main thread)")
    comp.add_column("component")
    comp.add_column("tokens", justify="right")
    comp.add_column("share", justify="right")
    total = sum(main["final"].values()) or 1
    for k, v in sorted(main["final"].items(), key=lambda kv: -kv[1]):
        comp.add_row(markup_safe(k), f"{v:,}", f"{v / total:.1%}")
    console.print(comp)
    near = [t["turn"] for t in main["turns"] if t["near_window"]]
    if near:
        console.print(f"[red]near the window[/red] at turns {near[:20]}")
    growth = sorted(main["turns"], key=lambda t: -t.get("growth", 0))[:3]
    if growth:
        console.print("largest growth: " + ", ".join(
            f"turn {t['turn']} +{t['growth']:,}" for t in growth))
    dup = report["duplicates"]
    console.print(f"repeated content: {dup['redundant_tokens']:,} tokens, {dup['share']:.1%} "
                  f"of the transcript in {len(dup['groups'])} groups")
    for g in dup["groups"][:top]:
        console.print(f"  {g['kind']} ×{g['copies']} {g['tokens']:,} tokens "
                      f"({markup_safe(g['component'])}): "
                      + markup_safe("; ".join(g["locations"][:4])))
    reads = report["reads"]
    for r in reads["reread"][:top]:
        console.print(f"read {len(r['reads'])}×: {markup_safe(r['path'])}")
    for s in reads["stale"][:top]:
        console.print(f"[red]stale read[/red] {markup_safe(s['path'])}: read "
                      f"{markup_safe(s['read'])}, "
                      f"edited {markup_safe(s['edit'])}, used {markup_safe(s['used'])}")
    for item in report["largest"][:top]:
        console.print(f"largest: {item['tokens']:,} tokens {markup_safe(item['component'])} at "
                      f"{markup_safe(item['where'])}")
