"""Usage records: one token convention, costs reported / priced / unknown, totals."""

from types import SimpleNamespace

import pytest
from genai_prices import Usage as PU
from genai_prices import calc_price

from andon.usage import Usage, from_anthropic, library_version, price, sum_counts, totals


def test_anthropic_counts_are_converted_to_the_opentelemetry_convention():
    # Anthropic's input_tokens excludes cache tokens; the store's includes them.
    t = from_anthropic(10, 25, 0, 21570)
    assert t == {"input_tokens": 21580, "output_tokens": 25, "cache_read_tokens": 0,
                 "cache_write_tokens": 21570}
    assert from_anthropic(None, 5, None, None)["input_tokens"] is None
    assert from_anthropic(3, 8, None, None)["input_tokens"] == 3  # no cache block: no cache


def test_worked_example_of_formats_md_is_priced_by_the_library():
    """10 input + 21,570 cache-write + 25 output on claude-opus-4-5 = $0.1354875."""
    u = Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570))
    price(u)
    assert u.cost_source == "priced"
    assert u.cost_usd == pytest.approx(0.1354875, abs=1e-12)
    assert u.price_source == f"genai-prices {library_version()}"


def test_reported_cost_is_used_as_is():
    u = Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570))
    u.report_cost(0.5)
    price(u)
    assert (u.cost_usd, u.cost_source, u.price_source) == (0.5, "reported", None)


def test_unknown_model_is_unknown_not_zero():
    u = Usage(model="no-such-model-7", input_tokens=100, output_tokens=5)
    price(u)
    assert u.cost_usd is None and u.cost_source == "unknown"
    assert any("no price for model 'no-such-model-7'" in n for n in u.notes)


def test_unknown_tokens_or_model_leave_cost_unknown():
    u = price(Usage(model="claude-opus-4-5", input_tokens=None, output_tokens=5))
    assert u.cost_usd is None and "not reported" in u.notes[0]
    u = price(Usage(model=None, input_tokens=10, output_tokens=5))
    assert u.cost_usd is None and "model is unknown" in u.notes[0]
    assert price(Usage()).cost_usd is None


def test_user_price_override_wins_over_the_library():
    p = SimpleNamespace(input_per_mtok=2.0, output_per_mtok=10.0, cache_read_per_mtok=0.2,
                        cache_write_per_mtok=None)
    u = Usage(model="claude-opus-4-5", input_tokens=1_000_000, output_tokens=100_000,
              cache_read_tokens=500_000, cache_write_tokens=100_000)
    price(u, {"claude-opus-4-5": p})
    # 400k uncached × $2 + 500k × $0.2 + 100k cache write at the input rate × $2 + 100k × $10
    assert u.cost_usd == pytest.approx(0.8 + 0.1 + 0.2 + 1.0)
    assert u.price_source == 'andon.toml [prices."claude-opus-4-5"]'


def test_several_models_are_priced_each_and_one_unknown_makes_all_unknown():
    u = Usage(model="claude-opus-4-5", models={
        "claude-opus-4-5": {"input_tokens": 1000, "output_tokens": 10},
        "claude-haiku-4-5": {"input_tokens": 1000, "output_tokens": 10}})
    price(u)
    assert u.cost_source == "priced" and u.cost_usd > 0
    u.models["mystery-1"] = {"input_tokens": 1, "output_tokens": 1}
    price(u)
    assert u.cost_usd is None and u.cost_source == "unknown"


def test_provider_prefixed_model_names_are_found():
    u = price(Usage(model="gemini/gemini-2.5-pro", input_tokens=1000, output_tokens=10))
    assert u.cost_source == "priced"


def test_sum_counts_never_turns_unknown_into_zero():
    assert sum_counts([{"input_tokens": 1, "output_tokens": None},
                       {"input_tokens": 2, "output_tokens": None}]) == {
        "input_tokens": 3, "output_tokens": None, "cache_read_tokens": None,
        "cache_write_tokens": None}
    assert sum_counts([{"input_tokens": 1}, {"input_tokens": None}])["input_tokens"] is None


def test_totals_count_runs_whose_cost_is_unknown():
    t = totals([{"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.25, "wall_s": 3.0},
                {"input_tokens": 5, "cost_usd": None, "wall_s": 1.5}, None])
    assert t["runs"] == 3 and t["input_tokens"] == 15 and t["output_tokens"] == 2
    assert t["cost_usd"] == 0.25 and t["cost_unknown_runs"] == 2
    assert t["wall_s"] == 4.5
    assert totals([None])["cost_usd"] is None


def test_usage_round_trips_through_a_dict():
    u = Usage(model="m", input_tokens=1, notes=["x"], models={"m": {"input_tokens": 1}})
    assert Usage.from_dict(u.to_dict()) == u


# -- per-request pricing (long-context tiers apply per request) -------------------------------

def _req(inp, out, cr=0, cw=0, model=None):
    r = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": cr,
         "cache_write_tokens": cw}
    return r | ({"model": model} if model else {})


def test_requests_are_priced_one_by_one_so_a_long_context_tier_is_not_applied_to_the_sum():
    """Twelve 30k-token requests (25k cached, 500 out) on gemini-2.5-pro: each is far below
    the 200k tier, so the run costs twelve times the library's price of one request — not
    the >200k rate the summed 360k input tokens would get (case price-tier-per-request)."""
    one = float(calc_price(PU(input_tokens=30_000, cache_read_tokens=25_000, output_tokens=500),
                           model_ref="gemini-2.5-pro").total_price)
    summed = float(calc_price(PU(input_tokens=360_000, cache_read_tokens=300_000,
                                 output_tokens=6_000), model_ref="gemini-2.5-pro").total_price)
    assert summed > 1.5 * 12 * one        # the trap the per-request pricing avoids
    u = Usage(model="gemini-2.5-pro", input_tokens=360_000, output_tokens=6_000,
              cache_read_tokens=300_000, requests=[_req(30_000, 500, 25_000)] * 12)
    price(u)
    assert u.cost_source == "priced" and u.pricing == "per_request"
    assert u.cost_usd == pytest.approx(12 * one, rel=1e-9)


def test_only_a_total_is_priced_as_a_total_and_says_so():
    u = price(Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570)))
    assert u.pricing == "total"
    assert u.cost_usd == pytest.approx(0.1354875, abs=1e-12)
    u = Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570))
    u.report_cost(0.5)
    assert price(u).pricing is None       # nothing was priced


def test_requests_are_not_stored_but_their_count_and_the_pricing_are():
    u = price(Usage(model="gpt-4o", input_tokens=20, output_tokens=2,
                    requests=[_req(10, 1), _req(10, 1)]))
    d = u.to_dict()
    assert "requests" not in d and d["pricing"] == "per_request" and d["priced_requests"] == 2
    assert Usage.from_dict(d).pricing == "per_request"


def test_requests_that_do_not_add_up_to_the_totals_are_not_used():
    """A per-request list that disagrees with the run's totals (a cut transcript) would
    price other tokens than the ones recorded: the totals are priced, with a note."""
    u = price(Usage(model="gpt-4o", input_tokens=30, output_tokens=3,
                    requests=[_req(10, 1), _req(10, 1)]))
    assert u.pricing == "total"
    assert any("requests do not add up" in n for n in u.notes)


def test_a_request_of_an_unknown_model_makes_the_cost_unknown_not_partial():
    u = price(Usage(model="gpt-4o", input_tokens=20, output_tokens=2,
                    requests=[_req(10, 1), _req(10, 1, model="no-such-model-7")]))
    assert u.cost_usd is None and u.cost_source == "unknown"


def test_a_dated_or_dashed_model_name_is_priced_as_the_library_names_it():
    """Codex writes `gpt-5-1-codex-2025-11-13`; genai-prices matches it once undated."""
    u = price(Usage(model="gpt-5-1-codex-2025-11-13", input_tokens=1_000_000,
                    output_tokens=0))
    ref = price(Usage(model="gpt-5.1-codex", input_tokens=1_000_000, output_tokens=0))
    assert u.cost_usd == ref.cost_usd and "(as gpt-5-1-codex)" in u.price_source


# -- a reported cost checked against andon's own price ----------------------------------------

def test_a_reported_cost_far_from_andons_price_is_replaced_and_the_evidence_says_why():
    u = Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570))
    u.report_cost(0.2409)                 # cache writes billed twice
    price(u, check_reported=True)
    assert u.cost_source == "priced" and u.cost_usd == pytest.approx(0.1354875)
    assert u.reported_cost_usd == pytest.approx(0.2409)
    assert any("reported $0.2409" in n and "andon's price" in n for n in u.notes)


def test_a_reported_cost_within_the_tolerance_is_kept():
    u = Usage(model="claude-opus-4-5", **from_anthropic(10, 25, 0, 21570))
    u.report_cost(0.1360)                 # rounding, a slightly different table
    price(u, check_reported=True)
    assert (u.cost_source, u.cost_usd) == ("reported", 0.1360)


def test_a_reported_cost_andon_cannot_check_is_kept():
    u = Usage(model="no-such-model-7", input_tokens=100, output_tokens=5)
    u.report_cost(0.25)
    price(u, check_reported=True)
    assert (u.cost_source, u.cost_usd) == ("reported", 0.25)


def test_totals_with_a_request_count_are_priced_as_that_many_equal_requests():
    """Gemini CLI's JSON gives totals and `totalRequests` only: twelve requests of 30,000
    input (25,000 cached) and 500 output tokens cost twelve times one such request."""
    one = float(calc_price(PU(input_tokens=30_000, cache_read_tokens=25_000, output_tokens=500),
                           model_ref="gemini-2.5-pro").total_price)
    u = Usage(model="gemini-2.5-pro", input_tokens=360_000, output_tokens=6_000,
              cache_read_tokens=300_000,
              models={"gemini-2.5-pro": {"input_tokens": 360_000, "output_tokens": 6_000,
                                         "cache_read_tokens": 300_000, "requests": 12}})
    price(u)
    assert u.pricing == "even_split" and u.cost_usd == pytest.approx(12 * one, rel=1e-9)
    # counts that do not divide evenly keep their exact sums (the last request takes the rest)
    u = Usage(model="gpt-4o", input_tokens=7, output_tokens=5,
              models={"gpt-4o": {"input_tokens": 7, "output_tokens": 5, "requests": 3}})
    whole = price(Usage(model="gpt-4o", input_tokens=7, output_tokens=5)).cost_usd
    assert price(u).cost_usd == pytest.approx(whole, rel=1e-9)   # linear below every tier


def test_andon_show_says_how_a_cost_was_priced():
    from io import StringIO

    from rich.console import Console

    from andon.report.evidence import _show_usage
    for pricing, words in (("total", "on the total: a per-request price tier may be wrong"),
                           ("per_request", "per request")):
        buf = StringIO()
        u = Usage(model="gpt-4o", input_tokens=10, output_tokens=1, cost_usd=0.5,
                  cost_source="priced", price_source="genai-prices 0.2.3", pricing=pricing)
        _show_usage(Console(file=buf, width=200), u.to_dict())
        assert f"$0.5000 (priced, genai-prices 0.2.3, {words})" in buf.getvalue()


def test_the_board_never_cuts_a_test_id_in_the_middle():
    from andon.report.board import clip
    tid = "tests/test_ops.py::test_multiply_negative_numbers"
    reason = "hermetic: 2 test(s) fail in a fresh clone: " + tid + " " + tid
    cut = clip(reason, 100)
    assert len(cut) <= 100 and cut.endswith(" …")
    assert all(w == tid or w in reason.split() for w in cut[:-2].split())  # whole words only
    assert clip("short", 100) == "short"
