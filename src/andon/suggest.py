"""Did-you-mean hints for misspelt names (packet fields, andon.toml keys, tables, values)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` if one is close enough to be a likely typo."""
    found = difflib.get_close_matches(name, list(known), n=1)
    return found[0] if found else None


def hint(name: str, known: Iterable[str], listing: str, show=repr) -> str:
    """``did you mean 'x'?`` for a close name, else ``<listing>: a, b, c`` (every known name).

    ``show`` formats the suggestion (default: quoted), e.g. ``"[{}]".format`` for tables.
    """
    known = list(known)
    near = closest(name, known)
    return f"did you mean {show(near)}?" if near else f"{listing}: {', '.join(known)}"
