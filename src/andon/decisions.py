"""A person's decisions on a packet: approve, reject (with a reason), unblock.

One implementation for every front end: ``andon approve/reject/unblock`` (cli/decide.py) and
the dashboard's buttons (web/actions.py) call these functions, so the rules and the store
transitions are the same wherever a person clicks or types. Approve and reject go through
:class:`andon.runner.Runner` (the runner lock, the merge exactly once); unblock re-reads the
packet file and moves ``blocked`` → ``ready`` with its event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import Config
from .errors import UsageError
from .git.repo import Repo
from .packet import load_packets
from .runner import Runner
from .state import open_store
from .store import no_such_packet


def person_runner(repo: Repo, config: Config,
                  echo: Callable[[str], None] = lambda s: None) -> Runner:
    """A Runner that carries out a person's decision and runs no agent (asking it for one
    raises UsageError)."""
    def no_agent(packet, stage):
        raise UsageError("a person's decision runs no agent")
    return Runner(repo, config, open_store(repo, config), no_agent, echo=echo)


def approve(repo: Repo, config: Config, packet_id: str, who: str,
            echo: Callable[[str], None] = lambda s: None) -> str:
    """Approve a packet in ``awaiting_human``: squash-merge it now; return its new state
    (``done``, or ``needs_work``/``blocked`` when the merged result failed its checks).

    Raises:
        UsageError: no such packet, or it is not awaiting a person.
        StoreError: another runner holds the repository.
    """
    return person_runner(repo, config, echo).approve(packet_id, who=who)


def reject(repo: Repo, config: Config, packet_id: str, who: str, why: str) -> str:
    """Reject a packet in ``awaiting_human`` with ``why`` (the next prompt carries it);
    return its new state (``needs_work``).

    Raises:
        UsageError: no such packet, it is not awaiting a person, or ``why`` is blank.
    """
    if not why.strip():
        raise UsageError("a rejection needs a reason (the next attempt's prompt carries it)")
    return person_runner(repo, config).reject(packet_id, who=who, why=why)


@dataclass(frozen=True)
class Unblocked:
    """What unblocking did: the packet file was edited since the block (``edited``), and the
    failure layer of the attempt that blocked it (``layer``, None without attempts)."""

    packet_id: str
    edited: bool
    layer: str | None
    source: str


def unblock(repo: Repo, config: Config, packet_id: str) -> Unblocked:
    """Put a blocked packet back in the queue: its definition is read again from its file
    (a person edits it before unblocking) and it moves ``blocked`` → ``ready``.

    Raises:
        UsageError: no such packet in the store, it is not blocked, or its file is gone.
        PacketError: the packet files are invalid (``problems`` lists each); it stays blocked.
    """
    store = open_store(repo, config)
    try:
        row = store.packet(packet_id)
        if row is None:
            raise UsageError(no_such_packet(store, packet_id))
        if row["state"] != "blocked":
            raise UsageError(f"packet {packet_id} is {row['state']}, not blocked")
        packets = {p.id: p for p in load_packets(repo.root / config.andon.packets_dir,
                                                 repo.root)}
        p = packets.get(packet_id)
        if p is None:
            raise UsageError(f"packet {packet_id} no longer exists in "
                             f"{config.andon.packets_dir}/")
        edited = p.content_sha != row["content_sha"]
        attempts = store.attempts(packet_id)
        layer = attempts[-1]["failure_layer"] if attempts else None
        store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                            p.model_dump(mode="json", by_alias=True))
        store.transition(packet_id, "ready", "unblocked", data={"packet_edited": edited})
        return Unblocked(packet_id, edited, layer, str(p.source))
    finally:
        store.close()
