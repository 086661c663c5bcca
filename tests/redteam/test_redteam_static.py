"""Issue 19's red-team table for the static net and scope (tests/redteam/scenarios_static.py):
each cheat, played through the real Runner on a real git project, must end rejected by the
named gate with the named finding; each honest control must be merged with every gate
passing."""

from __future__ import annotations

import pytest

from scenarios import play, verdict
from scenarios_static import build

TABLE = build()


@pytest.mark.parametrize("scenario", TABLE, ids=[s.name for s in TABLE])
def test_static_scenario(scenario, tmp_path):
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why}"
    if scenario.honest:
        assert outcome.state == "done"
        assert [g for g, st in outcome.gates if st not in ("pass", "skipped")] == []
    else:
        assert outcome.state != "done"


def test_the_table_covers_each_kind_and_has_honest_controls():
    kinds = {s.kind for s in TABLE if not s.honest}
    assert kinds == {4, 5, 8, 9, 10, 11}
    assert len([s for s in TABLE if s.honest]) >= 5
    assert len({s.name for s in TABLE}) == len(TABLE)
