"""Running the line and reading it: ``run`` (drain the queue), ``status`` (the board), ``show``
(the evidence for one packet)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import plain_file
from ..errors import AndonError, PacketError
from ..safe_text import visible
from . import common
from .common import (
    config_or_fail,
    fail,
    left_out_note,
    make_runner,
    open_repo,
    repo_or_fail,
)

if TYPE_CHECKING:
    from ..config import Config
    from ..git.repo import Repo
    from ..store import StoreProtocol


@click.command()
@click.option("--agent", "agent_spec", default=None, metavar="NAME",
              help="Agent adapter: claude-code, codex, aider, gemini (settings in "
                   "[agents.<name>]), command, or scripted:module:function "
                   "(default: [agent] default in andon.toml).")
@click.option("--command", "command", default=None, metavar="SHELL",
              help="Shell command for the command agent; the prompt is on stdin and in "
                   "$ANDON_PROMPT_FILE, cwd is the attempt's worktree. It also runs the "
                   "review stages ($ANDON_STAGE tells them apart) unless a reviewer is given.")
@click.option("--reviewer", "reviewer_spec", default=None, metavar="NAME",
              help="Agent adapter for the review stages (default: [agent] reviewer, else the "
                   "same as --agent). A reviewer gets $ANDON_REVIEW_FILE for its JSON.")
@click.option("--reviewer-command", default=None, metavar="SHELL",
              help="Shell command when the reviewer is the command agent.")
@click.option("--only", multiple=True, metavar="ID", help="Run only these packets (repeatable).")
@click.option("--keep-worktrees", is_flag=True, help="Keep each attempt's worktree for debugging.")
@click.option("--workers", type=click.IntRange(1, 64), default=None, metavar="N",
              help="Work up to N packets at once, each attempt in its own worktree; merges "
                   "one at a time (default: [run] workers in andon.toml, else 1).")
@click.pass_context
def run(ctx: click.Context, agent_spec: str | None, command: str | None,
        reviewer_spec: str | None, reviewer_command: str | None, only: tuple[str, ...],
        keep_worktrees: bool, workers: int | None) -> None:
    """Drain the packet queue: for each ready packet, a worktree, the agent's stages, the
    gates, the reviews, and a squash merge onto the integration branch if all passed.

    Exits 0 when the queue is drained, 1 when a blocked packet halts the line, 2 on invalid
    input, 3 when the integration branch fails its own suite before anything ran, 130 when
    Ctrl-C stopped a pool (--workers N) once its running attempts had finished.
    """
    from ..advice import ahead_notice, merged_ahead
    from ..config import CONFIG_NAME
    from ..report import board

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    common.trees_in_temp(repo, config, workers or config.run.workers)
    runner = make_runner(repo, config, agent_spec, command, reviewer_spec, reviewer_command,
                         keep_worktrees)
    runner.workers = workers or runner.workers
    store = runner.store
    # andon.toml and the packets are read from the checkout as they are, committed or not:
    # counting them would tell a new user that the packets they just wrote do not run
    owned = config.andon.packets_dir.rstrip("/") + "/"
    if note := left_out_note(repo, (CONFIG_NAME, owned)):
        common.out.print(visible(note), markup=False, soft_wrap=True)  # file names
    try:
        report = runner.run(list(only) or None)
    except PacketError as exc:
        for p in exc.problems:
            common.err.print(visible(p), soft_wrap=True, markup=False)
        fail(f"{len(exc.problems)} problem(s) in the packets; nothing ran (see `andon check`)")
    except AndonError as exc:
        fail(str(exc))
    # packets a halted or refused run never reached are still there to see, as ready
    common.out.print(board(store, config, sorted((p.id, p.slug) for p in runner.packets.values()),
                           complete=True))
    if report.message:
        console = common.err if report.exit_status else common.out
        console.print(visible(report.message, lines=True), soft_wrap=True, markup=False)
    if report.exit_status == 0 and (ahead := merged_ahead(repo, config)):
        common.out.print(visible(ahead_notice(ahead)), markup=False)  # wrapped: 80 columns
    if report.preflight:
        for r in report.preflight.runs:
            common.err.print(f"evidence: {visible(r.log_path)}", markup=False, soft_wrap=True)
    sys.exit(report.exit_status)


STORE_OPTION = click.option(
    "--store", "store_url", default=None, metavar="URL",
    help="The store to read (postgresql://…, sqlite:///path): from any machine and any "
         "folder, no clone needed (default: $ANDON_STORE_URL, else [store] url, else "
         ".andon/andon.db).")


def _reader(ctx: click.Context, store_url: str | None, require_commit: bool = True
            ) -> tuple[Repo | None, Config | None, StoreProtocol]:
    """What status and show read: the repository (None outside a clone, when a store URL is
    given: another machine's view of a shared store), its andon.toml (None when there is
    none), and the store. Exits 2 with the store's own message (its URL without the
    password) when the store cannot be opened."""
    from ..config import CONFIG_NAME
    from ..state import open_store
    from ..store import URL_ENV, connect

    url = store_url or os.environ.get(URL_ENV) or None
    if store_url:
        os.environ[URL_ENV] = store_url  # open_store reads it
    repo: Repo | None
    if url:
        try:
            repo = open_repo(ctx, require_commit)
        except AndonError:
            repo = None
        if repo is not None and not (repo.root / CONFIG_NAME).is_file():
            repo = None  # not a clone of the project: the store alone
    else:
        repo = repo_or_fail(ctx, require_commit)
    config = config_or_fail(repo) if repo and (repo.root / CONFIG_NAME).is_file() else None
    try:
        if repo is None:
            assert url is not None
            return None, None, connect(Path("/nonexistent"), url)
        return repo, config, open_store(repo, config)
    except AndonError as exc:
        fail(str(exc))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable board.")
@STORE_OPTION
@click.pass_context
def status(ctx: click.Context, as_json: bool, store_url: str | None) -> None:
    """The board: every packet, its state, attempts, last result, and the tokens, cost and
    agent time it used (--json: per packet and for all packets, plus "halted_by": the
    blocked packet that stops the line, or null, and "merged_ahead": the commits the
    integration branch holds that the base branch lacks, or null). With --store URL (or
    $ANDON_STORE_URL) outside a clone, the store's packets alone. In a terminal narrower
    than 72 columns, tries, gates and agents share one column."""
    from ..advice import ahead_notice, base_drift, drift_notice, halting_packet, merged_ahead
    from ..report import board, status_rows, usage_of_rows
    from ..report.board import packet_files, worker_rows

    repo, config, store = _reader(ctx, store_url)
    if repo is not None and config is None:  # a repository without andon.toml: say so
        config = config_or_fail(repo)
    if repo is None or config is None:
        _store_only_board(store, as_json)
        return
    drift = base_drift(repo, config)
    # packets written since the last run (or before the first) are ready, not absent
    on_disk, problems = packet_files(repo.root, config.andon.packets_dir)
    # as `andon run` decides: the first blocked packet still in packets/
    row = halting_packet(store.packets(), {pid for pid, _ in on_disk})
    halted = row["id"] if row else None
    if as_json:
        rows = status_rows(store, on_disk, complete=not problems)
        common.out.print_json(json.dumps({"integration_branch": config.andon.integration_branch,
                                   "base_drift": drift, "merged_ahead": merged_ahead(repo, config),
                                   "halted_by": halted, "packets": rows,
                                   "usage": usage_of_rows(rows),
                                   "workers": worker_rows(store)}),
                                   ensure_ascii=True)
    else:
        common.out.print(board(store, config, on_disk, complete=not problems))
        if halted is not None:
            halted = visible(halted)
            common.out.print(f"line halted: {halted} is blocked: `andon show {halted}`, edit "
                             f"the packet, `andon unblock {halted}`", markup=False)
        if problems:
            common.out.print(f"{len(problems)} problem(s) in the packet files, whose packets "
                             "are not listed: `andon check`", markup=False)
        if drift:
            # branch names: a `[` in one is not markup
            common.out.print(visible(drift_notice(drift)), markup=False, highlight=False)
        if ahead := merged_ahead(repo, config):
            common.out.print(visible(ahead_notice(ahead)), markup=False)  # wrapped: 80 columns


def _store_only_board(store: StoreProtocol, as_json: bool) -> None:
    """The board of a store read from outside any clone: its packets as the runners
    recorded them (packets written but never run are not in it; the integration branch
    shown is andon's default name, the configured one being in the project's andon.toml)."""
    from ..config import Config
    from ..report import board, status_rows, usage_of_rows
    from ..report.board import worker_rows

    config = Config.model_validate({})
    if as_json:
        rows = status_rows(store)
        common.out.print_json(json.dumps({"integration_branch": None, "base_drift": None,
                                          "packets": rows, "usage": usage_of_rows(rows),
                                          "workers": worker_rows(store)}),
                                          ensure_ascii=True)
        return
    common.out.print(board(store, config))
    common.out.print("read from the store alone (no clone here): packets never run are "
                     "not listed", markup=False, soft_wrap=True)


@click.command()
@click.argument("packet_id")
@click.option("--json", "as_json", is_flag=True, help="Everything, as JSON.")
@click.option("--context", "with_context", is_flag=True,
              help="Also each stage's context (andon context on its transcript), with an "
                   "offline page written beside the transcript.")
@STORE_OPTION
@click.pass_context
def show(ctx: click.Context, packet_id: str, as_json: bool, with_context: bool,
         store_url: str | None) -> None:
    """The evidence for one packet: attempts, gates with findings, diff stat, logs. With
    --store URL (or $ANDON_STORE_URL) from any machine: the store's rows, and the evidence
    files this machine can reach (a shared --evidence folder); the others are named as not
    reachable from here."""
    from ..report import packet_detail, show_packet
    from ..store import no_such_packet

    repo, _, store = _reader(ctx, store_url)
    detail = packet_detail(store, repo, packet_id)
    if detail is None:
        fail(no_such_packet(store, packet_id))
    if with_context:
        _add_context(detail)
    if as_json:
        # ASCII only: rich re-dumps without, leaving C1, bidi and zero-width characters raw
        common.out.print_json(json.dumps(detail), ensure_ascii=True)
    else:
        show_packet(common.out, detail)


def _add_context(detail: dict) -> None:
    """Each stage's context summary (and page) from its transcript, where there is one."""
    from ..context import stage as context_stage  # the tokenizer loads only when asked

    for a in detail["attempts"]:
        for s in a["stages"]:
            path = Path(s["transcript_path"]) if s.get("transcript_path") else None
            if path is None or not plain_file.is_file(path) or path.stat().st_size == 0:
                continue
            s["context"] = context_stage.summarise(path)
            s["context_line"] = context_stage.line(s["context"])
