"""End to end through the real CLI: `andon run --agent <cli>` with a fake agent CLI first on
PATH that edits the worktree → gates → merged; transcript, usage and cost in the store and
in `andon show --json` / `andon status --json`."""

import json
from pathlib import Path

import pytest

import fakes
from agent_ctx import MUL_EDIT
from helpers import MUL_CODE, SHIPPED, _add_lines, andon, git, make_project, mul_packet


def fake_rw(config: str, bin_dir) -> str:
    """The fake CLIs record their calls beside themselves: writable inside the sandbox."""
    return _add_lines(config, "agent", f'sandbox_paths = ["rw:{bin_dir}"]\n')

CASES = {
    # adapter: (executable, model in andon.toml, expected cost source)
    "claude-code": ("claude", "claude-sonnet-4-20250514", "reported"),
    "codex": ("codex", "gpt-5", "priced"),
    "aider": ("aider", "anthropic/claude-sonnet-4-20250514", "reported"),
    "gemini": ("gemini", "gemini-2.5-pro", "priced"),
}


@pytest.mark.parametrize("adapter", list(CASES))
def test_run_with_a_fake_agent_cli_merges_and_records_usage(tmp_path, adapter):
    exe, model, source = CASES[adapter]
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir, exe, {"append": MUL_EDIT})
    config = fake_rw(SHIPPED, bin_dir) + f'\n[agents.{adapter}]\nmodel = "{model}"\n'
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)
    env = {"PATH": fakes.path_with(bin_dir), "HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()

    r = andon(root, "run", "--agent", adapter, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert MUL_CODE in git(root, "show", "andon/integration:src/calc/ops.py")
    call, = fakes.calls(bin_dir, exe)
    assert "calc.ops.mul multiplies." in call["prompt"]       # the packet's goal, delivered
    assert Path(call["cwd"]).name == "P1-1"                   # the attempt's worktree

    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    attempt, = show["attempts"]
    stage = next(s for s in attempt["stages"] if s["stage"] == "implement")
    assert stage["agent"] == adapter and stage["exit_status"] == 0
    assert Path(stage["transcript_path"]).stat().st_size > 0
    u = stage["usage"]
    assert u["model"] == model and u["cost_source"] == source
    assert u["cost_usd"] > 0 and u["input_tokens"] > 0 and u["output_tokens"] > 0
    assert u["wall_s"] == stage["duration_s"]
    assert attempt["usage"]["cost_usd"] >= u["cost_usd"]
    assert show["usage"]["input_tokens"] == u["input_tokens"]   # the reviewer reports none

    status = json.loads(andon(root, "status", "--json", env=env).stdout)
    row, = status["packets"]
    assert row["state"] == "done" and row["usage"]["cost_usd"] == attempt["usage"]["cost_usd"]
    assert status["usage"]["cost_usd"] == row["usage"]["cost_usd"]
    assert status["usage"]["cost_unknown_runs"] == 1            # the review command's run

    board = andon(root, "status", env=env).stdout
    assert "tok ·" in board and "agents, all packets:" in board
    text = andon(root, "show", "P1", env=env).stdout
    assert f"usage: model {model}" in text and f"({source}" in text


def test_an_agent_cli_that_is_not_installed_stops_before_anything_runs(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    empty = tmp_path / "empty"
    empty.mkdir()
    r = andon(root, "run", "--agent", "codex", env={"PATH": f"{empty}:/usr/bin:/bin"})
    assert r.returncode == 2
    assert "the codex agent needs `codex` on PATH" in r.stderr and "andon doctor" in r.stderr


def test_a_budget_stops_the_cli_run_with_the_reason(tmp_path):
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir, "claude", {"append": MUL_EDIT})
    config = fake_rw(SHIPPED, bin_dir) + "\n[budgets.attempt]\nmax_cost_usd = 0.05\n"
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)
    env = {"PATH": fakes.path_with(bin_dir), "HOME": str(tmp_path)}
    r = andon(root, "run", "--agent", "claude-code", env=env)
    assert r.returncode == 1                                   # the line is halted
    assert "attempt budget exceeded: agents cost $0.0569, max_cost_usd is $0.05" in r.stderr
    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    attempt, = show["attempts"]
    assert attempt["failure_layer"] == "harness" and attempt["state"] == "failed"
    assert [g["gate"] for g in attempt["gates"]] == ["red", "budget"]
    assert [s["stage"] for s in attempt["stages"]] == ["implement"]   # no review ran
