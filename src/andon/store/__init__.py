"""andon's state: one store outside every worktree, every transition an event (README.md).

Today one backend, :mod:`andon.store.sqlite` (the embedded default); a PostgreSQL backend
implements the same public methods of :class:`Store`.
"""

from .sqlite import MIGRATIONS, Store, now

__all__ = ["MIGRATIONS", "Store", "now"]
