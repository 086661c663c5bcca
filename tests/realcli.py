"""The real agent CLIs for the end-to-end tests: pinned in tests/agent-clis.txt, installed
into ``.tools/`` by scripts/test (npm's in ``.tools/node_modules/.bin``, the ``pip:`` ones —
Aider — in their own venv ``.tools/aider-venv/bin``). ``binary(name)`` gives the path; when it
is missing the test is skipped — except with ``CI=true``, where a missing binary fails the
test (CI installs them all, so absence there is a broken set-up, not a reason to test less)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = ROOT / ".tools" / "node_modules" / ".bin"
PIP_BIN = ROOT / ".tools" / "aider-venv" / "bin"
PINS = ROOT / "tests" / "agent-clis.txt"
# The CLIs installed with pip, and the folder their executables are in.
PIP_CLIS = {"aider": PIP_BIN}


def pinned(package: str) -> str:
    """The version tests/agent-clis.txt pins for an npm ``package`` (``package@version``) or
    a PyPI one (``pip:package==version``)."""
    for line in PINS.read_text().splitlines():
        if line.startswith(package + "@"):
            return line[len(package) + 1:].strip()
        if line.startswith(f"pip:{package}=="):
            return line[len(package) + 6:].strip()
    raise LookupError(f"{PINS}: no pin for {package}")


def binary(name: str) -> Path:
    path = PIP_CLIS.get(name, TOOLS_BIN) / name
    if path.exists():
        return path
    why = f"{path} is not installed: run scripts/test (it installs the pinned agent CLIs)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)
