"""lob.measure.stats: the one home of percentile support, intervals, interleaving and the
change call, checked on synthetic data with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from lob.measure import stats as S


@pytest.mark.parametrize("q,need", [(50, 20), (90, 100), (99, 1000), (99.9, 10000),
                                    (99.99, 100000)])
def test_a_percentile_needs_ten_samples_beyond_it(q, need):
    assert S.min_count(q) == need
    assert S.supported(q, need) and not S.supported(q, need - 1)
    assert S.marker(q) == f"n<{need}"


def test_support_of_missing_counts_and_bad_quantiles():
    assert not S.supported(50, None) and not S.supported(50, float("nan"))
    for q in (0, 100, -1, 150):
        with pytest.raises(ValueError, match="percentile"):
            S.min_count(q)


def test_median_interval_is_the_sign_test_order_statistics():
    r = S.median_interval([5, 1, 4, 2, 3])  # n=5: k=1 covers 1 - 2/32 = 93.75%
    assert r["median"] == 3 and r["ci"] == (1, 5) and r["coverage"] == pytest.approx(0.9375)
    assert S.median_interval([1, 2, 3, 4])["ci"] is None  # 87.5% < 90%: no interval
    assert "no interval: 4 repeats" in S.median_interval([1, 2, 3, 4])["what"]
    assert S.median_interval([1, 2, 3, 4], 0.8)["ci"] == (1, 4)
    with pytest.raises(ValueError):
        S.median_interval([])
    with pytest.raises(ValueError, match="confidence"):
        S.median_interval([1, 2, 3], confidence=1.0)


@pytest.mark.parametrize("n", [7, 11, 20])
def test_median_interval_covers_the_truth_as_often_as_it_says(n):
    rng = np.random.default_rng(20261201)
    trials, hits, stated = 2000, 0, []
    for _ in range(trials):
        x = rng.lognormal(0.0, 0.3, n)  # true median exp(0) = 1, skewed noise
        r = S.median_interval(x, 0.9)
        stated.append(r["coverage"])
        hits += r["ci"][0] <= 1.0 <= r["ci"][1]
    cover = hits / trials
    # exact binomial coverage; 2,000 trials give a standard error under 0.7%
    assert abs(cover - np.mean(stated)) < 0.025, (cover, np.mean(stated))


def test_ratio_interval_covers_the_true_ratio_near_its_level():
    rng = np.random.default_rng(7)
    trials, hits = 400, 0
    for _ in range(trials):
        a = rng.lognormal(0.0, 0.1, 15)
        b = 1.2 * rng.lognormal(0.0, 0.1, 15)
        _, lo, hi = S.ratio_interval(a, b, confidence=0.95, n_boot=500, seed=int(rng.integers(1e9)))
        hits += lo <= 1.2 <= hi
    assert 0.90 <= hits / trials <= 0.99, hits / trials


def test_ratio_interval_refuses_to_invent_an_interval_from_too_few_values():
    assert S.ratio_interval([1.0, 1.1], [2.0, 2.1]) == (pytest.approx(2.05 / 1.05), None, None)
    assert S.ratio_interval([1.0, 1.1], [2.0, 2.1], min_n=2)[1] is not None
    with pytest.raises(ValueError):
        S.ratio_interval([], [1.0])


@pytest.mark.parametrize("lo,hi,threshold,word", [
    (1.10, 1.30, 0.05, "slower"),
    (0.70, 0.90, 0.05, "faster"),
    (0.97, 1.03, 0.05, "within noise"),
    (0.90, 1.02, 0.05, "inconclusive"),   # crosses the lower edge
    (1.02, 1.08, 0.05, "inconclusive"),   # crosses the upper edge
    (1.01, 1.02, 0.0, "slower"),
    (0.99, 1.01, 0.0, "inconclusive"),    # no margin: cannot call it unchanged
    (None, None, 0.05, "inconclusive"),
    (1.3, 1.1, 0.05, "slower"),           # ends given in either order
])
def test_change_has_one_vocabulary(lo, hi, threshold, word):
    assert S.change(lo, hi, threshold) == word
    assert word in S.CHANGE_WORDS


def test_change_rejects_a_negative_threshold():
    with pytest.raises(ValueError, match="threshold"):
        S.change(1.0, 1.1, -0.1)


def test_identical_code_is_rarely_called_changed():
    """A/A: ratios of two runs of the same thing, 7 pairs, 5% threshold: a false call in far
    fewer than 5% of trials."""
    rng = np.random.default_rng(11)
    calls = [S.change_of_ratios(rng.lognormal(0, 0.05, 7) / rng.lognormal(0, 0.05, 7),
                                threshold=0.05)["change"] for _ in range(2000)]
    false = sum(c in ("faster", "slower") for c in calls) / len(calls)
    assert false <= 0.05, false
    real = [S.change_of_ratios(1.5 * rng.lognormal(0, 0.05, 7) / rng.lognormal(0, 0.05, 7),
                               threshold=0.05)["change"] for _ in range(200)]
    assert real.count("slower") == 200


def test_rotations_balance_every_position():
    rounds = S.rotations(["a", "b", "c"], 6)
    assert rounds[0] == ["a", "b", "c"] and rounds[1] == ["b", "c", "a"]
    for name in "abc":
        positions = [r.index(name) for r in rounds]
        assert sorted(positions) == [0, 0, 1, 1, 2, 2]
    assert S.rotations(["A", "B"], 4) == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert S.rotations([], 2) == [[], []]
    with pytest.raises(ValueError):
        S.rotations(["a"], -1)


@pytest.mark.parametrize("sigma", [0.1, 0.3])
def test_no_ratio_interval_from_fewer_values_than_hold_its_coverage(sigma):
    """Identical samples: a 95% interval excludes 1 in at most ~5% of cases from
    MIN_RATIO_N values a side; from three it does so far more often (why there is a floor)."""
    rng = np.random.default_rng(26)
    trials = 300

    def false_calls(n, min_n):
        calls = 0
        for i in range(trials):
            a, b = rng.lognormal(0, sigma, n), rng.lognormal(0, sigma, n)
            _, lo, hi = S.ratio_interval(a, b, n_boot=1000, seed=i, min_n=min_n)
            calls += S.change(lo, hi) in ("faster", "slower")
        return calls / trials

    assert false_calls(S.MIN_RATIO_N, S.MIN_RATIO_N) <= 0.06
    assert false_calls(3, 2) >= 0.07
    a = rng.lognormal(0, sigma, S.MIN_RATIO_N - 1)
    assert S.ratio_interval(a, a)[1:] == (None, None)


def test_sequential_level_is_bonferroni_over_the_looks():
    assert S.sequential_level(0.95, 1) == pytest.approx(0.95)
    assert S.sequential_level(0.95, 5) == pytest.approx(0.99)
    with pytest.raises(ValueError, match="looks"):
        S.sequential_level(0.95, 0)
    with pytest.raises(ValueError, match="confidence"):
        S.sequential_level(1.5, 2)
