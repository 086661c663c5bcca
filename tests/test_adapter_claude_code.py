"""The claude-code adapter against a fake `claude` that prints the real stream-json format."""

import json
import os

import pytest

from andon.agents import ClaudeCodeAgent, make_agent
from andon.agents.claude_code import (
    default_permission_args,
    parse_stream,
    refused_as_root,
)
from andon.agents.external import FormatError
from andon.usage import library_version

import fakes
from agent_ctx import MUL_EDIT, make, stage_ctx
from helpers import MUL_CODE

# The fake's two assistant messages (from a real session log), summed.
TOKENS = {"input_tokens": 9 + 11120 + 20284, "output_tokens": 607,
          "cache_read_tokens": 20284, "cache_write_tokens": 11120}


@pytest.fixture
def bin_dir(tmp_path):
    return tmp_path / "bin"


def run(tmp_path, bin_dir, scenario=None, timeout=60, environ=None, **settings):
    fakes.install(bin_dir, "claude", scenario)
    ctx = stage_ctx(tmp_path, timeout=timeout)
    return ctx, make(ClaudeCodeAgent, bin_dir, environ, **settings).run(ctx)


def test_prompt_in_worktree_argv_and_reported_usage(tmp_path, bin_dir):
    ctx, run_ = run(tmp_path, bin_dir, {"append": MUL_EDIT}, model="claude-sonnet-4-20250514",
                    extra_args=["--max-turns", "30"])
    call, = fakes.calls(bin_dir, "claude")
    assert call["prompt"] == "Add mul to calc.ops." and call["cwd"] == str(ctx.worktree)
    assert call["argv"] == ["-p", "--output-format", "stream-json", "--verbose", "--model",
                            "claude-sonnet-4-20250514",
                            *default_permission_args(os.geteuid()), "--max-turns", "30"]
    assert (ctx.worktree / "src/calc/ops.py").read_text().endswith(MUL_CODE)
    assert run_.exit_status == 0 and not run_.timed_out
    assert run_.claim == "I added `mul` to src/calc/ops.py. All tests pass."
    u = run_.usage
    assert {k: getattr(u, k) for k in TOKENS} == TOKENS
    assert (u.cost_usd, u.cost_source) == (0.0569172, "reported")
    assert u.model == "claude-sonnet-4-20250514" and u.turns == 3
    assert u.wall_s == run_.duration_s > 0
    assert run_.transcript_path.read_text().count("\n") == 6


def test_environment_is_clean_but_has_credentials_and_passthrough(tmp_path, bin_dir):
    environ = {"ANTHROPIC_API_KEY": "sk-test", "SECRET_OF_USER": "x", "MY_PROXY": "p",
               "LC_ALL": "C.UTF-8"}
    run(tmp_path, bin_dir, environ=environ, env_passthrough=["MY_PROXY"])
    names = set(fakes.calls(bin_dir, "claude")[0]["env_names"])
    assert {"ANTHROPIC_API_KEY", "MY_PROXY", "LC_ALL", "PATH", "HOME", "ANDON_STAGE",
            "ANDON_PACKET_ID", "ANDON_PROMPT_FILE"} <= names
    assert "SECRET_OF_USER" not in names


def test_missing_cost_is_priced_from_the_table(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_cost"})
    u = r.usage
    assert u.cost_source == "priced"
    assert u.price_source == f"genai-prices {library_version()}"
    assert u.cost_usd == pytest.approx(0.0569172)   # claude-sonnet-4 list prices


def test_unknown_model_leaves_cost_unknown_not_zero(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_cost", "model": "claude-mystery-9"})
    assert r.usage.cost_usd is None and r.usage.cost_source == "unknown"
    assert r.usage.input_tokens == TOKENS["input_tokens"]  # tokens still known
    assert any("claude-mystery-9" in n for n in r.usage.notes)


def test_user_price_for_the_model_is_used_when_no_cost_is_reported(tmp_path, bin_dir):
    from andon.config import Price
    fakes.install(bin_dir, "claude", {"mode": "no_cost", "model": "claude-mystery-9"})
    agent = make(ClaudeCodeAgent, bin_dir, prices={"claude-mystery-9": Price(
        input_per_mtok=1, output_per_mtok=1)})
    u = agent.run(stage_ctx(tmp_path)).usage
    assert u.cost_source == "priced" and u.cost_usd == pytest.approx(32020 / 1e6)


def test_missing_usage_block_leaves_tokens_unknown(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_usage"})
    u = r.usage
    assert all(getattr(u, k) is None for k in TOKENS) and u.cost_usd is None
    assert u.cost_source == "unknown"
    assert any("no usage block" in n for n in u.notes)
    assert r.claim.startswith("I added")


def test_old_version_with_cost_usd(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "old_version"})
    assert (r.usage.cost_usd, r.usage.cost_source) == (0.0569172, "reported")
    assert r.usage.input_tokens == TOKENS["input_tokens"]
    assert "claude code 1.0.98" in r.usage.notes


def test_non_zero_exit_is_recorded_with_what_it_reported(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "exit_code"})
    assert r.exit_status == 1
    assert r.usage.cost_usd == 0.0569172
    assert any("error_during_execution" in n for n in r.usage.notes)


def test_permission_args_can_be_replaced(tmp_path, bin_dir):
    run(tmp_path, bin_dir, permission_args=["--permission-mode", "acceptEdits"])
    argv = fakes.calls(bin_dir, "claude")[0]["argv"]
    assert "--dangerously-skip-permissions" not in argv
    assert argv[-2:] == ["--permission-mode", "acceptEdits"]


def test_root_gets_the_documented_allowlist_not_the_flag_claude_refuses_as_root():
    assert default_permission_args(1000) == ("--dangerously-skip-permissions",)
    root = default_permission_args(0)
    assert root == ("--permission-mode", "acceptEdits", "--allowedTools=Bash")
    assert not refused_as_root(root, 0, {})
    for bypass in (["--dangerously-skip-permissions"], ["--permission-mode", "bypassPermissions"]):
        assert refused_as_root(bypass, 0, {})
        assert not refused_as_root(bypass, 0, {"IS_SANDBOX": "1"})   # the CLI's own way out
        assert not refused_as_root(bypass, 1000, {})


def test_cli_error_on_stderr_becomes_the_claim(tmp_path, bin_dir):
    fakes.install(bin_dir, "claude")
    r = make(ClaudeCodeAgent, bin_dir).run(stage_ctx(tmp_path, prompt=""))
    assert r.exit_status == 1 and "Input must be provided" in r.claim
    assert r.usage.cost_source == "unknown" and "no output: usage unknown" in r.usage.notes


def test_timeout_kills_it_and_keeps_what_was_printed(tmp_path, bin_dir):
    # long enough for the fake to start and print its first line on a loaded machine
    _, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=5)
    assert r.timed_out and r.exit_status is None
    assert '"subtype": "init"' in r.transcript_path.read_text()
    assert r.usage.cost_usd is None
    assert any("timeout" in n for n in r.usage.notes)


def test_timeout_per_adapter_setting_wins(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=600, timeout_s=1)
    assert r.timed_out


def test_truncated_json_line_is_skipped_and_counted(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "truncated"})
    assert r.usage.cost_usd == 0.0569172
    assert "1 truncated JSON line(s) skipped" in r.usage.notes


def test_unknown_event_types_are_kept_and_counted(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "unknown_event"})
    assert r.usage.cost_usd == 0.0569172
    assert "rate_limit_event" in r.transcript_path.read_text()
    note, = [n for n in r.usage.notes if n.startswith("unknown event types")]
    assert "rate_limit_event (1)" in note


def test_huge_output_is_capped_and_the_result_still_read(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "huge", "huge_bytes": 8_000_000},
               max_output_bytes=3_000_000)
    size = r.transcript_path.stat().st_size
    assert 3_000_000 <= size < 3_001_000
    assert r.usage.cost_usd == 0.0569172          # the tail with the result was kept
    assert any("bytes dropped" in n for n in r.usage.notes)


def test_text_output_is_a_format_this_adapter_cannot_read(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "text_output"})
    assert r.exit_status == 0 and r.usage.cost_source == "unknown"
    assert any(n.startswith("unreadable output: the output holds no JSON events")
               for n in r.usage.notes)


def test_no_result_event_sums_the_assistant_messages(tmp_path):
    lines = (tmp_path / "t.jsonl")
    lines.write_text(
        '{"type":"system","subtype":"init","model":"claude-sonnet-4-20250514"}\n'
        '{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-20250514",'
        '"content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":10,'
        '"cache_read_input_tokens":5,"output_tokens":2}}}\n'
        '{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-20250514",'
        '"content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":10,'
        '"cache_read_input_tokens":5,"output_tokens":40}}}\n')
    u = parse_stream(lines).usage
    assert (u.input_tokens, u.output_tokens, u.cache_write_tokens) == (18, 40, 10)
    assert any("no result event" in n for n in u.notes)


def test_other_json_is_refused_clearly(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"type": "thread.started", "thread_id": "x"}\n')
    with pytest.raises(FormatError, match="no Claude Code stream-json event"):
        parse_stream(p)


def test_not_installed_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="needs `claude` on PATH"):
        ClaudeCodeAgent(environ={"PATH": str(tmp_path)})


def test_registry_builds_it_with_settings(tmp_path, bin_dir, monkeypatch):
    from andon.config import Config
    fakes.install(bin_dir, "claude")
    monkeypatch.setenv("PATH", fakes.path_with(bin_dir))
    cfg = Config.model_validate({"agents": {"claude-code": {"model": "m1"}}})
    agent = make_agent("claude-code", None, cfg)
    assert isinstance(agent, ClaudeCodeAgent) and agent.settings.model == "m1"
    with pytest.raises(ValueError, match=r"\[agents.claude\].*claude-code, codex, aider"):
        make_agent("claude-code", None, Config.model_validate({"agents": {"claude": {}}}))
    with pytest.raises(ValueError, match=r"did you mean 'claude-code'.*known agents: command, "
                                         "scripted:module:function, claude-code, codex, aider, "
                                         "gemini"):
        make_agent("claude")


def test_an_executable_gone_after_the_check_is_recorded_not_raised(tmp_path, bin_dir):
    fakes.install(bin_dir, "claude")
    agent = make(ClaudeCodeAgent, bin_dir)
    (bin_dir / "claude").unlink()
    r = agent.run(stage_ctx(tmp_path))
    assert r.exit_status == 127 and r.claim.startswith("cannot start")
    assert r.usage.cost_source == "unknown"


def test_without_a_result_each_message_is_priced_as_its_own_request(tmp_path):
    """Case price-tier-per-request: twelve messages of 30,000 input (25,000 cache read) and
    500 output on claude-sonnet-4-5, cut before the result event. Each is far below the
    200k tier: twelve times one request's price, not the tiered price of the 360k sum."""
    from genai_prices import Usage as PU
    from genai_prices import calc_price

    from andon.usage import price
    lines = [{"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"}]
    lines += [{"type": "assistant", "parent_tool_use_id": None, "message": {
        "id": f"msg_{i}", "model": "claude-sonnet-4-5", "content": [{"type": "text",
                                                                       "text": "."}],
        "usage": {"input_tokens": 5000, "cache_read_input_tokens": 25000,
                  "cache_creation_input_tokens": 0, "output_tokens": 500}}}
        for i in range(12)]
    path = tmp_path / "cut.log"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    u = price(parse_stream(path).usage)
    one = float(calc_price(PU(input_tokens=30_000, cache_read_tokens=25_000, output_tokens=500),
                           model_ref="claude-sonnet-4-5").total_price)
    assert u.input_tokens == 360_000 and u.pricing == "per_request"
    assert u.cost_usd == pytest.approx(12 * one, rel=1e-9)


def test_the_adapter_and_andon_context_read_one_response_once_even_when_split(tmp_path):
    """One response written as two lines with a tool result between them (parallel tool
    calls) is one request for both readers: they are one parser (andon.context.claude)."""
    from andon.context import load

    def asst(content, out):
        return json.dumps({"type": "assistant", "message": {
            "id": "m1", "model": "claude-sonnet-4-20250514", "content": [content],
            "usage": {"input_tokens": 3, "cache_creation_input_tokens": 10,
                      "cache_read_input_tokens": 5, "output_tokens": out}}})
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join([
        '{"type":"system","subtype":"init","model":"claude-sonnet-4-20250514"}',
        asst({"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": "x"}}, 7),
        json.dumps({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x"}]}}),
        asst({"type": "tool_use", "id": "b", "name": "Read", "input": {"file_path": "y"}}, 40),
    ]) + "\n")
    u = parse_stream(p).usage
    assert (u.input_tokens, u.output_tokens, len(u.requests)) == (18, 40, 1)
    conv = load(p, "claude-stream-json")
    assert [(r.input_tokens, r.output_tokens) for r in conv.requests()] == [(18, 40)]
