"""A preflight that fails for a reason of the environment says which, with the first error
line and the setting that fixes it (issue 9), instead of "N test(s) fail". Real projects."""

from __future__ import annotations

from andon.exits import EXIT_PREFLIGHT

from helpers import CALC_TESTS, make_project, mul_packet, runner_for


def preflight_of(tmp_path, files):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, files)
    report = runner_for(root, lambda ctx: "done").run()
    assert report.exit_status == EXIT_PREFLIGHT
    return report.preflight


def test_a_dependency_missing_for_the_test_interpreter_names_the_command(tmp_path):
    pf = preflight_of(tmp_path, {"tests/test_clock.py": "import freezegun_not_installed\n\n\n"
                                 "def test_x():\n    pass\n"})
    assert (pf.layer, pf.findings[0].kind) == ("environment", "missing-module")
    assert "No module named 'freezegun_not_installed'" in pf.summary
    assert "[test] command" in pf.summary and "virtualenv" in pf.summary


def test_a_fixture_of_a_plugin_not_loaded_names_the_plugins_setting(tmp_path):
    pf = preflight_of(tmp_path, {"tests/test_bench.py": "def test_speed(benchmark):\n"
                                 "    pass\n"})
    assert (pf.layer, pf.findings[0].kind) == ("environment", "missing-fixture")
    assert "fixture 'benchmark' not found" in pf.summary and "[test] plugins" in pf.summary


def test_a_real_failing_test_is_still_reported_as_failing(tmp_path):
    pf = preflight_of(tmp_path, {"tests/test_ops.py": CALC_TESTS + "\n\ndef test_bad():\n"
                                 "    assert 1 == 2\n"})
    assert pf.findings[0].kind == "baseline-failure"
    assert "test(s) fail on the integration head" in pf.summary


def test_a_base_run_the_verdict_channel_reads_as_forged_stops_preflight_naming_it(tmp_path):
    # the project's own, trusted code does something the channel reads as forging (here a
    # test module registering a plugin): every attempt would be judged forged for it, so the
    # line stops before any agent runs, naming each finding (was: a pass)
    registers = ("class P:\n    def pytest_runtest_logreport(self, report):\n        pass\n\n\n"
                 "def test_reg(request):\n    request.config.pluginmanager.register(P(), "
                 "'mine')\n")
    pf = preflight_of(tmp_path, {"tests/test_reg.py": registers})
    assert (pf.status, pf.layer) == ("fail", "environment")
    assert {f.kind for f in pf.findings} == {"channel-on-base"}
    assert any("plugin registered: mine" in f.message for f in pf.findings)
    assert "every attempt" in pf.summary and "plugin registered: mine" in pf.summary


def test_a_passing_preflight_says_how_many_tests_were_skipped_and_which(tmp_path):
    from helpers import runner_for as _runner
    skips = ("import pytest\n\n\n@pytest.mark.skip(reason='no .mo files')\n"
             "def test_i18n():\n    pass\n")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        {"tests/test_i18n.py": skips})
    baseline = _runner(root, lambda ctx: "done", shared_preflight=False).baseline
    pf = baseline.preflight(baseline.head())
    assert pf.status == "pass", pf.summary
    assert "1 skipped, held to nothing: tests.test_i18n::test_i18n" in pf.summary
    assert pf.details["skipped_ids"] == ["tests.test_i18n::test_i18n"]
