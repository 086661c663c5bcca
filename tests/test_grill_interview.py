"""The interview loop in-process with scripted agents: a forgetful agent that asks a topic
again, an agent that never says done, a crash after the branch moved but before the log said
so — and the honest interviewer that must still get through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from andon.agents import ScriptedAgent, StageContext
from andon.config import load_config
from andon.demo.interviewer import interviewer, turn
from andon.git.repo import Repo
from andon.grill import AgentFailed, Interview, accept_all
from andon.grill import log as logfile
from andon.grill.record import commit_decisions, render_decisions

from helpers import make_project

FEATURE = "# Export to CSV\n\nExport the ledger.\n"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(make_project(tmp_path / "p", files={"FEATURE.md": FEATURE}))


def interview(repo: Repo, behaviour, **kw) -> Interview:
    return Interview(repo, load_config(repo.root), ScriptedAgent(behaviour),
                     repo.root / "FEATURE.md", **kw)


def answer(ctx: StageContext, doc: dict) -> str:
    assert ctx.review_file is not None
    ctx.review_file.write_text(json.dumps(doc))
    return "ok"


def test_a_forgetful_agent_that_asks_a_topic_again_is_refused_with_evidence(repo: Repo):
    def forgetful(ctx: StageContext) -> str:
        doc = turn(ctx.prompt)
        if '"public-name"' in ctx.prompt.split("<!-- grill-state -->")[1] and "done" not in doc:
            doc = {**doc, "topic": "public-name"}   # asks its first question again
        return answer(ctx, doc)

    it = interview(repo, forgetful)
    with pytest.raises(AgentFailed) as exc:
        it.run(accept_all)
    assert "topic 'public-name' was already asked (phase ask)" in str(exc.value)
    log = logfile.load(it.log_path)
    assert log is not None and [a.question.topic for a in log.answers] == ["public-name"]
    # each retry's prompt carried the reason
    prompts = sorted((it.dir / "runs").glob("*-ask2/prompt.md"))
    assert prompts and "already asked" in prompts[0].read_text()
    assert repo.rev_parse("refs/heads/andon/grill/feature") is None


def test_an_agent_that_never_says_done_is_moved_on_by_max_questions(repo: Repo):
    (repo.root / "andon.toml").write_text((repo.root / "andon.toml").read_text()
                                          + "\n[grill]\nmax_questions = 2\n")

    def endless(ctx: StageContext) -> str:
        state = json.loads(ctx.prompt.split("```json\n")[-1].split("\n```")[0])
        n = len(state["answers"]) + 1
        if state["phase"] == "write":
            return interviewer(ctx)
        return answer(ctx, {"topic": f"t{n}", "door": "two-way", "question": f"q{n}?",
                            "recommended": "yes", "why": "because",
                            "about": ["t1"] if state["phase"] == "review" else []})

    result = interview(repo, endless).run(accept_all)
    log = logfile.load(result.log_path)
    assert log is not None and [a.phase for a in log.answers] == ["ask"] * 2 + ["review"] * 2
    assert log.notes == ["2 questions in phase ask ([grill] max_questions): moved on",
                         "2 questions in phase review ([grill] max_questions): moved on"]


def test_a_crash_after_the_branch_moved_is_taken_as_done_on_resume(repo: Repo):
    it = interview(repo, interviewer)
    first = it.run(accept_all)
    # as if killed between moving the branch and saving the log: the log says "write"
    log = logfile.load(first.log_path)
    assert log is not None
    log.phase, log.branch, log.commit, log.decisions_copy = "write", None, None, None
    logfile.save(log, first.log_path)
    again = interview(repo, interviewer).run(accept_all)
    assert (again.branch, again.commit) == (first.branch, first.commit)
    assert again.decisions_path == first.decisions_path == "decisions/001-feature.md"


def test_another_interviews_branch_is_never_overwritten(repo: Repo):
    it = interview(repo, interviewer)
    it.run(accept_all)
    other = logfile.load(it.log_path)
    assert other is not None
    stranger = other.model_copy(update={"id": "someone-else"})
    assert other.written is not None
    with pytest.raises(Exception, match="exists and is not this interview's"):
        commit_decisions(repo, stranger, {"decisions/x.md": render_decisions(
            stranger, other.written, 9, "x")}, "decisions: x")


def test_the_checkout_is_not_the_agents_working_folder(repo: Repo):
    seen: list[Path] = []
    code: list[bool] = []

    def looking(ctx: StageContext) -> str:
        seen.append(ctx.worktree)
        code.append((ctx.worktree / "src" / "calc" / "ops.py").is_file())  # HEAD's files
        (ctx.worktree / "scribble.txt").write_text("agents write here")
        return interviewer(ctx)

    interview(repo, looking).run(accept_all)
    assert seen and all(not p.is_relative_to(repo.root) for p in seen)
    assert all(code)
    assert not (repo.root / "scribble.txt").exists()
    assert not seen[0].exists()   # the export is removed at the end


def test_two_processes_cannot_run_one_interview_at_once(repo: Repo):
    import subprocess
    import sys

    from andon.errors import UsageError

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from andon.grill.interview import _hold; "
        "f = _hold(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()"),
        str(repo.root / ".andon" / "grill" / "feature" / "lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(UsageError, match="another andon grill is running this interview"):
            interview(repo, interviewer)
    finally:
        holder.kill()
        holder.wait()
    interview(repo, interviewer)   # the lock went with the process
