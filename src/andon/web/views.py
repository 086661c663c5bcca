"""What each page shows, gathered from the store (opened read-only) and the repository.

Rows come from :mod:`andon.report` (the same ``status_rows`` and ``packet_detail`` as
``andon status`` and ``andon show``): nothing here recomputes a verdict. Files are read only
when the store names them (a run's log, a stage's transcript) and only inside the state
folder ``.andon/``; a request never names a path.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import packets_dir_despite_errors
from ..git.repo import Repo
from ..report import packet_detail, usage_of, usage_of_rows, usage_text
from ..report.board import (
    NOT_RUN_RESULT,
    REMOVED_RESULT,
    packet_files,
    queue_marks,
    shown_state,
    worker_rows,
)
from ..state import state_dir
from ..store import Store
from . import diffview, stages

# Where a person is needed comes first, then the rest in id order.
FIRST = {"blocked": 0, "awaiting_human": 1}
ORDER = ["blocked", "awaiting_human", "running", "gating", "reviewing", "merging",
         "needs_work", "ready", "stale", "draft", "done", "removed"]
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class OnDisk:
    """The packet files as the board reads them (``report.board.packet_files``): ``mark``
    changes whenever a file or folder under the packets folder (or which folder that is)
    changes; ``packets`` (id, slug); ``complete``: every file read without a problem."""

    mark: str
    packets: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = False


class PacketFiles:
    """The packet files of the repository at ``root``, parsed again only when their mark
    moved: the mark is the name, size and modification time of everything under the packets
    folder (``[andon] packets_dir`` of andon.toml), a few stat calls where parsing every
    packet would cost far more each time an open board polls. Shared by the server's threads.
    Without an andon.toml that is TOML there is no packets folder to read: no packet files,
    not complete (nothing is called removed)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._last = OnDisk("")

    def read(self) -> OnDisk:
        folder = packets_dir_despite_errors(self.root)
        mark = _tree_mark(self.root / folder, folder) if folder else "no-config"
        with self._lock:
            if self._last.mark == mark:
                return self._last
        found = OnDisk(mark)
        if folder:
            packets, problems = packet_files(self.root, folder)
            found = OnDisk(mark, packets, not problems)
        with self._lock:
            self._last = found
        return found


def _tree_mark(folder: Path, name: str) -> str:
    """A short hash of ``name`` and of every path under ``folder`` with its size and
    modification time (``missing`` when there is no such folder)."""
    h = hashlib.sha256(name.encode())
    if not folder.is_dir():
        return "missing"
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for entry in [top, *(os.path.join(top, f) for f in sorted(files))]:
            try:
                st = os.stat(entry)
            except OSError:
                continue  # gone since the listing: the next poll sees it
            h.update(f"{os.path.relpath(entry, folder)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                     .encode(errors="surrogateescape"))
    return h.hexdigest()[:16]


def open_read_only(db: Path) -> Store:
    """The store at ``db`` with writes refused by SQLite itself (``query_only``)."""
    store = Store(db)
    store.db.execute("PRAGMA query_only = ON")
    return store


def _gate_cell(gates: dict[str, str]) -> tuple[str, str]:
    """(text, css class): the first gate that failed, else how many passed/skipped."""
    bad = next(((g, s) for g, s in gates.items() if s in ("fail", "error")), None)
    if bad:
        return f"{bad[0]} {'✗' if bad[1] == 'fail' else '!'}", "bad"
    passed = sum(s == "pass" for s in gates.values())
    skipped = sum(s == "skipped" for s in gates.values())
    text = " ".join(t for t in (f"{passed} ✓" if passed else "",
                                f"{skipped} –" if skipped else "") if t)
    return text, "good" if passed else ""


def board(store: Store, on_disk: Sequence[tuple[str, str]] = (),
          complete: bool = False) -> dict[str, Any]:
    """The board: ``rows`` (blocked and awaiting-human first, each with ``reason``,
    ``gate``, ``cost``, ``time``, ``updated``, ``worker``), ``counts`` per state, ``progress``
    (done/total, removed packets left out), ``usage`` (all packets, as text) and
    ``workers`` (the pool at work, as ``andon status --json`` gives it; empty without one).

    The same figures as ``andon status`` (:func:`andon.report.status_rows`), read in four
    queries for the whole store instead of several per packet, and without reading any
    gate's evidence: the board of 1,000 packets is polled every few seconds. ``on_disk``
    and ``complete`` (the packet files, :class:`PacketFiles`) mark the same packets removed,
    and list the same files not run yet, as ``andon status`` does
    (``report.board.queue_marks``); a removed packet needs no person."""
    attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in store.all_attempts():
        attempts[a["packet_id"]].append(a)
    stages: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for st in store.all_stage_usage():
        stages[st["attempt_id"]].append(st)
    last_ids = [found[-1]["id"] for found in attempts.values()]
    gates: dict[int, dict[str, str]] = defaultdict(dict)
    for g in store.gate_statuses(last_ids):
        gates[g["attempt_id"]][g["gate"]] = g["status"]
    workers = worker_rows(store)
    # the worker holding it now, else the one that claimed it last (a finished pool)
    worked = store.claim_workers() | {w["packet"]: w["worker"] for w in workers if w["packet"]}
    out, every_usage = [], []
    packets = store.packet_states()
    removed, not_run = queue_marks([p["id"] for p in packets], on_disk, complete)
    for p in packets:
        tries = attempts.get(p["id"], [])
        last = tries[-1] if tries else {}
        gate, gate_class = _gate_cell(gates.get(last.get("id", -1), {}))
        u = usage_of([st for a in tries for st in stages.get(a["id"], [])])
        every_usage.append({"usage": u})
        state = shown_state(p["state"], p["id"] in removed)
        if p["state"] == "done" and last.get("merge_sha"):
            reason = f"merged {last['merge_sha'][:10]}"
        elif p["id"] in removed:  # its last reason is history: nothing acts on it any more
            reason = REMOVED_RESULT
        else:
            reason = (last.get("reason") or "").strip()
        out.append({
            "id": p["id"], "slug": p["slug"], "state": state,
            "attempts": sum(1 for a in tries if a["counted"]),
            "gate": gate, "gate_class": gate_class, "reason": reason,
            "layer": None if p["id"] in removed else last.get("failure_layer"),
            "cost": ("" if not u["runs"] else "?" if u["cost_usd"] is None
                     else f"${u['cost_usd']:.2f}"),
            "time": ("" if not u["runs"] or u["wall_s"] is None else
                     "<1 s" if u["wall_s"] < 1 else f"{u['wall_s']:.0f} s"),
            "updated": (p["updated_at"] or "")[:19].replace("T", " "),
            "needs_person": state in FIRST, "worker": worked.get(p["id"], ""),
        })
    out += [{"id": pid, "slug": slug, "state": "ready", "attempts": 0, "gate": "",
             "gate_class": "", "reason": NOT_RUN_RESULT, "layer": None, "cost": "", "time": "",
             "updated": "", "needs_person": False, "worker": ""} for pid, slug in not_run]
    out.sort(key=lambda r: (FIRST.get(r["state"], 9), r["id"]))
    counts = Counter(r["state"] for r in out)
    return {"rows": out, "counts": [(s, counts[s]) for s in ORDER if counts[s]],
            "progress": (counts["done"], len(out) - counts["removed"]),
            "usage": usage_text(usage_of_rows(every_usage)), "workers": workers}


def packet(store: Store, repo: Repo, packet_id: str) -> dict[str, Any] | None:
    """``andon show``'s detail plus, per attempt, the parsed diff (plant → candidate) and a
    ``link`` for each finding (a diff anchor or a run log); None for an unknown id."""
    d = packet_detail(store, repo, packet_id)
    if d is None:
        return None
    for a in d["attempts"]:
        diff = ""
        if a["plant_sha"] and a["candidate_sha"] and repo.rev_parse(a["candidate_sha"]):
            diff = repo.diff(a["plant_sha"], a["candidate_sha"])
        a["files"] = diffview.parse(diff, a["n"])
        a["split"] = [diffview.side_by_side(f) for f in a["files"]]
        for st in a["stages"]:
            st["sandbox"] = stages.sandbox_level(st.get("usage"))
            path = evidence_path(repo, st.get("transcript_path"))
            st["context"] = (stages.context_summary(path)
                             if path is not None and path.stat().st_size else None)
        anchors = {ln.anchor for f in a["files"] for ln in f.lines if ln.anchor}
        for gi, g in enumerate(a["gates"]):
            g["index"] = gi
            for f in g["evidence"].get("findings", []):
                f["link"] = _finding_link(packet_id, a["n"], gi, g, f, anchors)
        for r in a["reviews"]:
            for v in (r.get("document") or {}).get("verdicts", []):
                v["link"] = _place_link(a["n"], v.get("evidence"), anchors)
            for f in (r.get("document") or {}).get("findings", []):
                f["link"] = _place_link(a["n"], f.get("location"), anchors)
    d["usage_text"] = usage_text(d["usage"])
    d["planted"] = sorted((d["packet"]["definition"].get("plant_files") or {}).keys())
    return d


def _place_link(n: int, where: str | None, anchors: set[str]) -> str | None:
    found = diffview.path_line(where)
    if found is None:
        return None
    a = diffview.anchor(n, *found)
    return f"#{a}" if a in anchors else None


def _finding_link(packet_id: str, n: int, gi: int, gate: dict[str, Any], f: dict[str, Any],
                  anchors: set[str]) -> str | None:
    if f.get("path") and f.get("line"):
        a = diffview.anchor(n, f["path"], int(f["line"]))
        if a in anchors:
            return f"#{a}"
    if f.get("test_id") and gate["evidence"].get("runs"):
        return f"/packets/{packet_id}/attempts/{n}/gates/{gi}/runs/0/log"
    return None


def evidence_path(repo: Repo, recorded: str | None) -> Path | None:
    """The file the store names (resolved), if it is a file inside ``.andon/``, else None."""
    if not recorded:
        return None
    root = state_dir(repo).resolve()
    path = Path(recorded).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path


def evidence_file(repo: Repo, recorded: str | None) -> tuple[str, str] | None:
    """(path, text) of a file the store names, if it lies inside ``.andon/`` (the last
    2 MB of it), else None."""
    path = evidence_path(repo, recorded)
    if path is None:
        return None
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - MAX_FILE_BYTES))
        text = fh.read().decode("utf-8", "replace")
    return str(path), text


def events(store: Store, packet_id: str | None, kind: str | None, limit: int = 500,
           chain_status: stages.ChainStatus | None = None) -> dict[str, Any]:
    """The newest ``limit`` events (of one packet and/or kind when given), newest first,
    with the kinds and packets there are to filter by, and ``chain`` (the hash chain's
    verdict, :class:`stages.ChainStatus`; None when not asked)."""
    rows, total = store.recent_events(packet_id, kind, limit)
    kinds, packets = store.event_facets()
    return {"rows": rows, "kinds": kinds, "packets": packets, "total": total,
            "chain": chain_status.of(store) if chain_status else None}
