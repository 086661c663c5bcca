"""Claims with a lease: how several workers share one queue without working a packet twice.

A worker calls :meth:`Claims.claim` to take the next packet it may work; the store records a
lease (table ``leases``: packet, worker, expiry) in the same transaction that chose the
packet, so no two workers ever hold the same packet. The worker renews the lease while it
works (:meth:`Claims.renew`, well within ``lease_s``) and gives it back when the packet
leaves its hands (:meth:`Claims.release`). A worker that dies stops renewing: once the lease
has expired, the next :meth:`Claims.claim` (or :meth:`Claims.reclaim_expired`) takes the
packet back. An attempt in flight (``running``/``gating``/``reviewing``) is then marked
``interrupted`` (not counted) and the packet made ``ready`` again with an event of kind
``interrupted`` — never a failure of the agent.

Exclusion: on SQLite the whole claim is one ``BEGIN IMMEDIATE`` transaction (one writer at a
time); on PostgreSQL the candidate's row is locked with ``SELECT … FOR UPDATE SKIP LOCKED``
(a worker never waits on another's candidate) and its lease re-read after the lock.

Times are the store's ISO-8601 UTC strings (:func:`andon.store.sqlite.now`), compared as
strings: workers on several machines need clocks in step to well under ``lease_s``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import lifecycle
from ..errors import InvalidArgument


def _later(lease_s: float) -> str:
    if not lease_s > 0:
        raise InvalidArgument(f"lease_s must be a positive number of seconds, got {lease_s!r}")
    return (datetime.now(UTC) + timedelta(seconds=lease_s)).isoformat(timespec="milliseconds")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Claims:
    """The lease methods of a store; mixed into every backend's ``Store``.

    Needs of the backend: ``db.execute(sql, params)`` with SQLite's SQL, ``tx()``,
    ``transition``, ``event``, ``update_attempt``, ``attempts``, and ``_row_lock`` (the
    clause that locks a selected row without waiting, or ``""``).
    """

    _row_lock: str = ""
    db: Any

    if TYPE_CHECKING:  # provided by the backend's Store
        def tx(self) -> AbstractContextManager[Any]: ...

        def event(self, kind: str, packet_id: str | None = None, attempt_id: int | None = None,
                  data: dict[str, Any] | None = None, from_state: str | None = None,
                  to_state: str | None = None) -> None: ...

        def transition(self, packet_id: str, to_state: str, kind: str,
                       attempt_id: int | None = None, data: dict[str, Any] | None = None
                       ) -> str: ...

        def update_attempt(self, attempt_id: int, **fields: Any) -> None: ...

        def attempts(self, packet_id: str) -> list[dict[str, Any]]: ...


    def claim(self, worker_id: str, lease_s: float,
              among: Collection[str] | None = None) -> dict[str, Any] | None:
        """Take the next packet ``worker_id`` may work and hold it for ``lease_s`` seconds.

        The next packet is the first by id in a claimable state (``ready``/``needs_work``)
        whose ``requires`` (from its definition) are all ``done``, with no live lease, and in
        ``among`` when given (e.g. the packets on disk). Expired leases are reclaimed first.
        The packet's state is not changed: the caller starts its attempt (``new_attempt`` and
        ``transition(…, "running", "claimed")``) while holding the lease, and calls
        :meth:`release` when the packet leaves its hands.

        Returns:
            The packet row (as :meth:`packet` gives it) with ``lease``: ``{"worker",
            "expires_at"}``; or None when nothing is claimable now (try again after another
            worker's packet is done: a dependency may then be met).
        Raises:
            InvalidArgument: ``lease_s`` is not positive.
        """
        until = _later(lease_s)
        self.reclaim_expired()
        with self.tx() as db:
            states = {r[0]: r[1] for r in db.execute("SELECT id, state FROM packets")}
            claimable = sorted(lifecycle.CLAIMABLE)
            # candidates without a live lease; _take re-reads state and lease under the lock
            rows = db.execute(
                "SELECT p.id, p.definition FROM packets p LEFT JOIN leases l"
                " ON l.packet_id = p.id WHERE p.state IN (" + ", ".join("?" * len(claimable))
                + ") AND (l.expires_at IS NULL OR l.expires_at <= ?) ORDER BY p.id",
                (*claimable, _now())).fetchall()
            for r in rows:
                if among is not None and r["id"] not in among:
                    continue
                requires = json.loads(r["definition"]).get("requires") or []
                if not all(states.get(q) == "done" for q in requires):
                    continue
                if not self._take(db, r["id"], worker_id, until):
                    continue
                row = db.execute("SELECT * FROM packets WHERE id = ?", (r["id"],)).fetchone()
                out = {**dict(row), "definition": json.loads(row["definition"]),
                       "lease": {"worker": worker_id, "expires_at": until}}
                return out
        return None

    def _take(self, db: Any, packet_id: str, worker_id: str, until: str) -> bool:
        """Lock ``packet_id``'s row (skipping it if another claimer holds it), re-read its
        state and lease after the lock, and lease it to ``worker_id`` if still free."""
        locked = db.execute(f"SELECT state FROM packets WHERE id = ?{self._row_lock}",
                            (packet_id,)).fetchone()
        if locked is None or locked["state"] not in lifecycle.CLAIMABLE:
            return False
        held = db.execute("SELECT worker, expires_at FROM leases WHERE packet_id = ?",
                          (packet_id,)).fetchone()
        if held is not None and held["expires_at"] > _now():
            return False
        db.execute("DELETE FROM leases WHERE packet_id = ?", (packet_id,))
        db.execute("INSERT INTO leases (packet_id, worker, claimed_at, expires_at)"
                   " VALUES (?, ?, ?, ?)", (packet_id, worker_id, _now(), until))
        self.event("leased", packet_id, data={"worker": worker_id, "expires_at": until})
        return True

    def renew(self, worker_id: str, packet_id: str, lease_s: float) -> bool:
        """Extend ``worker_id``'s lease on ``packet_id`` to ``lease_s`` seconds from now.

        Returns:
            True if renewed; False if the worker no longer holds a live lease on it (it
            expired — even if nobody has reclaimed it yet — or was released): the worker must
            stop working the packet and record nothing more for it.
        """
        until = _later(lease_s)
        with self.tx() as db:
            held = db.execute(
                "SELECT expires_at FROM leases WHERE packet_id = ? AND worker = ?",
                (packet_id, worker_id)).fetchone()
            if held is None or held["expires_at"] <= _now():
                return False
            db.execute("UPDATE leases SET expires_at = ? WHERE packet_id = ? AND worker = ?",
                       (until, packet_id, worker_id))
            return True

    def release(self, worker_id: str, packet_id: str) -> None:
        """Give back ``worker_id``'s lease on ``packet_id`` (nothing if it holds none)."""
        with self.tx() as db:
            db.execute("DELETE FROM leases WHERE packet_id = ? AND worker = ?",
                       (packet_id, worker_id))

    def leases(self) -> list[dict[str, Any]]:
        """Every lease, live or expired: ``{"packet_id", "worker", "claimed_at",
        "expires_at"}``, by packet id."""
        return [dict(r) for r in self.db.execute("SELECT * FROM leases ORDER BY packet_id")]

    def reclaim_expired(self) -> list[str]:
        """Take back every packet whose lease has expired; return their ids.

        A packet in flight goes back to ``ready`` (event ``interrupted``, data: the worker and
        when its lease expired) and its running attempt is marked ``interrupted``, not
        counted. A packet in ``merging`` keeps its state (a runner's recovery finishes the
        merge) and gets an event ``lease-expired``; any other state just loses the lease.
        The dead worker's worktree and processes are its own machine's to clean up.
        """
        cut = _now()
        taken: list[str] = []
        if not self.db.execute("SELECT 1 FROM leases WHERE expires_at <= ? LIMIT 1",
                               (cut,)).fetchone():
            return taken  # the usual case: no write transaction for nothing
        with self.tx() as db:
            for lease in list(self._expired(db, cut)):
                pid = lease["packet_id"]
                state = db.execute(f"SELECT state FROM packets WHERE id = ?{self._row_lock}",
                                   (pid,)).fetchone()
                still = db.execute("SELECT expires_at FROM leases WHERE packet_id = ?"
                                   " AND worker = ?", (pid, lease["worker"])).fetchone()
                if state is None or still is None or still["expires_at"] > cut:
                    continue  # another claimer got there first, or it was renewed
                db.execute("DELETE FROM leases WHERE packet_id = ?", (pid,))
                why = {"worker": lease["worker"], "expired_at": lease["expires_at"]}
                if state["state"] in lifecycle.IN_FLIGHT:
                    running = [a for a in self.attempts(pid) if a["state"] == "running"]
                    for a in running:
                        self.update_attempt(
                            a["id"], state="interrupted", counted=0, ended_at=cut,
                            reason=f"interrupted: the lease of worker {lease['worker']} "
                                   f"expired at {lease['expires_at']}")
                    self.transition(pid, "ready", "interrupted",
                                    running[-1]["id"] if running else None, why)
                else:
                    self.event("lease-expired", pid, data={**why, "state": state["state"]})
                taken.append(pid)
        return taken

    def _expired(self, db: Any, cut: str) -> Iterator[Any]:
        yield from db.execute("SELECT packet_id, worker, expires_at FROM leases"
                              " WHERE expires_at <= ? ORDER BY packet_id", (cut,)).fetchall()
