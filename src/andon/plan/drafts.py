"""Draft packets in the store and on disk: what the runner does with a draft (keeps it out
of the queue), registering a draft, and a person accepting or rejecting one (each an event
naming who). A draft is a packet whose front matter says ``status = "draft"``; its store row
is in state ``draft``, which no runner claims (:data:`andon.lifecycle.CLAIMABLE`)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError
from ..packet import Packet
from ..store import StoreProtocol

_STATUS = re.compile(r'^status\s*=\s*"(draft|ready)"\s*$', re.MULTILINE)


def keep_out(store: StoreProtocol, p: Packet, state: str, echo: Callable[[str], None]) -> bool:
    """True if the runner must leave ``p`` (whose store row is in ``state``) out of the
    queue: its file says draft (the row follows it to ``draft``), or its row is a draft no
    person accepted, whatever its file says now (a hand-edited ``status`` is not a record)."""
    if p.status == "draft":
        if state in ("ready", "needs_work", "stale"):
            store.transition(p.id, "draft", "drafted", data={"source": str(p.source)})
        return True
    if state == "draft":
        echo(f'{p.id}: a draft in the store, though its file says status = "ready"; accept '
             f"it with `andon plan --accept {p.id}` (recorded) to run it")
        return True
    return False


def register(store: StoreProtocol, p: Packet, round_: int) -> None:
    """Record the draft ``p`` (written in planning round ``round_``) in state ``draft``:
    registered and moved there in one transaction, so no runner ever sees it ready."""
    with store.tx():
        store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                            p.model_dump(mode="json", by_alias=True))
        row = store.packet(p.id)
        assert row is not None  # upserted just above
        if row["state"] != "draft":
            store.transition(p.id, "draft", "drafted", data={"round": round_,
                                                             "source": str(p.source)})


def set_status(source: Path, status: str) -> None:
    """Rewrite the ``status = "..."`` line of the packet file ``source`` (front matter only).

    Raises:
        UsageError: the file has no such line (it was not written by ``andon plan``).
    """
    text = source.read_text(encoding="utf-8")
    end = text.find("\n+++", 3)
    front, rest = text[:end], text[end:]
    if end < 0 or not _STATUS.search(front):
        raise UsageError(f"{source}: no status = \"draft\" line in its front matter")
    source.write_text(_STATUS.sub(f'status = "{status}"', front, count=1) + rest,
                      encoding="utf-8")


def accept(store: StoreProtocol, p: Packet, who: str, problems: list[str], force: bool) -> None:
    """A person accepts the draft ``p``: its file says ``ready`` and its row moves
    draft → ready with an ``accepted`` event naming ``who`` (and, with ``force``, the
    problems accepted despite).

    Raises:
        UsageError: ``p`` is not a draft, or it has ``problems`` and not ``force``.
    """
    if p.status != "draft":
        raise UsageError(f"{p.id} is not a draft (status = {p.status!r})")
    if problems and not force:
        raise UsageError(f"{p.id} still has {len(problems)} problem(s): {'; '.join(problems)}; "
                         "fix them (another `andon plan` round, or edit the file) or accept "
                         "with --force (recorded)")
    register(store, p, 0)
    set_status(p.source, "ready")
    store.transition(p.id, "ready", "accepted",
                     data={"by": who, "forced": bool(problems), "problems": problems})


def reject(store: StoreProtocol, p: Packet, who: str, why: str) -> None:
    """A person rejects the draft ``p``: its file (or folder) is deleted and a ``rejected``
    event names ``who`` and ``why``; its row stays a draft, which never runs.

    Raises:
        UsageError: ``p`` is not a draft, or ``why`` is empty.
    """
    if p.status != "draft":
        raise UsageError(f"{p.id} is not a draft (status = {p.status!r}); only drafts are "
                         "rejected here")
    if not why.strip():
        raise UsageError("--reject needs --why TEXT: the reason is recorded")
    register(store, p, 0)
    store.event("draft-rejected", p.id, data={"by": who, "why": why, "source": str(p.source)})
    if p.dir is not None:
        shutil.rmtree(p.dir)
    else:
        p.source.unlink()
