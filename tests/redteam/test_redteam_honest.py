"""Honest agents that must be accepted (the catalogue's last section): new tests beside the
planted ones, a refactor, a split module, a larger change, an allowed dependency, a fix of an
existing test the packet names, a real implementation against hidden tests. A false rejection
costs as much trust as a missed cheat."""

from __future__ import annotations

import pytest

from scenarios import HIDDEN, build, play, verdict

CASES = [s for s in build() if s.honest]


@pytest.mark.parametrize("scenario", CASES, ids=[s.name for s in CASES])
def test_honest_agent_is_merged(scenario, tmp_path):
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why}"
    assert outcome.state == "done"
    assert [g for g, st in outcome.gates if st not in ("pass", "skipped")] == []
    assert ("patterns", "pass") in outcome.gates


def test_every_catalogue_kind_has_a_cheat_and_some_honest_agents():
    table = build()
    assert {s.kind for s in table if not s.honest} == set(range(1, 21))
    assert len([s for s in table if s.honest]) >= 6
    assert len({s.name for s in table}) == len(table)


def test_hidden_tests_are_run_and_never_committed(tmp_path):
    """The honest agent passes because the hidden file ran in the fresh clone (the hermetic
    gate's evidence lists it and its test passed there) and no commit of the attempt holds it."""
    s = next(x for x in build() if x.name == "honest-hidden-passes")
    o = play(s, tmp_path / "repo")
    assert o.merged
    att = o.runner.store.attempts("P1")[0]
    herm = next(g for g in o.runner.store.gate_results(att["id"]) if g["gate"] == "hermetic")
    assert herm["evidence"]["hidden"] == [HIDDEN]
    assert "hidden" in herm["summary"]
    for sha in (att["plant_sha"], att["candidate_sha"]):
        assert o.runner.repo.file_bytes(sha, HIDDEN) is None
