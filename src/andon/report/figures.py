"""The figures both reports show: the state and gate marks, what an attempt's test runs
cost (from the gates' recorded evidence), and agent usage totals. Pure functions of stored
rows; nothing here reads the store or recomputes a verdict.
"""

from __future__ import annotations

import re
from typing import Any

from ..usage import totals

STYLE = {"done": "green", "blocked": "bold red", "needs_work": "yellow", "stale": "magenta",
         "awaiting_human": "cyan", "ready": "white", "draft": "dim"}
GATE_MARK = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "error": "[red]![/]",
             "skipped": "[dim]–[/]"}
# The runs of the whole suite (no selection) a gate makes, by their evidence names; the
# others (red-N, flaky-N, ...) run a few files.
FULL_SUITE = re.compile(r"suite|hermetic-(\d+|random)|merge-check")


def run_accounting(gates: list[dict[str, Any]]) -> dict[str, Any]:
    """What an attempt's gates (stored rows) spent on test runs, from their recorded
    evidence: ``full_suite_runs`` and ``full_suite_s`` (wall seconds), ``test_runs`` and
    ``test_s`` for every run (red's, flaky's ... too). A cached result ran nothing."""
    every = [r for g in gates for r in g["evidence"].get("runs", [])]
    full = [r for r in every if FULL_SUITE.fullmatch(r.get("name") or "")]
    return {"full_suite_runs": len(full),
            "full_suite_s": round(sum(r.get("duration_s") or 0 for r in full), 3),
            "test_runs": len(every),
            "test_s": round(sum(r.get("duration_s") or 0 for r in every), 3)}


def accounting_text(t: dict[str, Any]) -> str:
    """``4 full-suite runs 12.3 s; 7 test runs in all 15.1 s``."""
    return (f"{t['full_suite_runs']} full-suite run(s) {t['full_suite_s']:.1f} s; "
            f"{t['test_runs']} test run(s) in all {t['test_s']:.1f} s")



def usage_of(stage_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of stage runs (see :func:`andon.usage.totals`); wall time is the stage runs'
    own duration, so agents that report no usage still count their seconds."""
    return totals([s["usage"] for s in stage_runs], [s["duration_s"] for s in stage_runs])


def usage_of_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the packets of ``status_rows``: every stage run in the store."""
    out: dict[str, Any] = {"runs": sum(r["usage"]["runs"] for r in rows)}
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "cost_usd", "wall_s"):
        known = [r["usage"][k] for r in rows if r["usage"][k] is not None]
        out[k] = sum(known) if known else None
    out["cost_unknown_runs"] = sum(r["usage"]["cost_unknown_runs"] for r in rows)
    return out


def usage_text(u: dict[str, Any]) -> str:
    """``31.4k in/607 out tok · $0.0569 · 12.3 s``; a cost some runs lack is marked partial."""
    def n(v: int | None) -> str:
        if v is None:
            return "?"
        return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e3 else str(v)
    if not u["runs"]:
        return "no agent runs"
    cost = "cost unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.4f}"
    if u["cost_usd"] is not None and u["cost_unknown_runs"]:
        cost += f" (+{u['cost_unknown_runs']} run(s) of unknown cost)"
    wall = ("?" if u["wall_s"] is None else "<0.1 s" if u["wall_s"] < 0.05
            else f"{u['wall_s']:.1f} s")
    if u["input_tokens"] is None and u["output_tokens"] is None:
        return f"tokens unknown · {cost} · {wall}"
    return f"{n(u['input_tokens'])} in/{n(u['output_tokens'])} out tok · {cost} · {wall}"
