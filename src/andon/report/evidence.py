"""The evidence of one packet (``andon show``): its attempts, their stage runs, gates,
reviews and events, and the diff awaiting a person.

Reads the store (and the repository for diffs) only; never recomputes a verdict. Read from
another machine than the one that ran an attempt (``andon show --store URL``), the evidence
files may not be here: those are listed in ``unreachable`` and marked where shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from ..git.repo import Repo
from ..safe_text import markup_safe, visible
from ..store import StoreProtocol
from .figures import GATE_MARK, STYLE, accounting_text, run_accounting, usage_of, usage_text

# what the two terms of the runs' lines mean, said once per packet (docs/gates.md has more)
CHANNEL_NOTE = ("verdict channel: what andon's own plugin saw of each test, sent out of the "
                "run as it happened; a JUnit report that disagrees with it is forged; \"used\": "
                "the run had one: docs/gates.md")
PROFILES_NOTE = ("the plain profile: a pytest run without what tells a test run from real "
                 "use (output capture, assertion rewriting, pytest's hooks); the usual one is "
                 "pytest's own; \"both profiles\": the two: docs/gates.md")
# an attempt's worktree made from the last one's tree (worktree_pool.py), not cloned afresh
WORKTREE_FROM_POOL = ("a finished attempt's tree, reset to the commit and checked file by file "
                      "(docs/gates.md, \"Worktrees used again\")")


def packet_detail(store: StoreProtocol, repo: Repo | None, packet_id: str
                  ) -> dict[str, Any] | None:
    """Everything ``andon show`` prints about ``packet_id`` (None: no such packet).
    ``repo``: a clone for diff stats and the diff awaiting a person, or None (the store
    alone). ``unreachable``: the evidence paths the store names that are not on this
    machine (another machine ran the attempt, and its evidence is not in a shared folder)."""
    p = store.packet(packet_id)
    if p is None:
        return None
    attempts = []
    for a in store.attempts(packet_id):
        stat = ""
        if (repo is not None and a["candidate_sha"] and a["plant_sha"]
                and repo.rev_parse(a["candidate_sha"])):
            stat = repo.diff_stat(a["plant_sha"], a["candidate_sha"])
        stages = store.stage_runs(a["id"])
        gates = store.gate_results(a["id"])
        attempts.append({**a, "diff_stat": stat, "gates": gates,
                         "test_runs": run_accounting(gates),
                         "stages": stages, "usage": usage_of(stages),
                         "reviews": store.reviews(a["id"])})
    diff = ""
    if p["state"] == "awaiting_human" and attempts and repo is not None:
        last = attempts[-1]
        if repo.rev_parse(last["candidate_sha"]):
            diff = repo.diff(last["plant_sha"], last["candidate_sha"])
    return {"packet": p, "attempts": attempts, "events": store.events(packet_id),
            "diff": diff, "usage": usage_of([s for a in attempts for s in a["stages"]]),
            "unreachable": _unreachable(attempts)}


def _unreachable(attempts: list[dict[str, Any]]) -> list[str]:
    """The evidence paths of ``attempts`` (folders, transcripts, run logs) absent here."""
    paths = []
    for a in attempts:
        paths.append(a["evidence_dir"])
        paths += [s["transcript_path"] for s in a["stages"]]
        paths += [r.get("log_path") for g in a["gates"] for r in g["evidence"].get("runs", [])]
    return list(dict.fromkeys(x for x in paths if x and not Path(x).exists()))


def _at(path: Any, away: set[str]) -> str:
    """``path`` as shown (:func:`visible`), marked when it is not on this machine."""
    return f"{visible(path)} (not reachable from here)" if path in away else visible(path)


def show_packet(out: Console, d: dict[str, Any]) -> None:
    """Print :func:`packet_detail`'s ``d`` for people. Every text that came from an agent,
    the code under test or the store goes through :func:`visible` (or :func:`markup_safe`
    where markup is read): on one line (a file name may hold a line break), except the
    goal, the diff stat and the diff."""
    p = d["packet"]
    away = set(d.get("unreachable", ()))
    style = STYLE.get(p["state"], "white")
    out.print(f"[bold]{markup_safe(p['id'])}[/] {markup_safe(p['slug'])} — "
              f"[{style}]{markup_safe(p['state'])}[/]")
    out.print(f"goal: {visible(p['definition'].get('goal', '').strip(), lines=True)}",
              markup=False)
    out.print(f"packet file: {visible(p['source'])}", markup=False)
    if d.get("usage", {}).get("runs"):
        out.print(f"agents used: {usage_text(d['usage'])}", markup=False)
    told_channel = told_profiles = False
    for a in d["attempts"]:
        counted = "" if a["counted"] else " (interrupted; not counted)"
        never = "" if a["stages"] else (" (never started: the attempt stopped before its "
                                         "first stage)")
        out.print(f"\n[bold]attempt {a['n']}[/]{counted}: {a['state']} — agent "
                  f"{markup_safe(a['agent'])}{never}, branch {markup_safe(a['branch'])}")
        if a["merge_sha"]:
            out.print(f"  merged as {a['merge_sha']}", markup=False)
        if a["test_runs"]["test_runs"]:
            out.print(f"  test runs: {accounting_text(a['test_runs'])}", markup=False)
        for e in d.get("events", []):  # written by the harness (worktree_build.py)
            if e["kind"] == "worktree-made" and e["attempt_id"] == a["id"]:
                made = e["data"] or {}
                how = (WORKTREE_FROM_POOL if made.get("made") == "pool" else "a fresh clone"
                       + (" (the waiting tree was refused: see andon show --json)"
                          if made.get("pool_refused") else ""))
                out.print(f"  worktree: {how}, written in {made.get('seconds', 0):.2f} s",
                          markup=False)
        if a["reason"]:
            out.print(f"  reason: {visible(a['reason'])}", markup=False, soft_wrap=True)
        for s in a["stages"]:
            claim = (s["claim"] or "").strip().splitlines()
            out.print(f"  stage {s['stage']}: exit {s['exit_status']}"
                      f"{' (timed out)' if s['timed_out'] else ''}, {s['duration_s']:.1f} s; "
                      f"transcript {_at(s['transcript_path'], away)}", markup=False, soft_wrap=True)
            if claim and not s["stage"].startswith("review"):  # a review is shown below
                out.print(f"    agent claimed (not used): {visible(claim[-1][:120])}", markup=False,
                          soft_wrap=True)
            if s["usage"]:
                _show_usage(out, s["usage"])
            if s.get("context_line"):  # andon show --context (andon.context.stage)
                out.print(f"    context: {visible(s['context_line'])}", markup=False,
                          soft_wrap=True)
        for g in a["gates"]:
            layer = markup_safe(f" [{g['failure_layer']}]") if g["failure_layer"] else ""
            mark = GATE_MARK.get(g["status"]) or markup_safe(g["status"])  # GATE_MARK: markup
            out.print(f"  {mark} {markup_safe(g['gate'])}{layer}: "
                      f"{markup_safe(g['summary'])}", soft_wrap=True)
            # the suite and hermetic gates' own words, not a test id that holds "profile"
            if ("both profiles" in g["summary"] or "in the plain profile first" in g["summary"]
                    ) and not told_profiles:
                told_profiles = True
                out.print(f"      ({PROFILES_NOTE})", markup=False, soft_wrap=True)
            for f in g["evidence"].get("findings", [])[:10]:
                where = f["path"] or f["test_id"] or ""
                if f.get("line") and f["path"]:
                    where = f"{where}:{f['line']}"
                out.print(visible(f"      {f['kind']}: " + (f"{where} — " if where else "")
                                  + f["message"][:200]), markup=False, soft_wrap=True)
            for r in g["evidence"].get("runs", []):
                integ = r.get("integrity") or {}
                chan = f", verdict channel {integ['channel']}" if integ.get("channel") else ""
                # without this, "exit 1" under a passing gate reads as a failure andon ignored
                planted = sum(v == "failed" for v in (integ.get("canaries") or {}).values())
                if planted:
                    # how many is drawn per run (docs/gates.md): a count that moves between
                    # runs is not a sign of anything
                    chan += (f" ({planted} canary test(s) fail on purpose, a number drawn "
                             "for each run: docs/gates.md)")
                log = _at(r.get("log_path"), away)
                out.print(f"      run {visible(r.get('name'))}: exit {r.get('exit_status')}, "
                          f"{r.get('duration_s', 0):.1f} s, log {log}{chan}",
                          markup=False, soft_wrap=True)
                if chan and not told_channel:  # the term, once per packet
                    told_channel = True
                    out.print(f"        ({CHANNEL_NOTE})", markup=False, soft_wrap=True)
        for r in a.get("reviews", []):
            _show_review(out, r)
        for e in d.get("events", []):  # the person's decision at a human gate
            if e["kind"] == "approved" and e["attempt_id"] == a["id"]:
                by = visible((e["data"] or {}).get("by", "?"))
                out.print(f"  approved by {by} at {e['ts']} "
                          "(human gate)", markup=False, soft_wrap=True)
        if a["diff_stat"]:
            out.print("  what the agent changed (plant commit → candidate):", markup=False)
            # git's stat starts every line with a space: keep it, so the columns line up
            stat = a["diff_stat"].strip("\n").splitlines()
            out.print(visible("\n".join("   " + ln for ln in stat), lines=True), markup=False)
        if a["evidence_dir"]:
            out.print(f"  evidence: {_at(a['evidence_dir'], away)}", markup=False,
                      soft_wrap=True)
    if away:
        out.print(f"\n{len(away)} evidence path(s) above are not reachable from here: they "
                  "stay on the machine that ran the attempt (`andon worker --evidence DIR` "
                  "on a folder every machine mounts at the same path shares them)",
                  markup=False, soft_wrap=True)
    if d.get("diff"):
        pid = markup_safe(p["id"])
        out.print(f"\n[bold]awaiting a person[/]: the change to decide on (`andon approve "
                  f"{pid}` or `andon reject {pid} --why ...`):")
        # the agent wrote the diff's lines: shown, never acting
        out.print(visible(d["diff"], lines=True), markup=False, highlight=False,
                  soft_wrap=True)


_PRICING = {"per_request": ", per request",   # usage.py: how a priced cost was priced
            "even_split": ", as equal requests: a price tier may be missed",
            "total": ", on the total: a per-request price tier may be wrong"}


def _show_usage(out: Console, u: dict[str, Any]) -> None:
    def n(key: str) -> str:
        return "?" if u.get(key) is None else str(u[key])
    cache = (f", cache read {n('cache_read_tokens')}, cache write {n('cache_write_tokens')}"
             if u.get("cache_read_tokens") is not None or u.get("cache_write_tokens") is not None
             else "")
    within = (f" (counts within ±{u['tokens_within']}: read from rounded prints)"
              if u.get("tokens_within") else "")
    tokens = (f"tokens in {n('input_tokens')}, out {n('output_tokens')}{cache}{within}"
              if u.get("input_tokens") is not None or u.get("output_tokens") is not None
              else "tokens not reported")
    src = u.get("cost_source", "unknown")
    cost = ("cost unknown" if u.get("cost_usd") is None else
            f"${u['cost_usd']:.4f} ({src}" + (f", {u['price_source']}" if u.get("price_source")
                                               else "") + _PRICING.get(u.get("pricing") or "", "")
            + ")")
    turns = f", {u['turns']} turns" if u.get("turns") is not None else ""
    out.print(visible(f"    usage: model {u.get('model') or '?'}, {tokens}; {cost}{turns}"),
              markup=False, soft_wrap=True)
    for note in u.get("notes", [])[:5]:
        out.print(f"      note: {visible(note)}", markup=False, soft_wrap=True)


def _show_review(out: Console, r: dict[str, Any]) -> None:
    # every field but the ask is the reviewer's (or the store's): each line is shown visible
    def say(line: str) -> None:
        out.print(visible(line), markup=False, soft_wrap=True)

    # the stage is "review" itself, or "review-tests" …: named once
    stage = r["stage"] if r["stage"].startswith("review") else f"review {r['stage']}"
    head = f"  {stage} (ask {r['ask']}): "
    if not r["valid"]:
        say(head + "rejected: " + "; ".join(r["errors"]))
        return
    decided = r["effective_decision"]
    if decided != r["decision"]:
        decided = f"{r['decision']} → {decided}"
    say(head + f"{decided}" + (f" (back to {r['revise_stage']})"
                               if r["effective_decision"] == "revise" else ""))
    for why in r["downgraded_because"]:
        say(f"      downgraded: {why}")
    for v in r["document"]["verdicts"]:
        say(f"      {v['invariant']}: {v['verdict']} at {v['evidence']} — {v['reason']}")
    for f in r["document"]["findings"]:
        say(f"      {f['severity']}: {f['location']} — {f['message']}")
