"""`andon experiment`: conditions through real adapters and the fake agent CLIs (cost and
tokens per condition end to end), the per-run and total budgets, errors retried on request,
a kill -9 mid-run resumed without losing or repeating a finished run, bad experiment files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from experiment_agents import project, spec_file

from andon.agents import Agent, AgentRun, ScriptedAgent, StageContext
from andon.config import load_config
from andon.errors import ConfigError, UsageError
from andon.experiments.experiment import Experiment
from andon.experiments.spec import load_spec
from andon.experiments.stored import export_rows, status
from andon.git.repo import Repo
from andon.state import open_store
from andon.usage import Usage

import fakes
from helpers import GIT_ENV, MUL_CODE, accept_review, andon

TESTS = Path(__file__).parent


def run_experiment(root: Path, path: Path, factory=None, **kw):
    repo = Repo(root)
    exp = Experiment(repo, load_config(root), open_store(repo), load_spec(path), factory)
    return exp, exp.run(**kw)


@pytest.mark.e2e
def test_conditions_through_fake_claude_and_codex_cost_and_tokens_per_condition(tmp_path):
    root = project(tmp_path / "proj", n=1)
    bin_dir = tmp_path / "bin"
    for name in ("claude", "codex"):
        fakes.install(bin_dir, name, {"append": {"src/calc/ops.py": MUL_CODE}})
    path_env = fakes.path_with(bin_dir)
    path = tmp_path / "cli.toml"
    path.write_text(f'''name = "cli"
[[conditions]]
name = "claude"
agent = "claude-code"
model = "claude-sonnet-4-20250514"
stages = ["implement"]
env = {{ PATH = "{path_env}" }}

[[conditions]]
name = "codex"
agent = "codex"
model = "gpt-5-codex"
stages = ["implement"]
env = {{ PATH = "{path_env}", CODEX_HOME = "{tmp_path / 'codex-home'}" }}
''')
    exp, _ = run_experiment(root, path)
    rows = {r["condition"]: r for r in export_rows(exp.store, "cli")}
    assert rows["claude"]["outcome"] == "resolved", rows["claude"]["failure_summary"]
    assert rows["codex"]["outcome"] == "resolved", rows["codex"]["failure_summary"]
    assert rows["claude"]["cost_usd"] == pytest.approx(0.0569172)
    assert rows["claude"]["cost_source"] == "reported"
    assert rows["claude"]["input_tokens"] == 9 + 11120 + 20284
    assert rows["claude"]["output_tokens"] == 607
    assert rows["codex"]["input_tokens"] == 24763 and rows["codex"]["output_tokens"] == 122
    assert rows["codex"]["cost_source"] == "priced" and rows["codex"]["cost_usd"] > 0
    # the model of each condition reached its CLI
    assert "claude-sonnet-4-20250514" in fakes.calls(bin_dir, "claude")[0]["argv"]
    assert "gpt-5-codex" in fakes.calls(bin_dir, "codex")[0]["argv"]
    # structured transcripts: the failed-commands observation is made (none failed)
    assert rows["claude"]["failed_commands"] == 0
    s = status(exp.store, "cli")
    assert s["spent_usd"] == pytest.approx(0.0569172 + rows["codex"]["cost_usd"], rel=1e-6)


class Costly(Agent):
    """In-process agent reporting 0.1 USD and 1,100 tokens per stage run; ``good`` decides
    whether it writes the right code."""

    name = "costly"

    def __init__(self, good: bool):
        self.good = good

    def run(self, ctx: StageContext) -> AgentRun:
        text = MUL_CODE if self.good else "\n\ndef mul(a, b):\n    return 0\n"
        ops = ctx.worktree / "src/calc/ops.py"
        ops.write_text(ops.read_text() + text)
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        transcript.write_text("done\n")
        return AgentRun(self.name, 0, False, 0.01, transcript, "done",
                        Usage(input_tokens=1000, output_tokens=100, cost_usd=0.1,
                              cost_source="reported"))


def costly(good: bool):
    """The factory of Experiment: Costly for the work, the accepting reviewer for review."""
    return lambda cond, review: ScriptedAgent(accept_review) if review else Costly(good)


@pytest.mark.e2e
def test_total_budget_stops_starting_runs(tmp_path):
    root = project(tmp_path / "proj", n=2)
    path = spec_file(root, {"A": "good", "B": "good"}, repeats=2,
                     extra="[budget]\ntotal_usd = 0.25\n", name="budget")
    exp, progress = run_experiment(root, path, costly(True))
    assert progress.planned == 8
    assert len(progress.recorded) == 3  # 0.1 + 0.1 + 0.1 >= 0.25: no fourth run started
    assert progress.stopped and "0.25" in progress.stopped
    s = status(exp.store, "budget")
    assert s["done"] == 3 and s["left"] == 5 and s["spent_usd"] == pytest.approx(0.3)


@pytest.mark.e2e
def test_per_run_budget_stops_a_retry_as_unresolved_not_error(tmp_path):
    root = project(tmp_path / "proj", n=1)
    path = spec_file(root, {"A": "bad"}, extra="[budget]\nrun_usd = 0.05\n", name="perrun")
    text = path.read_text().replace('name = "A"\n', 'name = "A"\nretries = 1\n'
                                    'stages = ["implement"]\n')
    path.write_text(text)
    exp, _ = run_experiment(root, path, costly(False))
    row, = export_rows(exp.store, "perrun")
    assert row["outcome"] != "error", row["failure_summary"]
    assert row["outcome"] == "unresolved" and row["failure_gate"] == "budget"
    assert row["attempts"] == 2 and row["cost_usd"] == pytest.approx(0.1)


@pytest.mark.e2e
def test_errors_are_retried_only_on_request_and_the_old_run_is_kept(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", n=1)
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("EXP_MARKER_DIR", str(markers))
    path = spec_file(root, {"A": "down_on_first_repeat"}, name="flaky")
    path.write_text(path.read_text().replace('name = "A"\n',
                                             'name = "A"\nstages = ["implement"]\n'))
    exp, _ = run_experiment(root, path)
    assert [r["outcome"] for r in export_rows(exp.store, "flaky")] == ["error"]
    _, again = run_experiment(root, path)
    assert again.recorded == []  # an error run is a finished run unless asked
    _, retried = run_experiment(root, path, retry_errors=True)
    assert [r["outcome"] for r in retried.recorded] == ["resolved"]
    assert [r["outcome"] for r in export_rows(exp.store, "flaky")] == ["resolved"]
    every = exp.store.experiment_runs("flaky", superseded=True)
    assert [(r["outcome"], r["superseded"]) for r in every] == [("error", 1), ("resolved", 0)]


@pytest.mark.e2e
def test_invalid_packet_refused_unless_allowed(tmp_path):
    root = project(tmp_path / "proj", n=1)
    sol = root / "packets" / "P1-mul" / "solution" / "src/calc/ops.py"
    sol.write_text(sol.read_text().replace("a * b", "a + b"))  # the reference is wrong
    path = spec_file(root, {"A": "good"}, name="inv")
    path.write_text(path.read_text().replace('name = "A"\n',
                                             'name = "A"\nstages = ["implement"]\n'))
    with pytest.raises(UsageError, match=r"(?s)invalid packet\(s\).*P1.*--allow-invalid"):
        run_experiment(root, path)
    exp, progress = run_experiment(root, path, allow_invalid=True)
    assert len(progress.recorded) == 1
    # the verdict is cached per packet content: the second refusal ran no validation
    assert any(k.startswith("validate:") for k in _cache_keys(exp))


def _cache_keys(exp):
    return [r[0] for r in exp.store.db.execute("SELECT key FROM results_cache")]


@pytest.mark.parametrize("text, where, what", [
    ('repeats = 0\n[[conditions]]\nname = "A"\nagent = "command"\n', ":1:", "repeats"),
    ('[[conditions]]\nname = "A"\nagnet = "command"\n', ":3:", "did you mean 'agent'"),
    ('[[conditions]]\nname = "A"\nagent = "x"\n[[conditions]]\nname = "A"\nagent = "y"\n',
     ":", "appears twice"),
    ('conditions = []\n', ":1:", "conditions"),
    ('[budget]\ntotal_usd = -1\n[[conditions]]\nname = "A"\nagent = "x"\n', ":2:",
     "total_usd"),
    ('name = \n', ":1:", "not valid TOML"),
])
def test_bad_experiment_file_names_file_line_and_problem(tmp_path, text, where, what):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert f"{path}{where}" in str(err.value) and what in str(err.value)


@pytest.mark.e2e
def test_kill_9_mid_run_loses_no_finished_run_and_repeats_none(tmp_path):
    root = project(tmp_path / "proj", n=1)
    markers = tmp_path / "markers"
    markers.mkdir()
    path = spec_file(root, {"A": "slow_good", "B": "slow_good"}, repeats=2, name="kill")
    path.write_text(path.read_text().replace('reviewer = "scripted:helpers:accept_review"\n',
                                             'stages = ["implement"]\n'))
    env = {**os.environ, **GIT_ENV, "EXP_MARKER_DIR": str(markers),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "andon", "-C", str(root), "experiment",
                             "run", str(path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        # repeat 0 (two runs) finishes; the first run of repeat 1 blocks in its agent
        while not list(markers.glob("started-*.1")):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    store = open_store(Repo(root))
    before = store.experiment_runs("kill")
    assert [(r["condition"], r["repeat"], r["outcome"]) for r in before] and \
        {r["repeat"] for r in before} == {0} and len(before) == 2
    (markers / "release").write_text("")
    proc2 = andon(root, "experiment", "run", str(path), env={
        "EXP_MARKER_DIR": str(markers),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])})
    assert proc2.returncode == 0, proc2.stderr
    assert "2 run(s) now, 2 done before, 4 planned" in proc2.stdout
    after = store.experiment_runs("kill")
    assert after[:2] == before  # the finished runs, untouched
    assert sorted((r["condition"], r["repeat"]) for r in after) == [
        ("A", 0), ("A", 1), ("B", 0), ("B", 1)]
    status_doc = json.loads(andon(root, "experiment", "status", str(path), "--json").stdout)
    assert status_doc["done"] == 4 and status_doc["left"] == 0
    exported = andon(root, "experiment", "export", str(path))
    assert exported.stdout.count("\n") == 5 and exported.stdout.startswith("task,condition")


def test_a_condition_names_a_reviewer_command_of_its_own(tmp_path):
    """A condition could not give its review stages a script of their own: a `command`
    reviewer ran the agent's `command` (newcomer pass: the README says to name another
    reviewer for a review that means something)."""
    from andon.agents import CommandAgent
    from andon.config import Config
    from andon.experiments.execute import build_agent
    from andon.experiments.spec import Condition
    config = Config.model_validate({})
    cond = Condition(name="A", agent="command", command="./agent.sh",
                     reviewer_command="./review.sh")
    agent = build_agent(None, cond, config)  # type: ignore[arg-type]
    reviewer = build_agent(None, cond, config, reviewer=True)  # type: ignore[arg-type]
    assert isinstance(agent, CommandAgent) and agent.command == "./agent.sh"
    assert isinstance(reviewer, CommandAgent) and reviewer.command == "./review.sh"
    path = tmp_path / "exp.toml"
    path.write_text('[[conditions]]\nname = "A"\nagent = "command"\ncommand = "x"\n'
                    'reviewer = "codex"\nreviewer_command = "y"\n')
    with pytest.raises(ConfigError, match=r"exp\.toml:1: .*reviewer_command is the command "
                                          r"of a `command` reviewer"):
        load_spec(path)


def test_a_packets_entry_that_matches_nothing_names_its_line(tmp_path):
    """It named the file and the entry, not the line (newcomer pass)."""
    root = project(tmp_path / "proj", n=1)
    path = spec_file(root, {"A": "good"}, name="nomatch", extra='packets = ["Z*"]')
    with pytest.raises(UsageError, match=r"nomatch\.toml:4: packets entry 'Z\*' matches no "
                                         r"packet; known: P1"):
        run_experiment(root, path)
