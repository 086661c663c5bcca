"""The aider adapter against a fake `aider` writing aider's analytics log and Tokens: lines."""

import json
import re

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
    # aider logged 9,475 + 5,120 sent (the 4,735 cache writes twice); the exact cache counts
    # are the ones aider's (litellm's) cost is the price of, within the printed "4.7k"
    assert (u.input_tokens, u.output_tokens, u.turns) == (4740 + 5120, 255 + 80, 2)
    assert (u.cost_usd, u.cost_source) == (pytest.approx(0.02537175), "reported")
    assert (u.cache_write_tokens, u.cache_read_tokens) == (4735, 4735)
    assert u.model == "anthropic/claude-sonnet-4-20250514"
    assert any("removed aider's own files" in n for n in u.notes)
    assert "Applied edit to src/calc/ops.py" in r.claim


def test_without_analytics_log_the_rounded_lines_are_used(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_analytics"})
    u = r.usage
    # "9.5k sent, 4.7k cache write" + "5.1k sent, 4.7k cache hit": 9,500 - 4,700 + 5,100
    assert (u.input_tokens, u.output_tokens, u.turns) == (9900, 335, 2)
    assert (u.cost_usd, u.cost_source) == (0.03, "reported")
    assert any("approximate" in n for n in u.notes)


def test_zero_cost_from_aider_is_not_believed_and_is_priced(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "zero_cost"})
    u = r.usage
    assert u.cost_source == "priced" and u.cost_usd > 0
    assert any("cost 0" in n for n in u.notes)


def test_zero_cost_and_unknown_model_is_unknown(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "zero_cost"}, model="ollama/my-local-model")
    assert r.usage.cost_usd is None and r.usage.cost_source == "unknown"
    assert "--model" in fakes.calls(bin_dir, "aider")[0]["argv"]


def test_non_zero_exit(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "exit_code"})
    assert r.exit_status == 1 and "AuthenticationError" in r.claim
    assert r.usage.input_tokens is None and r.usage.cost_usd is None


def test_exit_0_after_a_failed_model_request_is_recorded_as_a_provider_error(tmp_path, bin_dir):
    """Aider 0.86.2 prints litellm's error and exits 0 when the model API fails (seen with
    the real binary, tests/test_e2e_aider.py): its exit status is kept, the error is the
    run's provider_error and its claim, so the agent gate can name the layer."""
    _, r = run(tmp_path, bin_dir, {"mode": "api_error"})
    assert r.exit_status == 0
    assert r.provider_error == "litellm.AuthenticationError: OpenAIException - invalid x-api-key"
    assert r.claim == ("aider exited 0 but the model API failed: litellm.AuthenticationError: "
                       "OpenAIException - invalid x-api-key")
    assert not r.usage.output_tokens


def test_an_error_after_the_model_answered_keeps_exit_0(tmp_path, bin_dir):
    """The rewrite is only for a run that got no answer: one that spent output tokens (and
    edited) keeps aider's own exit status, whatever it printed later."""
    _, r = run(tmp_path, bin_dir, {"mode": "error_after_answer", "append": MUL_EDIT})
    assert r.exit_status == 0 and r.usage.output_tokens > 0
    assert "exited 0 but" not in r.claim and r.provider_error is None


def test_the_agent_gets_the_local_price_map_switch(tmp_path, bin_dir):
    """litellm would fetch its price map at start: the agent is told to use the bundled one,
    unless the user's environment says otherwise."""
    run(tmp_path, bin_dir, {"append": MUL_EDIT})
    call, = fakes.calls(bin_dir, "aider")
    assert "LITELLM_LOCAL_MODEL_COST_MAP" in call["env_names"]
    assert {"--no-detect-urls", "--no-show-model-warnings", "--no-check-update"} \
        <= set(call["argv"])


def test_timeout(tmp_path, bin_dir):
    ctx, r = run(tmp_path, bin_dir, {"mode": "timeout"}, timeout=1)
    assert r.timed_out and r.usage.cost_usd is None
    assert not (ctx.worktree / ".aider.tags.cache.v4").exists()


def test_truncated_analytics_line(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "truncated"})
    assert r.usage.input_tokens == 4740 and r.usage.turns == 1
    assert "1 truncated JSON line(s) skipped" in r.usage.notes


def test_huge_output_is_capped(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "huge", "huge_bytes": 5_000_000},
               max_output_bytes=1_000_000)
    assert r.transcript_path.stat().st_size < 1_001_000
    assert r.usage.input_tokens == 9860           # from the analytics log, not stdout


def test_no_usage_at_all(tmp_path, bin_dir):
    _, r = run(tmp_path, bin_dir, {"mode": "no_usage"})
    assert r.usage.input_tokens is None and r.usage.cost_source == "unknown"
    assert any("usage unknown" in n for n in r.usage.notes)


def test_model_from_the_model_line(tmp_path):
    out = tmp_path / "out.log"
    out.write_text("Aider v0.86.1\nModel: gpt-4o with diff edit format\n\n"
                   "Tokens: 2.5k sent, 1.2M received.\n")
    u = parse_run(tmp_path / "missing.jsonl", out).usage
    assert (u.model, u.input_tokens, u.output_tokens) == ("gpt-4o", 2500, 1_200_000)


def test_an_analytics_log_in_another_format_fails_clearly(tmp_path):
    log = tmp_path / "a.jsonl"
    log.write_text('{"name": "message_send", "props": {}}\n')
    with pytest.raises(FormatError, match=re.escape("no {event, properties} records")):
        parse_run(log, tmp_path / "none.log")


# -- aider's cache accounting (Aider-AI/aider#5516, #2304) ------------------------------------

def _aider_files(tmp_path, sent, out, cost, tokens_line, cost_line=None):
    log = tmp_path / "a.jsonl"
    log.write_text(json.dumps({"event": "message_send", "properties": {
        "main_model": "anthropic/claude-sonnet-4-5", "prompt_tokens": sent,
        "completion_tokens": out, "cost": cost, "total_cost": cost}}) + "\n")
    so = tmp_path / "out.log"
    so.write_text(f"Aider v0.86.1\n{tokens_line}\n" + (f"{cost_line}\n" if cost_line else ""))
    return log, so


# one request: 9 uncached + 17,102 cache-write input tokens, 180 output, claude-sonnet-4-5
# at $3 / $3.75 (write) / $15 per Mtok; litellm's prompt_tokens = 17,111 and aider logs
# 17,111 + 17,102 = 34,213 sent. litellm's cost: (9·3 + 17102·3.75 + 180·15) / 1e6.
TRUE_COST = (9 * 3 + 17102 * 3.75 + 180 * 15) / 1e6
FALLBACK_COST = (17102 * 3 * 1.25 + 17111 * 3 + 180 * 15) / 1e6   # cache writes billed twice


def test_cache_writes_are_counted_once_and_exactly_when_aiders_cost_fits(tmp_path):
    log, so = _aider_files(tmp_path, 34213, 180, TRUE_COST,
                           "Tokens: 34k sent, 17k cache write, 180 received.",
                           "Cost: $0.07 message, $0.07 session.")
    u = parse_run(log, so).usage
    assert (u.input_tokens, u.cache_write_tokens, u.cache_read_tokens) == (17111, 17102, 0)
    assert (u.cost_usd, u.cost_source) == (pytest.approx(TRUE_COST), "reported")
    assert u.pricing is None and any("counted once" in n for n in u.notes)


def test_aiders_double_billed_fallback_cost_is_replaced_by_andons_price(tmp_path):
    log, so = _aider_files(tmp_path, 34213, 180, FALLBACK_COST,
                           "Tokens: 34k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    # the double-billed cost still fits exactly one write count under aider's fallback
    # formula: the exact tokens, and andon's price of them
    assert (u.input_tokens, u.cache_write_tokens) == (17111, 17102)
    assert u.cost_source == "priced" and u.reported_cost_usd == pytest.approx(FALLBACK_COST)
    assert u.cost_usd == pytest.approx(TRUE_COST, rel=1e-9)
    assert any("andon's price used" in n for n in u.notes)


def test_a_cost_from_neither_formula_leaves_the_rounded_count(tmp_path):
    log, so = _aider_files(tmp_path, 34213, 180, FALLBACK_COST * 1.3,
                           "Tokens: 34k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    # the printed 17k is used: input = 34,213 - 17,000 = 17,213, noted as approximate
    assert (u.input_tokens, u.cache_write_tokens) == (17213, 17000)
    assert any("approximate" in n for n in u.notes) and u.cost_source == "priced"
    assert u.tokens_within == 500   # "17k" is 16,500..17,499


def test_exact_counts_carry_no_bound(tmp_path):
    log, so = _aider_files(tmp_path, 900, 20, 0, "Tokens: 900 sent, 20 received.")
    assert parse_run(log, so).usage.tokens_within is None


def test_zero_cost_is_priced_on_the_corrected_tokens(tmp_path):
    log, so = _aider_files(tmp_path, 34213, 180, 0,
                           "Tokens: 34k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    assert u.input_tokens == 17213 and u.cost_source == "priced"
    assert u.cost_usd == pytest.approx(TRUE_COST, rel=0.01)   # not ×1.77
    # the case aider-cache-double-count, zero-cost variant: nothing aider writes gives the
    # exact count, so the record says how far off it may be, and the truth is inside
    assert u.tokens_within == 500
    assert abs(u.input_tokens - 17111) <= u.tokens_within
    assert abs(u.cache_write_tokens - 17102) <= u.tokens_within


def test_an_honest_cost_within_the_rounding_is_kept(tmp_path):
    """A cost that is right but does not fit an exact count (another table, rounding of a
    provider) stays `reported`: the check replaces only a cost far from andon's price."""
    log, so = _aider_files(tmp_path, 34213, 180, TRUE_COST * 1.03,
                           "Tokens: 34k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    assert u.cost_source == "reported" and u.cost_usd == pytest.approx(TRUE_COST * 1.03)


def test_older_aider_with_reads_missing_from_sent(tmp_path):
    """With litellm before it folded cache tokens into prompt_tokens, aider's sent was
    uncached + writes (5 + 300 = 305) and the 4,000 cache reads were missing."""
    log, so = _aider_files(tmp_path, 305, 20, 0,
                           "Tokens: 305 sent, 300 cache write, 4.0k cache hit, 20 received.")
    u = parse_run(log, so).usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (4305, 4000, 300)


def test_cost_on_the_next_line_and_chat_history_quotes(tmp_path):
    """With both a cache hit and a cache write aider prints Cost: on its own line; the chat
    history quotes both with "> " and two trailing spaces."""
    hist = tmp_path / "chat.md"
    hist.write_text("> Tokens: 2.0k sent, 500 cache write, 1.0k cache hit, 10 received.  \n"
                    "> Cost: $0.0026 message, $0.0026 session.  \n")
    u = parse_run(tmp_path / "none.jsonl", tmp_path / "none.log", "gpt-4o", hist).usage
    assert (u.input_tokens, u.cache_write_tokens, u.cache_read_tokens) == (1500, 500, 1000)
    assert u.cost_usd == pytest.approx(0.0026) and u.cost_source == "reported"


def test_a_rounded_write_count_above_the_truth_is_not_read_as_the_older_convention(tmp_path):
    """16,600 writes print as "17k": sent = 9 + 2 × 16,600 = 33,209 is below 2 × 17,000, yet
    only the current convention fits the lowest count "17k" may stand for (16,500). The
    write count is capped at half of sent, so input = 33,209 - 16,604 = 16,605 (truth
    16,609), never sent + reads or a cache count above the input."""
    log, so = _aider_files(tmp_path, 33209, 180, 0,
                           "Tokens: 33k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    assert (u.input_tokens, u.cache_write_tokens) == (16605, 16604)
    assert any("counted once" in n for n in u.notes)


def test_the_exact_count_is_found_below_a_rounded_print_too(tmp_path):
    """The same request with litellm's cost (9·3 + 16600·3.75 + 180·15 µ$): 16,600 writes
    exactly, input 16,609."""
    log, so = _aider_files(tmp_path, 33209, 180, (9 * 3 + 16600 * 3.75 + 180 * 15) / 1e6,
                           "Tokens: 33k sent, 17k cache write, 180 received.")
    u = parse_run(log, so).usage
    assert (u.input_tokens, u.cache_write_tokens) == (16609, 16600)


def _openai_run(tmp_path, sends):
    """An analytics log and stdout as the real aider 0.86.2 writes them for openai/gpt-4o
    through Chat Completions (tests/test_e2e_aider.py): the model name REDACTED in the log,
    no cache in the Tokens: lines (aider reads only ``cache_read_input_tokens``)."""
    log, so, total = tmp_path / "a.jsonl", tmp_path / "out.log", 0.0
    lines = ["Aider v0.86.2", "Main model: openai/gpt-4o with diff edit format"]
    with open(log, "w") as f:
        for sent, out, cost in sends:
            total += cost
            f.write(json.dumps({"event": "message_send", "properties": {
                "main_model": "openai/REDACTED", "prompt_tokens": sent,
                "completion_tokens": out, "cost": cost, "total_cost": total}}) + "\n")
            lines.append(f"Tokens: {sent:,} sent, {out} received. Cost: ${cost:.4f} message, "
                         f"${total:.4f} session.".replace(",", "") if sent < 1000 else
                         f"Tokens: {sent / 1000:.1f}k sent, {out} received. Cost: "
                         f"${cost:.4f} message, ${total:.4f} session.")
    so.write_text("\n".join(lines) + "\n")
    return log, so


# gpt-4o at $2.50 / $1.25 (cache read) / $10 per Mtok, as litellm and genai-prices have it
def _gpt4o(inp, read, out):
    return ((inp - read) * 2.5 + read * 1.25 + out * 10) / 1e6


def test_cache_reads_aider_does_not_print_are_read_from_its_cost(tmp_path):
    log, so = _openai_run(tmp_path, [(1500, 80, _gpt4o(1500, 300, 80)),
                                     (2100, 20, _gpt4o(2100, 600, 20))])
    u = parse_run(log, so, "openai/gpt-4o").usage
    assert [q["cache_read_tokens"] for q in u.requests] == [300, 600]
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens) == (3600, 900, 100)
    assert u.cost_source == "reported"
    assert u.cost_usd == pytest.approx(_gpt4o(1500, 300, 80) + _gpt4o(2100, 600, 20))
    assert any("cache reads from aider's cost" in n for n in u.notes)


def test_a_cost_that_fits_no_whole_read_count_adds_no_reads(tmp_path):
    """A cost from another price table (here 7 % below andon's, no cache at all) must not
    be turned into invented cache reads."""
    log, so = _openai_run(tmp_path, [(1500, 80, _gpt4o(1500, 0, 80) * 0.93 + 1.1e-9)])
    u = parse_run(log, so, "openai/gpt-4o").usage
    assert u.cache_read_tokens == 0 and u.input_tokens == 1500
    assert not any("cache reads from" in n for n in u.notes)


def test_no_cache_and_a_cost_equal_to_the_price_adds_no_reads(tmp_path):
    log, so = _openai_run(tmp_path, [(1500, 80, _gpt4o(1500, 0, 80))])
    u = parse_run(log, so, "openai/gpt-4o").usage
    assert (u.cache_read_tokens, u.cost_source) == (0, "reported")
