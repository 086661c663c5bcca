"""The integration branch and what passes on it: where attempts start, and the tests they are
held to.

:meth:`Baseline.head` is the integration branch's commit (before the branch exists: the
base branch's). :meth:`Baseline.preflight` runs the whole suite there once per tree (the
``preflight`` gate; a pass is cached in the store by :func:`~andon.gates.cache.baseline_key`,
and said so). :meth:`Baseline.passing` gives the test ids that pass on a tree, the
PASS_TO_PASS set an attempt is held to.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .config import CONFIG_NAME, Config
from .errors import UsageError
from .gates import preflight
from .gates.base import GateResult
from .gates.cache import baseline_key
from .store import StoreProtocol
from .workspace import Repo


class Baseline:
    """The integration branch ``ref`` of ``repo``; preflight evidence goes under
    ``evidence_root/_preflight/<tree>``, progress to ``echo``."""

    def __init__(self, repo: Repo, config: Config, store: StoreProtocol, ref: str,
                 evidence_root: Path, echo: Callable[[str], None]):
        self.repo, self.config, self.store, self.ref = repo, config, store, ref
        self.evidence_root, self.echo = evidence_root, echo

    def head(self) -> str:
        """The commit attempts start from (see :func:`integration_head`)."""
        return integration_head(self.repo, self.config)

    def preflight(self, sha: str) -> GateResult:
        """The ``preflight`` gate on commit ``sha``: cached per tree once it passed."""
        tree = self.repo.resolve(f"{sha}^{{tree}}")
        key = baseline_key(self.config, tree)  # the tree, the test settings, andon's version
        if self.store.baseline(key) is not None:
            # said, as red says its cache: silence read as "the preflight was skipped"
            self.echo(f"preflight: pass: cached, no test run: the tree of "
                      f"{self.config.andon.integration_branch} ({sha[:10]}) passed before")
            return GateResult("preflight", "pass", f"cached for tree {tree[:10]}")
        self.echo(f"preflight: running the full suite on {self.config.andon.integration_branch}"
                  f" ({sha[:10]})")
        ev = self.evidence_root / "_preflight" / tree[:12]
        ev.mkdir(parents=True, exist_ok=True)
        result = preflight.run(self.repo, self.config, sha, ev)
        self.echo(f"preflight: {result.status}: {result.summary}")
        if result.status == "pass":
            self.store.set_baseline(key, set(result.details["passed_ids"]), result.evidence())
        return result

    def passing(self, tree: str) -> set[str]:
        """The test ids that pass on ``tree`` (from the store; else a preflight of the
        integration branch's head).

        Raises:
            UsageError: the integration branch no longer passes its suite.
        """
        key = baseline_key(self.config, tree)
        known = self.store.baseline(key)
        if known is None:
            sha = self.repo.resolve(self.ref)
            if self.preflight(sha).status != "pass":
                raise UsageError("the integration branch no longer passes its suite")
            known = self.store.baseline(key) or set()
        return known


def integration_head(repo: Repo, config: Config) -> str:
    """The commit an attempt starts from: the integration branch's head, or before that
    branch exists, the base branch's.

    Raises:
        UsageError: no integration branch yet and the base branch names no commit.
    """
    head = repo.rev_parse(f"refs/heads/{config.andon.integration_branch}")
    if head:
        return head
    base = config.andon.base_branch or repo.current_branch() or "HEAD"
    sha = repo.rev_parse(base)
    if not sha:
        have = repo.git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
        raise UsageError(f"base branch {base!r} (base_branch in {CONFIG_NAME}) does not "
                         f"resolve to a commit; branches here: {', '.join(have) or 'none'}."
                         " Set base_branch to one of them, or create the branch")
    return sha
