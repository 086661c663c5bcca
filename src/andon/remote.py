"""Several machines on one queue: ``andon worker --store URL --remote GIT_URL``.

Each worker machine keeps its own clone of a shared git repository (the *remote*: a bare
repository reachable by path, ssh or https) and claims packets from the shared store
(PostgreSQL) as any pool does (leases, workers.py). What changes is where refs live:

- **The integration branch is the remote's.** Before a merge the merger takes the merge lock
  of the whole fleet (a PostgreSQL advisory lock, session-level: a merger that dies frees
  it with its connection) and fetches the remote's branch into its clone; the squash commit
  is built there with plumbing (merge.py) and tested on the merged result when the branch
  moved; then it is pushed with the expected old value (``git push
  --force-with-lease=refs/heads/B:OLD``): git refuses the push unless the remote's branch is
  still at OLD, so two mergers can never both win, even without the advisory lock (a
  refused push fetches the new head and merges again onto it, suite included).
- **Attempts are pushed** as ``refs/andon/attempts/<packet>/<n>`` (the candidate commit), so
  that any machine can see, and recovery can merge, another machine's passed attempt;
  fetched back under ``refs/remotes/andon-attempts/`` (not andon's own namespace, which the
  ref check judges).

:class:`Remote` is the object merge.py and workers.py find on ``repo.remote``; a repository
without one merges locally as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import GitBlocked, StoreError, StoreUnavailable, UsageError
from .git import watch
from .git.repo import RefMoved, Repo

# the advisory lock key of the fleet's merges (any constant distinct from the store's own)
MERGE_LOCK = 0x616E646F6E + 16
ATTEMPTS = "refs/andon/attempts"
FETCHED_ATTEMPTS = "refs/remotes/andon-attempts"


class Remote:
    """The shared repository ``url`` and the store ``store_url`` whose advisory lock
    serialises merges (None: no lock, the compare-and-swap push alone keeps it safe)."""

    def __init__(self, url: str, branch: str, store_url: str | None):
        self.url, self.ref, self.store_url = url, f"refs/heads/{branch}", store_url

    def _git(self, repo: Repo, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = _run_git(["git", "-C", str(repo.root), *args], None)
        except GitBlocked as exc:
            raise StoreError(f"git {' '.join(args[:2])} with the remote {self.url} was "
                             f"stopped: {exc}") from exc
        if check and proc.returncode:
            raise StoreError(f"git {' '.join(args[:2])} with the remote {self.url} failed "
                             f"(exit {proc.returncode}): {proc.stderr.strip()}")
        return proc

    def head(self, repo: Repo) -> str | None:
        """The remote's integration branch (a sha), or None when it does not exist yet."""
        out = self._git(repo, "ls-remote", self.url, self.ref).stdout.split()
        return out[0] if out else None

    def fetch(self, repo: Repo) -> str | None:
        """Bring the remote's integration branch (and the pushed attempts) into this clone;
        the branch's sha, or None when the remote has none yet."""
        self._git(repo, "fetch", "-q", "--no-tags", self.url,
                  f"+{ATTEMPTS}/*:{FETCHED_ATTEMPTS}/*")
        sha = self.head(repo)
        if sha:
            self._git(repo, "fetch", "-q", "--no-tags", self.url, sha)
            repo.git("update-ref", self.ref, sha)
        return sha

    def push(self, repo: Repo, new: str, old: str | None) -> None:
        """Move the remote's integration branch from ``old`` (None: it must not exist) to
        ``new`` as one compare-and-swap.

        Raises:
            RefMoved: the remote's branch is not at ``old`` (another merger won); this clone
                now has the remote's branch, to merge onto again.
        """
        lease = f"--force-with-lease={self.ref}:{old or ''}"
        proc = self._git(repo, "push", "--porcelain", lease, self.url, f"{new}:{self.ref}",
                         check=False)
        if proc.returncode:
            self.fetch(repo)
            raise RefMoved(f"{self.url} {self.ref} is no longer at {(old or 'nothing')[:10]}: "
                           "another merger pushed first")

    def push_attempt(self, repo: Repo, packet_id: str, n: int, sha: str) -> None:
        """Publish attempt ``n`` of ``packet_id`` (its candidate commit) on the remote."""
        self._git(repo, "push", "-q", "--force", self.url, f"{sha}:{ATTEMPTS}/{packet_id}/{n}")

    @contextmanager
    def merging(self, repo: Repo) -> Iterator[str | None]:
        """Hold the fleet's merge lock and yield the remote's integration branch, fetched
        into this clone. The lock is PostgreSQL's ``pg_advisory_lock`` on its own
        connection (freed by the server if this process dies)."""
        conn = None
        if self.store_url and self.store_url.startswith(("postgresql:", "postgres:")):
            conn = _advisory_lock(self.store_url)
        try:
            yield self.fetch(repo)
        finally:
            if conn is not None:
                conn.close()  # ends the session: the lock goes with it


def _advisory_lock(url: str, retry_s: float = 60.0) -> Any:
    """A new connection to ``url`` holding the fleet's merge lock. Rides out an outage of
    the server as the store does (postgres.py): says so on standard error, retries with
    backoff (0.05 s to 2 s) for up to ``retry_s`` seconds.

    Raises:
        StoreUnavailable: the server stayed unreachable (the URL named without password).
    """
    import psycopg

    from .store.postgres import redact

    started, delay, said = time.monotonic(), 0.05, False
    while True:
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (MERGE_LOCK,))
            except BaseException:
                conn.close()
                raise
            if said:
                print(f"andon: merge lock: store {redact(url)} reachable again",
                      file=sys.stderr, flush=True)
            return conn
        except psycopg.OperationalError as e:
            why = " ".join(str(e).split())
            if password := urlsplit(url).password:
                why = why.replace(password, "***")
            if time.monotonic() - started + delay > retry_s:
                raise StoreUnavailable(f"merge lock: store {redact(url)} unreachable for "
                                       f"{retry_s:g}s, gave up: {why}") from None
            if not said:
                said = True
                print(f"andon: merge lock: store {redact(url)} unreachable ({why}); "
                      f"retrying for up to {retry_s:g}s", file=sys.stderr, flush=True)
            time.sleep(delay)  # backoff between reconnection tries, not synchronisation
            delay = min(delay * 2, 2.0)


def clone(url: str, where: Path, branch: str) -> Repo:
    """This machine's clone of the remote ``url`` at ``where`` (cloned the first time,
    fetched and reset to the remote's default branch after), with the remote's integration
    branch ``branch`` as its local one.

    Raises:
        UsageError: the remote cannot be cloned or fetched (git's message).
    """
    def git(*args: str, cwd: Path | None = None) -> str:
        try:
            proc = _run_git(["git", *args], cwd)
        except GitBlocked as exc:
            raise UsageError(f"git {' '.join(args[:2])} was stopped: {exc}") from exc
        if proc.returncode:
            raise UsageError(f"git {' '.join(args[:2])}: {proc.stderr.strip()}")
        return proc.stdout

    if not (where / ".git").exists():
        where.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "-q", url, str(where))
    else:
        git("fetch", "-q", "origin", cwd=where)
        default = git("rev-parse", "--abbrev-ref", "origin/HEAD", cwd=where).strip()
        git("reset", "-q", "--hard", default, cwd=where)
    repo = Repo(where)
    remote = Remote(url, branch, None)
    if remote.fetch(repo) is None:  # the first worker ever: the branch starts at main
        try:
            remote.push(repo, repo.resolve("HEAD"), None)
        except RefMoved:
            pass  # another worker created it first: fetched
        remote.fetch(repo)
    return repo


def _run_git(argv: list[str], cwd: Path | None) -> subprocess.CompletedProcess:
    """``argv`` run as every git command andon runs (git/watch.py: stopped, raising
    GitBlocked, when it waits on a FIFO — in this clone or in the remote, whose
    ``upload-pack`` runs in the same session when the remote is a path); output as text.
    This process's environment: a remote's credentials and ssh settings come from it."""
    proc = watch.run(argv, cwd, None, os.environ)
    return subprocess.CompletedProcess(argv, proc.returncode, os.fsdecode(proc.stdout),
                                       proc.stderr.decode(errors="replace"))
