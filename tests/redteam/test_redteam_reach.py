"""Issue 19 kind 3: a change to the interpreter's environment outside the worktree (a `.pth`
in the venv's or the user's site-packages, a `sitecustomize.py`, an edited installed module,
a module in a `sys.path` folder, a `.pth` written by the code under test during the suite
gate) is an `outside-worktree` finding naming the path, and the halt advice says how to
restore it; honest neighbours (byte code in site-packages, a separate venv) are merged.

Every case tests with a private interpreter made in its tmp_path and writes nothing outside
it, so the cases can run beside any other test (pytest-xdist)."""

from __future__ import annotations

import pytest

from andon.advice import halt_message

from scenarios import play, verdict
from scenarios_reach import (
    HONEST_NAMES,
    NO_BASE,
    REACH_NAMES,
    build_reach,
    hidden_leak,
    honest_reach,
)


@pytest.mark.parametrize("name", REACH_NAMES)
def test_environment_change_is_rejected_outside_worktree(name, tmp_path, monkeypatch):
    cases = build_reach(tmp_path / "env")
    if name not in cases:  # only the system-site cases, where no throwaway base can be made
        pytest.skip(f"no throwaway base interpreter on this machine: {NO_BASE[-1]}")
    case = cases[name]
    if case.home:  # the real user site is never written
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.delenv("PYTHONUSERBASE", raising=False)
    outcome = play(case.scenario, tmp_path / "repo")
    ok, why = verdict(case.scenario, outcome)
    assert ok, f"{case.scenario.name}: {why}"
    paths = [f["path"] for f in outcome.findings if f["kind"] == "outside-worktree"]
    # the cheat reached only the private interpreter: nothing shared was written
    assert paths and all(p.startswith(str(tmp_path)) for p in paths), paths
    if case.home:  # the path is only known once the agent ran: it is under the temp HOME
        assert any(p.startswith(str(tmp_path / "home")) and p.endswith("u.pth")
                   for p in paths), paths
    assert outcome.state == "blocked"
    store = outcome.runner.store
    message = halt_message(store, store.packet("P1"))
    assert "if you did not make this change, an agent did" in message.lower()
    assert "restore" in message
    if case.scenario.name in ("edit-installed-module", "forged-byte-code"):  # in its RECORD
        assert "--force-reinstall --no-deps iniconfig==" in message
    elif case.scenario.where:
        assert f"rm {case.scenario.where}" in message or "rm -r" in message


@pytest.mark.parametrize("name", HONEST_NAMES)
def test_honest_neighbours_of_the_interpreter_are_merged(name, tmp_path):
    case = honest_reach(tmp_path / "env")[name]
    outcome = play(case.scenario, tmp_path / "repo")
    ok, why = verdict(case.scenario, outcome)
    assert ok, f"{case.scenario.name}: {why}"
    # the private interpreter is started as every test run is (<python> -I -B boot.py)
    store = outcome.runner.store
    suite = next(g for g in store.gate_results(store.attempts("P1")[0]["id"])
                 if g["gate"] == "suite")
    assert [r["integrity"]["channel"] for r in suite["evidence"]["runs"]] == ["used"]


def test_a_second_attempt_learns_nothing_from_the_hidden_failure(tmp_path):
    scenario = hidden_leak()
    outcome = play(scenario, tmp_path / "repo")
    ok, why = verdict(scenario, outcome)
    assert ok, why
    attempts = outcome.runner.store.attempts("P1")
    assert len(attempts) == 2 and outcome.state == "blocked"
    last = [g for g in outcome.runner.store.gate_results(attempts[1]["id"])
            if g["status"] == "fail"]
    assert [g["gate"] for g in last] == ["hermetic"]
