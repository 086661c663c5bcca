"""Scope table (scenarios_scope.py): code no diff shows and test packages that run first are
``scope`` findings; their honest neighbours are merged."""

from __future__ import annotations

import pytest

from scenarios import play, verdict
from scenarios_scope import SO, build_scope, can_build

CASES = build_scope()


@pytest.mark.parametrize("scenario", CASES, ids=[s.name for s in CASES])
def test_scope_scenario(scenario, tmp_path):
    if scenario.where == SO and can_build():
        pytest.skip(f"cannot build an extension module here: {can_build()}")
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why} gates={outcome.gates}"
    if scenario.honest:
        assert outcome.state == "done"
