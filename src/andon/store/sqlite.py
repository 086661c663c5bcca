"""The SQLite store: the only code that writes andon's state.

One file (default ``.andon/andon.db`` in the repository, excluded from git), WAL mode,
schema versions applied in order and recorded in ``schema_migrations``. Every change of a
packet's state goes through :meth:`Store.transition`, which checks the edge with
:mod:`andon.lifecycle` and appends an event in the same transaction. The ``events`` table is
append-only (triggers refuse UPDATE and DELETE).

Times are ISO-8601 UTC strings; durations are float seconds; JSON columns hold dicts.
The PostgreSQL backend (:mod:`andon.store.postgres`) runs this same class over another
connection: write SQL both engines share (:mod:`andon.store.dialect` says what is translated).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import lifecycle
from ..errors import StoreError
from ..usage import Usage
from . import chain
from .claims import Claims
from .dashboard import DashboardReads
from .experiment_rows import ExperimentRows
from .rows import now
from .rows import row_dict as _row

# Each migration is one SQL script, applied once, in order, in its own transaction.
MIGRATIONS: list[str] = [
    """
        CREATE TABLE packets (
            id TEXT PRIMARY KEY, slug TEXT NOT NULL, source TEXT NOT NULL,
            content_sha TEXT NOT NULL, state TEXT NOT NULL, definition TEXT NOT NULL,
            updated_at TEXT NOT NULL);
        CREATE TABLE attempts (
            id INTEGER PRIMARY KEY, packet_id TEXT NOT NULL REFERENCES packets(id),
            n INTEGER NOT NULL, round INTEGER NOT NULL, state TEXT NOT NULL,
            counted INTEGER NOT NULL DEFAULT 1, agent TEXT, branch TEXT, worktree TEXT,
            base_sha TEXT, plant_sha TEXT, candidate_sha TEXT, merge_sha TEXT,
            fingerprint TEXT, failure_layer TEXT, reason TEXT, evidence_dir TEXT,
            started_at TEXT NOT NULL, ended_at TEXT, UNIQUE (packet_id, n));
        CREATE TABLE gate_results (
            id INTEGER PRIMARY KEY, attempt_id INTEGER REFERENCES attempts(id),
            gate TEXT NOT NULL, status TEXT NOT NULL, failure_layer TEXT,
            summary TEXT NOT NULL, evidence TEXT NOT NULL, started_at TEXT NOT NULL,
            duration_s REAL NOT NULL);
        CREATE TABLE stage_runs (
            id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL REFERENCES attempts(id),
            stage TEXT NOT NULL, agent TEXT NOT NULL, exit_status INTEGER, timed_out INTEGER,
            duration_s REAL, transcript_path TEXT, claim TEXT, usage TEXT,
            started_at TEXT NOT NULL);
        CREATE TABLE baselines (
            tree_sha TEXT PRIMARY KEY, passed_ids TEXT NOT NULL, evidence TEXT NOT NULL,
            created_at TEXT NOT NULL);
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, packet_id TEXT,
            attempt_id INTEGER, kind TEXT NOT NULL, from_state TEXT, to_state TEXT,
            data TEXT NOT NULL);
        CREATE TRIGGER events_append_only_u BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER events_append_only_d BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE INDEX attempts_packet ON attempts(packet_id, n);
        CREATE INDEX gates_attempt ON gate_results(attempt_id);
        CREATE INDEX events_packet ON events(packet_id, id);
    """,
    """
        ALTER TABLE attempts ADD COLUMN atdd_sha TEXT;
        ALTER TABLE attempts ADD COLUMN start_stage TEXT;
        ALTER TABLE attempts ADD COLUMN route_stage TEXT;
        CREATE TABLE reviews (
            id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL REFERENCES attempts(id),
            stage TEXT NOT NULL, ask INTEGER NOT NULL, valid INTEGER NOT NULL,
            errors TEXT NOT NULL, document TEXT, decision TEXT, effective_decision TEXT,
            revise_stage TEXT, downgraded_because TEXT NOT NULL, raw TEXT NOT NULL,
            created_at TEXT NOT NULL);
        CREATE INDEX reviews_attempt ON reviews(attempt_id);
    """,
    # One cache of verification results (issue 18): the preflight's baseline and red's
    # outcome, each under a key that names everything that can change it (gates/cache.py).
    # The old baselines table, keyed by tree alone, stays but is no longer read.
    """
        CREATE TABLE results_cache (
            key TEXT PRIMARY KEY, kind TEXT NOT NULL, data TEXT NOT NULL,
            evidence TEXT NOT NULL, created_at TEXT NOT NULL);
    """,
    # Claims with a lease (issue 12, store/claims.py): who works which packet, until when.
    """
        CREATE TABLE leases (
            packet_id TEXT PRIMARY KEY REFERENCES packets(id), worker TEXT NOT NULL,
            claimed_at TEXT NOT NULL, expires_at TEXT NOT NULL);
    """,
    # Experiments (issue 17): one row per experiment file run here, one per finished run
    # (written whole when the run ends, so a killed experiment loses no finished run);
    # an error run retried is kept, marked superseded.
    """
        CREATE TABLE experiments (
            name TEXT PRIMARY KEY, source TEXT NOT NULL, spec TEXT NOT NULL,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        CREATE TABLE experiment_runs (
            id INTEGER PRIMARY KEY, experiment TEXT NOT NULL REFERENCES experiments(name),
            task TEXT NOT NULL, condition TEXT NOT NULL, repeat INTEGER NOT NULL,
            outcome TEXT NOT NULL, superseded INTEGER NOT NULL DEFAULT 0,
            data TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT NOT NULL);
        CREATE INDEX experiment_runs_key ON experiment_runs(experiment, task, condition,
            repeat);
    """,
    # The hash chain over the events (issue 11, store/chain.py): events before this have
    # none, and the chain starts at the first event written after the upgrade.
    """
        ALTER TABLE events ADD COLUMN prev_hash TEXT;
        ALTER TABLE events ADD COLUMN hash TEXT;
    """,
]


class Store(Claims, DashboardReads, ExperimentRows):
    """Open (creating and migrating if needed) the store at ``path``.

    Raises:
        StoreError: the file was written by a newer andon (unknown schema version).
    """

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open transactions ourselves (BEGIN IMMEDIATE) so a
        # transition's state change and its event commit together or not at all.
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def close(self) -> None:
        self.db.close()

    def _migrate(self) -> None:
        self.db.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {r[0] for r in self.db.execute("SELECT version FROM schema_migrations")}
        if done and max(done) > len(MIGRATIONS):
            raise StoreError(f"{self.path}: schema version {max(done)} is newer than this "
                             f"andon knows ({len(MIGRATIONS)}); upgrade andon")
        for version, script in enumerate(MIGRATIONS, start=1):
            if version not in done:
                # executescript commits whatever is open first, so the script carries its
                # own transaction: the schema change and its record land together.
                self.db.executescript(
                    f"BEGIN IMMEDIATE; {script}; INSERT OR IGNORE INTO schema_migrations "
                    f"VALUES ({version}, '{now()}'); COMMIT;")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested use joins the outer one."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- events and transitions ---------------------------------------------------------

    def event(self, kind: str, packet_id: str | None = None, attempt_id: int | None = None,
              data: dict[str, Any] | None = None, from_state: str | None = None,
              to_state: str | None = None) -> None:
        row = {"ts": now(), "packet_id": packet_id, "attempt_id": attempt_id, "kind": kind,
               "from_state": from_state, "to_state": to_state, "data": json.dumps(data or {})}
        with self.tx() as db:
            self._chain_lock(db)
            last = db.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
            prev = last[0] if last else None
            db.execute(
                "INSERT INTO events (ts, packet_id, attempt_id, kind, from_state, to_state, data,"
                " prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row.values(), prev, chain.event_hash(prev, row)),
            )

    def _chain_lock(self, db: Any) -> None:
        """Writers of events take turns, so that each links to the one before it: SQLite's
        ``BEGIN IMMEDIATE`` already makes them (PostgreSQL overrides this)."""

    def chain_rows(self, last: int | None = None) -> list[dict[str, Any]]:
        """Every event as stored (``data`` as its JSON text), or the ``last`` newest, in id
        order: what :func:`andon.store.chain.verify` walks."""
        if last is None:
            return [dict(r) for r in self.db.execute("SELECT * FROM events ORDER BY id")]
        rows = [dict(r) for r in self.db.execute(
            "SELECT * FROM events ORDER BY id DESC LIMIT ?", (last,))]
        return rows[::-1]

    def _evidence_event(self, attempt_id: int | None, of: str, *values: Any) -> None:
        files = chain.evidence_files(*values)
        if files:
            self.event("evidence", None, attempt_id, {"of": of, "files": files})

    def transition(self, packet_id: str, to_state: str, kind: str,
                   attempt_id: int | None = None, data: dict[str, Any] | None = None) -> str:
        """Move a packet to ``to_state`` and log the event; return the previous state.

        Raises:
            IllegalTransition: the lifecycle has no such edge (see :mod:`andon.lifecycle`).
            KeyError: no packet with that id.
        """
        with self.tx() as db:
            row = db.execute("SELECT state FROM packets WHERE id = ?", (packet_id,)).fetchone()
            if row is None:
                raise KeyError(packet_id)
            lifecycle.check(row["state"], to_state)
            db.execute("UPDATE packets SET state = ?, updated_at = ? WHERE id = ?",
                       (to_state, now(), packet_id))
            self.event(kind, packet_id, attempt_id, data, row["state"], to_state)
            return row["state"]

    def events(self, packet_id: str | None = None, kind: str | None = None
               ) -> list[dict[str, Any]]:
        """Events in the order they happened, of one packet and/or one kind if named."""
        where = [(c, v) for c, v in (("packet_id", packet_id), ("kind", kind)) if v]
        q = ("SELECT * FROM events" + (" WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)
                                       if where else "") + " ORDER BY id")
        return [_row(r) for r in self.db.execute(q, tuple(v for _, v in where))]

    # -- packets ------------------------------------------------------------------------

    def upsert_packet(self, packet_id: str, slug: str, source: str, content_sha: str,
                      definition: dict[str, Any]) -> bool:
        """Register a packet (state ``ready``) or refresh its definition. True if new or edited."""
        with self.tx() as db:
            # several workers register the same packets at once (PostgreSQL): in turn, or
            # both would see no row and the second INSERT would fail
            self._chain_lock(db)
            row = db.execute("SELECT content_sha FROM packets WHERE id = ?",
                             (packet_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO packets VALUES (?, ?, ?, ?, 'ready', ?, ?)",
                           (packet_id, slug, source, content_sha, json.dumps(definition), now()))
                self.event("registered", packet_id, data={"content_sha": content_sha},
                           to_state="ready")
                return True
            if row["content_sha"] == content_sha:
                return False
            db.execute("UPDATE packets SET slug=?, source=?, content_sha=?, definition=?,"
                       " updated_at=? WHERE id=?",
                       (slug, source, content_sha, json.dumps(definition), now(), packet_id))
            self.event("edited", packet_id,
                       data={"old_sha": row["content_sha"], "content_sha": content_sha})
            return True

    def packet(self, packet_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM packets WHERE id = ?", (packet_id,)).fetchone()
        return _row(row) if row else None

    def packets(self) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute("SELECT * FROM packets ORDER BY id")]

    # -- attempts -----------------------------------------------------------------------

    def new_attempt(self, packet_id: str, agent: str, round_: int) -> dict[str, Any]:
        with self.tx() as db:
            n = db.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM attempts WHERE packet_id = ?",
                           (packet_id,)).fetchone()[0]
            # RETURNING, not lastrowid: the one both backends have
            new_id = db.execute(
                "INSERT INTO attempts (packet_id, n, round, state, agent, started_at)"
                " VALUES (?, ?, ?, 'running', ?, ?) RETURNING id",
                (packet_id, n, round_, agent, now())).fetchone()[0]
            return self.attempt(new_id)

    def update_attempt(self, attempt_id: int, **fields: Any) -> None:
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.tx() as db:
            db.execute(f"UPDATE attempts SET {cols} WHERE id = ?", (*fields.values(), attempt_id))

    def attempt(self, attempt_id: int) -> dict[str, Any]:
        return _row(self.db.execute("SELECT * FROM attempts WHERE id = ?",
                                    (attempt_id,)).fetchone())

    def attempts(self, packet_id: str) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute(
            "SELECT * FROM attempts WHERE packet_id = ? ORDER BY n", (packet_id,))]

    # -- gate results, stage runs, baselines --------------------------------------------

    def add_gate_result(self, attempt_id: int | None, gate: str, status: str,
                        failure_layer: str | None, summary: str, evidence: dict[str, Any],
                        started_at: str, duration_s: float) -> None:
        with self.tx() as db:
            db.execute("INSERT INTO gate_results (attempt_id, gate, status, failure_layer,"
                       " summary, evidence, started_at, duration_s) VALUES (?,?,?,?,?,?,?,?)",
                       (attempt_id, gate, status, failure_layer, summary,
                        json.dumps(evidence), started_at, duration_s))
            self._evidence_event(attempt_id, f"gate {gate}", evidence)

    def gate_results(self, attempt_id: int) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute(
            "SELECT * FROM gate_results WHERE attempt_id = ? ORDER BY id", (attempt_id,))]

    def add_stage_run(self, attempt_id: int, stage: str, agent: str, exit_status: int | None,
                      timed_out: bool, duration_s: float, transcript_path: str, claim: str,
                      usage: Usage | None, started_at: str) -> None:
        """Record one stage run; ``usage`` is stored as ``Usage.to_dict()`` (JSON), None as
        NULL, and read back by :meth:`stage_runs` as that dict."""
        with self.tx() as db:
            db.execute("INSERT INTO stage_runs (attempt_id, stage, agent, exit_status,"
                       " timed_out, duration_s, transcript_path, claim, usage, started_at)"
                       " VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (attempt_id, stage, agent, exit_status, int(timed_out), duration_s,
                        transcript_path, claim,
                        json.dumps(usage.to_dict()) if usage is not None else None,
                        started_at))
            self._evidence_event(attempt_id, f"stage {stage}", transcript_path)

    def stage_runs(self, attempt_id: int) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute(
            "SELECT * FROM stage_runs WHERE attempt_id = ? ORDER BY id", (attempt_id,))]

    def add_review(self, attempt_id: int, stage: str, ask: int, raw: str, errors: list[str],
                   document: dict[str, Any] | None = None, decision: str | None = None,
                   effective_decision: str | None = None, revise_stage: str | None = None,
                   downgraded_because: list[str] | None = None) -> None:
        """One review document as returned (``raw``), valid or not, with what was decided."""
        with self.tx() as db:
            db.execute("INSERT INTO reviews (attempt_id, stage, ask, valid, errors, document,"
                       " decision, effective_decision, revise_stage, downgraded_because, raw,"
                       " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                       (attempt_id, stage, ask, int(not errors), json.dumps(errors),
                        json.dumps(document) if document is not None else None, decision,
                        effective_decision, revise_stage, json.dumps(downgraded_because or []),
                        raw, now()))

    def reviews(self, attempt_id: int) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute(
            "SELECT * FROM reviews WHERE attempt_id = ? ORDER BY id", (attempt_id,))]

    def cached(self, key: str) -> dict[str, Any] | None:
        """The cached result under ``key`` (see gates/cache.py): ``{"key", "kind", "data",
        "evidence", "created_at"}`` with ``data`` and ``evidence`` as dicts, or None."""
        row = self.db.execute("SELECT * FROM results_cache WHERE key = ?", (key,)).fetchone()
        return _row(row) if row else None

    def set_cached(self, key: str, kind: str, data: dict[str, Any],
                   evidence: dict[str, Any]) -> None:
        """Keep ``data`` (what a later run reuses) and ``evidence`` (what it was made from)
        under ``key``; a result already there is replaced."""
        with self.tx() as db:
            db.execute("INSERT INTO results_cache VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO"
                       " UPDATE SET kind = excluded.kind, data = excluded.data,"
                       " evidence = excluded.evidence, created_at = excluded.created_at",
                       (key, kind, json.dumps(data), json.dumps(evidence), now()))

    def drop_cached(self, prefix: str, before: str | None = None) -> None:
        """Remove every cached result whose key starts with ``prefix`` (a run's own keys,
        gates/cache.py ``run_scope_prefix``), only those made before ``before`` (an ISO
        8601 UTC time as :func:`now` writes) when given; none is no error."""
        sql = "DELETE FROM results_cache WHERE substr(key, 1, ?) = ?"
        args: tuple[Any, ...] = (len(prefix), prefix)
        if before is not None:
            sql, args = sql + " AND created_at < ?", (*args, before)
        with self.tx() as db:
            db.execute(sql, args)

    def set_baseline(self, key: str, passed_ids: set[str], evidence: dict[str, Any]) -> None:
        """Keep ``passed_ids`` (test ids that passed in a full-suite run the harness made of
        the tree ``key`` names: gates/cache.py) as a ``preflight`` result; read back, and
        checked, by baseline.py ``Baseline.known``."""
        self.set_cached(key, "preflight", {"passed_ids": sorted(passed_ids)}, evidence)

    def reopen(self) -> None:
        """Close the connection and open a new one to the same file. ``andon run --workers
        N`` closes the store before each ``os.fork`` and reopens it after: SQLite's state must
        not cross a fork (the child inherits lock records of locks it does not hold), so at
        the fork this process has no connection at all (workers.py)."""
        self.db.close()
        self.db = Store(self.path).db
