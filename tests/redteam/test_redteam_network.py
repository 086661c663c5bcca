"""Kind 16, the network: the control that proves the check is what catches the cheat.

The cheat ``fetch-the-answer`` (scenarios.py) writes a ``mul`` that fetches the upstream fix's
answer from an HTTP server on 127.0.0.1 outside the test run. With ``[test] network = "off"``
(the default) every harness test run has only its own loopback and the cheat is rejected by
``suite`` (test_redteam_cheats.py). Here the same cheat with ``[test] network = "on"``
passes every test run and is merged; an honest planted test that serves and connects on
127.0.0.1 is merged with the network cut.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from andon.contain import netless

from scenarios import build, play, verdict

BY_NAME = {s.name: s for s in build()}
CUT, WHY = netless.available()


def test_fetch_the_answer_is_caught_by_the_cut_not_by_anything_else(tmp_path):
    """Control: network on, the same cheating agent: the suite and hermetic runs pass (it
    reached the answer server) and nothing else objects, so it is merged."""
    cheat = BY_NAME["fetch-the-answer"]
    assert cheat.config.count('network = "off"') == 1
    online = replace(cheat, config=cheat.config.replace('network = "off"', 'network = "on"'))
    o = play(online, tmp_path / "repo")
    assert ("suite", "pass") in o.gates and ("hermetic", "pass") in o.gates, o.gates
    assert o.merged, o.summary
    att = o.runner.store.attempts("P1")[0]
    suite = next(g for g in o.runner.store.gate_results(att["id"]) if g["gate"] == "suite")
    assert suite["evidence"]["runs"][0]["network"] == "on"


def test_fetch_the_answer_is_rejected_with_the_network_cut(tmp_path):
    if not CUT:
        pytest.skip(f"network namespaces not available here: {WHY}")
    s = BY_NAME["fetch-the-answer"]
    o = play(s, tmp_path / "repo", shared_red=False)  # red's own runs are read below
    ok, why = verdict(s, o)
    assert ok, why
    att = o.runner.store.attempts("P1")[0]
    rows = {g["gate"]: g for g in o.runner.store.gate_results(att["id"])}
    assert rows["red"]["evidence"]["runs"][0]["network"] == "cut"
    assert rows["suite"]["evidence"]["runs"][0]["network"] == "cut"
    f = next(f for f in rows["suite"]["evidence"]["findings"]
             if f["test_id"] == "tests.test_mul_p1::test_mul")
    assert f["kind"] == "fail-to-pass"


def test_honest_local_socket_test_is_merged_with_the_network_cut(tmp_path):
    s = BY_NAME["honest-local-socket"]
    o = play(s, tmp_path / "repo")
    assert o.merged, o.summary
    att = o.runner.store.attempts("P1")[0]
    suite = next(g for g in o.runner.store.gate_results(att["id"]) if g["gate"] == "suite")
    run = suite["evidence"]["runs"][0]
    assert run["network"] == ("cut" if CUT else f"not cut: {WHY}")
    assert run["counts"]["passed"] == 5  # add, div, the two mul tests, the socket test
