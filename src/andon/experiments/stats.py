"""The statistics of a comparison, with no I/O: proportions with intervals, the paired test,
the spread of per-task ratios, and the repeat-based success measures.

Every function takes plain numbers or a sequence of floats and returns a small frozen
dataclass or a float; bad arguments raise ``ValueError`` with the expected and the given
value. Where scipy or numpy has the method, it is used (the binomial test; the random
generator), so that the code here is the formula's bookkeeping, not its arithmetic.

Sources:

- Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
  *Journal of the American Statistical Association* 22(158), 209–212.
- McNemar, Q. (1947). Note on the sampling error of the difference between correlated
  proportions or percentages. *Psychometrika* 12(2), 153–157; its exact form is the two-sided
  binomial test of the discordant pairs against p = ½.
- Efron, B. (1979). Bootstrap methods: another look at the jackknife. *The Annals of
  Statistics* 7(1), 1–26; the percentile interval as in Efron & Tibshirani (1993), *An
  Introduction to the Bootstrap*, ch. 13; each sample's median drawn through its order
  statistics (David, H. A. & Nagaraja, H. N. (2003). *Order Statistics*, 3rd ed., Wiley).
- Hyndman, R. J. & Fan, Y. (1996). Sample quantiles in statistical packages. *The American
  Statistician* 50(4), 361–365 (definition 7, numpy's default, for the quartiles).
- Chen, M. et al. (2021). Evaluating large language models trained on code.
  arXiv:2107.03374, §2.1 (the unbiased pass@k estimator).
- Yao, S. et al. (2024). τ-bench: a benchmark for tool-agent-user interaction in real-world
  domains. arXiv:2406.12045, §4 (pass^k, the chance that all k runs succeed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

from ..errors import InvalidArgument


@dataclass(frozen=True)
class Interval:
    """A two-sided interval ``[low, high]`` at ``confidence`` (e.g. 0.95), in the unit of
    the estimate it bounds (a proportion in [0, 1], or a ratio)."""

    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class McNemar:
    """The exact McNemar test of a paired 2×2 table: ``only_a`` tasks resolved by A alone,
    ``only_b`` by B alone; ``p_value`` two-sided, 1.0 when there is no discordant pair."""

    only_a: int
    only_b: int
    p_value: float


@dataclass(frozen=True)
class Spread:
    """Median and quartiles (``q1``, ``q3``; IQR = q3 − q1) of ``n`` values, in their unit."""

    median: float
    q1: float
    q3: float
    n: int


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InvalidArgument(f"confidence: expected a number strictly between 0 and 1, "
                         f"got {confidence!r}")


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """The Wilson score interval (Wilson 1927) of a proportion ``successes / trials``.

    With z the two-sided normal quantile of ``confidence`` and p̂ = successes/trials::

        centre = (p̂ + z²/2n) / (1 + z²/n)
        half   = z / (1 + z²/n) · √(p̂(1 − p̂)/n + z²/4n²)

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not empty at 0 or n
    successes. Requires ``0 <= successes <= trials`` and ``trials >= 1``.
    """
    _check_confidence(confidence)
    if trials < 1 or not 0 <= successes <= trials:
        raise InvalidArgument("Wilson interval: expected 0 <= successes <= trials and "
                              f"trials >= 1, got successes={successes}, trials={trials}")
    z = float(_sps.norm.ppf(0.5 + confidence / 2))
    n = float(trials)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # clamp the rounding at the edges (0 successes gives centre == half up to an ulp)
    return Interval(max(0.0, centre - half), min(1.0, centre + half), confidence)


def mcnemar_exact(only_a: int, only_b: int) -> McNemar:
    """The exact McNemar test (McNemar 1947) on the discordant pairs of a paired 2×2 table.

    Under the null hypothesis (A and B resolve tasks equally often) each discordant task is
    A's or B's with probability ½, so ``only_a`` is Binomial(only_a + only_b, ½); the p-value
    is scipy's two-sided exact binomial test (``scipy.stats.binomtest``). Concordant pairs
    carry no information about the difference and are not arguments. No discordant pair
    gives p = 1.0. Counts must be >= 0.
    """
    if only_a < 0 or only_b < 0:
        raise InvalidArgument(f"McNemar: expected discordant counts >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    if n == 0:
        return McNemar(only_a, only_b, 1.0)
    p = float(_sps.binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)
    return McNemar(only_a, only_b, min(1.0, p))


def median_iqr(values: Sequence[float]) -> Spread:
    """Median and quartiles of ``values`` (at least one), quartiles by linear interpolation
    between order statistics (Hyndman & Fan 1996, definition 7; numpy's default)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise InvalidArgument("median/IQR: expected at least one value, got none")
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return Spread(float(med), float(q1), float(q3), int(arr.size))


def bootstrap_medians(values: Sequence[float], *, resamples: int = 10_000,
                      seed: int = 0) -> np.ndarray:
    """The medians of ``resamples`` bootstrap samples of ``values`` (Efron 1979): each
    sample is ``len(values)`` values drawn with replacement. Returns a float array of
    shape ``(resamples,)`` in the unit of ``values``; the same values, seed and resamples
    always give the same array (numpy's PCG64 generator seeded by ``seed``).

    Drawing n indices and taking their median costs O(n) per sample; instead the median's
    order statistics are drawn directly, which has exactly the same distribution. With
    U_(1) <= … <= U_(n) the order statistics of n uniforms on (0, 1), the indices
    floor(n·U_i) are n draws with replacement from 0..n−1 and, floor being monotone, the
    k-th smallest index is floor(n·U_(k)). U_(k) ~ Beta(k, n − k + 1), and given U_(k) = u,
    U_(k+1) = u + (1 − u)·Beta(1, n − k) (the least of the n − k uniforms above u) —
    standard results on uniform order statistics (David & Nagaraja 2003, *Order
    Statistics*, 3rd ed., §2.2–2.5). So a sample's median is x_(floor(n·U_(m))) for odd n
    (m = (n + 1)/2) and the mean of the values at the m-th and (m+1)-th indices for even n
    (m = n/2), with x sorted: O(1) per sample, so 10 000 resamples of thousands of ratios
    take milliseconds.
    """
    arr = np.sort(np.asarray(values, dtype=float))
    if arr.size == 0:
        raise InvalidArgument("bootstrap: expected at least one value, got none")
    if resamples < 1:
        raise InvalidArgument(f"bootstrap: expected resamples >= 1, got {resamples}")
    n = arr.size
    rng = np.random.default_rng(seed)
    m = (n + 1) // 2
    u = rng.beta(m, n - m + 1, size=resamples)
    low = np.minimum((n * u).astype(np.int64), n - 1)
    if n % 2:
        return arr[low]
    # even n: the (m+1)-th order statistic, the least of the n − m uniforms above u
    nxt = u + (1.0 - u) * rng.beta(1, n - m, size=resamples)
    high = np.minimum((n * nxt).astype(np.int64), n - 1)
    return (arr[low] + arr[high]) / 2.0


def bootstrap_median_ci(values: Sequence[float], *, resamples: int = 10_000, seed: int = 0,
                        confidence: float = 0.95) -> Interval:
    """Percentile bootstrap interval of the median (Efron 1979; Efron & Tibshirani 1993,
    ch. 13): the ``(1 − confidence)/2`` and ``(1 + confidence)/2`` quantiles (linear
    interpolation) of :func:`bootstrap_medians`. Units: those of ``values``. The same
    values, seed and resamples always give the same interval. Requires at least one value
    and ``resamples >= 1``.
    """
    _check_confidence(confidence)
    medians = bootstrap_medians(values, resamples=resamples, seed=seed)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), confidence)


def _check_nck(n: int, c: int, k: int) -> None:
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise InvalidArgument(f"pass@k: expected n >= 1, 0 <= c <= n, 1 <= k <= n, "
                         f"got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k, the chance that at least one of k runs resolves a task,
    from ``n`` runs of which ``c`` resolved (Chen et al. 2021, §2.1)::

        pass@k = 1 − C(n − c, k) / C(n, k)

    computed on Python's exact integers (so the product form Chen et al. use against
    floating-point overflow is not needed). A fraction in [0, 1]; average it over tasks for
    a condition. Requires 1 <= k <= n and 0 <= c <= n.
    """
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k, the chance that all of k runs resolve a task, from ``n``
    runs of which ``c`` resolved (Yao et al. 2024, §4)::

        pass^k = C(c, k) / C(n, k)

    A fraction in [0, 1]: with k = n it is 1 only when every run resolved, so an agent that
    succeeds once in three scores pass@3 = 1 but pass^3 = 0. Requires 1 <= k <= n.
    """
    _check_nck(n, c, k)
    if c < k:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)
