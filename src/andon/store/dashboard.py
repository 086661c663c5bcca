"""Whole-store reads for the dashboard (``web/views.py``): the board in a few queries, not
one per packet; mixed into the backend's ``Store``. Shared SQL, so PostgreSQL runs them too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .rows import row_dict as _row

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


class DashboardReads:
    """The dashboard's reads, over the backend's ``db`` connection."""

    if TYPE_CHECKING:  # provided by the backend's Store
        db: Any

        def tx(self) -> AbstractContextManager[Any]: ...

    def packet_states(self) -> list[dict[str, Any]]:
        """``{"id", "slug", "state", "updated_at"}`` of every packet, by id (no definition)."""
        return [dict(r) for r in self.db.execute(
            "SELECT id, slug, state, updated_at FROM packets ORDER BY id")]

    def all_attempts(self) -> list[dict[str, Any]]:
        """Every attempt (all columns), by packet id then number."""
        return [_row(r) for r in self.db.execute(
            "SELECT * FROM attempts ORDER BY packet_id, n")]

    def all_stage_usage(self) -> list[dict[str, Any]]:
        """``{"attempt_id", "usage" (dict or None), "duration_s"}`` of every stage run."""
        return [_row(r) for r in self.db.execute(
            "SELECT attempt_id, usage, duration_s FROM stage_runs ORDER BY id")]

    def gate_statuses(self, attempt_ids: list[int]) -> list[dict[str, Any]]:
        """``{"attempt_id", "gate", "status"}`` of those attempts' gates, in the order run;
        the evidence is not read."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(attempt_ids), 500):  # SQLite's limit on bound parameters
            chunk = attempt_ids[i:i + 500]
            out += [dict(r) for r in self.db.execute(
                "SELECT attempt_id, gate, status FROM gate_results WHERE attempt_id IN "
                f"({','.join('?' * len(chunk))}) ORDER BY id", chunk)]
        return out

    def recent_events(self, packet_id: str | None = None, kind: str | None = None,
                      limit: int = 500) -> tuple[list[dict[str, Any]], int]:
        """The newest ``limit`` events (of one packet and/or kind if named), newest first,
        and how many there are in all."""
        where = [(c, v) for c, v in (("packet_id", packet_id), ("kind", kind)) if v]
        cond = (" WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)) if where else ""
        args = tuple(v for _, v in where)
        rows = [_row(r) for r in self.db.execute(
            f"SELECT * FROM events{cond} ORDER BY id DESC LIMIT ?", (*args, limit))]
        return rows, self.db.execute(f"SELECT COUNT(*) FROM events{cond}", args).fetchone()[0]

    def change_mark(self) -> str:
        """A short text that changes whenever an event, attempt, stage run, gate result or
        packet is added or a packet changes state (the newest ids and times): the dashboard's
        board answers "nothing new" without reading the rows. An attempt updated without any
        event is seen with the next event."""
        row = self.db.execute(
            "SELECT (SELECT MAX(id) FROM events), (SELECT MAX(id) FROM attempts),"
            " (SELECT MAX(id) FROM stage_runs), (SELECT MAX(id) FROM gate_results),"
            " (SELECT COUNT(*) FROM packets), (SELECT MAX(updated_at) FROM packets)").fetchone()
        return "-".join(str(v) for v in row)

    def event_facets(self) -> tuple[list[str], list[str]]:
        """(the event kinds there are, the packet ids that have events), sorted."""
        kinds = [r[0] for r in self.db.execute("SELECT DISTINCT kind FROM events ORDER BY 1")]
        packets = [r[0] for r in self.db.execute(
            "SELECT DISTINCT packet_id FROM events WHERE packet_id IS NOT NULL ORDER BY 1")]
        return kinds, packets

    def claim_workers(self) -> dict[str, str]:
        """``{packet id: worker}`` from each packet's newest ``claimed`` event that names a
        worker (``andon run --workers N`` writes ``w1`` …); packets never claimed by a pool
        worker are absent."""
        out: dict[str, str] = {}
        for r in self.db.execute("SELECT packet_id, data FROM events WHERE kind = 'claimed'"
                                 " ORDER BY id"):
            d = _row(r)
            worker = (d.get("data") or {}).get("worker")
            if worker and d["packet_id"]:
                out[d["packet_id"]] = str(worker)
        return out

    def newest_event_id(self) -> int | None:
        """The id of the newest event (None when there is none): the key the dashboard's
        hash-chain status is cached under."""
        return self.db.execute("SELECT MAX(id) FROM events").fetchone()[0]
