"""``andon verify``: walk the store's hash chain and the evidence files it names
(:mod:`andon.store.chain`); exit 0 with the head hash, 1 with the first broken link."""

from __future__ import annotations

import json
import sys

import click

from ..safe_text import visible
from . import common
from .common import config_or_fail, fail, repo_or_fail

EXIT_BROKEN = 1


@click.command()
@click.option("--json", "as_json", is_flag=True, help="The verdict as JSON on stdout.")
@click.option("--expect", metavar="HASH",
              help="A head hash printed by an earlier `andon verify`: it must still be in the "
                   "chain (a record rewritten whole, hashes and all, has lost it).")
@click.option("--no-files", is_flag=True,
              help="Check the events only, not the evidence files they name (faster).")
@click.pass_context
def verify(ctx: click.Context, as_json: bool, expect: str | None, no_files: bool) -> None:
    """Check that andon's record was not changed behind its back: every event links to the one
    before it by hash (an edited, deleted or inserted event breaks a link), and every evidence
    file an event names (logs, JUnit XML, transcripts) still has the content hash recorded.

    Exits 0 and prints the head hash (keep it: `--expect` checks it later), 1 with each
    problem, the first broken link first, 2 when there is no store (before `andon init`). An
    empty store (after init, before any run) verifies: exit 0, head "none".
    """
    from ..config import STATE_DIR
    from ..state import open_store
    from ..store import chain, store_url

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    db = repo.root / STATE_DIR / "andon.db"
    if store_url(config.store.url) is None and not db.is_file():
        fail(f"no store yet ({STATE_DIR}/andon.db): `andon init` or `andon run` makes it")
    store = open_store(repo, config)
    v = chain.verify(store.chain_rows(), expect=expect, check_files=not no_files)
    if as_json:
        common.out.print_json(json.dumps(v.to_dict()), ensure_ascii=True)
    else:
        for problem in v.problems:
            common.out.print(f"broken: {visible(problem)}", markup=False, soft_wrap=True)
        if v.expected_found is False:
            common.out.print(f"broken: {visible(expect)} is not in the chain: the record was "
                             "rewritten after that head was printed", markup=False,
                             soft_wrap=True)
        files = "" if no_files else f", {v.files} evidence file(s) checked"
        before = f" ({v.unchained} older event(s) predate the chain)" if v.unchained else ""
        head = v.head or "none (no chained event yet)"
        common.out.print(f"{'intact' if v.ok else 'NOT intact'}: {v.chained} event(s) "
                         f"chained{before}{files}; head {head}", markup=False, soft_wrap=True)
    sys.exit(0 if v.ok else EXIT_BROKEN)
