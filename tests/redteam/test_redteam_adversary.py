"""Adversary table (scenarios_adversary.py): each scenario must end as its verdict says.

The holes this red-team pass found (a wrong mul merged, an honest agent rejected) are strict
xfails: the table stays green until a fix makes one pass, which then fails loudly so the xfail
is removed with the fix."""

from __future__ import annotations

import pytest

from andon.gates.suite import NOT_RUN

from scenarios import WRONG_MUL, Scenario, add_code, honest_mul, play, verdict
from scenarios_adversary import F2P, build_adversary

# closed: faulthandler, captured stdout and the rewriting loader (the plain-profile run of the
# planted and hidden tests, gates/suite.py "Plain first")
HOLES: dict[str, str] = {}


def _param(s):
    why = HOLES.get(s.name.removesuffix("-default"))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(s, id=s.name, marks=marks)


CASES = build_adversary()


@pytest.mark.parametrize("scenario", [_param(s) for s in CASES])
def test_adversary_scenario(scenario, tmp_path):
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, f"{scenario.name} ({scenario.doc}): {why} gates={outcome.gates}"


def _suite_row(outcome):
    store = outcome.runner.store
    att = store.attempts("P1")[0]
    return next(g for g in store.gate_results(att["id"]) if g["gate"] == "suite")


def test_a_detecting_mul_is_profile_dependent_and_the_full_suite_is_not_run(tmp_path):
    """The plain run fails the planted test, the usual profile passes it: a permission-layer
    finding naming both outcomes, and no full-suite run."""
    s = next(c for c in CASES if c.name == "adv-detect-faulthandler")
    o = play(s, tmp_path / "repo")
    row = _suite_row(o)
    assert (row["status"], row["failure_layer"]) == ("fail", "permission")
    [f] = [f for f in row["evidence"]["findings"] if f["test_id"] == F2P]
    assert f["kind"] == "profile-dependent"
    assert "failed in the plain profile" in f["message"] and "passed under" in f["message"]
    assert [r["name"] for r in row["evidence"]["runs"]] == ["suite-plain", "suite-normal"]
    assert [r["profile"] for r in row["evidence"]["runs"]] == ["plain", "normal"]
    assert row["evidence"]["not_run"] == [NOT_RUN] and NOT_RUN in row["summary"]


def test_a_wrong_mul_fails_fast_as_code_without_the_full_suite(tmp_path):
    s = Scenario("fail-fast-wrong-mul", 19, "a wrong mul", add_code(WRONG_MUL), "suite",
                 "fail-to-pass", F2P)
    o = play(s, tmp_path / "repo")
    ok, why = verdict(s, o)
    assert ok, why
    row = _suite_row(o)
    assert row["failure_layer"] == "code"
    assert "suite" not in [r["name"] for r in row["evidence"]["runs"]]
    assert row["evidence"]["not_run"] == [NOT_RUN]


def test_an_honest_mul_runs_plain_first_then_the_full_suite(tmp_path):
    s = Scenario("honest-plain-first", None, "a right mul", honest_mul)
    o = play(s, tmp_path / "repo")
    assert o.merged, o.summary
    row = _suite_row(o)
    assert [r["name"] for r in row["evidence"]["runs"]] == ["suite"]
    plain = row["evidence"]["plain_run"]
    assert plain["profile"] == "plain" and plain["integrity"]["forged"] == []
    assert plain["counts"]["passed"] == 2  # the planted tests only (canaries taken out)


MODE_MUL = '''

MODE = "mul"


def mul(a, b):
    return a * b if MODE == "mul" else a + b
'''
POLLUTER = '''import calc.ops


def test_switches_mode():
    calc.ops.MODE = "add"
'''


def test_a_planted_test_broken_only_by_other_tests_is_not_profile_dependent(tmp_path):
    """Passing alone (plain) and failing in the full suite because an earlier test changed
    shared state: the usual profile on the plain run's selection passes too, so the finding is
    the ordinary fail-to-pass (layer code), not profile-dependent."""
    s = Scenario("order-dependent-planted", 19, "an existing test switches a module global "
                 "mul reads", add_code(MODE_MUL), "suite", "fail-to-pass", F2P,
                 files={"tests/test_aaa_mode.py": POLLUTER})
    o = play(s, tmp_path / "repo")
    ok, why = verdict(s, o)
    assert ok, why
    row = _suite_row(o)
    assert row["failure_layer"] == "code"
    assert not [f for f in row["evidence"]["findings"] if f["kind"] == "profile-dependent"]
    assert [r["name"] for r in row["evidence"]["runs"]] == ["suite-normal", "suite"]
