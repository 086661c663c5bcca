"""A person's decisions: ``approve`` and ``reject`` a packet that awaits one, ``unblock`` a
blocked packet after editing it."""

from __future__ import annotations

import sys

import click

from ..errors import AndonError, PacketError
from ..safe_text import visible
from . import common
from .common import (
    NOT_THE_PACKET,
    config_or_fail,
    fail,
    repo_or_fail,
    who,
)


@click.command()
@click.argument("packet_id")
@click.pass_context
def approve(ctx: click.Context, packet_id: str) -> None:
    """Approve a packet that awaits a person (gate = "human"): squash-merge it now.

    Look first: `andon show ID` has the diff, the gate evidence, the reviewers' verdicts and
    findings. Exits 0 when merged, 1 if the merged result failed its checks, 2 if the packet
    is not awaiting a person.
    """
    from .. import decisions

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    try:
        state = decisions.approve(repo, config, packet_id, who(), echo=common.echo)
    except AndonError as exc:
        fail(str(exc))
    common.out.print(visible(f"{packet_id}: {state}"), markup=False)
    sys.exit(0 if state == "done" else 1)


@click.command()
@click.argument("packet_id")
@click.option("--why", required=True, help="The reason; the next attempt's prompt carries it.")
@click.pass_context
def reject(ctx: click.Context, packet_id: str, why: str) -> None:
    """Reject a packet that awaits a person: back to needs_work, with your reason as
    evidence for the next attempt."""
    from .. import decisions

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    try:
        state = decisions.reject(repo, config, packet_id, who(), why)
    except AndonError as exc:
        fail(str(exc))
    common.out.print(visible(f"{packet_id}: {state}; `andon run` will try again with your "
                             "reason"), markup=False)


@click.command()
@click.argument("packet_id")
@click.pass_context
def unblock(ctx: click.Context, packet_id: str) -> None:
    """Put a blocked packet back in the queue (after you have edited it)."""
    from .. import decisions

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    try:
        done = decisions.unblock(repo, config, packet_id)
    except PacketError as exc:
        for problem in exc.problems:
            common.err.print(visible(problem), soft_wrap=True, markup=False)
        fail("fix the packets first; the packet stays blocked")
    except AndonError as exc:
        fail(str(exc))
    edited, layer = done.edited, done.layer
    # the board's "tries" and the attempt numbers keep counting: say which count restarts
    common.out.print(f"{visible(packet_id)} is ready again; max_attempts counts afresh from "
                     "its next attempt (attempt numbers and the board's tries keep counting)",
                     markup=False)
    if layer in NOT_THE_PACKET:
        # the advice was to fix the reviewer or the environment: an unchanged packet is right
        article = "an" if layer[0] in "aeiou" else "a"
        common.out.print(f"it was blocked by {article} {layer} failure, not by the packet: if "
                         f"you fixed the {NOT_THE_PACKET[layer]}, the next run tries again",
                         markup=False)
    elif not edited:
        common.err.print(f"warning: {visible(done.source)} is unchanged since it was blocked; "
                         "the same failure will probably block it again", markup=False)
