"""The command adapter's optional usage file: read when written, never guessed at."""

import json

import pytest

from andon.agents import CommandAgent
from andon.usage import library_version

from agent_ctx import stage_ctx


def run_writing(tmp_path, doc):
    ctx = stage_ctx(tmp_path)
    payload = doc if isinstance(doc, str) else json.dumps(doc)
    (tmp_path / "usage.json").write_text(payload)
    cmd = f'cp {tmp_path / "usage.json"} "$ANDON_USAGE_FILE"; echo done'
    return ctx, CommandAgent(cmd).run(ctx)


def test_the_path_is_given_in_the_environment_and_read_back(tmp_path):
    ctx, r = run_writing(tmp_path, {"model": "claude-opus-4-5", "input_tokens": 21580,
                                    "output_tokens": 25, "cache_read_tokens": 0,
                                    "cache_write_tokens": 21570, "turns": 2})
    assert (ctx.evidence_dir / "implement.usage.json").is_file()
    u = r.usage
    assert (u.model, u.input_tokens, u.output_tokens, u.turns) == (
        "claude-opus-4-5", 21580, 25, 2)
    # no cost in the file: priced (the worked example of FORMATS.md)
    assert u.cost_usd == pytest.approx(0.1354875)
    assert u.cost_source == "priced"
    assert u.price_source == f"genai-prices {library_version()}"
    assert u.wall_s == r.duration_s


def test_reported_cost_is_used_as_is(tmp_path):
    _, r = run_writing(tmp_path, {"model": "claude-opus-4-5", "input_tokens": 21580,
                                  "output_tokens": 25, "cost_usd": 0.01})
    assert (r.usage.cost_usd, r.usage.cost_source) == (0.01, "reported")


def test_unknown_model_is_unknown_cost(tmp_path):
    _, r = run_writing(tmp_path, {"model": "home-made-1", "input_tokens": 10,
                                  "output_tokens": 1})
    assert r.usage.cost_usd is None and r.usage.cost_source == "unknown"


@pytest.mark.parametrize("doc, note", [
    ("{not json", "usage file is not JSON"),
    ([1, 2], "not a JSON object"),
    ({"input_tokens": -5}, "input_tokens must be numbers >= 0"),
    ({"input_tokens": "many"}, "input_tokens must be"),
    ({"cost_usd": "free"}, "cost_usd must be"),
    ({"input_tokens": 10, "cache_read_tokens": 500, "output_tokens": 1},
     "must include the cache tokens"),
    ({"requests": [{"input_tokens": 10}]}, "requests (a list of objects"),
    ({"requests": {"input_tokens": 10, "output_tokens": 1}}, "requests (a list of objects"),
    ({"requests": [{"input_tokens": 1.5, "output_tokens": 1}]}, "requests (a list of"),
])
def test_bad_files_become_notes_and_unknowns(tmp_path, doc, note):
    _, r = run_writing(tmp_path, doc)
    assert r.exit_status == 0
    assert r.usage.input_tokens is None and r.usage.cost_usd is None
    assert any(note in n for n in r.usage.notes), r.usage.notes


def test_no_file_means_usage_unknown_with_wall_time(tmp_path):
    r = CommandAgent("true").run(stage_ctx(tmp_path))
    assert r.usage.cost_source == "unknown" and r.usage.input_tokens is None
    assert r.usage.wall_s > 0 and "no usage file written" in r.usage.notes[0]


def test_a_file_left_by_an_earlier_run_of_the_stage_is_not_read(tmp_path):
    ctx = stage_ctx(tmp_path)
    (ctx.evidence_dir / "implement.usage.json").write_text('{"cost_usd": 9}')
    r = CommandAgent("true").run(ctx)
    assert r.usage.cost_usd is None


def test_requests_in_the_file_are_priced_one_by_one(tmp_path):
    """Twelve requests of 30,000 input (25,000 cached) and 500 output on gemini-2.5-pro:
    twelve times one request, not the >200k tier of their 360k sum (case
    price-tier-per-request: the usage file was priced like the total)."""
    from genai_prices import Usage as PU
    from genai_prices import calc_price
    one = float(calc_price(PU(input_tokens=30_000, cache_read_tokens=25_000, output_tokens=500),
                           model_ref="gemini-2.5-pro").total_price)
    req = {"input_tokens": 30_000, "cache_read_tokens": 25_000, "output_tokens": 500}
    _, r = run_writing(tmp_path, {"model": "gemini-2.5-pro", "requests": [req] * 12})
    u = r.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (
        360_000, 6_000, 300_000)                         # totals are the requests' sums
    assert u.pricing == "per_request" and u.priced_requests == 12
    assert u.cost_usd == pytest.approx(12 * one, rel=1e-9)


def test_totals_without_requests_are_priced_as_a_total_and_say_so(tmp_path):
    _, r = run_writing(tmp_path, {"model": "gemini-2.5-pro", "input_tokens": 360_000,
                                  "output_tokens": 6_000})
    assert r.usage.pricing == "total" and r.usage.cost_source == "priced"
