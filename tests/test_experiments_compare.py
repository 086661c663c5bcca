"""The comparison built from a run table (andon.experiments.compare): pairing and dropped
tasks, rates with error runs excluded and counted, the paired table and McNemar, per-task
ratios, pass@k / pass^k / consistency with repeats, several candidates, and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from andon.experiments import stats
from andon.experiments.compare import ComparisonError, as_dict, compare, holm
from andon.experiments.runs import read_csv

HAND = """task,condition,outcome,cost_usd,input_tokens,output_tokens,wall_s
t1,A,resolved,1,100,10,5
t2,A,resolved,1,100,10,5
t3,A,resolved,1,100,10,5
t4,A,resolved,1,100,10,5
t5,A,unresolved,1,100,10,5
t6,A,unresolved,1,100,10,5
t7,A,resolved,1,100,10,5
t8,A,error,7,,,
t1,B,resolved,2,300,30,5
t2,B,unresolved,0.5,50,5,5
t3,B,unresolved,,,,5
t4,B,resolved,0,100,10,5
t5,B,resolved,4,100,10,5
t6,B,unresolved,1,100,10,5
t7,B,resolved,3,100,10,5
t8,B,resolved,1,100,10,5
t9,B,resolved,1,100,10,5
"""


def table(tmp_path: Path, text: str):
    p = tmp_path / "runs.csv"
    p.write_text(text)
    return read_csv(p)


def test_hand_computed_pair(tmp_path):
    c = compare(table(tmp_path, HAND), "A", "B", resamples=2000, seed=1)
    (pair,) = c.pairs
    assert pair.tasks == 7
    assert pair.dropped == [("t8", "every run of A errored (1)"), ("t9", "no run of A")]
    # both t1 t4 t7; only A t2 t3; only B t5; neither t6
    t = pair.table
    assert (t.both, t.only_a, t.only_b, t.neither) == (3, 2, 1, 1)
    assert t.p_value == pytest.approx(1.0) and t.p_holm is None
    ra, rb = pair.rate_a, pair.rate_b
    assert (ra.resolved, ra.runs, ra.errors) == (5, 7, 0)
    assert (rb.resolved, rb.runs) == (4, 7)
    ci = stats.wilson_interval(5, 7)
    assert (ra.low, ra.high) == (ci.low, ci.high)
    # cost: t3 has none for B, t4's B cost is 0 (not > 0): 5 tasks, ratios 2, .5, 4, 1, 3
    cost = next(r for r in pair.ratios if r.metric == "cost_usd")
    assert (cost.tasks, cost.missing, cost.b_higher) == (5, 2, 3)
    assert (cost.median, cost.q1, cost.q3) == (2.0, 1.0, 3.0)
    assert cost.ci_low <= cost.median <= cost.ci_high
    total = next(r for r in pair.ratios if r.metric == "total_tokens")
    assert total.tasks == 6 and total.median == 1.0       # t1 ratio 3, t2 0.5, others 1
    tool = next(r for r in pair.ratios if r.metric == "tool_s")
    assert (tool.tasks, tool.missing, tool.median) == (0, 7, None)
    assert pair.regressions == ["t2", "t3"]
    assert pair.cost_increases == ["t5", "t7", "t1"]
    assert pair.repeats is None


def test_error_runs_are_excluded_from_both_rates_and_counted(tmp_path):
    c = compare(table(tmp_path, HAND), "A", "B", resamples=100)
    a, b = c.conditions
    # all of A's runs: 8, one error; the error is neither resolved nor unresolved
    assert (a.condition, a.runs, a.errors, a.resolved) == ("A", 7, 1, 5)
    assert a.rate == pytest.approx(5 / 7)
    assert (b.runs, b.errors, b.resolved) == (9, 0, 6)
    # an error on a compared task is counted beside that pair's rate, not in it
    text = ("task,condition,repeat,outcome\n"
            "t1,A,0,resolved\nt1,B,0,resolved\nt1,B,1,error\n"
            "t2,A,0,unresolved\nt2,B,0,error\n")
    c = compare(table(tmp_path, text), "A", "B", resamples=100)
    (pair,) = c.pairs
    assert (pair.rate_b.resolved, pair.rate_b.runs, pair.rate_b.errors) == (1, 1, 1)
    assert pair.dropped == [("t2", "every run of B errored (1)")]
    assert (c.conditions[1].runs, c.conditions[1].errors) == (1, 2)


REPEATS = """task,condition,repeat,resolved,outcome
t1,A,0,,error
t1,A,1,true,
t1,A,2,false,
t1,A,3,false,
t1,B,0,true,
t1,B,1,true,
t1,B,2,true,
t2,A,0,false,
t2,A,1,false,
t2,A,2,false,
t2,B,0,false,
t2,B,1,true,
t2,B,2,true,
"""


def test_repeats_pass_at_k_pass_hat_k_and_consistency(tmp_path):
    (pair,) = compare(table(tmp_path, REPEATS), "A", "B", resamples=100).pairs
    ra, rb = pair.repeats
    assert ra.condition == "A" and [p.k for p in ra.pass_k] == [1, 2, 3]
    by_k = {p.k: p for p in ra.pass_k}
    assert by_k[1].pass_at_k == pytest.approx((1 / 3 + 0) / 2)
    assert by_k[3].pass_at_k == pytest.approx(0.5) and by_k[3].pass_hat_k == 0.0
    assert by_k[3].tasks == 2
    by_k = {p.k: p for p in rb.pass_k}
    assert by_k[1].pass_at_k == pytest.approx((1 + 2 / 3) / 2)
    assert by_k[3].pass_hat_k == pytest.approx(0.5)
    assert (ra.always, ra.sometimes, ra.never) == (0, 1, 1)
    assert (rb.always, rb.sometimes, rb.never) == (1, 1, 0)
    # the paired table takes the first valid run: A's repeat 0 errored, so repeat 1 (resolved)
    t = pair.table
    assert (t.both, t.only_a, t.only_b, t.neither) == (1, 0, 0, 1)
    assert (pair.rate_a.resolved, pair.rate_a.runs, pair.rate_a.errors) == (1, 6, 1)
    assert pair.regressions == []


def test_every_condition_against_the_baseline_with_holm(tmp_path):
    text = HAND + "".join(f"t{i},C,{'resolved' if i < 3 else 'unresolved'},1,1,1,1\n"
                          for i in range(1, 8))
    c = compare(table(tmp_path, text), "A", resamples=100)
    assert [(p.a, p.b) for p in c.pairs] == [("A", "B"), ("A", "C")]
    ps = [p.table.p_value for p in c.pairs]
    assert [p.table.p_holm for p in c.pairs] == holm(ps)
    assert [r.condition for r in c.conditions] == ["A", "B", "C"]


def test_holm_hand_computed():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_unknown_or_identical_conditions(tmp_path):
    t = table(tmp_path, HAND)
    with pytest.raises(ComparisonError, match=r"no condition 'AA'.*the baseline.*did you mean"):
        compare(t, "AA", "B")
    with pytest.raises(ComparisonError, match="no condition 'Z' \\(the candidate\\); "
                                              "the conditions are: A, B"):
        compare(t, "A", "Z")
    with pytest.raises(ComparisonError, match="the candidate is the baseline"):
        compare(t, "A", "A")
    one = table(tmp_path, "task,condition,resolved\nt1,A,1\n")
    with pytest.raises(ComparisonError, match="needs at least two"):
        compare(one, "A")


def test_same_seed_same_report_and_valid_json(tmp_path):
    t = table(tmp_path, HAND)
    one = as_dict(compare(t, "A", "B", resamples=500, seed=9))
    two = as_dict(compare(t, "A", "B", resamples=500, seed=9))
    assert one == two
    text = json.dumps(one, allow_nan=False)
    assert json.loads(text)["seed"] == 9
    rows = one["pairs"][0]["rows"]
    assert rows[0]["task"] == "t1" and rows[0]["a"]["fraction"] == 1.0
    assert one["pairs"][0]["dropped"][0] == {"task": "t8",
                                             "reason": "every run of A errored (1)"}
