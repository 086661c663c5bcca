"""A PASS_TO_PASS test that fails on a candidate is re-run on the base (issue 9, case
flaky-pass-to-pass): flaky there, it is reported and not counted against the agent; steady
there, the failure stays the agent's — also when the agent made it fail only sometimes.
Real repositories, real pytest runs; the "flakiness" is a counter file outside the repository,
so which run fails is known exactly (no timing, no randomness)."""

from __future__ import annotations

from pathlib import Path

from andon.exits import EXIT_OK

from helpers import CALC, config_toml, honest_mul, make_project, mul_packet, runner_for, write

FAST = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False)


def counter_test(counter: Path, fail_when: str) -> str:
    return (f"from pathlib import Path\n\nCOUNTER = Path({str(counter)!r})\n\n\n"
            "def test_sometimes():\n    n = int(COUNTER.read_text()) + 1\n"
            f"    COUNTER.write_text(str(n))\n    assert not ({fail_when}), 'flaky'\n")


def gate_rows(runner, pid="P1", n=1):
    attempt = runner.store.attempts(pid)[n - 1]
    return {g["gate"]: g for g in runner.store.gate_results(attempt["id"])}


def test_a_test_flaky_on_the_base_does_not_block_an_honest_agent(tmp_path):
    """Counter: preflight run 1 passes, the suite gate's run 2 fails, base re-run 3 passes,
    re-run 4 fails → flaky on the base: reported in the suite gate (summary and evidence),
    not counted; the honest `mul` is merged."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        {"tests/test_clock.py": counter_test(counter, "n % 2 == 0")}, FAST)
    runner = runner_for(root, honest_mul)
    report = runner.run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message
    suite = gate_rows(runner)["suite"]
    assert suite["status"] == "pass"
    assert "flaky on the base" in suite["summary"]
    assert "tests.test_clock::test_sometimes" in suite["summary"]
    [rec] = suite["evidence"]["flaky_on_base"]
    assert (rec["test_id"], rec["file"], rec["failed_on_base_run"]) == (
        "tests.test_clock::test_sometimes", "tests/test_clock.py", 2)
    assert Path(rec["base_log"]).is_file()
    # preflight, the suite gate's run (also hermetic-1: it runs in a fresh clone when the
    # worktree holds exactly the candidate), 2 base re-runs
    assert counter.read_text() == "4"


def sometimes_broken_add(counter: Path):
    """The adversary: `add` is wrong on every odd call (counted in a file outside the tree),
    so the existing test_add fails in some runs and passes when re-run."""
    def agent(ctx) -> str:
        code = CALC.replace("    return a + b\n", (
            f"    from pathlib import Path\n    c = Path({str(counter)!r})\n"
            "    n = int(c.read_text()) + 1\n    c.write_text(str(n))\n"
            "    return a + b + (n % 2)\n"), 1)
        write(ctx, "src/calc/ops.py", code)
        honest_mul(ctx)
        return "done"
    return agent


def test_an_agent_that_breaks_a_test_only_sometimes_is_still_rejected(tmp_path):
    """The same test passes every base re-run: the failure is the change's (layer code), and
    the finding says how often the base passed."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        config=FAST)
    runner = runner_for(root, sometimes_broken_add(counter))
    report = runner.run()
    assert report.merged == []
    suite = gate_rows(runner)["suite"]
    assert (suite["status"], suite["failure_layer"]) == ("fail", "code")
    f = next(x for x in suite["evidence"]["findings"]
             if x["test_id"] == "tests.test_ops::test_add")
    assert f["kind"] == "pass-to-pass"
    assert "passed 10 of 10 re-runs on the base" in f["message"]
    assert suite["evidence"]["flaky_on_base"] == []


def test_no_reruns_when_switched_off_and_a_changed_test_file_is_never_excused(tmp_path):
    """base_reruns = 0: the flaky failure counts (the old behaviour, chosen). And an agent
    that edits the flaky test's own file gets no excuse even though the base is flaky."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    config = FAST.replace("[gates]\n", "[gates]\nbase_reruns = 0\n", 1)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        {"tests/test_clock.py": counter_test(counter, "n % 2 == 0")}, config)
    runner = runner_for(root, honest_mul)
    runner.run()
    suite = gate_rows(runner)["suite"]
    assert (suite["status"], suite["failure_layer"]) == ("fail", "code")
    assert counter.read_text() == "2"

    counter2 = tmp_path / "counter2"
    counter2.write_text("0")
    root2 = make_project(tmp_path / "repo2", {"P1": mul_packet(
        "P1", max_attempts=1, allowed_paths=["src/calc/**", "tests/test_clock.py"])},
        {"tests/test_clock.py": counter_test(counter2, "n == 3")}, FAST)

    def edits_clock(ctx) -> str:
        write(ctx, "tests/test_clock.py", "\n# touched\n", append=True)
        return honest_mul(ctx)
    runner2 = runner_for(root2, edits_clock)
    runner2.run()
    suite2 = gate_rows(runner2)["suite"]
    assert suite2["status"] == "fail" and suite2["evidence"]["flaky_on_base"] == []
    # preflight 1, the plain-first run 2 (the agent's changed test module runs there too,
    # not judged), the full suite 3 fails: no re-run on the base was made
    assert counter2.read_text() == "3"


# Order-dependence that lives in the base (platformdirs 4.3.6: test_platform_on_win32 reloads
# platformdirs.unix under a mocked sys.platform and leaves getuid raising; a test_api test of
# user_runtime_dir run after it fails). 30 polluters and 30 victims: in file order every victim
# runs first; a random order puts some victim after some polluter all but surely (the chance
# that all 30 victims come first is 1 in C(60, 30)).
VICTIMS = ("import os\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', range(30))\n"
           "def test_victim(i):\n    assert 'POLLUTED' not in os.environ, 'polluted'\n")
POLLUTERS = ("import os\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', range(30))\n"
             "def test_polluter(i):\n    os.environ['POLLUTED'] = '1'\n")
ORDERED = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=True)


def test_a_base_test_that_fails_in_a_random_order_does_not_block_an_honest_agent(tmp_path):
    """The random-order run fails victims that pass with their file alone on the base. The
    candidate's order is replayed on a fresh clone of the base (the tests the base has): the
    victims fail there too, so they are order-dependent on the base — reported, not counted,
    and the honest `mul` is merged."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        {"tests/test_a_victims.py": VICTIMS,
                         "tests/test_b_polluters.py": POLLUTERS}, ORDERED)
    runner = runner_for(root, honest_mul)
    report = runner.run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message
    herm = gate_rows(runner)["hermetic"]
    assert herm["status"] == "pass" and "flaky on the base" in herm["summary"]
    recs = herm["evidence"]["flaky_on_base"]
    assert recs and all(r["file"] == "tests/test_a_victims.py" for r in recs)
    assert all(r["failed_on_base_run"] == "same order" for r in recs)
    assert all(Path(r["base_log"]).name.startswith("base-order-") for r in recs)


def test_an_agent_whose_code_pollutes_a_random_order_is_still_rejected(tmp_path):
    """The adversary: `mul` sets the variable the victims check, so the victims fail in the
    random order after a planted test. Replayed on the base (which has no planted test and no
    such `mul`), they pass: the failure stays the agent's (layer code)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        {"tests/test_a_victims.py": VICTIMS}, ORDERED)

    def polluting_mul(ctx) -> str:
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    import os\n"
              "    os.environ['POLLUTED'] = '1'\n    return a * b\n", append=True)
        return "done"
    runner = runner_for(root, polluting_mul)
    report = runner.run()
    assert report.merged == []
    herm = gate_rows(runner)["hermetic"]
    assert (herm["status"], herm["failure_layer"]) == ("fail", "code")
    assert herm["evidence"]["flaky_on_base"] == []
    assert any(f["test_id"].startswith("tests.test_a_victims::test_victim")
               for f in herm["evidence"]["findings"])
