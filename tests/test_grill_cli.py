"""`andon grill FEATURE.md` driven as a person would: through a pseudo-terminal (pexpect),
Enter to accept, a typed correction, Ctrl-C and resume, kill -9 between answers and resume;
and `--non-interactive`, which commits the decisions on a branch of their own and leaves the
user's HEAD, index and working tree as they were. The interviewer is the scripted one
(andon.demo.interviewer): four questions, one contradiction check, then the decisions."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from andon.demo import interviewer

from helpers import GIT_ENV, _add_lines, git, make_project, skip_without_fs, with_sandbox

SCRIPTED = "scripted:andon.demo.interviewer:interviewer"
FEATURE = "# Export to CSV\n\nUsers want to export the ledger as a CSV file.\n"
GLOSSARY = "# Glossary\n\n| term | meaning |\n| --- | --- |\n| ledger | the book of entries |\n"
INTERVIEWER = Path(interviewer.__file__)  # run as a script: it imports nothing of andon
TOPICS = ["public-name", "data-format", "dependency-failure", "compatibility", "consistency"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "p", files={"FEATURE.md": FEATURE, "GLOSSARY.md": GLOSSARY})


def spawn(root: Path, *args: str) -> pexpect.spawn:
    env = {**os.environ, **GIT_ENV, "NO_COLOR": "1", "COLUMNS": "200"}
    # Ctrl-C as at a terminal: a test run started in the background (`cmd &` in a script)
    # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
    return pexpect.spawn(sys.executable, ["-m", "andon", "-C", str(root), "grill", "FEATURE.md",
                                          "--agent", SCRIPTED, *args],
                         cwd=str(root), env=env, encoding="utf-8", timeout=180,
                         dimensions=(50, 200),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "grill", *args],
                          cwd=root, capture_output=True, text=True, timeout=180,
                          env={**os.environ, **GIT_ENV, "COLUMNS": "200"})


def question(child: pexpect.spawn) -> str:
    """Wait for the next question; return its topic."""
    # (rich makes the number bold: escape codes may follow it)
    child.expect(r"Question \d+(?:\x1b\[[\d;]*m)* \((?:ask|review), one-way door, "
                 r"topic ([a-z-]+)[,)]")
    topic = child.match.group(1)
    child.expect("Enter accepts, or type your answer: ")
    return topic


def finish(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return child.before


def decisions(root: Path, slug: str = "feature") -> str:
    return git(root, "show", f"andon/grill/{slug}:decisions/001-{slug}.md")


def log_of(root: Path, slug: str = "feature") -> dict:
    return json.loads((root / ".andon" / "grill" / slug / "log.json").read_text())


def test_enter_accepts_and_a_typed_correction_is_recorded(project: Path):
    child = spawn(project)
    seen = []
    for i in range(5):
        seen.append(question(child))
        if i == 1:
            child.sendline("A CSV file per export in exports/, UTF-8, header row")
        else:
            child.sendline("")
    out = finish(child)
    assert seen == TOPICS
    assert "branch: andon/grill/feature" in out and "commit: " in out
    text = decisions(project)
    assert "**Decision.** A CSV file per export in exports/, UTF-8, header row" in text
    assert ("answer (correction by the person): A CSV file per export in exports/, UTF-8, "
            "header row") in text
    # the recommendation the person refused is kept as an alternative refused
    assert "- No new stored data: it works on what the project already has — the person " \
           "corrected it" in text
    assert text.count("answer (recommendation accepted)") == 4


def test_ctrl_c_saves_and_the_same_command_resumes_without_asking_again(project: Path):
    child = spawn(project)
    assert question(child) == "public-name"
    child.sendline("")
    assert question(child) == "data-format"
    child.sendintr()
    child.expect("resume with: andon grill FEATURE.md")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert [a["question"]["topic"] for a in log_of(project)["answers"]] == ["public-name"]

    child = spawn(project)
    child.expect("resuming: 1 answer")
    seen = []
    for _ in range(4):
        seen.append(question(child))
        child.sendline("")
    finish(child)
    assert seen == TOPICS[1:]          # the answered question was not asked again
    assert decisions(project).count("topic `public-name`") == 1


def test_kill_9_between_answers_then_resume_asks_only_what_is_left(project: Path):
    child = spawn(project)
    for topic in TOPICS[:2]:
        assert question(child) == topic
        child.sendline("" if topic != "data-format" else "SQLite table exports")
    assert question(child) == "dependency-failure"   # the answers before it are on disk
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == signal.SIGKILL
    log = log_of(project)
    assert [a["answer"] for a in log["answers"]] == ["export-to-csv", "SQLite table exports"]
    assert log["pending"]["topic"] == "dependency-failure"
    runs = len(log["runs"])

    child = spawn(project)
    seen = []
    for _ in range(3):
        seen.append(question(child))
        child.sendline("")
    finish(child)
    assert seen == TOPICS[2:]
    log = log_of(project)
    # the pending question was shown again from the log: the agent was not asked for it
    assert [r["turn"] for r in log["runs"][runs:]][:1] == [4]
    assert "**Decision.** SQLite table exports" in decisions(project)


def _state(root: Path) -> dict[str, str]:
    return {"head": git(root, "rev-parse", "HEAD"), "branch": git(root, "branch",
                                                                 "--show-current"),
            "index": git(root, "ls-files", "-s"), "staged": git(root, "diff", "--cached"),
            "status": git(root, "status", "--porcelain", "--untracked-files=all"),
            "tree": (root / "src" / "calc" / "ops.py").read_text()}


def test_non_interactive_commits_on_its_own_branch_only(project: Path):
    # a person mid-work: a staged change and an edit in the working tree
    (project / "src" / "calc" / "ops.py").write_text("# staged\n")
    git(project, "add", "src/calc/ops.py")
    (project / "src" / "calc" / "ops.py").write_text("# staged\n# and edited\n")
    before = _state(project)
    cmd = f"{sys.executable} {INTERVIEWER}"
    r = run_cli(project, "FEATURE.md", "--agent", "command", "--command", cmd,
                "--non-interactive")
    assert r.returncode == 0, r.stderr
    assert _state(project) == before
    head = before["head"].strip()
    commits = git(project, "rev-list", f"{head}..andon/grill/feature").split()
    assert len(commits) == 1 and f"commit: {commits[0]}" in r.stdout
    assert git(project, "rev-parse", f"{commits[0]}^").strip() == head
    changed = git(project, "diff", "--name-only", head, commits[0]).split()
    assert changed == ["GLOSSARY.md", "decisions/001-feature.md"]
    glossary = git(project, "show", "andon/grill/feature:GLOSSARY.md")
    assert glossary.startswith(GLOSSARY)
    assert "## From decisions/001-feature.md" in glossary and "| export-to-csv |" in glossary
    # usage, as the command reported it: in the log per run and in the store's events
    log = log_of(project)
    assert log["phase"] == "done" and all(a["corrected"] is False for a in log["answers"])
    assert all(run["usage"]["input_tokens"] > 0 for run in log["runs"])
    assert "interview agent: 8 run(s)" in r.stdout and "in /" in r.stdout
    db = sqlite3.connect(project / ".andon" / "andon.db")
    kinds = [k for (k,) in db.execute("SELECT kind FROM events WHERE kind LIKE 'grill%'")]
    assert kinds == ["grill-run"] * 8 + ["grill-written"]
    data = json.loads(db.execute("SELECT data FROM events WHERE kind = 'grill-written'")
                      .fetchone()[0])
    assert data["usage"]["runs"] == 8 and data["usage"]["input_tokens"] > 0
    # running it again changes nothing and says where the outcome is
    again = run_cli(project, "FEATURE.md", "--agent", SCRIPTED, "--non-interactive")
    assert again.returncode == 0 and f"commit {commits[0]}" in again.stdout
    # a second feature takes the next number, also counting the other interview's branch
    (project / "Search.md").write_text("# Search box\n\nFind entries.\n")
    r2 = run_cli(project, "Search.md", "--agent", SCRIPTED, "--non-interactive")
    assert r2.returncode == 0, r2.stderr
    assert "decisions/002-search.md" in r2.stdout


BAD_THEN_GOOD = """\
import os, pathlib, subprocess, sys
count = pathlib.Path(sys.argv[1])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
if n == 1:
    print("Sure! Here is my question: {topic: names}")
else:
    subprocess.run([sys.executable, sys.argv[2]], check=True)
"""


def test_bad_json_is_evidence_for_a_retry_then_a_clear_error(project: Path, tmp_path: Path):
    script = tmp_path / "agent.py"
    script.write_text(BAD_THEN_GOOD)
    # the agent counts its calls outside its folder: bound writable, as a user would
    state = tmp_path / "state"
    state.mkdir()
    toml = project / "andon.toml"
    toml.write_text(_add_lines(toml.read_text(), "agent", f'sandbox_paths = ["rw:{state}"]\n'))
    git(project, "commit", "-qam", "the agent's counter folder")
    cmd = f"{sys.executable} {script} {state / 'count'} {INTERVIEWER}"
    r = run_cli(project, "FEATURE.md", "--agent", "command", "--command", cmd,
                "--non-interactive")
    assert r.returncode == 0, r.stderr
    runs = log_of(project)["runs"]
    assert runs[0]["ask"] == 1 and "not valid JSON" in runs[0]["errors"][0]
    assert runs[1]["ask"] == 2 and runs[1]["errors"] == []
    retry_prompt = (Path(runs[1]["evidence_dir"]) / "prompt.md").read_text()
    assert "Your previous document was rejected:\n- the turn is not valid JSON" in retry_prompt

    garbage = tmp_path / "garbage.sh"
    garbage.write_text("echo 'no JSON here'\n")
    r = run_cli(project, "FEATURE.md", "--slug", "again", "--agent", "command", "--command",
                f"sh {garbage}", "--non-interactive")
    assert r.returncode == 1
    assert "gave no valid ask document in 3 asks" in r.stderr
    assert "expected one JSON object" in r.stderr and "Traceback" not in r.stderr
    assert git(project, "branch", "--list", "andon/grill/again") == ""
    assert log_of(project, "again")["answers"] == []


def test_a_changed_feature_or_a_foreign_branch_is_refused_clearly(project: Path):
    child = spawn(project)
    assert question(child) == "public-name"
    child.sendline("")
    assert question(child) == "data-format"
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    (project / "FEATURE.md").write_text(FEATURE + "\nAlso JSON.\n")
    r = run_cli(project, "FEATURE.md", "--agent", SCRIPTED)
    assert r.returncode == 2
    assert "FEATURE.md changed since its interview began (1 answers" in r.stderr
    assert "andon grill FEATURE.md --restart" in r.stderr

    git(project, "branch", "andon/grill/feature", "HEAD")
    r = run_cli(project, "FEATURE.md", "--agent", SCRIPTED, "--restart", "--non-interactive")
    assert r.returncode == 2
    assert "branch andon/grill/feature exists and is not this interview's" in r.stderr


def test_run_interview_is_the_demo_seam(project: Path):
    from andon.demo.interviewer import run_interview

    path = run_interview(project, project / "FEATURE.md")
    assert path == project / ".andon" / "grill" / "feature" / "001-feature.md"
    assert path.read_text() == decisions(project)
    assert run_interview(project, project / "FEATURE.md") == path


def test_the_interview_agent_runs_under_the_sandbox_like_every_stage(project: Path):
    """At `auto` the interviewer (a command below /tmp, as the test's project is) runs at
    `fs`: the interview completes, each run's evidence says the level, and the checkout is
    out of its sight (the interviewer is told to list it and records what it saw)."""
    skip_without_fs("auto")
    toml = project / "andon.toml"
    toml.write_text(with_sandbox(toml.read_text(), "auto"))
    git(project, "commit", "-qam", "sandbox auto")
    r = run_cli(project, "FEATURE.md", "--agent", "command", "--command",
                f"{sys.executable} {INTERVIEWER}", "--non-interactive")
    assert r.returncode == 0, r.stdout + r.stderr
    runs = log_of(project)["runs"]
    assert runs and all(run["usage"]["notes"][0].startswith("sandbox fs") for run in runs)
    assert git(project, "show", "andon/grill/feature:decisions/001-feature.md")


def test_the_interview_keeps_to_the_attempt_budget(project: Path):
    """[budgets.attempt] holds for the whole interview as for one attempt: over it, the
    interview stops (exit 1) naming the budget, with the answers so far kept."""
    toml = project / "andon.toml"
    toml.write_text(toml.read_text() + "\n[budgets.attempt]\nmax_wall_s = 0.001\n")
    git(project, "commit", "-qam", "a tiny budget")
    r = run_cli(project, "FEATURE.md", "--agent", "command", "--command",
                f"{sys.executable} {INTERVIEWER}", "--non-interactive")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the interview stopped: attempt budget exceeded" in r.stderr + r.stdout
    assert len(log_of(project)["runs"]) == 1
