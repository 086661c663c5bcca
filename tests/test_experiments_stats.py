"""The statistics of `andon compare` (andon.experiments.stats) against hand-computed small
cases and against independent computations (scipy's own Wilson interval and binomial test,
scipy's bootstrap, the closed forms of pass@k and pass^k with math.comb)."""

from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from andon.experiments import stats

# -- Wilson score interval ---------------------------------------------------------------


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # by hand: z = 1.959964, centre (p + z²/2n)/(1 + z²/n),
    # half-width z/(1 + z²/n)·√(p(1-p)/n + z²/4n²)
    (8, 10, 0.490162, 0.943318),
    (0, 10, 0.0, 0.277533),
    (10, 10, 0.722467, 1.0),
    (1, 2, 0.094531, 0.905469),
])
def test_wilson_matches_hand_computed_bounds(k, n, low, high):
    ci = stats.wilson_interval(k, n)
    assert ci.low == pytest.approx(low, abs=1e-6)
    assert ci.high == pytest.approx(high, abs=1e-6)
    assert ci.confidence == 0.95


@pytest.mark.parametrize("n", [1, 3, 7, 20, 61])
def test_wilson_agrees_with_scipy(n):
    for k in range(n + 1):
        for conf in (0.9, 0.95, 0.99):
            ours = stats.wilson_interval(k, n, confidence=conf)
            ref = sps.binomtest(k, n).proportion_ci(confidence_level=conf, method="wilson")
            assert (ours.low, ours.high) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_wilson_rejects_impossible_counts():
    for k, n in [(0, 0), (3, 2), (-1, 4)]:
        with pytest.raises(ValueError):
            stats.wilson_interval(k, n)
    with pytest.raises(ValueError):
        stats.wilson_interval(1, 2, confidence=1.0)


# -- exact McNemar ------------------------------------------------------------------------


@pytest.mark.parametrize(("only_a", "only_b", "p"), [
    (1, 9, 22 / 1024),       # 2·(C(10,0) + C(10,1))/2^10
    (9, 1, 22 / 1024),       # symmetric
    (2, 5, 58 / 128),        # 2·(1 + 7 + 21)/2^7
    (0, 5, 2 / 32),
    (3, 3, 1.0),
    (0, 0, 1.0),             # no discordant pair: no evidence either way
])
def test_mcnemar_exact_matches_hand_computed_p(only_a, only_b, p):
    result = stats.mcnemar_exact(only_a, only_b)
    assert result.p_value == pytest.approx(p, rel=1e-12)
    assert (result.only_a, result.only_b) == (only_a, only_b)


def test_mcnemar_exact_agrees_with_scipy_binomial_test():
    for b in range(12):
        for c in range(12):
            if b + c == 0:
                continue
            ref = sps.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
            assert stats.mcnemar_exact(b, c).p_value == pytest.approx(ref, rel=1e-12)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 3)


# -- median, IQR, bootstrap ---------------------------------------------------------------


def test_median_iqr_hand_computed():
    s = stats.median_iqr([4.0, 1.0, 3.0, 2.0])
    assert (s.median, s.q1, s.q3, s.n) == (2.5, 1.75, 3.25, 4)
    s = stats.median_iqr([5.0])
    assert (s.median, s.q1, s.q3, s.n) == (5.0, 5.0, 5.0, 1)
    with pytest.raises(ValueError):
        stats.median_iqr([])


def test_bootstrap_same_seed_same_interval_and_seed_matters():
    rng = np.random.default_rng(7)
    values = rng.lognormal(0.0, 0.5, size=301)
    a = stats.bootstrap_median_ci(values, resamples=3000, seed=42)
    b = stats.bootstrap_median_ci(list(values), resamples=3000, seed=42)
    c = stats.bootstrap_median_ci(values, resamples=3000, seed=43)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    med = float(np.median(values))
    assert a.low < med < a.high


@pytest.mark.parametrize("size", [400, 301])
def test_bootstrap_agrees_with_scipy_percentile_bootstrap(size):
    rng = np.random.default_rng(3)
    values = rng.lognormal(0.2, 0.6, size=size)
    ours = stats.bootstrap_median_ci(values, resamples=20000, seed=1)
    # scipy 1.15 renamed random_state to rng
    gen = np.random.default_rng(2)
    seed_kw = ({"rng": gen} if "rng" in inspect.signature(sps.bootstrap).parameters
               else {"random_state": gen})
    ref = sps.bootstrap((values,), np.median, n_resamples=20000, method="percentile",
                        confidence_level=0.95, vectorized=True, **seed_kw).confidence_interval
    # two Monte Carlo estimates of the same percentiles: equal within a small fraction of
    # the interval's width
    width = ref.high - ref.low
    assert ours.low == pytest.approx(ref.low, abs=0.1 * width)
    assert ours.high == pytest.approx(ref.high, abs=0.1 * width)


def test_bootstrap_degenerate_inputs():
    ci = stats.bootstrap_median_ci([2.0, 2.0, 2.0], resamples=500, seed=0)
    assert (ci.low, ci.high) == (2.0, 2.0)
    ci = stats.bootstrap_median_ci([0.5], resamples=500, seed=0)
    assert (ci.low, ci.high) == (0.5, 0.5)
    with pytest.raises(ValueError):
        stats.bootstrap_median_ci([], resamples=500, seed=0)
    with pytest.raises(ValueError):
        stats.bootstrap_median_ci([1.0, 2.0], resamples=0, seed=0)


@pytest.mark.parametrize(("values", "exact"), [
    # every one of the 27 samples of 3 from [1, 2, 3] enumerated: median 1 in 7, 2 in 13, 3 in 7
    ([3.0, 1.0, 2.0], {1.0: 7 / 27, 2.0: 13 / 27, 3.0: 7 / 27}),
    # the 4 samples of 2 from [1, 3]: (1,1) (1,3) (3,1) (3,3)
    ([1.0, 3.0], {1.0: 0.25, 2.0: 0.5, 3.0: 0.25}),
    # the 256 samples of 4 from [1, 2, 4, 8], enumerated below
    ([8.0, 1.0, 4.0, 2.0], None),
])
def test_bootstrap_medians_have_the_resampling_distribution(values, exact):
    if exact is None:
        exact = {}
        for sample in itertools.product(values, repeat=len(values)):
            med = float(np.median(sample))
            exact[med] = exact.get(med, 0) + 1 / len(values) ** len(values)
    medians = stats.bootstrap_medians(values, resamples=200_000, seed=11)
    assert medians.shape == (200_000,)
    got = {float(v): c / medians.size for v, c in zip(*np.unique(medians, return_counts=True),
                                                      strict=True)}
    assert set(got) <= set(exact)
    for v, p in exact.items():
        # binomial standard error at 200 000 draws is below 0.0012; allow 5 of them
        assert got.get(v, 0.0) == pytest.approx(p, abs=0.006)


# -- pass@k and pass^k --------------------------------------------------------------------


def test_pass_at_k_hand_computed():
    assert stats.pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert stats.pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert stats.pass_at_k(3, 1, 3) == 1.0
    assert stats.pass_at_k(3, 0, 3) == 0.0
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)


def test_pass_hat_k_hand_computed():
    assert stats.pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    assert stats.pass_hat_k(3, 3, 3) == 1.0
    assert stats.pass_hat_k(3, 2, 3) == 0.0
    assert stats.pass_hat_k(4, 2, 1) == pytest.approx(0.5)


def test_pass_at_k_and_pass_hat_k_equal_closed_forms():
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert stats.pass_at_k(n, c, k) == pytest.approx(
                    1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)
                assert stats.pass_hat_k(n, c, k) == pytest.approx(
                    math.comb(c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_rejects_k_beyond_n():
    for f in (stats.pass_at_k, stats.pass_hat_k):
        with pytest.raises(ValueError):
            f(2, 1, 3)
        with pytest.raises(ValueError):
            f(2, 3, 1)
        with pytest.raises(ValueError):
            f(2, 1, 0)
