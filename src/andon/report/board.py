"""The status board: one row per packet, narrow enough for an 80-column terminal.

Reads the store only; never recomputes a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ..config import Config
from ..errors import Problem
from ..packet import check_packets
from ..safe_text import markup_safe, visible
from ..store import StoreProtocol
from .figures import GATE_MARK, STYLE, run_accounting, usage_of, usage_of_rows, usage_text

GATE_SHORT = {"hermetic": "herm", "preflight": "pre"}
# outcome.py's reason for a block on a repeated fingerprint
_SAME_FAILURE = re.compile(r"^same failure as attempt \d+ \(fingerprint \w+\): no new "
                           r"evidence — ")
# the gates column, read once: its marks are not colours alone (a log or a pipe loses them)
GATES_LEGEND = ("gates (the last attempt's): 6 ✓ = six passed · 3 – = three skipped, which "
                "checked nothing · scope ✗ = the first that failed (! = it could not run) · "
                "N suites T s = its N runs of the whole suite, T seconds in all")
# what the result says of a packet taken off the queue, and of a file no run has reached
REMOVED_RESULT = "packet file removed: not run again (its history stays in the store)"
NOT_RUN_RESULT = "not run yet"


def packet_files(repo_root: Path, packets_dir: str) -> tuple[list[tuple[str, str]],
                                                             list[Problem]]:
    """The packet files under ``repo_root / packets_dir`` as the board reads them: (id, slug)
    of each that parsed, by id, and every problem :func:`~andon.packet.check_packets` found.
    They are :func:`status_rows`'s ``on_disk``, and ``complete`` is "no problem"."""
    found, problems = check_packets(repo_root / packets_dir, repo_root)
    return sorted((p.id, p.slug) for p in found), problems


def queue_marks(store_ids: Iterable[str], on_disk: Sequence[tuple[str, str]],
                complete: bool) -> tuple[set[str], list[tuple[str, str]]]:
    """(the ids of the store's packets taken off the queue, the (id, slug) of packet files
    the store has not seen): a packet of the store is removed when every packet file was
    read (``complete``) and none is its; a file whose id the store lacks was written since
    the last run (or before the first) and is ready, not run yet. The one rule behind
    ``andon status`` and the dashboard's board."""
    seen = set(store_ids)
    listed = {pid for pid, _ in on_disk}
    removed = seen - listed if complete else set()
    return removed, [(pid, slug) for pid, slug in on_disk if pid not in seen]


def shown_state(state: str, removed: bool) -> str:
    """The state a board shows: a removed packet's last state is history, so ``removed``."""
    return "removed" if removed else state


def status_rows(store: StoreProtocol, on_disk: Sequence[tuple[str, str]] = (),
                complete: bool = False) -> list[dict[str, Any]]:
    """One dict per packet: id, slug, state, attempts (counted), ``sandbox`` (the level the
    last attempt's newest agent stage ran at, see :func:`sandbox_level`), last attempt's
    outcome, ``removed``.
    ``on_disk`` (id, slug) are the packet files: one the store has not seen yet (nothing ran
    since it was written) is listed as ``ready`` with ``not_run`` true. ``complete``: every
    packet file was read without a problem, so a packet of the store missing from
    ``on_disk`` was taken off the queue by a person (``removed`` true; `andon run` no
    longer reads it). Otherwise ``removed`` is false for every row."""
    packets = store.packets()
    removed, not_run = queue_marks([p["id"] for p in packets], on_disk, complete)
    rows = []
    for p in packets:
        attempts = store.attempts(p["id"])
        last = attempts[-1] if attempts else None
        runs = {a["id"]: store.stage_runs(a["id"]) for a in attempts}
        rows.append({
            "id": p["id"], "slug": p["slug"], "state": p["state"],
            "removed": p["id"] in removed,
            "attempts": len([a for a in attempts if a["counted"]]),
            "interrupted": len([a for a in attempts if not a["counted"]]),
            "usage": usage_of([s for a in attempts for s in runs[a["id"]]]),
            "sandbox": sandbox_level(runs[last["id"]]) if last else None,
            "last_attempt": last and {
                "n": last["n"], "state": last["state"], "reason": last["reason"],
                "failure_layer": last["failure_layer"], "merge_sha": last["merge_sha"],
                "evidence_dir": last["evidence_dir"],
                "gates": {g["gate"]: g["status"] for g in store.gate_results(last["id"])},
                "test_runs": run_accounting(store.gate_results(last["id"])),
            },
        })
    rows += [{"id": pid, "slug": slug, "state": "ready", "removed": False, "attempts": 0,
              "interrupted": 0,
              "usage": usage_of([]), "sandbox": None, "last_attempt": None, "not_run": True}
             for pid, slug in not_run]
    return rows


def sandbox_level(stage_runs: Sequence[dict[str, Any]]) -> str | None:
    """The sandbox level achieved by the newest of ``stage_runs`` (one attempt's, in order)
    that recorded one: ``"none"``, ``"fs"`` or ``"fs+net"``, read from the stage's usage note
    ``sandbox <level>: …`` (agents/process, sandbox/plan.describe); None when no stage
    recorded a level (the scripted adapter, records from before issue 11)."""
    for run in reversed(stage_runs):
        for note in (run.get("usage") or {}).get("notes") or []:
            head, sep, _ = str(note).partition(":")
            if sep and head.startswith("sandbox ") and head[8:] in ("none", "fs", "fs+net"):
                return head[8:]
    return None


def last_preflight(store: StoreProtocol) -> dict[str, Any] | None:
    """The data of the newest ``preflight`` event (``status``, ``head``, ``summary``), or
    None before any run reached preflight."""
    found = store.events(kind="preflight")
    return found[-1]["data"] if found else None


# Below this width the fixed columns (packet, state, tries, gates, agents: about 57 columns)
# leave the result a few letters; then tries, gates and agents share one cell.
NARROW = 72


def board(store: StoreProtocol, config: Config, on_disk: Sequence[tuple[str, str]] = (),
          complete: bool = False) -> Board:
    """The status board: per packet its state, counted tries, the last attempt's gates (all
    passed, or the first that did not), agent cost and time and the sandbox level its last
    agent stage got, and the result (merged sha or the reason; for a removed packet, that its
    file is gone). A rich renderable: at 80 columns and more one column each; narrower than
    ``NARROW`` columns, tries, gates and agents share one, so that the result stays readable.
    ``on_disk``, ``complete``: see :func:`status_rows`."""
    rows = status_rows(store, on_disk, complete)
    workers = worker_rows(store)
    held = {w["packet"]: w["worker"] for w in workers if w["packet"]}
    # the agents' figures, not the run's: a run of scripted agents took <1 s of agent time
    caption = "agents, all packets: " + usage_text(usage_of_rows(rows))
    if workers:  # a pool is at work (andon run --workers N): who holds what
        caption = "workers: " + " · ".join(
            f"{w['worker']} {w['packet']} {w['state']}" if w["packet"]
            else f"{w['worker']} idle" for w in workers) + "\n" + caption
    if rows and all(r.get("not_run") for r in rows):
        pf = last_preflight(store)
        if pf is not None and pf["status"] != "pass":
            caption = (f"nothing ran: the last `andon run` stopped at preflight (the base "
                       f"{pf['head'][:10]} fails its own suite): {clip(pf['summary'], 300)}; fix "
                       "the base, then `andon run`\n" + caption)
        else:
            caption = ("nothing ran yet: the packets are read from their files; `andon run` "
                       "starts them\n" + caption)
    shown = [_row(r, held.get(r["id"], "")) for r in rows]
    if any(r.gates for r in shown):
        caption += f"\n{GATES_LEGEND}"
    if any(r["usage"]["runs"] and r["usage"]["cost_usd"] is None for r in rows):
        caption += ("\ncost ? = the agent reported no usage (no tokens, no cost); "
                    "see `andon show`")
    return Board(f"andon board — integration branch {config.andon.integration_branch}",
                 shown, caption, bool(workers))


@dataclass(frozen=True)
class _Row:
    packet: str  # markup-escaped, as every cell of agent or store text
    state: str  # markup: the state in its colour
    tries: str
    gates: str
    agents: str
    result: str  # markup-escaped
    worker: str


@dataclass(frozen=True)
class Board:
    """The board's rows, laid out when printed, for the width the console gives."""

    title: str  # plain text, as the caption
    rows: list[_Row]
    caption: str  # plain text, never markup: it holds test ids and summaries
    workers: bool

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def table(self, width: int) -> Table:
        """The table for a terminal ``width`` columns wide."""
        narrow = width < NARROW
        # a preflight summary in the caption is the code under test's: shown, never acting
        table = Table(title=Text(visible(self.title), style="table.title"), title_justify="left",
                      caption=Text(visible(self.caption, lines=True)), caption_justify="left")
        table.add_column("packet", no_wrap=True)
        table.add_column("state", no_wrap=True)
        if narrow:
            table.add_column("attempts", no_wrap=True)
        else:
            table.add_column("tries", justify="right")
            table.add_column("gates", no_wrap=True)
            table.add_column("agents", no_wrap=True)
        # a word wider than the column (a test id, a path) is cut with "…", never folded into
        # pieces that read as other names: the full reason is in `andon show`
        table.add_column("result", overflow="ellipsis", ratio=1)
        if self.workers:
            table.add_column("worker", no_wrap=True)
        for r in self.rows:
            middle = ([_tries(r.tries), r.gates, r.agents] if narrow
                      else [r.tries, r.gates, r.agents])
            cells = [r.packet, r.state,
                     *(["\n".join(c for c in middle if c)] if narrow else middle), r.result]
            table.add_row(*cells, *([r.worker] if self.workers else []))
        return table


def _tries(n: str) -> str:
    return f"{n} {'try' if n == '1' else 'tries'}"


def _row(r: dict[str, Any], worker: str) -> _Row:
    last = r["last_attempt"]
    if r["state"] == "done" and last:
        result = f"merged {last['merge_sha'][:10]}"
    elif r["removed"]:  # its last reason is history: nothing acts on it any more
        result = REMOVED_RESULT
    elif last and last["reason"]:
        # the cause first: the fingerprint is in `andon show`, and at 80 columns the
        # preamble alone filled the clipped cell
        reason = _SAME_FAILURE.sub(r"same failure twice: ", last["reason"].splitlines()[0])
        if r["state"] == "ready":  # unblocked (or recovered): not why it waits now
            reason = f"last attempt: {reason}"
        result = clip(reason, 160)
    elif r.get("not_run"):
        result = NOT_RUN_RESULT
    else:
        result = ""
    gates_cell = _gates_cell((last or {}).get("gates", {}))
    if last and last["test_runs"]["full_suite_runs"]:
        t = last["test_runs"]  # verification time: full-suite runs of the last attempt
        n = t["full_suite_runs"]
        gates_cell += f"\n{n} suite{'' if n == 1 else 's'} {_seconds(t['full_suite_s'])}"
    agents_cell = _usage_cell(r["usage"])
    if r.get("sandbox"):  # the level the last attempt's agent actually ran at
        agents_cell += f"\nsandbox {r['sandbox']}"
    state = shown_state(r["state"], r["removed"])  # the state column says what it is now
    style = "dim" if r["removed"] else STYLE.get(r["state"], "white")
    return _Row(markup_safe(r["id"]), f"[{style}]{markup_safe(state)}[/]", str(r["attempts"]),
                gates_cell, agents_cell, markup_safe(result), markup_safe(worker))


def _seconds(s: float) -> str:
    """Whole seconds for the board; ``<1 s`` under one (a rounded "0 s" reads as nothing)."""
    return "<1 s" if s < 1 else f"{s:.0f} s"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space, never inside a word (a test
    id or a path cut in the middle reads as another one), with " …" when cut."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip() + " …"


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
    wall = "time ?" if u["wall_s"] is None else _seconds(u["wall_s"])
    return f"{cost} · {wall}"


def worker_rows(store: StoreProtocol) -> list[dict[str, Any]]:
    """What each worker of the pool at work is doing (``andon run --workers N``): one dict
    per worker, ``worker`` (``w1`` …), ``packet`` (id, or None when idle), ``state`` (the
    packet's, or ``idle``), ``attempt`` (n) and ``since`` (the claim's ISO-8601 UTC time).
    Empty when no pool is at work. Read from the events the pool writes (``pool-started``,
    ``pool-stopped``, the ``claimed`` event's ``worker``): after a kill -9 the last pool is
    shown as it was until the next run recovers its packets."""
    started = store.events(kind="pool-started")
    if not started or any(e["id"] > started[-1]["id"]
                          for e in store.events(kind="pool-stopped")):
        return []
    pool = started[-1]
    states = {p["id"]: p["state"] for p in store.packets()}
    last_claim = {e["packet_id"]: e for e in store.events(kind="claimed")
                  if e["id"] > pool["id"] and e["data"].get("worker")}
    # a packet is held by the worker of its newest claim, a worker by its newest packet
    holding = {e["data"]["worker"]: e
               for e in sorted(last_claim.values(), key=lambda e: e["id"])}
    rows = []
    for i in range(1, pool["data"]["workers"] + 1):
        name = f"w{i}"
        e = holding.get(name)
        state = states.get(e["packet_id"]) if e else None
        if e and state in ("running", "gating", "reviewing", "merging"):
            rows.append({"worker": name, "packet": e["packet_id"], "state": state,
                         "attempt": e["data"].get("n"), "since": e["ts"]})
        else:
            rows.append({"worker": name, "packet": None, "state": "idle", "attempt": None,
                         "since": None})
    return rows
