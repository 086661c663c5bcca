"""The PostgreSQL store: the same :class:`andon.store.sqlite.Store`, over psycopg 3.

``PgStore(url)`` runs every method of ``Store`` (and of the claims in
:mod:`andon.store.claims`) unchanged: its ``db`` is a small adapter that speaks the part of
``sqlite3``'s interface the store uses (``execute`` → rows readable by name and position,
``in_transaction``) and translates each statement with :mod:`andon.store.dialect`. So a
method another module appends to ``Store`` runs here too, as long as its SQL is shared.

Outages: when the connection is lost (the server restarted, the network dropped), the store
reports it (``on_outage``: a callable taking one line; default: standard error), reconnects
with exponential backoff for at most ``retry_s`` seconds, records an event ``store-outage``,
and carries on. A method that lost its connection inside its own transaction is run again
from the start (the server rolled that transaction back); one nested in a caller's
``with store.tx()`` cannot be, and raises :class:`~andon.errors.StoreUnavailable`, as does a
``COMMIT`` the server cannot settle (a lost ``COMMIT`` is settled by asking the server, after
reconnecting, whether the transaction's id committed: ``pg_xact_status``), and an outage
longer than ``retry_s``.

psycopg is imported only here, when a PostgreSQL URL is opened (extra ``andon[postgres]``).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import InvalidValue, StoreError, StoreUnavailable
from . import dialect
from .claims import Claims
from .sqlite import MIGRATIONS, Store, now

# the advisory lock that serialises migrations of one database (any constant would do)
_MIGRATION_LOCK = 0x616E646F6E  # "andon"
# the advisory lock writers of events take in turn, so that each links to the one before it
_CHAIN_LOCK = _MIGRATION_LOCK + 1


def redact(url: str) -> str:
    """``url`` without its password (in the user part or a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = urlencode([(k, "***" if k == "password" else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class _Row(dict[str, Any]):
    """A row readable by column name and by position, like ``sqlite3.Row``."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


def _rows(cursor: Any) -> Callable[[Any], _Row]:
    names = [c.name for c in cursor.description or ()]
    return lambda values: _Row(zip(names, values, strict=True))


class _Result:
    def __init__(self, rows: list[_Row]):
        self._rows = rows

    def fetchone(self) -> _Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[_Row]:
        return self._rows

    def __iter__(self) -> Iterator[_Row]:
        return iter(self._rows)

    @property
    def lastrowid(self) -> int:
        raise StoreError("lastrowid has no PostgreSQL equivalent: add RETURNING id to the "
                         "INSERT and read it from the row (both backends run that)")


class _Connection:
    """sqlite3-like access to one PostgreSQL connection, reconnecting after an outage."""

    def __init__(self, url: str, retry_s: float, on_outage: Callable[[str], None]):
        try:
            import psycopg  # the optional dependency: only needed when PostgreSQL is used
        except ImportError as exc:
            raise InvalidValue(f"a PostgreSQL store needs the postgres extra: pip install "
                               f"'andon[postgres]' ({exc})") from None

        self._psycopg = psycopg
        self.url, self.safe_url = url, redact(url)
        self.retry_s, self.on_outage = retry_s, on_outage
        self.conn = self._connect()

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True, row_factory=_rows,
                                         connect_timeout=10)
        except self._psycopg.OperationalError as e:
            raise StoreUnavailable(f"cannot open the PostgreSQL store {self.safe_url}: "
                                   f"{self._reason(e)}") from None

    def _reason(self, e: BaseException) -> str:
        text = " ".join(str(e).split())
        password = urlsplit(self.url).password
        return text.replace(password, "***") if password else text

    @property
    def in_transaction(self) -> bool:
        status = self.conn.info.transaction_status
        return not self.conn.broken and status != self._psycopg.pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> _Result:
        """Run one statement of SQLite's SQL (see :mod:`andon.store.dialect`)."""
        text = dialect.statement(sql, bool(params))
        word = text.lstrip()[:8].upper()
        if word.startswith("ROLLBACK") and self.conn.broken:
            return _Result([])  # the server already rolled it back with the connection
        inside = self.in_transaction
        if self.conn.broken and not inside:
            self.reconnect("the connection was lost earlier")
        xid = None
        try:
            if word.startswith("COMMIT") and inside:
                # the transaction's id, if it wrote anything: how a lost COMMIT is settled
                xid = self._run("SELECT pg_current_xact_id_if_assigned()::text AS x", ()
                                ).fetchall()[0]["x"]
            return self._run(text, params)
        except self._psycopg.OperationalError as e:
            if not self.conn.broken:
                raise
            if xid is not None:
                self._settle_commit(xid, self._reason(e))
                return _Result([])
            if inside:
                raise StoreUnavailable(f"lost the connection to {self.safe_url} inside a "
                                       f"transaction (rolled back): {self._reason(e)}",
                                       retry_safe=True) from None
            self.reconnect(self._reason(e))
            return self._run(text, params)

    def _settle_commit(self, xid: str, why: str) -> None:
        """The connection broke during COMMIT of transaction ``xid``: reconnect and ask the
        server whether it committed. Returns if it did.

        Raises:
            StoreUnavailable: it did not (``retry_safe``: the work may run again), or the
                server cannot say.
        """
        self.reconnect(why)
        status = self._run("SELECT pg_xact_status(%s::xid8) AS s", (xid,)).fetchall()[0]["s"]
        if status == "committed":
            return
        raise StoreUnavailable(f"lost the connection to {self.safe_url} during COMMIT; the "
                               f"server says transaction {xid} is {status or 'unknown'}",
                               retry_safe=status == "aborted")

    def _run(self, text: str, params: Any) -> _Result:
        cur = self.conn.execute(text, params or None)
        return _Result(cur.fetchall() if cur.description else [])

    def reconnect(self, why: str) -> None:
        """Connect again, backing off from 0.05 s to 2 s between tries, for at most
        ``retry_s`` seconds; then record the outage as an event.

        Raises:
            StoreUnavailable: still unreachable after ``retry_s`` seconds.
        """
        started = time.monotonic()
        self.on_outage(f"andon: store {self.safe_url} unreachable ({why}); retrying for up "
                       f"to {self.retry_s:g}s")
        delay = 0.05
        while True:
            try:
                self.conn = self._connect()
                break
            except StoreUnavailable as e:
                if time.monotonic() - started + delay > self.retry_s:
                    raise StoreUnavailable(f"store {self.safe_url} unreachable for "
                                           f"{self.retry_s:g}s, gave up: {e}") from None
                time.sleep(delay)  # backoff between reconnection tries, not synchronisation
                delay = min(delay * 2, 2.0)
        down = round(time.monotonic() - started, 3)
        self.on_outage(f"andon: store {self.safe_url} reachable again after {down:g}s")
        self._run("INSERT INTO events (ts, kind, data) VALUES (%s, 'store-outage', %s)",
                  (now(), json.dumps({"error": why, "down_s": down})))

    def close(self) -> None:
        self.conn.close()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class PgStore(Store):
    """Open (creating and migrating if needed) the PostgreSQL store at ``url``
    (``postgresql://user:password@host:port/dbname``, any libpq URL).

    ``retry_s``: how long an outage is retried before giving up (seconds);
    ``on_outage``: called with one line when the connection is lost and when it is back.

    Raises:
        StoreUnavailable: the server cannot be reached or refused the login (the message
            names the URL without its password).
        StoreError: the database was migrated by a newer andon.
    """

    _row_lock = " FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str, retry_s: float = 60.0,
                 on_outage: Callable[[str], None] | None = None):
        self.url = redact(url)
        self.path = Path(self.url)  # what messages name the store by
        self.db = _Connection(url, retry_s, on_outage or _stderr)
        self._migrate()

    def close(self) -> None:
        self.db.close()

    def _chain_lock(self, db: Any) -> None:
        """READ COMMITTED lets two writers read the same last event: they take turns (released
        at the end of the transaction)."""
        db.execute(f"SELECT pg_advisory_xact_lock({_CHAIN_LOCK})")

    def _migrate(self) -> None:
        # Same list, same schema_migrations table as SQLite; each version in its own
        # transaction, under an advisory lock so that workers starting together migrate once.
        for version, script in enumerate(MIGRATIONS, start=1):
            with self.tx() as db:
                db.execute(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
                db.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                           "(version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)")
                done = {r[0] for r in db.execute("SELECT version FROM schema_migrations")}
                if done and max(done) > len(MIGRATIONS):
                    raise StoreError(f"{self.url}: schema version {max(done)} is newer than "
                                     f"this andon knows ({len(MIGRATIONS)}); upgrade andon")
                if version not in done:
                    db.execute(dialect.schema(script))
                    db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, now()))


def _retrying(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` again when the connection was lost inside the transaction it opened."""
    @functools.wraps(fn)
    def call(self: PgStore, *args: Any, **kwargs: Any) -> Any:
        if self.db.in_transaction:
            return fn(self, *args, **kwargs)
        for tries in range(1, 6):
            try:
                return fn(self, *args, **kwargs)
            except StoreUnavailable as e:
                if not e.retry_safe or tries == 5:
                    raise
        raise AssertionError("unreachable")
    return call


# Every public method of Store — the ones other modules append included — gets the retry.
for _cls in (Claims, Store):
    for _name, _fn in vars(_cls).items():
        if callable(_fn) and not _name.startswith("_") and _name not in ("tx", "close"):
            setattr(PgStore, _name, _retrying(_fn))
