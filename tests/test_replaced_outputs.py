"""The code under test puts something else where a test run's outputs are read from.

A test process knows where its JUnit report goes (its ``--junitxml=`` argument), where its
output log is (its stdout's name, beside the report) and can list the harness's temporary
folder (its TMPDIR's parents). In the place of any of these it can leave a link to
``/dev/zero`` (copied without end: the disk fills), a FIFO (a reader waits for ever) or a
link to a file of the user's (whose bytes would become evidence). andon must read none of
these, say what it found, and finish.

Each run has a deadline (a thread): a test that fails would otherwise hang the suite, or fill
the disk.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from andon.exits import EXIT_OK
from andon.runners.pytest import run_suite

from helpers import (
    accept_review,
    andon,
    config_toml,
    git,
    honest_mul,
    make_project,
    mul_packet,
    runner_for,
    unblock,
    within_deadline,
    write,
    write_tree,
)

PYTEST = [sys.executable, "-m", "pytest"]
DEADLINE_S = 120.0
FIFOS: list[Path] = []


@pytest.fixture(autouse=True)
def _unblock():
    yield
    unblock(FIFOS)


def within(fn):
    return within_deadline(fn, DEADLINE_S)


def run_p1(root: Path, agent):
    """A run of ``agent`` within the deadline: its report, and the gate results of P1's
    first attempt (read in the run's thread: SQLite's objects stay in the thread that made
    them)."""
    def go():
        runner = runner_for(root, agent)
        report = runner.run()
        rows = runner.store.gate_results(runner.store.attempts("P1")[0]["id"])
        runner.store.close()
        return report, rows
    return within(go)


# The test module: finds its report's path, then puts ``{target}`` in the place of the file
# named ``{which}`` ("report.xml" or the log beside it).
REPLACING = """
    import os
    import sys

    def test_replaces_its_output():
        print("OUTPUT-OF-THE-RUN")
        report = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
        path = os.path.join(os.path.dirname(report), {which!r})
        if os.path.lexists(path):
            os.unlink(path)
        target = {target!r}
        if target == "FIFO":
            os.mkfifo(path)
        elif target == "FOLDER":
            os.mkdir(path)
        else:
            os.symlink(target, path)
"""


def _run(tmp_path: Path, which: str, target: str):
    source = textwrap.dedent(REPLACING.format(which=which, target=target))
    project = write_tree(tmp_path / "proj", {"test_replace.py": source})
    return within(lambda: run_suite(PYTEST, project, tmp_path / "evidence", "suite",
                                             timeout_s=60))


@pytest.mark.parametrize("target,what", [("/dev/zero", "a link"), ("SECRET", "a link"),
                                         ("FOLDER", "a folder")])
def test_what_stands_in_the_reports_place_is_named_and_not_read(tmp_path, target, what):
    """pytest writes its report through the link (or fails to, on a folder); andon reads
    nothing through it: the run has no results and says what was in the report's place."""
    secret = tmp_path / "secret.xml"
    secret.write_text('<testsuite><testcase classname="x" name="forged"/></testsuite>')
    run = _run(tmp_path, "report.xml", str(secret) if target == "SECRET" else target)

    assert run.results == {}
    assert run.report_problem is not None and f"held {what}" in run.report_problem, run
    assert "forged" not in run.junit_path.read_text() if run.junit_path.exists() else True
    assert run.junit_path.stat().st_size < 1_000_000 if run.junit_path.exists() else True


def test_a_fifo_in_the_reports_place_is_a_run_that_times_out_not_a_hang(tmp_path):
    """pytest itself waits opening the FIFO to write its report: the run's timeout ends it,
    and andon does not wait on the FIFO after it."""
    source = textwrap.dedent(REPLACING.format(which="report.xml", target="FIFO"))
    project = write_tree(tmp_path / "proj", {"test_replace.py": source})
    run = within(lambda: run_suite(PYTEST, project, tmp_path / "evidence", "suite",
                                            timeout_s=5))
    assert run.timed_out and run.results == {}


@pytest.mark.parametrize("target", ["/dev/zero", "FIFO"])
def test_the_log_is_read_from_what_the_run_wrote_whatever_stands_in_its_place(tmp_path,
                                                                              target):
    """The log is read back through the descriptor the run wrote to, not by its name: the
    evidence holds the run's own output, and the report is read as usual."""
    run = _run(tmp_path, "output.log", target)

    assert run.report_problem is None, run.report_problem
    assert [r.outcome for r in run.results.values()] == ["passed"]
    assert "OUTPUT-OF-THE-RUN" in run.log_path.read_text()
    assert run.log_path.stat().st_size < 1_000_000


def test_fifos_left_in_the_harness_temporary_folders_do_not_hang_the_lanes(tmp_path):
    """The hermetic runs go in two lanes (``jobs = 2``), each a forked process that hands its
    results back to the gate. The agent's code, imported by every run, makes FIFOs named
    like result files in every empty folder beside its own run's: a result passed through
    a file there would wait for ever. The run ends and merges."""
    config = config_toml(red_runs=1, add={"test": "jobs = 2\n"})
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", textwrap.dedent("""

            import os as _os
            from pathlib import Path as _Path

            def _plant():
                top = _Path(_os.environ.get("TMPDIR", "/nonexistent")).parents[2]
                for d in top.iterdir():
                    if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
                        for n in range(4):
                            try:
                                _os.mkfifo(d / f"{n}.out")
                            except OSError:
                                pass

            _plant()
            """), append=True)
        return "done"

    report, rows = run_p1(root, agent)
    gates = [(g["gate"], g["status"]) for g in rows]

    assert report.exit_status == EXIT_OK and report.merged == ["P1"], report.message
    assert ("hermetic", "pass") in gates, gates


# tests/__init__.py, which pytest imports before the test modules beside it: once the run
# is over (atexit: its report is written), each test file's place gets a stand-in
REPLACE_AT_EXIT = """\
import atexit
import os
import pathlib


def _replace():
    for p in pathlib.Path(__file__).parent.glob("test_*.py"):
        p.unlink()
        if {target!r} == "FIFO":
            os.mkfifo(p)
        else:
            os.symlink({target!r}, p)


atexit.register(_replace)
"""


@pytest.mark.parametrize("target", ["FIFO", "/dev/zero"])
def test_a_planted_file_replaced_while_it_ran_is_forgery_not_a_hang(tmp_path, target):
    """The agent's tests/__init__.py puts a FIFO or a link to /dev/zero in the planted test
    file's place as the test process ends. andon compares the planted files' bytes after
    every run of agent code: what stands there is not read; it is a planted file changed
    during the run, and the attempt fails."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet(
        "P1", max_attempts=1, allowed_paths=["src/calc/**", "tests/__init__.py"])})

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "tests/__init__.py", REPLACE_AT_EXIT.format(target=target))
        return "done"

    report, rows = run_p1(root, agent)
    failing = [g for g in rows if g["status"] != "pass"]

    assert report.merged == []
    assert len(failing) == 1, failing
    assert "tests/test_mul_p1.py changed on disk during the run" in json.dumps(
        failing[0]["evidence"]), failing[0]


# -- what andon writes where the agent or the code under test can write too -------------------

def _targets(tmp_path: Path) -> tuple[Path, Path]:
    """A file of the user's (its text: "the user's own file") and a FIFO, for links to."""
    user_file = tmp_path / "users-notes.txt"
    user_file.write_text("the user's own file\n")
    fifo = tmp_path / "elsewhere.fifo"
    os.mkfifo(fifo)
    FIFOS.append(fifo)
    return user_file, fifo


EVIDENCE_NAMES = ["suite-plain.log", "suite-normal.log", "suite.log", "suite.junit.xml",
                  "hermetic-1.log", "review.prompt.md", "review.transcript.log"]


@pytest.mark.parametrize("target", ["FIFO", "USERFILE"])
def test_links_left_where_andon_writes_its_evidence_are_not_written_through(tmp_path, target):
    """The agent writes its attempt's evidence folder (its stage's folder there with the
    sandbox, all of it without): it leaves links named like the files andon writes later —
    the gates' run logs and reports, the review's prompt and transcript — to a FIFO (a
    plain open would wait on it) or to a file of the user's (a plain open would write over
    it). andon replaces each link with its own file: the run ends, the user's file is as it
    was, and the honest change merges."""
    user_file, fifo = _targets(tmp_path)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})

    def agent(ctx):
        honest_mul(ctx)
        for name in EVIDENCE_NAMES:
            (ctx.evidence_dir / name).symlink_to(fifo if target == "FIFO" else user_file)
        return "done"

    report, _ = run_p1(root, agent)

    assert report.exit_status == EXIT_OK and report.merged == ["P1"], report.message
    assert user_file.read_text() == "the user's own file\n"
    kept = root / ".andon" / "evidence" / "P1" / "1" / "suite.log"
    assert not kept.is_symlink() and kept.is_file()


# setup.py imports the package (a common way to read a version), so the set-up step runs the
# agent's code; that code finds its log through its stdout, puts a stand-in in the log's
# place and fails the step: the log is read back through the descriptor the step wrote to
SETUP_PY = 'import sys\nsys.path.insert(0, "src")\nimport calc.ops  # its version\n'
REPLACES_ITS_SETUP_LOG = '''

import os as _os
def _in_setup():
    out = _os.readlink(bytes.fromhex("2f70726f632f73656c662f66642f31").decode())  # its stdout
    if not out.endswith(".setup.log"):
        return
    print("Error: the build failed (its own words)", flush=True)
    tmp = out + ".swap"
    if {target!r} == "FIFO":
        _os.mkfifo(tmp)
    else:
        _os.symlink({target!r}, tmp)
    _os.rename(tmp, out)
    raise SystemExit(1)
_in_setup()
'''


@pytest.mark.parametrize("target", ["FIFO", "SECRET"])
def test_a_setup_step_that_replaces_its_log_is_judged_from_what_it_wrote(tmp_path, target):
    """``[test] setup`` runs the agent's code, which puts a FIFO or a link to a file of the
    user's in its log's place and fails: andon neither waits nor reads the user's file; the
    failure quotes what the step itself wrote."""
    secret = tmp_path / "id_rsa"
    secret.write_text("USER-SECRET-Error: 0123456789abcdef\n")
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         add={"test": 'setup = ["python", "setup.py"]\nsetup_cache = false'})
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)},
                        files={"setup.py": SETUP_PY}, config=config)
    stand_in = str(secret) if target == "SECRET" else target

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", REPLACES_ITS_SETUP_LOG.format(target=stand_in),
              append=True)
        return "done"

    report, rows = run_p1(root, agent)

    assert report.merged == []
    said = json.dumps(rows)
    assert "USER-SECRET" not in said
    assert "the build failed (its own words)" in said, said[:2000]
    assert secret.read_text() == "USER-SECRET-Error: 0123456789abcdef\n"


# appended to the atdd stage's test file: a FIFO in the file's own place once its run ends
SWAP_AT_EXIT = '''

import atexit as _atexit
import os as _os


def _swap():
    f = _os.path.abspath(__file__)
    _os.mkfifo(f + ".swap")
    _os.rename(f + ".swap", f)


_atexit.register(_swap)
'''


def test_an_atdd_test_file_that_makes_itself_a_fifo_is_judged_as_committed(tmp_path):
    """red reads the atdd stage's test files for the invariants they name after running
    them, by when the file has put a FIFO in its own place in the worktree: red reads them as
    committed, so it neither waits nor loses them, and passes. (The FIFO left in the worktree
    then fails the implement stage's snapshot: a worktree andon cannot read.)"""
    from test_e2e_review import ATDD_FILE, ATDD_TESTS, inv_packet

    md, planted = inv_packet("P1", plant=False, stages=["atdd", "implement"], max_attempts=1)
    root = make_project(tmp_path / "repo", {"P1": (md, planted)}, config=config_toml(red_runs=1))

    def agent(ctx):
        if ctx.stage == "atdd":
            write(ctx, ATDD_FILE, ATDD_TESTS + SWAP_AT_EXIT)
            FIFOS.append(ctx.worktree / ATDD_FILE)
        else:
            honest_mul(ctx)
        return "done"

    report, rows = run_p1(root, agent)

    assert ("red", "pass") in [(g["gate"], g["status"]) for g in rows], rows
    assert report.merged == []


# -- the [test] setup cache, which the code under test can reach in .andon/ -------------------

def _entry(cached: Path, files: object, content: dict[str, str | None]) -> None:
    """A set-up cache entry: ``files.json`` holding ``files``, and each of ``content``'s
    paths (below ``files/``) with its text (None: leave it to the test)."""
    (cached / "files").mkdir(parents=True)
    (cached / "files.json").write_text(json.dumps(files))
    for rel, text in content.items():
        if text is not None:
            (cached / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
            (cached / "files" / rel).write_text(text)


def test_an_entry_as_the_cache_writes_it_is_copied_mode_and_all(tmp_path):
    from andon.clone_setup import _restore

    cached, clone = tmp_path / "key", tmp_path / "clone"
    clone.mkdir()
    _entry(cached, ["gen/out.txt", "bin/tool"], {"gen/out.txt": "generated\n", "bin/tool": "#!"})
    (cached / "files" / "bin" / "tool").chmod(0o755)
    assert _restore(cached, clone) == ["gen/out.txt", "bin/tool"]
    assert (clone / "gen" / "out.txt").read_text() == "generated\n"
    assert os.access(clone / "bin" / "tool", os.X_OK)


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "link-on-the-way", "link-to-zero",
                                 "fifo", "not-json", "not-a-list"])
def test_a_cache_entry_not_as_the_cache_writes_it_is_discarded_and_nothing_leaves_the_clone(
        tmp_path, how):
    """Whoever wrote ``.andon/setup-cache/<key>/`` (the code under test can, by absolute
    path): a path in files.json that leaves the clone, a link on the way to a file of the
    user's, a link to /dev/zero, a FIFO, a files.json that is not a list of paths. The
    entry is not used (the set-up step runs instead), nothing is written outside the clone,
    nothing of the user's is copied in, and nothing waits or reads without end."""
    from andon.clone_setup import _restore

    cached, clone, outside = tmp_path / "cache" / "key", tmp_path / "clone", tmp_path / "out"
    clone.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("USER-SECRET\n")
    if how == "dot-dot":
        _entry(cached, ["../../out/escaped.txt"], {})
        (cached / "files" / ".." / "..").mkdir(parents=True, exist_ok=True)
        (tmp_path / "cache" / "out").mkdir()
        (tmp_path / "cache" / "out" / "escaped.txt").write_text("WRITTEN-BY-THE-AGENT\n")
    elif how == "absolute":
        _entry(cached, [str(outside / "escaped.txt")], {})
    elif how == "link-on-the-way":
        _entry(cached, ["src/secret.txt"], {})
        (cached / "files" / "src").symlink_to(outside)
    elif how == "link-to-zero":
        _entry(cached, ["gen/out.txt"], {"gen/out.txt": None})
        (cached / "files" / "gen").mkdir()
        (cached / "files" / "gen" / "out.txt").symlink_to("/dev/zero")
    elif how == "fifo":
        _entry(cached, ["gen/out.txt"], {})
        (cached / "files" / "gen").mkdir()
        os.mkfifo(cached / "files" / "gen" / "out.txt")
        FIFOS.append(cached / "files" / "gen" / "out.txt")
    else:
        _entry(cached, {"gen/out.txt": 1} if how == "not-a-list" else [], {})
        (cached / "files.json").write_text("{not json" if how == "not-json" else
                                           json.dumps({"gen/out.txt": 1}))

    assert within(lambda: _restore(cached, clone)) is None
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not any(clone.rglob("*")), list(clone.rglob("*"))


# -- andon's own files in .git, which an agent without the sandbox reaches by absolute path ---

@pytest.mark.parametrize("target", ["USERFILE", "FIFO"])
def test_a_link_at_the_merge_lock_is_replaced_not_written_through(tmp_path, target):
    """The agent links ``.git/andon-merge.lock`` (the merge lock and its ledger) to a file of
    the user's, or to a FIFO: the merge replaces the link with its own lock file; the user's
    file is as it was and the change merges."""
    user_file, fifo = _targets(tmp_path)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    lock = root / ".git" / "andon-merge.lock"

    def agent(ctx):
        honest_mul(ctx)
        lock.unlink(missing_ok=True)
        lock.symlink_to(user_file if target == "USERFILE" else fifo)
        return "done"

    report, _ = run_p1(root, agent)

    assert report.exit_status == EXIT_OK and report.merged == ["P1"], report.message
    assert user_file.read_text() == "the user's own file\n"
    assert not lock.is_symlink() and lock.is_file()


def test_a_link_at_git_info_exclude_is_left_alone_and_andons_folder_ignores_itself(tmp_path):
    """``.git/info/exclude`` is a link to a file of the user's (an agent made it, or the
    user): andon neither reads nor appends to it; ``.andon/`` is kept out of ``git status``
    by a ``.gitignore`` of its own instead."""
    user_file = tmp_path / "users-notes.txt"
    user_file.write_text("the user's own file\n")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    exclude = root / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(user_file)

    status = andon(root, "status")

    assert status.returncode == 0, status.stderr
    assert user_file.read_text() == "the user's own file\n"
    assert (root / ".andon" / ".gitignore").read_text() == "*\n"
    assert ".andon" not in git(root, "status", "--porcelain")


# -- what andon shows later: the context of a stage, the plan, an experiment's observations ---

CLAUDE_LINE = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "parentUuid": None,
                          "message": {"role": "user", "content": "hello"}})


def test_show_context_reads_no_stand_in_and_writes_its_page_through_no_link(tmp_path):
    """The implement agent (its transcript a Claude Code session) leaves in its evidence a
    link named like the context page ``andon show --context`` writes, to a file of the
    user's; beside its transcript, a sub-agent log that is a FIFO and one that links to the
    user's own Claude Code session. ``show --context`` ends, writes its page anew, leaves
    the user's files as they were, and shows nothing of them."""
    victim, session = tmp_path / "victim.txt", tmp_path / "users-session.jsonl"
    victim.write_text("USER-PRECIOUS\n")
    session.write_text(json.dumps({"type": "user", "uuid": "u9", "sessionId": "t",
                                   "parentUuid": None, "message": {
                                       "role": "user", "content": "USER-SECRET-PROMPT"}}) + "\n")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})

    def agent(ctx):
        honest_mul(ctx)
        (ctx.evidence_dir / "implement.transcript.log.context.html").symlink_to(victim)
        subagents = ctx.evidence_dir / "implement.transcript" / "subagents"
        subagents.mkdir(parents=True)
        os.mkfifo(subagents / "agent-x.jsonl")
        FIFOS.append(subagents / "agent-x.jsonl")
        (subagents / "agent-y.jsonl").symlink_to(session)
        return CLAUDE_LINE

    run_p1(root, agent)
    shown = within(lambda: andon(root, "show", "P1", "--context"))

    assert shown.returncode == 0, shown.stderr
    assert victim.read_text() == "USER-PRECIOUS\n"
    page = root / ".andon" / "evidence" / "P1" / "1" / "implement.transcript.log.context.html"
    assert not page.is_symlink() and "USER-SECRET-PROMPT" not in page.read_text()
    assert "USER-SECRET-PROMPT" not in shown.stdout + shown.stderr


@pytest.mark.store_tampered  # the reviewer changed recorded evidence: `andon verify` says so
def test_a_transcript_a_later_stage_replaced_by_a_link_is_not_read(tmp_path):
    """The reviewer replaces the implement stage's transcript, in the evidence folder they
    share, with a link to a file of the user's: ``show --context`` does not read it."""
    secret = tmp_path / "id_rsa"
    secret.write_text("SECRETBYTES of a private key\n")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})

    def reviewer(ctx):
        transcript = ctx.evidence_dir / "implement.transcript.log"
        transcript.unlink()
        transcript.symlink_to(secret)
        return accept_review(ctx)

    within(lambda: runner_for(root, honest_mul, reviewer=reviewer).run() and None)
    shown = within(lambda: andon(root, "show", "P1", "--context"))
    assert "SECRETBYTES" not in shown.stdout + shown.stderr


def test_a_plan_document_that_is_a_link_is_not_read(tmp_path):
    """The planner (sandboxed or not: the document's folder is its to write) makes its plan
    document a link to a file of the user's: andon reads none of it, in its output or in
    the plan's evidence."""
    secret = tmp_path / "home" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nUSERSECRETBYTES\n")
    root = make_project(tmp_path / "repo", files={"docs/spec.md": "# Spec\n\nMultiply.\n"})
    command = f'ln -sf {secret} "$ANDON_REVIEW_FILE"; echo done'

    r = within(lambda: andon(root, "plan", "docs/spec.md", "--agent", "command",
                             "--command", command, "--rounds", "1"))

    assert "USERSECRETBYTES" not in r.stdout + r.stderr
    assert not [f for f in (root / ".andon").rglob("plan.json")
                if "USERSECRETBYTES" in f.read_text()]


def test_an_experiments_observations_do_not_wait_on_a_transcript_made_a_fifo(tmp_path):
    from andon.experiments.observe import observe

    transcript = tmp_path / "implement.transcript.log"  # what a later stage left there
    os.mkfifo(transcript)
    FIFOS.append(transcript)
    runs = [{"stage": "implement", "transcript_path": str(transcript), "exit_status": 0,
             "timed_out": 0, "claim": "done"}]
    within(lambda: observe("resolved", [], runs, None, None))
