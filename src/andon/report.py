"""What people read: the status board and the evidence of one packet.

Reads the store only; never recomputes a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .config import Config
from .store import Store
from .usage import totals
from .workspace import Repo

STYLE = {"done": "green", "blocked": "bold red", "needs_work": "yellow", "stale": "magenta",
         "awaiting_human": "cyan", "ready": "white"}
GATE_MARK = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "error": "[red]![/]",
             "skipped": "[dim]–[/]"}
GATE_SHORT = {"hermetic": "herm", "preflight": "pre"}
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


def status_rows(store: Store, on_disk: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """One dict per packet: id, slug, state, attempts (counted), last attempt's outcome.
    ``on_disk`` (id, slug) are the packet files: one the store has not seen yet (nothing ran
    since it was written) is listed as ``ready`` with ``not_run`` true."""
    rows = []
    for p in store.packets():
        attempts = store.attempts(p["id"])
        last = attempts[-1] if attempts else None
        rows.append({
            "id": p["id"], "slug": p["slug"], "state": p["state"],
            "attempts": len([a for a in attempts if a["counted"]]),
            "interrupted": len([a for a in attempts if not a["counted"]]),
            "usage": usage_of([s for a in attempts for s in store.stage_runs(a["id"])]),
            "last_attempt": last and {
                "n": last["n"], "state": last["state"], "reason": last["reason"],
                "failure_layer": last["failure_layer"], "merge_sha": last["merge_sha"],
                "evidence_dir": last["evidence_dir"],
                "gates": {g["gate"]: g["status"] for g in store.gate_results(last["id"])},
                "test_runs": run_accounting(store.gate_results(last["id"])),
            },
        })
    seen = {r["id"] for r in rows}
    rows += [{"id": pid, "slug": slug, "state": "ready", "attempts": 0, "interrupted": 0,
              "usage": usage_of([]), "last_attempt": None, "not_run": True}
             for pid, slug in on_disk if pid not in seen]
    return rows


def board(store: Store, config: Config, on_disk: Sequence[tuple[str, str]] = ()) -> Table:
    """The status board, narrow enough for an 80-column terminal: per packet its state,
    counted tries, the last attempt's gates (all passed, or the first that did not), agent
    cost and time, and the result (merged sha or the reason). ``on_disk``: see
    :func:`status_rows`."""
    table = Table(title=f"andon board — integration branch {config.andon.integration_branch}",
                  title_justify="left")
    table.add_column("packet", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("tries", justify="right")
    table.add_column("gates", no_wrap=True)
    table.add_column("agents", no_wrap=True)
    table.add_column("result", overflow="fold", ratio=1)
    rows = status_rows(store, on_disk)
    caption = "all packets: " + usage_text(usage_of_rows(rows))
    if rows and all(r.get("not_run") for r in rows):
        caption = ("nothing ran yet: the packets are read from their files; `andon run` "
                   "starts them\n" + caption)
    if any(r["usage"]["runs"] and r["usage"]["cost_usd"] is None for r in rows):
        caption += ("\ncost ? = the agent reported no usage (no tokens, no cost); "
                    "see `andon show`")
    table.caption = caption
    table.caption_justify = "left"
    for r in rows:
        last = r["last_attempt"]
        if r["state"] == "done" and last:
            result = f"merged {last['merge_sha'][:10]}"
        elif last and last["reason"]:
            result = last["reason"].splitlines()[0][:160]
        elif r.get("not_run"):
            result = "not run yet"
        else:
            result = ""
        style = STYLE.get(r["state"], "white")
        gates_cell = _gates_cell((last or {}).get("gates", {}))
        if last and last["test_runs"]["full_suite_runs"]:
            t = last["test_runs"]  # verification time: full-suite runs of the last attempt
            gates_cell += f"\n{t['full_suite_runs']} suites {t['full_suite_s']:.0f} s"
        table.add_row(r["id"], f"[{style}]{r['state']}[/]", str(r["attempts"]), gates_cell,
                      _usage_cell(r["usage"]), escape(result))
    return table


def _gates_cell(gates: dict[str, str]) -> str:
    """The first gate that failed (``scope ✗``), else how many passed and how many were
    skipped (``6 ✓ 3 –``): a skipped gate checked nothing, so it is not counted as passed."""
    bad = next(((g, s) for g, s in gates.items() if s in ("fail", "error")), None)
    if bad:
        return f"{GATE_SHORT.get(bad[0], bad[0])} {GATE_MARK[bad[1]]}"
    counts = [(n, GATE_MARK[st]) for st in ("pass", "skipped")
              if (n := sum(1 for s in gates.values() if s == st))]
    return " ".join(f"{n} {mark}" for n, mark in counts)


def _usage_cell(u: dict[str, Any]) -> str:
    """``$0.06 · 12 s``; ``cost ?`` when the agent reported no usage (the board's legend
    says so), ``<1 s`` for an agent that took under a second; empty before any agent ran."""
    if not u["runs"]:
        return ""
    cost = "cost ?" if u["cost_usd"] is None else f"${u['cost_usd']:.2f}"
    if u["wall_s"] is None:
        wall = "time ?"
    else:
        wall = "<1 s" if u["wall_s"] < 1 else f"{u['wall_s']:.0f} s"
    return f"{cost} · {wall}"


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


def packet_detail(store: Store, repo: Repo, packet_id: str) -> dict[str, Any] | None:
    p = store.packet(packet_id)
    if p is None:
        return None
    attempts = []
    for a in store.attempts(packet_id):
        stat = ""
        if a["candidate_sha"] and a["plant_sha"] and repo.rev_parse(a["candidate_sha"]):
            stat = repo.diff_stat(a["plant_sha"], a["candidate_sha"])
        stages = store.stage_runs(a["id"])
        gates = store.gate_results(a["id"])
        attempts.append({**a, "diff_stat": stat, "gates": gates,
                         "test_runs": run_accounting(gates),
                         "stages": stages, "usage": usage_of(stages),
                         "reviews": store.reviews(a["id"])})
    diff = ""
    if p["state"] == "awaiting_human" and attempts:
        last = attempts[-1]
        diff = repo.diff(last["plant_sha"], last["candidate_sha"])
    return {"packet": p, "attempts": attempts, "events": store.events(packet_id),
            "diff": diff, "usage": usage_of([s for a in attempts for s in a["stages"]])}


def show_packet(out: Console, d: dict[str, Any]) -> None:
    p = d["packet"]
    style = STYLE.get(p["state"], "white")
    out.print(f"[bold]{p['id']}[/] {p['slug']} — [{style}]{p['state']}[/]")
    out.print(f"goal: {p['definition'].get('goal', '').strip()}", markup=False)
    out.print(f"packet file: {p['source']}", markup=False)
    if d.get("usage", {}).get("runs"):
        out.print(f"agents used: {usage_text(d['usage'])}", markup=False)
    for a in d["attempts"]:
        counted = "" if a["counted"] else " (interrupted; not counted)"
        out.print(f"\n[bold]attempt {a['n']}[/]{counted}: {a['state']} — agent {a['agent']}, "
                  f"branch {a['branch']}")
        if a["merge_sha"]:
            out.print(f"  merged as {a['merge_sha']}", markup=False)
        if a["test_runs"]["test_runs"]:
            out.print(f"  test runs: {accounting_text(a['test_runs'])}", markup=False)
        if a["reason"]:
            out.print(f"  reason: {a['reason']}", markup=False, soft_wrap=True)
        for s in a["stages"]:
            claim = (s["claim"] or "").strip().splitlines()
            out.print(f"  stage {s['stage']}: exit {s['exit_status']}"
                      f"{' (timed out)' if s['timed_out'] else ''}, {s['duration_s']:.1f} s; "
                      f"transcript {s['transcript_path']}", markup=False, soft_wrap=True)
            if claim and not s["stage"].startswith("review"):  # a review is shown below
                out.print(f"    agent claimed (not used): {claim[-1][:120]}", markup=False,
                          soft_wrap=True)
            if s["usage"]:
                _show_usage(out, s["usage"])
        for g in a["gates"]:
            layer = escape(f" [{g['failure_layer']}]") if g["failure_layer"] else ""
            out.print(f"  {GATE_MARK.get(g['status'], g['status'])} {g['gate']}"
                      f"{layer}: {escape(g['summary'])}", soft_wrap=True)
            for f in g["evidence"].get("findings", [])[:10]:
                where = f["path"] or f["test_id"] or ""
                if f.get("line") and f["path"]:
                    where = f"{where}:{f['line']}"
                out.print(f"      {f['kind']}: {where} — {f['message'][:200]}",
                          markup=False, soft_wrap=True)
            for r in g["evidence"].get("runs", []):
                integ = r.get("integrity") or {}
                chan = f", verdict channel {integ['channel']}" if integ.get("channel") else ""
                # without this, "exit 1" under a passing gate reads as a failure andon ignored
                planted = sum(v == "failed" for v in (integ.get("canaries") or {}).values())
                if planted:
                    chan += f" ({planted} canary test(s) fail on purpose: docs/gates.md)"
                out.print(f"      run {r.get('name')}: exit {r.get('exit_status')}, "
                          f"{r.get('duration_s', 0):.1f} s, log {r.get('log_path')}{chan}",
                          markup=False, soft_wrap=True)
        for r in a.get("reviews", []):
            _show_review(out, r)
        if a["diff_stat"]:
            out.print("  what the agent changed (plant commit → candidate):", markup=False)
            # git's stat starts every line with a space: keep it, so the columns line up
            stat = a["diff_stat"].strip("\n").splitlines()
            out.print("\n".join("   " + ln for ln in stat), markup=False)
        if a["evidence_dir"]:
            out.print(f"  evidence: {a['evidence_dir']}", markup=False, soft_wrap=True)
    if d.get("diff"):
        out.print(f"\n[bold]awaiting a person[/]: the change to decide on (`andon approve "
                  f"{p['id']}` or `andon reject {p['id']} --why ...`):")
        out.print(d["diff"], markup=False, highlight=False, soft_wrap=True)


_PRICING = {"per_request": ", per request",   # usage.py: how a priced cost was priced
            "even_split": ", as equal requests: a price tier may be missed",
            "total": ", on the total: a per-request price tier may be wrong"}


def _show_usage(out: Console, u: dict[str, Any]) -> None:
    def n(key: str) -> str:
        return "?" if u.get(key) is None else str(u[key])
    cache = (f", cache read {n('cache_read_tokens')}, cache write {n('cache_write_tokens')}"
             if u.get("cache_read_tokens") is not None or u.get("cache_write_tokens") is not None
             else "")
    tokens = (f"tokens in {n('input_tokens')}, out {n('output_tokens')}{cache}"
              if u.get("input_tokens") is not None or u.get("output_tokens") is not None
              else "tokens not reported")
    src = u.get("cost_source", "unknown")
    cost = ("cost unknown" if u.get("cost_usd") is None else
            f"${u['cost_usd']:.4f} ({src}" + (f", {u['price_source']}" if u.get("price_source")
                                               else "") + _PRICING.get(u.get("pricing") or "", "")
            + ")")
    turns = f", {u['turns']} turns" if u.get("turns") is not None else ""
    out.print(f"    usage: model {u.get('model') or '?'}, {tokens}; {cost}{turns}",
              markup=False, soft_wrap=True)
    for note in u.get("notes", [])[:5]:
        out.print(f"      note: {note}", markup=False, soft_wrap=True)


def _show_review(out: Console, r: dict[str, Any]) -> None:
    head = f"  review {r['stage']} (ask {r['ask']}): "
    if not r["valid"]:
        out.print(head + "rejected: " + "; ".join(r["errors"]), markup=False, soft_wrap=True)
        return
    decided = r["effective_decision"]
    if decided != r["decision"]:
        decided = f"{r['decision']} → {decided}"
    out.print(head + f"{decided}" + (f" (back to {r['revise_stage']})"
                                     if r["effective_decision"] == "revise" else ""),
              markup=False)
    for why in r["downgraded_because"]:
        out.print(f"      downgraded: {why}", markup=False, soft_wrap=True)
    for v in r["document"]["verdicts"]:
        out.print(f"      {v['invariant']}: {v['verdict']} at {v['evidence']} — {v['reason']}",
                  markup=False, soft_wrap=True)
    for f in r["document"]["findings"]:
        out.print(f"      {f['severity']}: {f['location']} — {f['message']}", markup=False,
                  soft_wrap=True)
