"""Which filesystem holds a path, from the kernel's mount table (Linux).

No andon imports: the choice of a temp dir (tempdir.py) and of the trees worth keeping
(worktree_pool.py) both ask it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["filesystem_type"]

_OCTAL = re.compile(r"\\([0-7]{3})")


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type (``"tmpfs"``, ``"ext4"``, …) of the filesystem holding ``path``, from the
    longest matching mount point of ``mounts`` (the text of ``/proc/self/mounts`` when None,
    Linux); None where that cannot be read. Mount points with spaces are octal-escaped there
    (``\\040``), as in fstab(5)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    lines = mounts.splitlines()
    target = os.path.realpath(path)
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind
