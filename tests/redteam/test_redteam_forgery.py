"""Issue 19, kinds 1, 2 (start-up) and 4 (environment): forging the verdict from inside the test
process, code at interpreter start-up, and harness detection. Each cheat ends rejected at the
named gate with the named finding; each honest control is merged. Real Runner, real git, real
pytest subprocesses (see scenarios_forgery.py)."""

from __future__ import annotations

import pytest
from scenarios_collect import build_collect

from scenarios import play, verdict
from scenarios_forgery import PERSON, build_forgery

CASES = build_forgery() + build_collect()


def test_the_table_has_cheats_of_each_kind_and_honest_controls():
    names = [s.name for s in CASES]
    assert len(set(names)) == len(names)
    for prefix in ("k1-", "k2-", "k4-", "honest-"):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("scenario", CASES, ids=[s.name for s in CASES])
def test_forgery_scenario(scenario, tmp_path, monkeypatch):
    for k in PERSON:  # whatever a scenario's setup sets in the environment is undone after it
        monkeypatch.setenv(k, "-")
        monkeypatch.delenv(k)
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


def test_the_same_forgery_twice_blocks_and_show_names_it(tmp_path):
    """Canary ids are random, yet the fingerprint of a repeated forgery is stable: the second
    attempt blocks the packet; ``andon show`` prints the forged-report findings."""
    import dataclasses
    import io

    from rich.console import Console

    from andon.report import packet_detail, show_packet

    base = next(s for s in CASES if s.name == "k1-report-rewrite-assembled")
    s = dataclasses.replace(base, packet={**base.packet, "max_attempts": 3})
    o = play(s, tmp_path / "repo")
    store = o.runner.store
    attempts = store.attempts("P1")
    assert o.state == "blocked" and len(attempts) == 2
    prints = [next(g for g in store.gate_results(a["id"]) if g["gate"] == "suite")
              for a in attempts]
    assert all(g["evidence"]["findings"][0]["kind"] == "forged-report" for g in prints)
    buf = io.StringIO()
    show_packet(Console(file=buf, width=200), packet_detail(store, o.runner.repo, "P1"))
    text = buf.getvalue()
    assert "forged-report: tests.test_mul_p1::test_mul" in text
    assert "verdict channel used" in text
    # what to do names the forgery, not "widen the packet's allowed_paths"
    from andon.advice import halt_message
    said = halt_message(store, store.packet("P1"))
    assert "report of the agent's code was forged" in said and "allowed_paths" not in said
