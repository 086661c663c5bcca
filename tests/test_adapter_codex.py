"""The codex adapter against a fake `codex` printing the real `codex exec --json` events."""

import pytest

from andon.agents import CodexAgent
from andon.agents.codex import parse_events, rollout_model
from andon.agents.external import FormatError
from andon.usage import library_version

import fakes
from agent_ctx import MUL_EDIT, make, stage_ctx
from helpers import MUL_CODE


@pytest.fixture
def bin_dir(tmp_path):
    return tmp_path / "bin"


def run(tmp_path, bin_dir, scenario=None, timeout=60, environ=None, **settings):
    fakes.install(bin_dir, "codex", scenario)
    ctx = stage_ctx(tmp_path, timeout=timeout)
    return ctx, make(CodexAgent, bin_dir, environ, **settings).run(ctx)


def test_prompt_on_stdin_edit_made_usage_priced(tmp_path, bin_dir):
    ctx, r = run(tmp_path, bin_dir, {"append": MUL_EDIT}, model="gpt-5-codex")
    call, = fakes.calls(bin_dir, "codex")
    assert call["prompt"] == "Add mul to calc.ops." and call["cwd"] == str(ctx.worktree)
    assert call["argv"][:3] == ["exec", "--json", "--output-last-message"]
    assert call["argv"][4:] == ["--model", "gpt-5-codex", "--sandbox", "workspace-write",
                                "-"]
    assert (ctx.worktree / "src/calc/ops.py").read_text().endswith(MUL_CODE)
    assert r.exit_status == 0 and r.claim == "Added `mul` to src/calc/ops.py; the tests pass."
    u = r.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (
        24763, 122, 24448)
    assert u.cache_write_tokens is None and u.turns == 1
    assert u.cost_source == "priced" and u.cost_usd > 0
    assert u.price_source == f"genai-prices {library_version()}"


def test_model_from_the_rollout_file_when_not_configured(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"model": "gpt-5"})
    assert r.usage.model == "gpt-5" and r.usage.cost_source == "priced"
    assert "model read from the session's rollout file" in r.usage.notes


def test_no_model_anywhere_means_cost_unknown(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_rollout"})
    assert r.usage.model is None and r.usage.input_tokens == 24763
    assert r.usage.cost_usd is None and r.usage.cost_source == "unknown"


def test_unknown_model_means_cost_unknown(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, model="gpt-imaginary-99")
    assert r.usage.cost_usd is None and r.usage.cost_source == "unknown"


def test_credentials_pass_the_clean_environment(tmp_path, bin_dir):
    run(tmp_path, bin_dir, environ={"OPENAI_API_KEY": "sk", "AWS_SECRET_ACCESS_KEY": "no"})
    names = fakes.calls(bin_dir, "codex")[0]["env_names"]
    assert "OPENAI_API_KEY" in names and "AWS_SECRET_ACCESS_KEY" not in names


def test_failed_turn_and_non_zero_exit(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "exit_code"})
    assert r.exit_status == 1
    assert r.usage.input_tokens is None and r.usage.cost_usd is None
    assert "turn.failed: stream disconnected before completion" in r.usage.notes


def test_timeout(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=1)
    assert r.timed_out and r.exit_status is None and r.usage.cost_usd is None
    assert "no turn.completed event: usage unknown" in r.usage.notes


def test_truncated_line(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "truncated"})
    assert r.usage.input_tokens == 24763
    assert "1 truncated JSON line(s) skipped" in r.usage.notes


def test_unknown_event_and_item_types_are_kept(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "unknown_event"})
    assert r.usage.input_tokens == 24763
    assert any("thread.compacted (1)" in n for n in r.usage.notes)
    assert "collab_tool_call" in r.transcript_path.read_text()


def test_huge_output_is_capped(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "huge", "huge_bytes": 6_000_000},
               max_output_bytes=2_000_000)
    assert r.transcript_path.stat().st_size < 2_001_000
    assert r.usage.input_tokens == 24763


def test_missing_usage_block(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_usage"}, model="gpt-5")
    assert r.usage.input_tokens is None and r.usage.cost_usd is None
    assert "a turn.completed event has no usage: tokens unknown" in r.usage.notes


def test_older_protocol_fails_clearly(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "legacy"})
    note, = [n for n in r.usage.notes if n.startswith("unreadable output")]
    assert "older `codex exec --json` protocol" in note and "upgrade codex" in note
    assert r.usage.cost_source == "unknown"


def test_turns_are_summed(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"type":"thread.started","thread_id":"t"}\n'
                 '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,'
                 '"output_tokens":2}}\n'
                 '{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":0,'
                 '"output_tokens":3,"reasoning_output_tokens":1}}\n')
    u = parse_events(p).usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.turns) == (30, 5, 4, 2)
    with pytest.raises(FormatError):
        p.write_text('{"type": "result"}\n')
        parse_events(p)


def test_rollout_lookup_ignores_other_threads(tmp_path):
    day = tmp_path / "sessions/2025/01/02"
    day.mkdir(parents=True)
    (day / "rollout-x-other.jsonl").write_text(
        '{"type":"turn_context","payload":{"model":"o3"}}\n')
    assert rollout_model(tmp_path, "mine") is None
    assert rollout_model(tmp_path, "other") == "o3"
