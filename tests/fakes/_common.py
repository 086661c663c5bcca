"""Shared by the fake agent CLIs: the scenario a test chose, a record of each call, and the
edit a real agent would make in its working directory.

A test installs a fake with ``fakes.install(bin_dir, "claude", scenario)``: ``bin_dir/claude``
is a tiny launcher running a copy of ``tests/fakes/claude.py`` (in
``bin_dir/.fakes``, with this module), and ``bin_dir/claude.scenario.json``
holds the scenario. Every call appends ``{argv, cwd, prompt, env_names}`` to
``bin_dir/claude.calls.jsonl`` (variable names only, never values).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

LAUNCHER = Path(sys.argv[0])


def scenario() -> dict:
    path = LAUNCHER.parent / f"{LAUNCHER.name}.scenario.json"
    return json.loads(path.read_text()) if path.exists() else {}


def record(prompt: str) -> None:
    with open(LAUNCHER.parent / f"{LAUNCHER.name}.calls.jsonl", "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "prompt": prompt,
                            "env_names": sorted(os.environ)}) + "\n")


def edit(sc: dict) -> None:
    """Do the work: append text to a file of the working directory, as an agent would."""
    for rel, text in sc.get("append", {}).items():
        path = Path(rel)
        path.write_text(path.read_text() + text)


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def hang() -> None:
    """A stuck agent: never returns (the harness's timeout must end it)."""
    while True:
        time.sleep(3600)


def flood(n_bytes: int, line: str) -> None:
    """A runaway agent: ``n_bytes`` of output made of ``line``."""
    chunk = (line + "\n") * max(1, 65536 // (len(line) + 1))
    written = 0
    while written < n_bytes:
        sys.stdout.write(chunk)
        written += len(chunk)
    sys.stdout.flush()
