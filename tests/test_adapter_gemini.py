"""The gemini adapter against a fake `gemini` printing the documented JSON output."""

import pytest

from andon.agents import GeminiAgent
from andon.agents.gemini import ARG_LIMIT, STDIN_NOTE, parse_json

import fakes
from agent_ctx import MUL_EDIT, make, stage_ctx
from helpers import MUL_CODE


@pytest.fixture
def bin_dir(tmp_path):
    return tmp_path / "bin"


def run(tmp_path, bin_dir, scenario=None, timeout=60, prompt="Add mul to calc.ops.",
        **settings):
    fakes.install(bin_dir, "gemini", scenario)
    ctx = stage_ctx(tmp_path, prompt=prompt, timeout=timeout)
    return ctx, make(GeminiAgent, bin_dir, **settings).run(ctx)


def test_prompt_edit_and_usage_priced_per_model(tmp_path, bin_dir):
    ctx, r = run(tmp_path, bin_dir, {"append": MUL_EDIT})
    call, = fakes.calls(bin_dir, "gemini")
    assert call["argv"] == ["--prompt", "Add mul to calc.ops.", "--output-format", "json",
                            "--yolo"]
    assert call["prompt"] == "Add mul to calc.ops." and call["cwd"] == str(ctx.worktree)
    assert (ctx.worktree / "src/calc/ops.py").read_text().endswith(MUL_CODE)
    assert r.exit_status == 0 and r.claim == "I added mul(a, b) to src/calc/ops.py."
    u = r.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (
        24939, 20 + 154, 21263)
    assert u.cache_write_tokens is None and u.turns == 2
    assert u.model == "gemini-2.5-pro" and u.cost_source == "priced"
    assert u.cost_usd > 0
    assert "Loaded cached credentials." in (ctx.evidence_dir / "implement.stderr.log").read_text()


def test_long_prompt_goes_on_stdin(tmp_path, bin_dir):
    long = "x" * (ARG_LIMIT + 10)
    run(tmp_path, bin_dir, prompt=long)
    call, = fakes.calls(bin_dir, "gemini")
    assert call["argv"][1] == STDIN_NOTE and call["prompt"].startswith(long)


def test_unknown_model_is_unknown_cost(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, model="gemini-99-ultra")
    assert fakes.calls(bin_dir, "gemini")[0]["argv"][4:6] == ["--model", "gemini-99-ultra"]
    assert r.usage.input_tokens == 24939 and r.usage.cost_usd is None
    assert r.usage.cost_source == "unknown"


def test_error_object_and_exit_code(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "exit_code"})
    assert r.exit_status == 1 and "quota exceeded" in r.claim
    assert r.usage.input_tokens is None and r.usage.cost_usd is None
    assert any(n.startswith("error: ApiError") for n in r.usage.notes)


def test_timeout(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=1)
    assert r.timed_out and r.usage.cost_usd is None


def test_truncated_json(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "truncated"})
    assert r.usage.input_tokens is None
    assert "the JSON output is truncated: usage unknown" in r.usage.notes


def test_unknown_fields_are_ignored(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "unknown_field"})
    assert r.usage.input_tokens == 24939
    assert '"warnings"' in r.transcript_path.read_text()


def test_huge_output_is_capped_and_then_unreadable(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "huge", "huge_bytes": 5_000_000},
               max_output_bytes=1_500_000)
    assert r.transcript_path.stat().st_size < 1_501_000
    assert r.usage.input_tokens is None   # one JSON object cut in the middle
    assert any("bytes dropped" in n for n in r.usage.notes)


def test_missing_usage_block(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_usage"})
    assert r.claim.startswith("I added") and r.usage.input_tokens is None
    assert "no stats block: usage unknown" in r.usage.notes


def test_stats_in_an_unknown_format_fail_clearly(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "old_stats"})
    note, = [n for n in r.usage.notes if n.startswith("unreadable output")]
    assert "stats has no `models` table" in note and "inputTokens" in note


def test_text_output_fails_clearly(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "text_output"})
    assert any("no JSON object in the output" in n for n in r.usage.notes)


def test_notice_before_the_object_is_skipped(tmp_path):
    p = tmp_path / "o.json"
    p.write_text('Update available!\n{"response": "ok", "stats": {"models": {}}}\n')
    out = parse_json(p)
    assert out.claim == "ok" and out.usage.turns is None


def test_totals_are_priced_as_the_reported_number_of_requests(tmp_path):
    """Case price-tier-per-request: 12 requests of 30,000 prompt tokens (25,000 cached) and
    500 candidates on gemini-2.5-pro, only totals in the JSON and no chat recording: priced
    as twelve equal requests, not at the >200k rate of the 360k sum."""
    import json

    from genai_prices import Usage as PU
    from genai_prices import calc_price

    from andon.usage import price
    t = {"input": 60_000, "prompt": 360_000, "candidates": 6_000, "total": 366_000,
         "cached": 300_000, "thoughts": 0, "tool": 0}
    out = tmp_path / "g.json"
    out.write_text(json.dumps({"response": "done", "stats": {"models": {"gemini-2.5-pro": {
        "api": {"totalRequests": 12}, "tokens": t}}}}))
    u = price(parse_json(out).usage)
    one = float(calc_price(PU(input_tokens=30_000, cache_read_tokens=25_000, output_tokens=500),
                           model_ref="gemini-2.5-pro").total_price)
    assert u.pricing == "even_split" and u.cost_usd == pytest.approx(12 * one, rel=1e-9)
