"""andon's state: one store outside every worktree, every transition an event (README.md).

Two backends behind one interface (:class:`StoreProtocol`): :mod:`andon.store.sqlite` (the
embedded default) and :mod:`andon.store.postgres` (``postgresql://…``, for several workers).
:func:`connect` picks one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidValue
from .protocol import StoreProtocol
from .sqlite import MIGRATIONS, Store, now

__all__ = ["MIGRATIONS", "Store", "StoreProtocol", "connect", "no_such_packet", "store_url",
           "now"]

URL_ENV = "ANDON_STORE_URL"


def no_such_packet(store: StoreProtocol, packet_id: str) -> str:
    """The message for a packet id the store does not hold, with the ids it does."""
    known = ", ".join(p["id"] for p in store.packets()) or "none (run `andon run` first)"
    return f"no packet {packet_id!r} in the store; known: {known}"


def store_url(configured: str | None = None) -> str | None:
    """The store URL to use: ``$ANDON_STORE_URL`` if set and not empty, else ``configured``
    (``[store] url`` of andon.toml), else None (the default SQLite file)."""
    return os.environ.get(URL_ENV) or configured or None


def connect(default_path: Path, url: str | None = None, *, retry_s: float = 60.0,
            on_outage: Callable[[str], None] | None = None) -> StoreProtocol:
    """Open the store ``url`` names, else the SQLite file ``default_path``.

    ``url``: ``postgresql://…``/``postgres://…`` (PostgreSQL, see
    :class:`andon.store.postgres.PgStore` for ``retry_s`` and ``on_outage``) or
    ``sqlite:///absolute/path.db``.

    Raises:
        InvalidValue: a URL of another scheme, or a PostgreSQL one without psycopg installed
            (the postgres extra).
        StoreUnavailable: PostgreSQL unreachable, or its login refused.
        StoreError: the store was written by a newer andon.
    """
    if not url:
        return Store(default_path)
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        from .postgres import PgStore  # psycopg only when PostgreSQL is asked for
        return PgStore(url, retry_s=retry_s, on_outage=on_outage)
    if scheme == "sqlite" and url.startswith("sqlite:///"):
        return Store(Path(url[len("sqlite://"):]))
    raise InvalidValue(f"store url: expected postgresql://… or sqlite:///path, got "
                       f"{scheme + '://…' if '://' in url else repr(url)}")
