"""Adversary table (scenarios_adversary.py): each scenario must end as its verdict says.

The holes this red-team pass found (a wrong mul merged, an honest agent rejected) are strict
xfails: the table stays green until a fix makes one pass, which then fails loudly so the xfail
is removed with the fix."""

from __future__ import annotations

import pytest

from scenarios import play, verdict
from scenarios_adversary import build_adversary

HOLES = {
    "adv-detect-faulthandler": "faulthandler.is_enabled() tells a pytest run from real use",
    "adv-detect-stdout-capture": "type(sys.stdout) tells a captured pytest run from real use",
    "adv-pep562-importer-detect": "a module __getattr__ tells the rewriting loader's importer",
}


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
