"""The few statistics the harness reports: Wilson intervals, unbiased pass@k, exact McNemar.

* `wilson(k, n)` — the 95 % Wilson score interval for a binomial proportion k/n (what the
  reference's `show_ladder` printed; equal to scipy's
  `binomtest(k, n).proportion_ci(method="wilson")`).
* `pass_at_k(n, c, k)` — the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
  Models Trained on Code"): the probability that at least one of k samples drawn without
  replacement from n generated samples, c of them correct, is correct.
* `mcnemar_exact(a, b)` — paired comparison of two systems on the same tasks: exact two-sided
  binomial test on the discordant pairs.
* `mean_interval(xs)` — a mean over tasks with its 95 % t interval (graded measures such as the
  mean tiered reward, where a proportion's interval does not apply).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (lo, hi) for k successes in n trials; (0.0, 1.0) when n == 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom (then ~1.96)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def mean_interval(xs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of xs and its 95 % Student-t interval (mean +- t * sd / sqrt(n),
    sd with n - 1); a single value or none gives (mean, mean, mean) / (nan, nan, nan)."""
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, math.nan
    m = sum(xs) / n
    if n == 1:
        return m, m, m
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    half = t * sd / math.sqrt(n)
    return m, m - half, m + half


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k), as the numerically stable product
    1 - prod_{i=n-c+1}^{n} (1 - k/i)."""
    if not (0 <= c <= n) or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(ns: Sequence[int], cs: Sequence[int], k: int) -> float:
    """pass@k averaged over tasks (n_i samples, c_i correct for task i)."""
    if not ns:
        return 0.0
    return sum(pass_at_k(n, c, k) for n, c in zip(ns, cs, strict=True)) / len(ns)


def _binom_two_sided(b: int, c: int) -> float:
    """Exact two-sided p-value of b successes out of b + c under p = 1/2 (doubled tail, capped)."""
    n = b + c
    if n == 0:
        return 1.0
    lo = min(b, c)
    tail = sum(math.comb(n, i) for i in range(lo + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """Exact McNemar test for paired binary outcomes of systems A and B on the same items.

    Returns {"b": #(A right, B wrong), "c": #(A wrong, B right), "n": #pairs, "p": two-sided p}.
    With p = 1/2 under H0 the binomial is symmetric, so the two-sided p-value is twice the smaller
    tail (capped at 1), matching scipy's `binomtest(b, b + c, 0.5).pvalue`.
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    nb = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    nc = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return {"b": nb, "c": nc, "n": len(a), "p": _binom_two_sided(nb, nc)}
