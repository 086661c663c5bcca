"""A person's decisions: ``approve`` and ``reject`` a packet that awaits one, ``unblock`` a
blocked packet after editing it."""

from __future__ import annotations

import sys

import click

from ..errors import AndonError, PacketError
from ..packet import load_packets
from ..runner import open_store
from . import common
from .common import (
    NOT_THE_PACKET,
    config_or_fail,
    decision_runner,
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
    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    runner = decision_runner(repo, config)
    try:
        state = runner.approve(packet_id, who=who())
    except AndonError as exc:
        fail(str(exc))
    common.out.print(f"{packet_id}: {state}")
    sys.exit(0 if state == "done" else 1)


@click.command()
@click.argument("packet_id")
@click.option("--why", required=True, help="The reason; the next attempt's prompt carries it.")
@click.pass_context
def reject(ctx: click.Context, packet_id: str, why: str) -> None:
    """Reject a packet that awaits a person: back to needs_work, with your reason as
    evidence for the next attempt."""
    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    runner = decision_runner(repo, config)
    try:
        state = runner.reject(packet_id, who=who(), why=why)
    except AndonError as exc:
        fail(str(exc))
    common.out.print(f"{packet_id}: {state}; `andon run` will try again with your reason")


@click.command()
@click.argument("packet_id")
@click.pass_context
def unblock(ctx: click.Context, packet_id: str) -> None:
    """Put a blocked packet back in the queue (after you have edited it)."""
    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    store = open_store(repo, config)
    row = store.packet(packet_id)
    if row is None:
        fail(f"no packet {packet_id!r} in the store")
    if row["state"] != "blocked":
        fail(f"packet {packet_id} is {row['state']}, not blocked")
    try:
        packets = {p.id: p for p in load_packets(repo.root / config.andon.packets_dir,
                                                 repo.root)}
    except PacketError as exc:
        for problem in exc.problems:
            common.err.print(str(problem), soft_wrap=True, markup=False)
        fail("fix the packets first; the packet stays blocked")
    p = packets.get(packet_id)
    if p is None:
        fail(f"packet {packet_id} no longer exists in {config.andon.packets_dir}/")
    edited = p.content_sha != row["content_sha"]
    attempts = store.attempts(packet_id)
    layer = attempts[-1]["failure_layer"] if attempts else None
    store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                        p.model_dump(mode="json", by_alias=True))
    store.transition(packet_id, "ready", "unblocked", data={"packet_edited": edited})
    # the board's "tries" and the attempt numbers keep counting: say which count restarts
    common.out.print(f"{packet_id} is ready again; max_attempts counts afresh from its next "
                     "attempt (attempt numbers and the board's tries keep counting)",
                     markup=False)
    if layer in NOT_THE_PACKET:
        # the advice was to fix the reviewer or the environment: an unchanged packet is right
        common.out.print(f"it was blocked by a {layer} failure, not by the packet: if you fixed "
                         f"the {NOT_THE_PACKET[layer]}, the next run tries again", markup=False)
    elif not edited:
        common.err.print(f"warning: {p.source} is unchanged since it was blocked; the same failure "
                         "will probably block it again", markup=False)
