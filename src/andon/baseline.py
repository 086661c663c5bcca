"""The integration branch and what passes on it: where attempts start, and the tests they are
held to.

:meth:`Baseline.head` is the integration branch's commit (before the branch exists: the
base branch's). :meth:`Baseline.preflight` runs the whole suite there once per tree (the
``preflight`` gate; a pass is cached in the store by :func:`~andon.gates.cache.baseline_key`,
and said so). :meth:`Baseline.passing` gives the test ids that pass on a tree, the
PASS_TO_PASS set an attempt is held to. Every key names the tests' interpreter's
environment as this process found it (:meth:`Baseline.watch`): a package upgraded there
since a tree passed makes its preflight run again. With no environment to name (a wrapper
test command), a key names the run instead (``run_baseline_key``): what a run found holds
for that run, in every worker process of it, and is dropped when it ends.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .config import CONFIG_NAME, Config
from .contain import envprint
from .contain.interpreter import python_of
from .errors import ConfigError, UsageError
from .gates import lanes, preflight
from .gates.base import GateResult
from .gates.cache import baseline_key, run_baseline_key, run_scope_prefix
from .git.refs import base_commit
from .git.repo import Repo
from .store import StoreProtocol


class Baseline:
    """What passes on the integration branch of ``repo`` (``config``'s, or its base branch
    before it exists: :meth:`head`); preflight evidence goes under
    ``evidence_root/_preflight/<tree>``, progress to ``echo``. ``exclude``: folders the
    environment's fingerprint leaves to the gates (the checkout, the worktrees)."""

    def __init__(self, repo: Repo, config: Config, store: StoreProtocol,
                 evidence_root: Path, echo: Callable[[str], None],
                 exclude: tuple[Path, ...] = ()):
        self.repo, self.config, self.store = repo, config, store
        self.evidence_root, self.echo, self.exclude = evidence_root, echo, exclude
        # the tests' environment the keys name: taken on first use, or given by the runner
        # once its own watch is taken (after a preflight that ran code)
        self.env: envprint.Watch | None = None
        self._no_env = False
        # without an environment digest (a wrapper test command) what passes on a tree holds
        # for one run only (its own walk watches the environment): kept in the store under
        # keys that name this token, so that the run's worker processes share it (join_run),
        # and dropped when the run ends (forget_run). Each such row is signed with a secret
        # only this run's processes hold: an agent that can write the store could otherwise
        # shrink the PASS_TO_PASS set later attempts of the run are held to
        self.run_scope = secrets.token_hex(16)
        self._run_secret = secrets.token_bytes(32)

    def watch(self) -> envprint.Watch | None:
        """The fingerprint of the tests' interpreter's environment (contain/envprint.py)
        the cache keys name, taken once; None when that interpreter cannot be asked where it
        looks (then nothing is read from or written to the cache: the preflight runs and
        says what is wrong with the test command)."""
        if self.env is None and not self._no_env:
            try:
                self.rewatch()
            except ConfigError:
                self._no_env = True
        return self.env

    def rewatch(self) -> envprint.Watch:
        """A new fingerprint (code ran since the last: a preflight), which the keys name
        from now on. Raises ConfigError: the interpreter cannot be asked where it looks."""
        self.env = envprint.watch(python_of(self.config.test_argv()), self.exclude)
        return self.env

    def digest(self) -> str | None:
        """What the cache keys name of the tests' environment (:meth:`watch`'s digest); None
        when it cannot be known: no answer from the interpreter, or a ``[test] command``
        whose interpreter andon cannot see (a wrapper such as ``uv run``, ``tox``, a script:
        the fingerprint would be of andon's own interpreter). None: nothing cached."""
        if python_of(self.config.test_argv()) is None:
            return None
        env = self.watch()
        return env.digest if env is not None else None

    def key(self, tree: str) -> str:
        """The preflight baseline's key for ``tree``: in this environment, or, with no
        digest, for this run only (:attr:`run_scope`)."""
        digest = self.digest()
        return (baseline_key(self.config, tree, digest) if digest is not None
                else run_baseline_key(self.config, tree, self.run_scope))

    def known(self, tree: str) -> set[str] | None:
        """The cached ids that pass on ``tree`` in this environment (with no digest: found
        earlier in this run, and signed by it), or None."""
        key = self.key(tree)
        row = self.store.cached(key)
        if row is None or row["kind"] != "preflight":
            return None
        data, evidence = row["data"], row["evidence"]
        raw = data.get("passed_ids") if isinstance(data, dict) else None
        ids = set(map(str, raw)) if isinstance(raw, list) else None
        mac = evidence.get("run_mac") if isinstance(evidence, dict) else None
        if ids is None or (key.startswith(run_scope_prefix(self.run_scope))
                           and not hmac.compare_digest(str(mac), self._mac(key, ids))):
            self.echo(f"note: what passes on tree {tree[:10]}, as the store keeps it, was "
                      "changed outside andon: not used (if you did not change it, an agent "
                      "did); its preflight runs again")
            return None
        return ids

    def join_run(self, other: Baseline) -> None:
        """Share ``other``'s run-only results (a worker process of the same run)."""
        self.run_scope, self._run_secret = other.run_scope, other._run_secret

    def _keep(self, key: str, ids: set[str], evidence: dict) -> None:
        if key.startswith(run_scope_prefix(self.run_scope)):
            evidence = {**evidence, "run_mac": self._mac(key, ids)}
        self.store.set_baseline(key, ids, evidence)

    def _mac(self, key: str, ids: set[str]) -> str:
        text = json.dumps([key, sorted(ids)])
        return hmac.new(self._run_secret, text.encode(), hashlib.sha256).hexdigest()

    def forget_run(self) -> None:
        """Drop what was kept for this run only, at its end: no other run reads it. Rows the
        store does not drop now (it cannot be reached; the run was killed) are never read
        again, and a later run drops them a day on (:meth:`forget_old_runs`); so no error
        here: the run's own outcome is what its caller is reporting."""
        try:
            self.store.drop_cached(run_scope_prefix(self.run_scope))
        except Exception as exc:  # noqa: BLE001 - a clean-up must not hide the run's outcome
            self.echo(f"note: this run's own baselines stay in the store, unread: {exc}")

    def forget_old_runs(self) -> None:
        """Drop the run-only rows of runs that started over a day ago (killed before their
        end dropped them; a run still going after a day preflights again what it lost)."""
        day_ago = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="milliseconds")
        self.store.drop_cached(run_scope_prefix(), before=day_ago)

    def remember(self, tree: str, passed: set[str], evidence: dict,
                 ran_in: str | None = "") -> None:
        """Keep ``passed`` as what passes on ``tree`` (a merge's runs), unless known.
        ``ran_in``: the environment digest the runs saw, when they ran in another process
        (an attempt's hermetic runs, merged by ``andon approve`` or on resume): kept only
        when it is this process's; "" means the runs are this process's own."""
        if not passed or (ran_in != "" and ran_in != self.digest()):
            return
        if self.known(tree) is None:
            self._keep(self.key(tree), passed, evidence)

    def head(self) -> str:
        """The commit attempts start from (see :func:`integration_head`)."""
        return integration_head(self.repo, self.config)

    def start_servers(self) -> None:
        """Start the fork servers an attempt's runs are forked from
        (``lanes.servers_of_an_attempt``) and return at once: they come up while the preflight
        runs, and the first attempt's red and hermetic runs find them ready instead of
        waiting for each (0.1 CPU-s apiece). For a run's own loop only: the workers of
        ``--workers`` are forked processes, which start servers of their own."""
        if self.config.test.fork_server:
            lanes.ready_servers(self.config.test_argv(), self.config.test.plugins,
                                lanes.servers_of_an_attempt(self.config), wait=False)

    def preflight(self, sha: str) -> GateResult:
        """The ``preflight`` gate on commit ``sha``: cached per tree once it passed."""
        tree = self.repo.resolve(f"{sha}^{{tree}}")
        if self.known(tree) is not None:
            # said, as red says its cache: silence read as "the preflight was skipped"
            when = ("in this environment" if self.digest() is not None
                    else "earlier in this run")
            self.echo(f"preflight: pass: cached, no test run: the tree of "
                      f"{self.config.andon.integration_branch} ({sha[:10]}) passed {when}")
            return GateResult("preflight", "pass", f"cached for tree {tree[:10]}",
                              details={"cached": True})
        return self._preflight_run(sha, tree)

    def _preflight_run(self, sha: str, tree: str) -> GateResult:
        """The preflight's full-suite run on ``sha`` (whose tree is ``tree``, not known),
        kept when it passes."""
        # the tree, the test settings, the tests' environment, andon's version
        key = self.key(tree)
        # the head attempts start from (the base branch's before the integration branch
        # exists: a first run's preflight), not an older base a retry carries
        head = sha == self.head()
        self.echo(f"preflight: running the full suite on {sha[:10]}"
                  + (f" ({self.config.andon.integration_branch})" if head else
                     ", an attempt's base the branch has moved past"))
        ev = self.evidence_root / "_preflight" / tree[:12]
        ev.mkdir(parents=True, exist_ok=True)
        result = preflight.run(self.repo, self.config, sha, ev, self.digest())
        self.echo(f"preflight: {result.status}: {result.summary}")
        if result.status == "pass":
            self._keep(key, set(result.details["passed_ids"]), result.evidence())
        return result

    def passing(self, sha: str) -> set[str]:
        """The test ids that pass on commit ``sha``'s tree (from the store; else a preflight
        of that commit: an attempt's base, a moved head a merge lands on).

        Raises:
            UsageError: that commit no longer passes its own suite.
        """
        tree = self.repo.resolve(f"{sha}^{{tree}}")
        known = self.known(tree)
        if known is None:
            # that commit itself, not the branch's head: a retry keeps the base of its
            # first attempt, and the head's tree would leave this one's unknown (none held)
            result = self._preflight_run(sha, tree)
            if result.status != "pass":
                raise UsageError(f"{sha[:10]} no longer passes its own suite: "
                                 f"{result.summary}")
            known = set(result.details["passed_ids"])
        return known


def integration_head(repo: Repo, config: Config) -> str:
    """The commit an attempt starts from: the integration branch's head, or before that
    branch exists, the base branch's (:func:`base_commit`).

    Raises:
        UsageError: no integration branch yet and the base branch names no commit.
    """
    head = repo.rev_parse(f"refs/heads/{config.andon.integration_branch}")
    if head:
        return head
    base, sha = base_commit(repo, config.andon.base_branch)
    if not sha:
        have = repo.git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
        raise UsageError(f"base branch {base!r} (base_branch in {CONFIG_NAME}) does not "
                         f"resolve to a commit; branches here: {', '.join(have) or 'none'}."
                         " Set base_branch to one of them, or create the branch")
    return sha
