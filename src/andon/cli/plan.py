"""``andon plan``: a planning agent drafts packets from a spec (:mod:`andon.plan`); a person
accepts (``--accept IDS`` / ``--all``) or rejects (``--reject ID --why``) the drafts."""

from __future__ import annotations

import os
import sys

import click

from ..errors import AndonError
from ..safe_text import visible
from . import common
from .common import config_or_fail, fail, repo_or_fail, who

EXIT_PROBLEMS = 1


@click.command()
@click.argument("paths", nargs=-1, metavar="SPEC [DECISIONS]...")
@click.option("--agent", "agent_spec", default=None,
              help="The planner's adapter (as `andon run --agent`); default [agent] default.")
@click.option("--command", default=None, help="Shell command of the command adapter.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Planning rounds at most: each problem found goes back as evidence.")
@click.option("--accept", "accept_ids", default=None, metavar="IDS",
              help="Accept these drafts (comma-separated): they become ready packets.")
@click.option("--all", "accept_all", is_flag=True, help="Accept every draft.")
@click.option("--reject", "reject_id", default=None, metavar="ID",
              help="Reject one draft (its folder is deleted); needs --why.")
@click.option("--why", default=None, help="Why a draft is rejected (recorded).")
@click.option("--by", default=None, help="Who accepts or rejects (recorded); default $USER.")
@click.option("--force", is_flag=True,
              help="Accept drafts that still have problems (the problems are recorded).")
@click.pass_context
def plan(ctx: click.Context, paths: tuple[str, ...], agent_spec: str | None,
         command: str | None, rounds: int, accept_ids: str | None, accept_all: bool,
         reject_id: str | None, why: str | None, by: str | None, force: bool) -> None:
    """Draft packets from SPEC (and DECISIONS files) with a planning agent, check every draft
    mechanically, and return each problem to the agent for another round. Drafts are written
    to the packets folder with status = "draft"; `andon run` never claims one until a person
    accepts it with --accept IDS or --all.

    Exits 0 when the drafts pass every check (or the accept/reject was done), 1 when
    problems remain (shown; nothing accepted), 2 on bad input.
    """
    from ..state import open_store

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    person = by or os.environ.get("USER") or who()
    deciding = bool(accept_ids or accept_all or reject_id)
    if deciding and paths:
        fail("give a SPEC to plan, or --accept/--all/--reject to decide on drafts, not both")
    if not deciding and not paths:
        fail("give a SPEC file to plan from (see `andon plan --help`)")
    store = open_store(repo, config)
    try:
        if reject_id:
            _reject(repo, config, store, reject_id, why or "", person)
        elif deciding:
            _accept(repo, config, store, accept_ids, accept_all, person, force)
        else:
            _plan(repo, config, store, paths, agent_spec, command, rounds)
    except AndonError as exc:
        fail(str(exc))
    finally:
        store.close()


def _plan(repo, config, store, paths, agent_spec, command, rounds) -> None:
    from ..agents import make_agent
    from ..plan.session import run_plan

    spec = agent_spec or config.agent.default
    agent = make_agent(spec, command or config.agent.command, config)
    outcome = run_plan(repo, config, store, agent, paths, rounds,
                       lambda s: common.err.print(visible(s, lines=True), markup=False,
                                                  soft_wrap=True))
    folder = config.andon.packets_dir
    for pid in outcome.drafts:
        common.out.print(visible(f"draft {pid}: {folder}/{pid}/packet.md"), markup=False)
    if outcome.ok:
        common.out.print(f"{len(outcome.drafts)} draft(s) pass every check after "
                         f"{len(outcome.rounds)} round(s); read them, then `andon plan "
                         f"--accept IDS` or `--all`", markup=False, soft_wrap=True)
        return
    for p in outcome.problems:
        common.out.print(f"problem: {visible(p)}", markup=False, soft_wrap=True)
    common.out.print(f"{len(outcome.problems)} problem(s) remain after {len(outcome.rounds)} "
                     f"round(s); nothing was accepted (evidence: {visible(outcome.evidence)})",
                     markup=False, soft_wrap=True)
    sys.exit(EXIT_PROBLEMS)


def _drafts(repo, config) -> dict:
    from ..packet import check_packets

    found, _ = check_packets(repo.root / config.andon.packets_dir, repo.root)
    return {p.id: p for p in found if p.status == "draft"}


def _accept(repo, config, store, ids: str | None, every: bool, person: str,
            force: bool) -> None:
    from ..baseline import integration_head
    from ..packet import check_packets
    from ..plan import drafts
    from ..plan.session import check_all, from_packet

    current = _drafts(repo, config)
    wanted = sorted(current) if every else [i.strip() for i in (ids or "").split(",")
                                            if i.strip()]
    unknown = [i for i in wanted if i not in current]
    if unknown:
        fail(f"not a draft: {', '.join(unknown)}; drafts: {', '.join(sorted(current)) or 'none'}")
    if not wanted:
        fail("no drafts to accept")
    ready = [p.id for p in current.values()]
    found, _ = check_packets(repo.root / config.andon.packets_dir, repo.root)
    others = [p.id for p in found if p.status != "draft"]
    problems = check_all(repo, config, integration_head(repo, config),
                         [from_packet(current[i]) for i in ready],
                         {i: current[i].source for i in ready}, others)
    refused = []
    for pid in wanted:
        mine = [p for p in problems if p.startswith(f"{pid}:")]
        try:
            drafts.accept(store, current[pid], person, mine, force)
        except AndonError as exc:
            refused.append(str(exc))
            continue
        note = f" despite {len(mine)} problem(s) (--force, recorded)" if mine else ""
        common.out.print(visible(f"{pid}: accepted by {person}{note}: ready"), markup=False)
    for r in refused:
        common.err.print(f"refused: {visible(r)}", markup=False, soft_wrap=True)
    if refused:
        sys.exit(EXIT_PROBLEMS)


def _reject(repo, config, store, pid: str, why: str, person: str) -> None:
    from ..plan import drafts

    current = _drafts(repo, config)
    if pid not in current:
        fail(f"not a draft: {pid}; drafts: {', '.join(sorted(current)) or 'none'}")
    drafts.reject(store, current[pid], person, why)
    common.out.print(visible(f"{pid}: rejected by {person} ({why}); its draft was deleted"),
                     markup=False, soft_wrap=True)
