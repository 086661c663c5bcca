"""Where andon keeps a repository's state: ``.andon/`` in its checkout (``STATE_DIR``), and
the store opened from there (or from ``$ANDON_STORE_URL`` / ``[store] url``).

Apart from the runner, so that the commands that only read the store (``status``, ``show``,
``verify``) open it without loading what carries out attempts.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import plain_file
from .config import STATE_DIR, Config
from .git.repo import Repo
from .store import StoreProtocol, connect, store_url


def state_dir(repo: Repo) -> Path:
    """``<checkout>/.andon``: the SQLite store, the runner's lock, evidence, plan evidence."""
    return repo.root / STATE_DIR


def open_store(repo: Repo, config: Config | None = None) -> StoreProtocol:
    """The store of this repository: ``$ANDON_STORE_URL``, else ``[store] url`` of
    ``config``, else ``.andon/andon.db`` (SQLite), kept out of git via ``.git/info/exclude``
    so that nothing andon writes shows up in ``git status``."""
    d = state_dir(repo)
    d.mkdir(exist_ok=True)
    exclude = repo.git_dir / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    try:  # a link there (to a file of the user's) is neither read nor appended to
        lines = plain_file.read_text(exclude, 1 << 20).splitlines()
    except FileNotFoundError:
        lines = []
    except OSError:  # not a file andon writes to: the folder ignores itself instead
        plain_file.write(d / ".gitignore", "*\n")
        lines = [f"/{STATE_DIR}/"]
    if f"/{STATE_DIR}/" not in lines:
        with os.fdopen(plain_file.own(exclude), "a") as f:
            f.write(("\n" if lines and lines[-1] else "") + f"/{STATE_DIR}/\n")
    return connect(d / "andon.db", store_url(config.store.url if config else None))
