"""Every entry under a folder, for the walks over trees an agent or the code under test wrote.

Such a tree can nest folders deeper than Python's recursion limit (a few thousand relative
``mkdir`` calls), where ``os.walk`` and ``Path.rglob`` (recursive on Python 3.11) raise
``RecursionError``, which no ``except OSError`` catches: a walk meant to find the agent's
change stopped the line as a harness error instead. This walk keeps its own stack.

No andon imports: the environment fingerprint, the manifests, the review export and the
joint plan's ``.git`` search all use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator


def entries(root: str | os.PathLike[str], *,
            skip: Callable[[os.DirEntry[str]], bool] | None = None,
            descend: Callable[[str, os.DirEntry[str]], bool] | None = None,
            ) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` for every entry below ``root``, depth first, folders before
    what they hold; the path is "/"-separated and relative to ``root``.

    Links are yielded, never followed. ``skip(entry)`` true: the entry is neither yielded
    nor entered. ``descend(rel, entry)`` false: a folder is yielded but not entered (default:
    every folder is). A folder that cannot be listed (gone, no permission, a path longer
    than the system allows) is yielded and not entered; ``root`` itself unlistable yields
    nothing. Raises nothing of its own; memory grows with the number of folders waiting on
    the stack, never with the depth of the call stack."""
    stack = [("", os.fspath(root))]
    while stack:
        prefix, where = stack.pop()
        try:
            with os.scandir(where) as it:
                found = list(it)  # closed before yielding: no open folder per level
        except OSError:
            continue
        for entry in found:
            if skip is not None and skip(entry):
                continue
            rel = prefix + entry.name
            yield rel, entry
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and (descend is None or descend(rel, entry)):
                stack.append((rel + "/", entry.path))
