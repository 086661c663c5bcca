"""``andon worker``: one machine of several working a shared queue (remote.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import AndonError
from ..safe_text import visible
from . import common
from .common import config_or_fail, fail, make_runner, trees_in_temp


@click.command()
@click.option("--store", "store_url", required=True, metavar="URL",
              help="The shared store: postgresql://user:password@host:port/db.")
@click.option("--remote", "remote_url", required=True, metavar="GIT_URL",
              help="The shared git repository (bare; a path, ssh:// or https://).")
@click.option("--dir", "clone_dir", default=None, metavar="PATH",
              help="This machine's clone of the remote (default: "
                   "~/.andon/workers/<hash of the remote>).")
@click.option("--evidence", "evidence_dir", default=None, metavar="DIR",
              help="Where evidence goes: a folder every machine mounts at the same path "
                   "(default: .andon/evidence in this machine's clone).")
@click.option("--machine", default=None, metavar="NAME",
              help="This machine's name in the store's leases (default: $ANDON_MACHINE, "
                   "else the host name): give each worker on one host its own to have "
                   "them treated as separate machines.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              metavar="N", help="Attempts at once on this machine.")
@click.option("--agent", "agent_spec", default=None, metavar="NAME",
              help="Agent for the work stages, as for `andon run`.")
@click.option("--command", "command", default=None, metavar="SHELL",
              help="Shell command for the command agent (an absolute path).")
@click.option("--reviewer", "reviewer_spec", default=None, metavar="NAME",
              help="Agent for review stages, as for `andon run`.")
@click.option("--reviewer-command", default=None, metavar="SHELL",
              help="Shell command when the reviewer is the command agent.")
def worker(store_url: str, remote_url: str, clone_dir: str | None, evidence_dir: str | None,
           machine: str | None, workers: int, agent_spec: str | None, command: str | None,
           reviewer_spec: str | None, reviewer_command: str | None) -> None:
    """Work the shared queue from this machine until nothing is left to claim or to wait
    for (another machine's live lease: it may die, or unlock a packet that requires its
    own): claim from the store (leases), attempt in this machine's clone of the remote,
    push each attempt to the remote under refs/andon/attempts/, and merge one machine at a
    time (a PostgreSQL advisory lock, then a compare-and-swap push of the integration
    branch).

    Exits as `andon run` does (0 drained, 1 halted by a blocked packet, 2 bad input)."""
    import hashlib

    from .. import pool_leases
    from .. import remote as remote_mod
    from ..store import URL_ENV

    os.environ[URL_ENV] = store_url  # open_store, and the forked workers, read it
    if machine is not None:
        os.environ[pool_leases.MACHINE_ENV] = machine
    try:
        pool_leases.machine()
    except AndonError as exc:
        fail(f"--machine: {exc}")
    where = Path(clone_dir) if clone_dir else Path.home() / ".andon" / "workers" / \
        hashlib.sha1(remote_url.encode()).hexdigest()[:12]
    try:
        repo = remote_mod.clone(remote_url, where.resolve(), "andon/integration")
    except AndonError as exc:
        fail(f"--remote {remote_url}: {exc}")
    config = config_or_fail(repo)
    branch = config.andon.integration_branch
    if branch != "andon/integration":  # the configured branch is the one to share
        repo = remote_mod.clone(remote_url, where.resolve(), branch)
    repo.remote = remote_mod.Remote(remote_url, branch, store_url)  # type: ignore[attr-defined]
    trees_in_temp(repo, config, workers)
    runner = make_runner(repo, config, agent_spec, command, reviewer_spec, reviewer_command)
    runner.workers = workers
    if evidence_dir:
        runner.evidence_root = Path(evidence_dir).resolve()
        runner.baseline.evidence_root = runner.evidence_root
    try:
        report = runner.run()
    except AndonError as exc:
        fail(str(exc))
    if report.message:
        console = common.err if report.exit_status else common.out
        console.print(visible(report.message, lines=True), soft_wrap=True, markup=False)
    common.out.print(visible(f"worker done: merged {', '.join(report.merged) or 'nothing'}"),
                     markup=False)
    sys.exit(report.exit_status)
