"""A stored experiment read back: its export rows (CSV and JSON, columns in
docs/experiments.md, "Export"), its status (progress, spend against budget, ETA) and its run
table for ``compare``. Reads the store only."""

from __future__ import annotations

import csv
import io
from typing import Any

from ..store import StoreProtocol
from .experiment import plan
from .observe import OBSERVATIONS
from .runs import METRICS, Run, RunTable

COLUMNS = ("task", "condition", "repeat", "outcome", "resolved", *METRICS, "agent_s",
           "turns", "cost_source", "attempts", "failure_gate", "failure_layer",
           "failure_summary", *OBSERVATIONS, "claim_rule", "transcripts", "evidence_dir",
           "started_at", "ended_at")


def export_rows(store: StoreProtocol, name: str) -> list[dict[str, Any]]:
    """One dict per current run (superseded error runs left out), in the order they
    finished; keys :data:`COLUMNS`; None where not known."""
    rows = []
    for r in store.experiment_runs(name):
        d = r["data"]
        u = d.get("usage") or {}
        f = d.get("failure") or {}
        obs = d.get("observations") or {}
        rows.append({
            "task": r["task"], "condition": r["condition"], "repeat": r["repeat"],
            "outcome": r["outcome"],
            "resolved": None if r["outcome"] == "error" else r["outcome"] == "resolved",
            **{m: u.get(m) for m in METRICS if m not in ("wall_s", "tool_s")},
            "wall_s": d.get("wall_s"), "tool_s": d.get("tool_s"), "agent_s": d.get("agent_s"),
            "turns": u.get("turns"), "cost_source": "+".join(u.get("cost_sources") or []),
            "attempts": d.get("attempts"), "failure_gate": f.get("gate"),
            "failure_layer": f.get("layer"), "failure_summary": f.get("summary"),
            **{o: obs.get(o) for o in OBSERVATIONS}, "claim_rule": obs.get("claim_rule"),
            "transcripts": ";".join(d.get("transcripts") or []),
            "evidence_dir": d.get("evidence_dir"), "started_at": r["started_at"],
            "ended_at": r["ended_at"],
        })
    return rows


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The export as CSV: a header of :data:`COLUMNS`; booleans ``true``/``false``; an
    unknown value is an empty cell (read back as not known, never 0)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for row in rows:
        w.writerow(["" if row[c] is None else str(row[c]).lower() if isinstance(row[c], bool)
                    else row[c] for c in COLUMNS])
    return buf.getvalue()


def run_table(store: StoreProtocol, name: str) -> RunTable:
    """The stored runs as the table ``compare`` reads, observations included."""
    runs = []
    for row in export_rows(store, name):
        metrics = {m: None if row[m] is None else float(row[m]) for m in METRICS}
        obs = {o: row[o] for o in OBSERVATIONS}
        runs.append(Run(row["task"], row["condition"], row["repeat"], row["outcome"],
                        metrics, f"experiment {name}", obs))
    return RunTable(runs, f"experiment {name}")


def status(store: StoreProtocol, name: str) -> dict[str, Any] | None:
    """Progress of a stored experiment (``planned``, ``done``, outcomes, ``errors``), spend
    (``spent_usd``, ``spent_tokens``) against the budget, and ``eta_s`` (the mean wall time
    of the runs so far, times the runs left, divided by the concurrency); None if not
    stored."""
    exp = store.experiment(name)
    if exp is None:
        return None
    spec = exp["spec"]
    every = store.experiment_runs(name, superseded=True)
    current = [r for r in every if not r["superseded"]]
    tasks = sorted({r["task"] for r in current}) or []
    conditions = [c["name"] for c in spec["conditions"]]
    planned = spec.get("planned") or len(plan(tasks, conditions, spec["repeats"],
                                              spec["seed"]))
    outcomes = {o: sum(r["outcome"] == o for r in current)
                for o in ("resolved", "unresolved", "error")}
    usd = sum((r["data"].get("usage") or {}).get("cost_usd") or 0.0 for r in every)
    tokens = sum(((r["data"].get("usage") or {}).get("input_tokens") or 0)
                 + ((r["data"].get("usage") or {}).get("output_tokens") or 0) for r in every)
    walls = [r["data"].get("wall_s") or 0.0 for r in every]
    left = max(planned - len(current), 0)
    # up to `concurrency` runs at once (experiment.py): the runs left go that many abreast
    abreast = min(max(int(spec.get("concurrency") or 1), 1), left or 1)
    eta = (sum(walls) / len(walls)) * left / abreast if walls and left \
        else (0.0 if not left else None)
    per = {c: {o: sum(r["outcome"] == o for r in current if r["condition"] == c)
               for o in ("resolved", "unresolved", "error")} for c in conditions}
    return {"experiment": name, "source": exp["source"], "base_sha": spec.get("base_sha"),
            "planned": planned, "done": len(current), "left": left, **outcomes,
            "conditions": per, "spent_usd": round(usd, 6), "spent_tokens": tokens,
            "budget": spec.get("budget") or {}, "eta_s": None if eta is None else round(eta, 1),
            "updated_at": exp["updated_at"]}
