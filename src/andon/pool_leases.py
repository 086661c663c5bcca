"""The pool's claims as leases (store/claims.py), so that several runners — ``andon run
--workers N`` on one machine, ``andon worker`` on several — share one store's queue.

A lease is held in the name of the dispatcher that forked the worker: ``machine:pid:wN``
(:func:`holder`; the machine is ``$ANDON_MACHINE``, else the host name: ``andon worker
--machine NAME`` sets it, so that workers on one host can stand for several machines).
The dispatcher renews the leases of its live workers every third of ``lease_s``
(:func:`renew`); a dispatcher that dies stops renewing, and after ``lease_s`` any other
runner's next claim takes the packet back as ``interrupted``. A lease whose holder
is a dead process on this very host is given back at once (:func:`release_dead_local`): the
kernel already told us, no need to wait out the lease (a pid reused since is the one case
this errs, towards waiting). A holder of another machine is never judged by pid: only its
lease tells whether it still works.

``ANDON_LEASE_S`` sets ``lease_s`` (seconds, default 60): short in tests, longer than the
longest store outage a worker should ride out without losing its packet.
"""

from __future__ import annotations

import os
import socket

from .contain.procgroup import alive
from .errors import ConfigError
from .store import Store, StoreProtocol

LEASE_ENV = "ANDON_LEASE_S"
MACHINE_ENV = "ANDON_MACHINE"
DEFAULT_LEASE_S = 60.0


def lease_s() -> float:
    """``$ANDON_LEASE_S`` as seconds (default 60).

    Raises:
        ConfigError: not a positive number.
    """
    raw = os.environ.get(LEASE_ENV, "")
    if not raw:
        return DEFAULT_LEASE_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ConfigError(f"{LEASE_ENV}: expected a positive number of seconds, got {raw!r}")
    return value


def machine() -> str:
    """This machine's name in lease holders: ``$ANDON_MACHINE`` if set, else the host name.

    Raises:
        ConfigError: the name holds a ``:`` (the holder's separator) or white space.
    """
    name = os.environ.get(MACHINE_ENV) or socket.gethostname()
    if ":" in name or not name.strip() or len(name.split()) != 1:
        raise ConfigError(f"{MACHINE_ENV}: expected a machine name without ':' or spaces, "
                          f"got {name!r}")
    return name


def holder(worker: str) -> str:
    """The lease holder's name for this dispatcher's worker ``worker``:
    ``machine:pid:worker`` (:func:`machine`)."""
    return f"{machine()}:{os.getpid()}:{worker}"


def mine(name: str) -> bool:
    """Whether the lease holder ``name`` is one of this dispatcher's workers."""
    return name.startswith(holder(""))


def _dead_here(name: str) -> bool:
    host, _, rest = name.partition(":")
    pid = rest.partition(":")[0]
    return host == machine() and pid.isdigit() and int(pid) != os.getpid() \
        and not alive(int(pid))


def release_dead_local(store: StoreProtocol) -> list[str]:
    """Give back every lease held by a process of this host that no longer exists (a runner
    killed with -9); the packet ids. Their attempts are then recovered as any other."""
    gone = []
    for lease in store.leases():
        if _dead_here(lease["worker"]):
            store.release(lease["worker"], lease["packet_id"])
            gone.append(lease["packet_id"])
    return gone


def reopen(store: StoreProtocol) -> StoreProtocol:
    """A new connection to the same store (a forked worker's own)."""
    if isinstance(store, Store) and type(store) is Store:
        return Store(store.path)
    from .store.postgres import PgStore

    assert isinstance(store, PgStore)
    return PgStore(store.db.url, store.db.retry_s, store.db.on_outage)


def close_for_fork(store: StoreProtocol) -> None:
    """No connection crosses a fork: SQLite's lock records and a PostgreSQL session's
    socket both belong to one process. :func:`after_fork` opens it again in the parent."""
    store.db.close()  # type: ignore[attr-defined]


def after_fork(store: StoreProtocol) -> None:
    """The parent's connection back, after :func:`close_for_fork` and ``os.fork``."""
    if type(store) is Store:
        store.reopen()
        return
    store.db = reopen(store).db  # type: ignore[attr-defined]
