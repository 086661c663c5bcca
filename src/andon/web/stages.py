"""What the packet page adds to each stage, and the events page's chain status: read from the
store and from the files it names, never computed anew where andon already decided.

- the **sandbox level** a stage's agent ran at: the ``sandbox LEVEL: …`` note the agent
  launcher put into the stage's usage (``Plan.describe``);
- the **context summary** of a stage's transcript (``andon show --context``'s line, from
  :mod:`andon.context.stage`) and its page (``andon.context.html.page``), computed in memory:
  the server writes no file;
- the **hash-chain status** (:func:`andon.store.chain.verify` over the events, without
  the evidence files), cached under the newest event id.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..store import Store, chain

LEVEL = re.compile(r"^sandbox (\S+):")
NOT_RECORDED = "not recorded"


def sandbox_level(usage: dict[str, Any] | None) -> str:
    """``"none"``, ``"fs"`` or ``"fs+net"`` from the first usage note naming a level (a
    limit note may come before it), else ``"not recorded"`` (no usage stored, or a stage
    from before the sandbox existed)."""
    for note in (usage or {}).get("notes") or []:
        m = LEVEL.match(str(note))
        if m:
            return m.group(1)
    return NOT_RECORDED


def context_summary(path: Path) -> dict[str, Any]:
    """``andon.context.stage.summarise`` of the transcript at ``path`` without writing its
    page, plus ``line`` (what ``andon show --context`` prints); cached by the file's size
    and modification time, so a packet page does not tokenize its transcripts on every
    request."""
    st = path.stat()
    return dict(_summary(str(path), st.st_size, st.st_mtime_ns))


@lru_cache(maxsize=256)
def _summary(path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    from ..context import stage  # the tokenizer loads only when a page needs it
    out = stage.summarise(Path(path), write_page=False)
    out["line"] = stage.line(out)
    return out


def context_page(path: Path) -> str | None:
    """The offline context page of the transcript at ``path`` (the page ``andon show
    --context`` writes beside it), or None when it is in no format andon.context reads."""
    from ..context import load
    from ..context.analyse import analyse
    from ..context.html import page
    from ..context.model import TranscriptError
    try:
        conv = load(path, follow=False)
    except TranscriptError:
        return None
    return page(analyse(conv, near=False), conv)


class ChainStatus:
    """The events' hash-chain verdict, walked again only when a newer event exists (the
    log is append-only; an old event edited in place shows once the next event is
    written). Safe to share between the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: object = object()
        self._verdict: dict[str, Any] = {}

    def of(self, store: Store) -> dict[str, Any]:
        """``{"ok", "problems", "head", "chained", "unchained", "newest"}`` for ``store``."""
        newest = store.newest_event_id()
        with self._lock:
            if newest == self._key:
                return self._verdict
        v = chain.verify(store.chain_rows(), check_files=False).to_dict()
        v["newest"] = newest
        with self._lock:
            self._key, self._verdict = newest, v
        return v
