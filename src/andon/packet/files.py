"""A packet's own files: the ``plant/``, ``hidden/`` and ``solution/`` trees as read (tool and
editor litter left out), frozen into bytes, and hashed with the packet file into ``content_sha``
(all but ``solution/``); which planted files are tests, and whether a packet without them can
run."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from andon.errors import Problem

from .model import Packet

_LITTER_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def is_litter(rel: str) -> bool:
    """A file tools and editors leave beside the packet's files (Python and test caches, an
    editor's swap or backup file, .DS_Store): never part of a packet, never planted, and
    never a reason to blame an agent when it comes or goes."""
    parts = rel.split("/")
    name = parts[-1]
    return bool(_LITTER_DIRS & set(parts[:-1])) or name.endswith((".pyc", "~")) \
        or name == ".DS_Store" or bool(re.fullmatch(r"\..*\.sw[a-p]|#.*#|\.#.*", name))


def _tree_files(root: Path, problems: list[Problem]) -> dict[str, Path]:
    """Repo-relative POSIX path -> absolute file for everything under ``root``
    (plant/hidden/solution) except what tools and editors leave there (:func:`is_litter`)."""
    if not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _LITTER_DIRS]
        for name in sorted(dirnames + filenames):
            entry = Path(dirpath) / name
            if is_litter(entry.relative_to(root).as_posix()):
                continue
            if entry.is_symlink():
                target = os.readlink(entry)
                msg = f"{root.name}/ entries must be regular files, got a symlink to {target}"
                problems.append(Problem(entry, None, msg))
            elif entry.is_file():
                found[entry.relative_to(root).as_posix()] = entry.absolute()
    if not found and not any(p.path.is_relative_to(root) for p in problems):
        problems.append(Problem(root, None, f"{root.name}/ exists but contains no files"))
    return dict(sorted(found.items()))


def _freeze(trees: dict[str, dict[str, Path]]) -> dict[str, dict[str, tuple[bytes, bool]]]:
    return {tree: {rel: (file.read_bytes(), bool(file.stat().st_mode & stat.S_IXUSR))
                   for rel, file in files.items()} for tree, files in trees.items()}


def _content_sha(source_bytes: bytes, frozen: dict[str, dict[str, tuple[bytes, bool]]]) -> str:
    digest = hashlib.sha256()
    # Length-prefixed so that moving bytes between a name and its content changes the hash.
    for part in [source_bytes] + [
        item
        for tree, files in sorted(frozen.items())
        for rel, (data, _) in files.items()
        for item in (f"{tree}/{rel}".encode(), data)
    ]:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


_TEST_FILE = re.compile(r"(test_.*|.*_test)\.py")


def planted_test_files(packet: Packet) -> list[str]:
    """Planted paths pytest would collect as test files (``test_*.py``, ``*_test.py``)."""
    return [p for p in sorted(packet.plant_files) if _TEST_FILE.fullmatch(p.rsplit("/", 1)[-1])]


def tests_problem(packet: Packet, stages: Sequence[str]) -> Problem | None:
    """Why ``packet`` (whose stages are ``stages``) cannot run as it stands: it plants no
    test file and neither opts out (``tests = "none"``) nor has an ``atdd`` stage to write
    them — nothing would be red before the agent, FAIL_TO_PASS would be empty, and any
    change would pass; or it says ``tests = "none"`` but plants test files. None if fine."""
    planted = planted_test_files(packet)
    if packet.tests == "none" and planted:
        return Problem(packet.source, packet.line_of("tests"),
                       f'tests = "none" but plant/ holds test files ({", ".join(planted)}): '
                       "remove the setting or the files")
    if packet.tests == "none" or planted or "atdd" in stages:
        return None
    return Problem(packet.source, packet.line_of("tests"),
                   "the packet plants no test files, so no test would fail before the change "
                   "and any change would pass: add a failing test under plant/, give it an "
                   'atdd stage that writes one, or opt out with tests = "none" (it then '
                   'waits for a person: gate = "human" unless you set gate)')
