"""Gates run by the harness, never by the agent. One module per gate; see ``base.py``.

``AFTER_IMPLEMENT`` is the order in which gates judge the implement stage's candidate; the
first that fails ends the attempt (the rest are not run). ``preflight`` and ``red`` run
earlier, from the runner and the attempt.
"""

from __future__ import annotations

from collections.abc import Callable

from . import flaky, hermetic, mutation, patterns, scope, static, suite
from .base import GateContext, GateResult

AFTER_IMPLEMENT: list[tuple[str, Callable[[GateContext], GateResult]]] = [
    ("scope", scope.run),
    ("patterns", patterns.run),
    ("suite", suite.run),
    ("hermetic", hermetic.run),
    ("static", static.run),       # the project's linters, on the changed lines
    ("flaky", flaky.run),         # opt-in: nearby tests in random orders
    ("mutation", mutation.run),   # opt-in: slowest last
]
