"""jacrl.stats against closed forms, brute force and scipy."""

from __future__ import annotations

import itertools
import math

import pytest
from scipy.stats import binomtest

from jacrl.stats import mcnemar_exact, mean_pass_at_k, pass_at_k, wilson


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10, 16, 20])
def test_pass_at_k_matches_closed_form(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            closed = 1 - math.comb(n - c, k) / math.comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_pass_at_k_matches_subset_enumeration(n):
    """pass@k = share of k-subsets of the n samples that contain a correct one."""
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            hit = sum(any(samples[i] for i in s) for s in subsets)
            assert pass_at_k(n, c, k) == pytest.approx(hit / len(subsets), abs=1e-12)


def test_pass_at_k_edges_and_stability():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k
    # large n: the product form stays finite where comb() ratios would be huge integers
    v = pass_at_k(2000, 3, 100)
    assert 0 < v < 1 and v == pytest.approx(1 - math.comb(1997, 100) / math.comb(2000, 100))
    assert mean_pass_at_k([4, 4], [0, 4], 1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_wilson_matches_scipy_on_a_grid():
    for n in [1, 2, 3, 5, 7, 10, 15, 18, 32, 50, 100, 1000]:
        for k in range(n + 1):
            ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            lo, hi = wilson(k, n)
            # scipy uses the exact normal quantile 1.95996...; 1.96 differs in the 4th decimal
            assert lo == pytest.approx(ci.low, abs=5e-5), (k, n)
            assert hi == pytest.approx(ci.high, abs=5e-5), (k, n)
    from scipy.stats import norm

    zq = norm.ppf(0.975)
    for k, n in [(7, 18), (11, 18), (0, 18), (4, 15), (18, 18)]:
        ci = binomtest(k, n).proportion_ci(method="wilson")
        assert wilson(k, n, z=zq) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_reference_values():
    """SPEC §7.3's printed examples (x100, rounded to 0 dp)."""
    for (k, n), (lo, hi) in {
        (7, 18): (20, 61),
        (11, 18): (39, 80),
        (4, 15): (11, 52),
        (0, 18): (0, 18),
    }.items():
        a, b = wilson(k, n)
        assert (round(100 * a), round(100 * b)) == (lo, hi)
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_known_cases():
    # identical systems: no discordant pairs
    r = mcnemar_exact([True, False, True], [True, False, True])
    assert (r["b"], r["c"], r["p"]) == (0, 0, 1.0)
    # 6 discordant, all favouring A: p = 2 * 0.5**6
    a = [True] * 6 + [True, False]
    b = [False] * 6 + [True, False]
    r = mcnemar_exact(a, b)
    assert (r["b"], r["c"], r["n"]) == (6, 0, 8)
    assert r["p"] == pytest.approx(2 * 0.5**6)
    # b=1, c=9 (classic textbook case): p = 2 * (1 + 10) / 1024
    a = [True] + [False] * 9
    b = [False] + [True] * 9
    assert mcnemar_exact(a, b)["p"] == pytest.approx(22 / 1024)
    # symmetric split is not significant; p capped at 1
    assert mcnemar_exact([True, False], [False, True])["p"] == 1.0
    # agrees with scipy's exact binomial test on discordant pairs
    for nb, nc in [(3, 7), (0, 5), (12, 4), (10, 10)]:
        a = [True] * nb + [False] * nc
        b = [False] * nb + [True] * nc
        assert mcnemar_exact(a, b)["p"] == pytest.approx(binomtest(nb, nb + nc, 0.5).pvalue)
    with pytest.raises(ValueError):
        mcnemar_exact([True], [True, False])


def test_intervals_never_leave_zero_one():
    """At k = 0 and k = n the formula's own bound strays past 0 or 1 in floating point (n = 5)."""
    for n in range(1, 60):
        for k in (0, 1, n - 1, n):
            lo, hi = wilson(k, n)
            assert 0.0 <= lo and hi <= 1.0, (k, n)
            assert lo - 1e-12 <= k / n <= hi + 1e-12, (k, n)  # wilson(6, 6): hi = 1 - 1e-16


def test_bad_counts_are_errors_that_say_what_was_given():
    for k, n in ((5, 3), (-1, 5), (0, -1), (-1, -1)):
        with pytest.raises(ValueError, match=rf"need 0 <= k <= n, got k={k}, n={n}"):
            wilson(k, n)
    for n, c, k in ((3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError, match=rf"got n={n}, c={c}, k={k}"):
            pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="paired outcomes need equal lengths, got 2 and 1"):
        mcnemar_exact([True, False], [True])


def test_mean_pass_at_k_of_no_tasks_is_zero_and_lengths_must_match():
    assert mean_pass_at_k([], [], 1) == 0.0
    assert mean_pass_at_k([4, 4], [0, 4], 2) == 0.5
    with pytest.raises(ValueError):
        mean_pass_at_k([4, 4], [1], 1)
