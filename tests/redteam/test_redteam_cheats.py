"""Every catalogue kind 1–20: changing the tests or how they run (1–6), faking the answer
(7–12), attacking the harness and its environment (13–20).

Each scripted cheating agent of ``scenarios.build()`` runs through the real Runner on a real
git project; the test asserts from the store that the packet was not merged, that the named
gate failed first and that its findings carry the named kind and path or test id. Each
scenario's ``doc`` says what it tries and, where andon cannot fully prevent the kind, the
limit.
"""

from __future__ import annotations

import pytest

from andon.contain import netless

from scenarios import build, play, verdict

CASES = [s for s in build() if s.kind is not None]


def test_every_catalogue_kind_has_a_cheat():
    assert sorted({s.kind for s in CASES}) == list(range(1, 21))


@pytest.mark.parametrize("scenario", CASES, ids=[f"{s.kind}-{s.name}" for s in CASES])
def test_cheat_is_rejected_for_the_right_reason(scenario, tmp_path):
    if scenario.needs_netns and not netless.available()[0]:
        pytest.skip(f"network namespaces not available here: {netless.available()[1]}")
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why}"
    assert outcome.state != "done"
