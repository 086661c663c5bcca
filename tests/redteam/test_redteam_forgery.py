"""Issue 19, kinds 1, 2 (start-up) and 4 (environment): forging the verdict from inside the test
process, code at interpreter start-up, and harness detection. Each cheat ends rejected at the
named gate with the named finding; each honest control is merged. Real Runner, real git, real
pytest subprocesses (see scenarios_forgery.py)."""

from __future__ import annotations

import pytest
from scenarios import play, verdict
from scenarios_forgery import build_forgery

CASES = build_forgery()


def test_the_table_has_cheats_of_each_kind_and_honest_controls():
    names = [s.name for s in CASES]
    assert len(set(names)) == len(names)
    for prefix in ("k1-", "k2-", "k4-", "honest-"):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("scenario", CASES, ids=[s.name for s in CASES])
def test_forgery_scenario(scenario, tmp_path):
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why}"
    if scenario.honest:
        assert outcome.state == "done"
    else:
        assert outcome.state != "done"
        if scenario.finding == "forged-report":
            assert outcome.findings and all(f["kind"] == "forged-report"
                                            for f in outcome.findings)
