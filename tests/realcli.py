"""The real agent CLIs for the end-to-end tests: pinned in tests/agent-clis.txt, installed
into ``.tools/`` by scripts/test. ``binary(name)`` gives the path; when it is missing the test
is skipped — except with ``CI=true``, where a missing binary fails the test (CI installs
them all, so absence there is a broken set-up, not a reason to test less)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = ROOT / ".tools" / "node_modules" / ".bin"
PINS = ROOT / "tests" / "agent-clis.txt"


def pinned(package: str) -> str:
    """The version tests/agent-clis.txt pins for an npm ``package``."""
    for line in PINS.read_text().splitlines():
        if line.startswith(package + "@"):
            return line[len(package) + 1:].strip()
    raise LookupError(f"{PINS}: no pin for {package}")


def binary(name: str) -> Path:
    path = TOOLS_BIN / name
    if path.exists():
        return path
    why = f"{path} is not installed: run scripts/test (it installs the pinned agent CLIs)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)
