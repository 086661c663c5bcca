"""Files read more than once, and stale reads: a file read, then edited, then acted on
(a later call naming the file) with no fresh read in between — the agent works from the
old read. Per thread; paths as the calls name them.
"""

from __future__ import annotations

from typing import Any

from andon.context.components import paths_of, tool_kind
from andon.context.model import Thread


def analyse(threads: list[Thread]) -> dict[str, Any]:
    """``{"reread": [{path, reads: [where]}], "stale": [{path, read, edit, used}]}``."""
    reread: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    for t in threads:
        reads: dict[str, list[str]] = {}
        state: dict[str, tuple[str, str | None, str | None]] = {}  # path -> (state, read, edit)
        for m in t.messages:
            for p in m.parts:
                if p.kind != "tool_call":
                    continue
                kind = tool_kind(p)
                where = f"{t.name} {m.source}"
                for path in paths_of(p):
                    st, read_at, edit_at = state.get(path, ("none", None, None))
                    if kind == "file_read":
                        reads.setdefault(path, []).append(where)
                        state[path] = ("read", where, None)
                        continue
                    if st == "edited":
                        stale.append({"path": path, "read": read_at, "edit": edit_at,
                                      "used": where})
                        state[path] = ("none", None, None)
                    if kind == "edit" and st == "read":
                        state[path] = ("edited", read_at, where)
        reread += [{"path": k, "reads": v} for k, v in reads.items() if len(v) > 1]
    return {"reread": reread, "stale": stale}
