"""Which Python interpreter a ``[test] command`` runs on — one answer for every part of andon
that needs it (the verdict channel's start-up, the environment fingerprint, the shadowing check).

``python_of(argv)``: ``argv[0]`` when it is a Python (``[test] command`` has already turned
``"python"`` into andon's own interpreter), else the interpreter named in the ``#!`` line of the
``argv[0]`` script — ``#!/abs/python`` or ``#!/usr/bin/env python3`` — as pip writes for console
scripts such as ``pytest``; None for anything else (``uv run …``, a shell wrapper).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def is_python(path: str) -> bool:
    """``path`` names a Python interpreter by its file name (``python``, ``python3.11``)."""
    return Path(path).name.startswith("python")


def shebang_python(script: str) -> str | None:
    """The interpreter in ``script``'s ``#!`` line (absolute, or found on PATH after
    ``/usr/bin/env``), or None when the file cannot be read or names no Python."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.isabs(words[0]) and is_python(words[0]):
        return words[0]
    if len(words) >= 2 and Path(words[0]).name == "env" and is_python(words[1]):
        return shutil.which(words[1])
    return None


def python_of(argv: list[str]) -> str | None:
    """The interpreter ``argv`` runs on (see the module docstring), or None."""
    if not argv:
        return None
    exe = argv[0] if os.path.isabs(argv[0]) else (shutil.which(argv[0]) or argv[0])
    if is_python(exe):
        return exe
    return shebang_python(exe)
