"""The aider adapter against a fake `aider` writing aider's analytics log and Tokens: lines."""

import pytest

from andon.agents import AiderAgent
from andon.agents.aider import parse_run
from andon.agents.external import FormatError

import fakes
from agent_ctx import MUL_EDIT, make, stage_ctx
from helpers import MUL_CODE


@pytest.fixture
def bin_dir(tmp_path):
    return tmp_path / "bin"


def run(tmp_path, bin_dir, scenario=None, timeout=60, **settings):
    fakes.install(bin_dir, "aider", scenario)
    ctx = stage_ctx(tmp_path, timeout=timeout)
    return ctx, make(AiderAgent, bin_dir, **settings).run(ctx)


def test_message_file_edit_reported_cost_and_files_kept_out_of_the_worktree(tmp_path, bin_dir):
    ctx, r = run(tmp_path, bin_dir, {"append": MUL_EDIT})
    call, = fakes.calls(bin_dir, "aider")
    assert call["prompt"] == "Add mul to calc.ops." and call["cwd"] == str(ctx.worktree)
    argv = call["argv"]
    assert argv[:2] == ["--message-file", str(ctx.prompt_file)]
    assert {"--yes-always", "--no-auto-commits", "--no-gitignore", "--no-analytics"} <= set(argv)
    assert argv[argv.index("--analytics-log") + 1].startswith(str(ctx.evidence_dir))
    assert (ctx.worktree / "src/calc/ops.py").read_text().endswith(MUL_CODE)
    # aider's tag cache is removed, .gitignore untouched, history files in the evidence
    assert sorted(p.name for p in ctx.worktree.iterdir()) == ["src"]
    assert (ctx.evidence_dir / "implement.aider-analytics.jsonl").is_file()
    u = r.usage
    assert (u["input_tokens"], u["output_tokens"], u["turns"]) == (4740 + 5120, 255 + 80, 2)
    assert (u["cost_usd"], u["cost_source"]) == (pytest.approx(0.02537175), "reported")
    assert (u["cache_write_tokens"], u["cache_read_tokens"]) == (4700, 4700)
    assert u["model"] == "anthropic/claude-sonnet-4-20250514"
    assert any("removed aider's own files" in n for n in u["notes"])
    assert "Applied edit to src/calc/ops.py" in r.claim


def test_without_analytics_log_the_rounded_lines_are_used(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_analytics"})
    u = r.usage
    assert (u["input_tokens"], u["output_tokens"], u["turns"]) == (9800, 335, 2)
    assert (u["cost_usd"], u["cost_source"]) == (0.03, "reported")
    assert any("approximate" in n for n in u["notes"])


def test_zero_cost_from_aider_is_not_believed_and_is_priced(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "zero_cost"})
    u = r.usage
    assert u["cost_source"] == "priced" and u["cost_usd"] > 0
    assert any("cost 0" in n for n in u["notes"])


def test_zero_cost_and_unknown_model_is_unknown(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "zero_cost"}, model="ollama/my-local-model")
    assert r.usage["cost_usd"] is None and r.usage["cost_source"] == "unknown"
    assert "--model" in fakes.calls(bin_dir, "aider")[0]["argv"]


def test_non_zero_exit(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "exit_code"})
    assert r.exit_status == 1 and "AuthenticationError" in r.claim
    assert r.usage["input_tokens"] is None and r.usage["cost_usd"] is None


def test_timeout(tmp_path, bin_dir):
    ctx, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=1)
    assert r.timed_out and r.usage["cost_usd"] is None
    assert not (ctx.worktree / ".aider.tags.cache.v4").exists()


def test_truncated_analytics_line(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "truncated"})
    assert r.usage["input_tokens"] == 4740 and r.usage["turns"] == 1
    assert "1 truncated JSON line(s) skipped" in r.usage["notes"]


def test_huge_output_is_capped(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "huge", "huge_bytes": 5_000_000},
               max_output_bytes=1_000_000)
    assert r.transcript_path.stat().st_size < 1_001_000
    assert r.usage["input_tokens"] == 9860           # from the analytics log, not stdout


def test_no_usage_at_all(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_usage"})
    assert r.usage["input_tokens"] is None and r.usage["cost_source"] == "unknown"
    assert any("usage unknown" in n for n in r.usage["notes"])


def test_model_from_the_model_line(tmp_path):
    out = tmp_path / "out.log"
    out.write_text("Aider v0.86.1\nModel: gpt-4o with diff edit format\n\n"
                   "Tokens: 2.5k sent, 1.2M received.\n")
    u = parse_run(tmp_path / "missing.jsonl", out).usage
    assert (u.model, u.input_tokens, u.output_tokens) == ("gpt-4o", 2500, 1_200_000)


def test_an_analytics_log_in_another_format_fails_clearly(tmp_path):
    log = tmp_path / "a.jsonl"
    log.write_text('{"name": "message_send", "props": {}}\n')
    with pytest.raises(FormatError, match="no {event, properties} records"):
        parse_run(log, tmp_path / "none.log")
