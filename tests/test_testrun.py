"""testrun: real pytest subprocesses on small projects written into tmp_path."""

from __future__ import annotations

import json
import os
import select
import sys
import textwrap
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from andon.runners.pytest import PASSED_ENV, JUnitError, harness_env, parse_junit, run_suite

from helpers import write_tree

PYTEST = [sys.executable, "-m", "pytest"]


def run(tmp_path: Path, files: dict[str, str], name: str = "suite", **kw):
    project = write_tree(tmp_path / "proj", files)
    return run_suite(PYTEST, project, tmp_path / "evidence", name, **kw)


def junit_order(path: Path) -> list[str]:
    return [tc.get("name") for tc in ET.parse(path).iter("testcase")]


def assert_process_ends(pid: int) -> None:
    """The process ends (it blocks forever on its own, so only a kill can end it)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:  # a pidfd becomes readable when the process exits: an event, not a sleep
        ready, _, _ = select.select([fd], [], [], 10)
        assert ready, f"process {pid} is still alive 10 s after run_suite returned"
    finally:
        os.close(fd)


OUTCOMES_FILE = """
    import pytest

    def test_ok():
        pass

    def test_fail():
        assert 1 == 2

    @pytest.fixture
    def broken():
        raise RuntimeError("boom")

    def test_err(broken):
        pass

    def test_skip():
        pytest.skip("not today")

    @pytest.mark.xfail(reason="known bug")
    def test_xfail():
        assert 0

    class TestA:
        @pytest.mark.parametrize("a,b", [(1, 2)])
        def test_b(self, a, b):
            pass
"""


def test_outcomes_are_read_per_id_with_file(tmp_path):
    r = run(tmp_path, {"tests/test_a.py": OUTCOMES_FILE})
    assert r.report_problem is None
    assert {i: t.outcome for i, t in r.results.items()} == {
        "tests.test_a::test_ok": "passed",
        "tests.test_a::test_fail": "failed",
        "tests.test_a::test_err": "error",
        "tests.test_a::test_skip": "skipped",
        "tests.test_a::test_xfail": "skipped",
        "tests.test_a.TestA::test_b[1-2]": "passed",
    }
    assert {t.file for t in r.results.values()} == {"tests/test_a.py"}
    assert r.results["tests.test_a::test_ok"].message == ""
    assert "assert 1 == 2" in r.results["tests.test_a::test_fail"].message
    assert "boom" in r.results["tests.test_a::test_err"].message
    assert r.results["tests.test_a::test_skip"].message == "not today"
    assert r.results["tests.test_a::test_xfail"].message == "known bug"
    assert r.exit_status == 1 and not r.timed_out and r.seed is None


def test_suite_run_helpers_and_evidence(tmp_path):
    r = run(tmp_path, {"tests/test_a.py": OUTCOMES_FILE, "tests/test_b.py": "def test_b(): pass\n"})
    assert r.ids_with("failed", "error") == {"tests.test_a::test_fail", "tests.test_a::test_err"}
    assert set(r.by_file(["tests/test_b.py"])) == {"tests.test_b::test_b"}
    assert set(r.by_file(["./tests/test_b.py"])) == {"tests.test_b::test_b"}
    evidence = json.loads(json.dumps(r.to_evidence()))
    assert evidence["counts"] == {"passed": 3, "failed": 1, "error": 1, "skipped": 2}
    assert "results" not in evidence
    assert evidence["argv"] == r.argv and evidence["junit_path"] == str(r.junit_path)
    assert r.log_path.read_text().count("PASSED") == 3
    assert "short test summary info" in r.output_tail
    assert len(r.output_tail.splitlines()) <= 60


def test_evidence_says_when_the_run_started_so_overlapping_runs_can_be_told_apart(tmp_path):
    """started_at: UTC wall clock (ISO 8601) when the suite process was started; with
    duration_s it places the run in time, so concurrent runs (``[test] jobs``) are not summed
    as if they had run one after another."""
    before = datetime.now(UTC)
    r = run(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"})
    after = datetime.now(UTC)
    started = datetime.fromisoformat(r.to_evidence()["started_at"])
    assert started.utcoffset() == timedelta(0)
    # started_at is cut to the millisecond: compare with ``before`` cut the same way
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= started
    assert started + timedelta(seconds=r.duration_s) <= after


def test_argv_carries_the_harness_flags_and_junit_is_outside_cwd(tmp_path):
    r = run(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"}, name="red-1")
    # started through the verdict channel's boot.py, with -I -B, in this interpreter
    assert r.argv[:3] == [sys.executable, "-I", "-B"] and r.argv[3].endswith("contain/boot.py")
    assert r.integrity is not None and r.integrity.channel == "used"
    # pytest writes its report into a neutral scratch dir; the harness moves it to the evidence
    junit_arg = next(a for a in r.argv if a.startswith("--junitxml="))
    assert "andon" not in junit_arg and "evidence" not in junit_arg
    for flag in (["-o", "junit_family=xunit1"], ["-o", "addopts="], ["-p", "no:cacheprovider"]):
        assert any(r.argv[i : i + 2] == flag for i in range(len(r.argv))), flag
    assert r.junit_path == tmp_path / "evidence" / "red-1.junit.xml" and r.junit_path.exists()
    assert r.log_path == tmp_path / "evidence" / "red-1.log"
    with pytest.raises(ValueError, match="evidence_dir must be outside cwd"):
        run_suite(PYTEST, tmp_path / "proj", tmp_path / "proj" / "ev", "x")


def test_same_id_twice_keeps_the_worse_outcome(tmp_path):
    files = {
        "test_t.py": """
            import pytest

            @pytest.fixture
            def td():
                yield
                raise RuntimeError("teardown boom")

            def test_pass_then_teardown_error(td):
                pass

            def test_fail_then_teardown_error(td):
                assert 0
        """
    }
    r = run(tmp_path, files)
    # pytest writes test_fail_then_teardown_error twice: a failure, then an error
    assert junit_order(r.junit_path).count("test_fail_then_teardown_error") == 2
    assert r.results["test_t::test_fail_then_teardown_error"].outcome == "failed"
    assert r.results["test_t::test_pass_then_teardown_error"].outcome == "error"


def test_collection_error_is_an_error_result_pointing_at_the_file(tmp_path):
    r = run(
        tmp_path,
        {"tests/test_ok.py": "def test_ok(): pass\n",
         "tests/test_loader.py": "import missing_mod\n"},
    )
    broken = r.results["::tests.test_loader"]
    assert (broken.outcome, broken.file) == ("error", "tests/test_loader.py")
    assert "ModuleNotFoundError" in broken.message and "missing_mod" in broken.message
    assert r.by_file(["tests/test_loader.py"]) == {broken.id: broken}


def test_hand_written_report_without_file_attributes(tmp_path):
    report = tmp_path / "x.xml"
    report.write_text(
        '<testsuite><testcase classname="" name="tests.sub.test_c">'
        '<error message="collection failure">E   SyntaxError: bad</error></testcase>'
        '<testcase classname="tests.test_d" name="test_d" />'
        '<testcase classname="t" name="two"><skipped message="s"/><failure message="f"/>'
        "<system-out>noise</system-out></testcase></testsuite>"
    )
    results = parse_junit(report)
    assert results["::tests.sub.test_c"].file == "tests/sub/test_c.py"
    assert results["::tests.sub.test_c"].message == "collection failure\nE   SyntaxError: bad"
    plain = results["tests.test_d::test_d"]
    assert (plain.file, plain.outcome, plain.message) == (None, "passed", "")
    assert (results["t::two"].outcome, results["t::two"].message) == ("failed", "f")


def test_select_runs_only_the_named_file_or_node(tmp_path):
    files = {
        "tests/test_a.py": "def test_one(): pass\ndef test_two(): pass\n",
        "tests/test_b.py": "def test_b(): pass\n",
    }
    r = run(tmp_path, files, select=["tests/test_a.py"])
    assert set(r.results) == {"tests.test_a::test_one", "tests.test_a::test_two"}
    r = run(tmp_path, files, name="node", select=["tests/test_a.py::test_two"])
    assert set(r.results) == {"tests.test_a::test_two"}


@pytest.mark.parametrize(
    "config",
    [
        {"pytest.ini": "[pytest]\naddopts = -k nothing\n"},
        {"pyproject.toml":
         '[tool.pytest.ini_options]\naddopts = "--deselect tests/test_a.py::test_one"\n'},
        {"tox.ini": "[pytest]\naddopts = --ignore=tests/test_a.py -p no:python\n"},
    ],
)
def test_repository_addopts_do_not_narrow_the_run(tmp_path, config):
    files = {"tests/test_a.py": "def test_one(): pass\ndef test_two(): pass\n", **config}
    r = run(tmp_path, files)
    assert r.ids_with("passed") == {"tests.test_a::test_one", "tests.test_a::test_two"}


def test_outer_environment_does_not_reach_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k nothing")
    monkeypatch.setenv("PYTEST_PLUGINS", "no_such_plugin_anywhere")
    monkeypatch.setenv("ANDON_OUTER_MARKER", "leaked")
    files = {
        "tests/test_a.py": """
            import os
            def test_env():
                assert "ANDON_OUTER_MARKER" not in os.environ
                assert "PYTEST_ADDOPTS" not in os.environ
        """
    }
    r = run(tmp_path, files)
    assert r.report_problem is None
    assert r.ids_with("passed") == {"tests.test_a::test_env"}


def test_harness_env_is_an_allowlist(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k nothing")
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere")
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    env = harness_env(tmp_path / "home", [Path("rel/src"), tmp_path / "b"], {"X": "1"})
    assert set(env) - set(PASSED_ENV) == {
        "PATH", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH",
        "X", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    }  # fmt: skip
    # the person's user and locale, as they are; nothing the person does not have (issue 19)
    assert env["USER"] == "alice" and env["LANG"] == "de_DE.UTF-8" and "LC_ALL" not in env
    assert "PYTHONHASHSEED" not in harness_env(tmp_path / "h4", flags_in_env=True)
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert env["PATH"] == f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    assert env["HOME"] == str(tmp_path / "home")
    assert Path(env["TMPDIR"]) == tmp_path / "home" / "tmp" and Path(env["TMPDIR"]).is_dir()
    assert env["PYTHONPATH"] == f"{Path('rel/src').absolute()}:{tmp_path / 'b'}"
    assert "PYTHONPATH" not in harness_env(tmp_path / "h2")
    with pytest.raises(ValueError, match="PYTEST_PLUGINS"):
        harness_env(tmp_path / "h3", extra={"PYTEST_PLUGINS": "evil"})


def test_harness_env_has_the_persons_session_shape_but_no_handle_on_it(tmp_path, monkeypatch):
    """What only a shell-started run has (PWD, SHLVL, the desktop session's variables) is there
    as the person has it; the person's state folders (XDG_*_HOME) move under the fresh HOME;
    what hands the test a capability of the person's session (ssh agent, session bus, tmux
    server) is not passed (issue 19, kind 4: a harness run looks like an ordinary run)."""
    session = {"SHLVL": "2", "OLDPWD": "/home/p/src", "DISPLAY": ":0",
               "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_SESSION_TYPE": "x11",
               "XDG_CONFIG_HOME": f"{os.environ['HOME']}/.cfg", "XDG_CACHE_HOME": "/var/c",
               "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/b",
               "TMUX": "/tmp/tmux-1000/default,1,0"}
    for k, v in session.items():
        monkeypatch.setenv(k, v)
    home = tmp_path / "home"
    env = harness_env(home, cwd=tmp_path / "proj")
    assert env["PWD"] == str(tmp_path / "proj")
    for k in ("SHLVL", "OLDPWD", "DISPLAY", "XDG_RUNTIME_DIR", "XDG_SESSION_TYPE"):
        assert env[k] == session[k], k
    assert env["XDG_CONFIG_HOME"] == str(home / ".cfg")
    assert env["XDG_CACHE_HOME"] == str(home / ".cache")
    for k in ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "TMUX"):
        assert k not in env, k
    assert "PWD" not in harness_env(tmp_path / "h2")


def test_os_exit_zero_at_import_means_no_report_and_no_stale_results(tmp_path):
    stale = tmp_path / "evidence" / "suite.junit.xml"
    stale.parent.mkdir()
    stale.write_text('<testsuite><testcase classname="tests.test_a" name="test_a"/></testsuite>')
    files = {
        "src/pkg/__init__.py": "import os\nos._exit(0)\n",
        "tests/test_a.py": "import pkg\ndef test_a(): pass\n",
    }
    r = run(tmp_path, files, pythonpath=[tmp_path / "proj" / "src"])
    assert r.exit_status == 0 and not r.timed_out
    assert r.report_problem == "no JUnit report written (the run ended early: exit status 0)"
    assert r.results == {}


def test_truncated_report_is_a_report_problem(tmp_path):
    # the code under test overwrites the report with half of one and exits before pytest can
    files = {
        "tests/test_a.py": """
            import os, sys
            path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
            open(path, "w").write('<testsuites><testsuite><testcase classname="t" name="x">')
            os._exit(0)
        """
    }
    r = run(tmp_path, files)
    assert r.results == {}
    assert r.report_problem.startswith("JUnit report truncated or malformed: ")


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    files = {
        "tests/test_block.py": """
            import os, subprocess, sys, threading
            def test_block():
                child = subprocess.Popen(
                    [sys.executable, "-c", "import threading; threading.Event().wait()"])
                with open(os.environ["PIDFILE"], "w") as f:
                    f.write(str(child.pid))
                threading.Event().wait()
        """
    }
    # 5 s: the test must reach its pidfile before the timeout even on a loaded machine
    r = run(tmp_path, files, timeout_s=5, extra_env={"PIDFILE": str(pidfile)})
    assert r.timed_out and r.exit_status is None
    assert r.report_problem == "timed out after 5 s"
    assert r.results == {}
    assert 5 <= r.duration_s < 60
    assert r.to_evidence()["timed_out"] is True
    assert_process_ends(int(pidfile.read_text()))


def test_a_child_left_running_by_a_passing_suite_is_killed(tmp_path):
    pidfile = tmp_path / "child.pid"
    files = {
        "tests/test_leave.py": """
            import os, subprocess, sys
            def test_leave():
                child = subprocess.Popen(
                    [sys.executable, "-c", "import threading; threading.Event().wait()"])
                with open(os.environ["PIDFILE"], "w") as f:
                    f.write(str(child.pid))
        """
    }
    r = run(tmp_path, files, extra_env={"PIDFILE": str(pidfile)})
    assert r.exit_status == 0 and r.ids_with("passed") == {"tests.test_leave::test_leave"}
    assert_process_ends(int(pidfile.read_text()))


def test_shuffle_is_decided_by_the_seed(tmp_path):
    names = [f"test_{i:02d}" for i in range(40)]
    files = {"tests/test_many.py": "".join(f"def {n}(): pass\n" for n in names)}
    plain = run(tmp_path, files, name="plain")
    a1 = run(tmp_path, files, name="a1", random_seed=1)
    a2 = run(tmp_path, files, name="a2", random_seed=1)
    b = run(tmp_path, files, name="b", random_seed=2)
    assert junit_order(plain.junit_path) == names
    order_a1, order_a2, order_b = (junit_order(r.junit_path) for r in (a1, a2, b))
    assert sorted(order_a1) == names and order_a1 != names
    assert order_a1 == order_a2
    assert order_b != order_a1 and sorted(order_b) == names
    assert (a1.seed, b.seed, plain.seed) == (1, 2, None)
    assert a1.to_evidence()["seed"] == 1
    assert "andon-shuffle-seed: 1" in a1.log_path.read_text()
    assert "andon-shuffle-seed" not in plain.log_path.read_text()


def test_pythonpath_wins_over_the_outer_sys_path(tmp_path, monkeypatch):
    for who in ("outer", "wt/src", "other"):
        write_tree(tmp_path / who, {"pkg/__init__.py": f"WHO = {who!r}\n"})
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "outer"))
    monkeypatch.syspath_prepend(tmp_path / "outer")  # the outer process would import "outer"
    files = {"tests/test_who.py":
             "import pkg\ndef test_who():\n    assert pkg.WHO == 'wt/src', pkg.__file__\n"}
    r = run(tmp_path, files, pythonpath=[tmp_path / "wt/src", tmp_path / "other"])
    assert r.ids_with("passed") == {"tests.test_who::test_who"}, r.output_tail
    r = run(tmp_path, files, name="reversed", pythonpath=[tmp_path / "other", tmp_path / "wt/src"])
    assert r.ids_with("failed") == {"tests.test_who::test_who"}


def test_parse_junit_rejects_missing_empty_truncated_and_foreign_files(tmp_path):
    with pytest.raises(JUnitError, match="no JUnit report"):
        parse_junit(tmp_path / "absent.xml")
    empty = tmp_path / "empty.xml"
    empty.write_text("")
    with pytest.raises(JUnitError, match="empty"):
        parse_junit(empty)
    truncated = tmp_path / "truncated.xml"
    truncated.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">'
                         '<testcase classname="a" na')
    with pytest.raises(JUnitError, match="truncated or malformed"):
        parse_junit(truncated)
    foreign = tmp_path / "foreign.xml"
    foreign.write_text("<html><testcase classname='a' name='b'/></html>")
    with pytest.raises(JUnitError, match="got html"):
        parse_junit(foreign)
    assert issubclass(JUnitError, ValueError)


def test_nothing_is_written_into_cwd(tmp_path):
    files = {
        "conftest.py": "import pytest\n",
        "src/pkg/__init__.py": "def f():\n    return 1\n",
        "tests/test_a.py":
            "import pkg\ndef test_f():\n    assert pkg.f() == 1\ndef test_g():\n    assert 0\n",
    }
    project = write_tree(tmp_path / "proj", files)
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    r = run_suite(PYTEST, project, tmp_path / "evidence", "suite", pythonpath=[project / "src"])
    assert r.ids_with("failed") == {"tests.test_a::test_g"}  # a failure makes pytest's cache write
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


def test_a_helper_started_by_the_code_under_test_in_its_own_session_is_ended(tmp_path):
    """Code under test starts a helper in a session of its own (it could swap files or serve
    answers to the next test run): when the run returns, the helper is gone too."""
    pid_file = tmp_path / "helper.pid"
    r = run(tmp_path, {"test_spawn.py": f'''
        import subprocess, sys
        def test_spawn():
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 start_new_session=True)
            open({str(pid_file)!r}, "w").write(str(p.pid))
        '''})
    assert r.results["test_spawn::test_spawn"].outcome == "passed"
    from helpers import process_alive
    assert not process_alive(int(pid_file.read_text()))


def test_a_multi_line_assertion_is_one_line_in_findings_and_summaries(tmp_path):
    """pytest's assertion message spans lines ("assert 4 == 5" then "+  where 4 = f(2)"):
    a finding or a gate summary built from it must stay on one line (the board prints one
    line per packet)."""
    r = run(tmp_path, {"tests/test_m.py": "def f(x):\n    return 2 * x\n\n\n"
                       "def test_m():\n    assert f(2) == 5\n"})
    (res,) = r.results.values()
    assert "\n" in res.message                       # the raw message keeps pytest's lines
    assert "\n" not in res.brief and "assert 4 == 5 | " in res.brief and "f(2)" in res.brief


def test_what_the_code_under_test_nests_too_deep_for_python_in_home_and_tmp_goes(tmp_path):
    """The code under test writes where it likes in its HOME and TMPDIR (a scratch folder
    per run): a folder nested 3,000 deep there (shutil.rmtree gives up: RecursionError) must
    not break the run, and nothing of the scratch folder is left (andon.reaper)."""
    from andon import reaper

    from helpers import NEST_DEEP_PY
    deep = "import os\n\n\n" + NEST_DEEP_PY + textwrap.dedent("""\


        def test_deep():
            home, tmp = os.environ["HOME"], os.environ["TMPDIR"]
            with open(os.path.join(os.path.dirname(__file__), "where.txt"), "w") as f:
                f.write(home + "\\n" + tmp + "\\n")
            nest_deep(os.path.join(home, "cache"))
            nest_deep(os.path.join(tmp, "work"))
        """)
    try:
        r = run(tmp_path, {"tests/test_deep.py": deep})
    finally:  # nothing too deep for pytest's own clean-up of old tmp_path folders is left
        reaper.drain()
    assert {i: t.outcome for i, t in r.results.items()} == {
        "tests.test_deep::test_deep": "passed"}, r.output_tail
    home, tmp = (tmp_path / "proj/tests/where.txt").read_text().split()
    assert reaper.drain() == []
    assert not os.path.exists(home) and not os.path.exists(tmp)


DOCTESTS = '''
    def double(x):
        """Double a number. A docstring of prose long enough that the failing example and
        what it printed come after the first few hundred characters of the report, which is
        where pytest's message (and andon's 500-character cut) would lose them. More prose,
        and more prose, and more prose, and more prose, and more prose, and more prose here.

        >>> double(2)
        4
        >>> double(3)
        6
        """
        return x * 2 + (x == 3)


    def inverse(x):
        """Prose again, long enough to push the example out of the first few hundred
        characters of the report: more prose, and more prose, and more prose, and more
        prose, and more prose, and more prose, and more prose, and more prose, and more.

        >>> inverse(1)
        1
        >>> inverse(0)
        0
        """
        return 1 // x
'''


def test_a_failed_doctest_says_which_example_and_what_it_got(tmp_path):
    """A doctest's report is its numbered docstring, then Expected/Got (or the exception): the
    message and its one-line brief, which the retry prompt shows, lead with the failing
    example and what it printed, not with prose the agent wrote itself."""
    project = write_tree(tmp_path / "proj", {"calc.py": DOCTESTS})
    r = run_suite([*PYTEST, "--doctest-modules"], project, tmp_path / "evidence", "suite")
    got = r.results["calc::calc.double"]
    assert got.outcome == "failed"
    assert got.brief.startswith(">>> double(3) | Expected: | 6 | Got: | 7"), got.brief
    exc = r.results["calc::calc.inverse"]
    assert exc.brief.startswith(">>> inverse(0) | UNEXPECTED EXCEPTION: ZeroDivisionError("), \
        exc.brief
    assert "calc.py:" in got.message and "prose" not in got.brief
