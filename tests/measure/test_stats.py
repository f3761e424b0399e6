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


# --- issue 24: the clock's grid, the clock floor, A/A bands, interval coverage ----------------

def _on_grid(tick, n=20000, seed=3, kmax=60, jitter=True):
    """Durations on a clock of ``tick`` ns, truncated to whole ns, plus a jitter of +-1 ns."""
    rng = np.random.default_rng(seed)
    v = np.floor(rng.integers(1, kmax, n) * tick)
    return v + (rng.integers(-1, 2, n) if jitter else 0)


@pytest.mark.parametrize("tick,jitter", [(1.0, False), (10.0, True), (41.6667, True),
                                         (25.0, True)])
def test_clock_grid_recovers_the_tick(tick, jitter):
    g = S.clock_grid(_on_grid(tick, jitter=jitter))
    assert g["tick_ns"] == pytest.approx(tick, rel=0.005), g
    assert g["share_on_grid"] >= 0.9 and g["chance_share"] <= 0.26
    assert f"{g['tick_ns']:.4g} ns" in g["what"]


def test_clock_grid_reads_an_hgrm_like_table_of_values_and_counts():
    # the ~10 ns grid recorded durations fall on (the example .hgrm values)
    values = [29, 30, 31, 40, 41, 49, 50, 51, 60, 70, 79, 80, 90, 101, 110]
    counts = [40, 900, 30, 800, 60, 20, 700, 25, 500, 300, 10, 200, 100, 50, 20]
    g = S.clock_grid(values, counts)
    assert g["tick_ns"] == pytest.approx(10, rel=0.01) and g["n"] == sum(counts)
    # counts move the answer: the same values, nearly all weight on a 1 ns-off value
    assert S.clock_grid([30, 33, 40], [1, 1000, 1])["tick_ns"] != pytest.approx(10, rel=0.01)
    with pytest.raises(ValueError, match="counts"):
        S.clock_grid([1, 2], [1])
    with pytest.raises(ValueError, match="positive"):
        S.clock_grid([0, -3])


def test_clock_grid_is_robust_to_hdr_rounding_above_2048():
    # a 41.67 ns timer, all values large: an HDR histogram with 3 significant digits keeps
    # them only to 1/2048 of themselves; few exact values below 2048
    v = _on_grid(41.6667, n=5000, kmax=200)
    v = v[v > 2100]
    unit = 2.0 ** np.floor(np.log2(v / 1024))  # HDR's bucket width at v
    rounded = np.floor(v / unit) * unit
    g = S.clock_grid(rounded)
    assert g["tick_ns"] == pytest.approx(41.667, rel=0.01), g


def test_clock_grid_finds_no_grid_in_continuous_durations():
    g = S.clock_grid(np.random.default_rng(5).uniform(100, 2000, 5000))
    assert g["tick_ns"] is None and g["saw"] == "continuous" and "no grid" in g["what"]


def test_clock_grid_takes_no_peak_for_a_grid():
    """The issue's notional_walk: one value 90% of the time is on a multiple of every step
    that divides it (it read a 22.39 ns "grid"); the values off the peak decide."""
    rng = np.random.default_rng(11)
    n = 20000
    peak = rng.random(n) < 0.9
    cont = np.where(peak, 22.0, rng.uniform(15, 3000, n))  # the rest continuous
    g = S.clock_grid(cont)
    assert g["tick_ns"] is None and g["saw"] == "peaked"
    assert g["what"].startswith("peaked, no grid: 22 ns holds 9") and "% of 20000" in g["what"]
    ints = np.where(peak, 22.0, np.floor(rng.uniform(15, 3000, n)))  # the rest on whole ns
    gi = S.clock_grid(ints)
    assert gi["saw"] == "grid" and gi["tick_ns"] == pytest.approx(1.0, abs=0.01)
    # a true grid whose p50 is one tick 90% of the time is still read as the grid
    tick = 1e3 / 24
    grid = np.floor(rng.integers(1, 60, n) * tick)
    grid[peak] = 41.0
    gg = S.clock_grid(grid)
    assert gg["saw"] == "grid" and gg["tick_ns"] == pytest.approx(tick, rel=0.005)
    # too few samples off the peak to show any grid
    few = np.full(1000, 22.0)
    few[:5] = [30.5, 47.25, 80.1, 123.7, 501.3]
    assert S.clock_grid(few)["saw"] == "peaked"


def test_a_percentile_is_the_interval_its_ticks_allow():
    tick = 1e3 / 24
    assert S.tick_interval(292, tick) == pytest.approx((292 - tick, 292 + tick))  # +-14%
    assert S.tick_interval(41, tick) == pytest.approx((0.0, 41 + tick))  # "at most two ticks"
    assert S.tick_interval(41, None) == (41.0, 41.0)
    with pytest.raises(ValueError, match="tick_ns"):
        S.tick_interval(41, 0)
    # the cancel_only: p99 19,007 over a one-tick p50 is at least 229, no upper end
    t = {"p50": 41, "p99": 19007, "max": 834559}
    lo, hi = S.ratio_bounds(S.percentile_bounds(t, "p99", tick_ns=tick)[:2],
                            S.percentile_bounds(t, "p50", tick_ns=tick)[:2], ordered=True)
    assert lo == pytest.approx((19007 - tick) / (41 + tick)) and lo > 229 and hi == np.inf
    # a p99 from 500 samples is bounded by its neighbours only: p50 and max
    mc = {"p50": 32591, "p99": 42271, "p99.9": 54463, "max": 54463}
    p99 = S.percentile_bounds(mc, "p99", tick_ns=tick, samples=500)
    assert p99[:2] == pytest.approx((32591 - tick, 54463 + tick))
    assert "from 500 samples (it needs 1,000): only between p50 and max" in p99[2]
    lo, hi = S.ratio_bounds(p99[:2], S.percentile_bounds(mc, "p50", tick_ns=tick,
                                                         samples=500)[:2], ordered=True)
    assert lo == 1.0 and hi == pytest.approx(1.67, abs=0.01)  # max / p50 bounds p99 / p50
    assert S.quantile_of("p99.9") == 99.9 and S.quantile_of("max") == 100
    with pytest.raises(ValueError, match="percentile name"):
        S.quantile_of("p100")


def test_quantised_factor_of_a_figure():
    # p99 / p50 of 300 / 13 ns on a 1 ns grid: exactly, and bounded whatever the roles
    lo, hi = S.quantised_factor({"p50": 13, "p99": 300}, 1.0, ("p99", "p50"))
    assert lo == pytest.approx((299 / 14) / (300 / 13)) and hi == pytest.approx(
        (301 / 12) / (300 / 13))
    blo, bhi = S.quantised_factor({"p50": 13, "p99": 300}, 1.0)
    assert blo <= lo and bhi >= hi
    assert S.quantised_factor({"p50": 10}, 10.0)[1] == np.inf  # a one-tick figure
    assert S.quantised_factor({"p50": 13}, None) == (1.0, 1.0)


def test_at_clock_floor_is_ten_ticks():
    tick = 1e3 / 24  # a 24 MHz timer, 41.67 ns
    assert S.at_clock_floor(41, tick) and S.at_clock_floor(292, tick)  # 1 and 7 ticks
    assert not S.at_clock_floor(917, tick)  # 22 ticks
    assert S.at_clock_floor(416, tick) and not S.at_clock_floor(417, tick)
    assert S.at_clock_floor(29, 10, ticks=3) and not S.at_clock_floor(30, 10, ticks=3)
    assert not S.at_clock_floor(1, None)  # an unknown tick is no floor
    with pytest.raises(ValueError, match="tick_ns"):
        S.at_clock_floor(10, 0)
    with pytest.raises(ValueError, match="ticks"):
        S.at_clock_floor(10, 1, ticks=0)


def test_aa_band_is_the_spread_of_identical_code():
    # log ratios -0.1..0.1 evenly: median 0, MAD 0.05, so h = 1.96 x 1.4826 x 0.05
    r = np.exp(np.linspace(-0.1, 0.1, 21))
    band = S.aa_band(r, 0.95)
    h = 1.959964 * 1.4826 * 0.05
    assert band["low"] == pytest.approx(np.exp(-h), rel=1e-4) and band["high"] == pytest.approx(
        np.exp(h), rel=1e-4) and band["n"] == 21
    assert band["spread"] == pytest.approx(np.exp(2 * h), rel=1e-4)
    assert "1.4826 MAD" in band["what"] and "21 A/A ratios" in band["what"]
    # the A/A median's offset widens the band on both sides (identical code read 3% slower)
    off = S.aa_band(1.03 * r, 0.95)
    assert off["high"] == pytest.approx(np.exp(h + np.log(1.03)), rel=1e-4)
    assert off["low"] == pytest.approx(np.exp(-h - np.log(1.03)), rel=1e-4)
    # more than half the ratios exactly equal: the scaled mean deviation, not a zero band
    tied = S.aa_band([1.0, 1.0, 1.0, 1.2, 0.8])
    assert tied["high"] > 1.1
    assert S.aa_band([1.0, 1.1, 0.9, 1.0])["low"] is None  # 4 ratios: no band
    with pytest.raises(ValueError, match="positive"):
        S.aa_band([1.0, -1.0, 1.0, 1.0, 1.0])
    words = {(0.5, 0.8): "faster", (1.2, 1.3): "slower", (0.95, 1.05): "within noise",
             (0.85, 1.0): "inconclusive", (None, None): "inconclusive"}
    for (lo, hi), w in words.items():
        assert S.change_beyond_aa(lo, hi, band) == w, (lo, hi)
    assert S.change_beyond_aa(0.5, 0.8, {"low": None, "high": None}) == "inconclusive"


def test_identical_code_is_called_changed_beyond_its_aa_band_in_at_most_5pct():
    """A/A then B/A of identical code in the same interleaving (15 pairs each, per-run noise
    5%, a shared drift per round): B/A called faster or slower in <= 5% of seeded trials; a real 30%
    change is called in at least 85% (the A/A band is wider than the noise of a median)."""
    rng = np.random.default_rng(24)

    def ratios(shift, n):
        drift = rng.lognormal(0, 0.03, n)  # the machine's drift, shared within a round
        return shift * drift * rng.lognormal(0, 0.05, n) / (drift * rng.lognormal(0, 0.05, n))

    calls, real = [], []
    for _ in range(1000):
        band = S.aa_band(ratios(1.0, 15))
        ci = S.median_interval(ratios(1.0, 15), 0.9)["ci"]
        calls.append(S.change_beyond_aa(*ci, band))
    for _ in range(200):
        band = S.aa_band(ratios(1.0, 15))
        ci = S.median_interval(ratios(1.3, 15), 0.9)["ci"]
        real.append(S.change_beyond_aa(*ci, band))
    false = sum(c in ("faster", "slower") for c in calls) / len(calls)
    assert false <= 0.05, false
    assert real.count("slower") >= 170, real.count("slower")  # the band costs some power


def test_one_stray_round_cannot_set_the_aa_band():
    quiet = np.exp(np.random.default_rng(2).normal(0, 0.03, 10))
    stray = np.append(quiet[:-1], 296.0)  # one round's hiccup: the pinning band
    a, b = S.aa_band(quiet), S.aa_band(stray)
    assert b["high"] / a["high"] < 1.05 and b["spread"] < S.MAX_AA_SPREAD
    assert S.aa_unmeasurable(b) is None


def test_a_band_wider_than_a_factor_of_two_is_not_measurable():
    wide = S.aa_band(np.exp(np.random.default_rng(3).normal(0, 1.0, 9)))
    why = S.aa_unmeasurable(wide)
    assert wide["spread"] > 2 and why.startswith("not measurable on this machine")
    assert f"{wide['low']:.3g}-{wide['high']:.3g}" in why and "a factor of" in why
    assert S.aa_unmeasurable({"low": None, "high": None}) is None
    assert S.aa_unmeasurable({"low": 0.8, "high": 1.25, "n": 5}) is None


@pytest.mark.parametrize("n", [5, 10, 20])
def test_aa_band_false_call_rate_with_one_outlier_round_planted(n):
    """Rounds of A, A' and B (B = A: identical code; per-run noise 5%, a drift shared within a
    round), one run of one round multiplied by 8 (a stray round): B/A's 90% sign-test
    interval is called faster or slower against the A/A band in <= 5% of 800 seeded trials.
    A real 30% change (n = 20) is still called in >= 80% of them: the stray round does not
    set the band, as the largest ratio did."""
    rng = np.random.default_rng(1000 + n)

    def calls(shift, trials):
        out = []
        for _ in range(trials):
            drift = rng.lognormal(0, 0.03, n)
            runs = [drift * rng.lognormal(0, 0.05, n) for _ in range(3)]
            runs[2] = runs[2] * shift
            runs[int(rng.integers(3))][int(rng.integers(n))] *= 8.0
            a, a2, b = runs
            ci = S.median_interval(b / a, 0.9)["ci"]
            out.append(S.change_beyond_aa(*ci, S.aa_band(a2 / a)))
        return out

    null = calls(1.0, 800)
    assert sum(c in ("faster", "slower") for c in null) / len(null) <= 0.05
    if n == 20:
        real = calls(1.3, 200)
        assert real.count("slower") >= 160, real.count("slower")


def test_ratio_interval_says_what_it_is():
    assert S.ratio_interval_what(5, 7) == ("95% percentile-bootstrap interval of the ratio of "
                                           "the medians of 5 and 7 runs (each side resampled "
                                           "on its own)")
    assert S.ratio_interval_what(3, 7, of="pairs").startswith("no interval: 3 and 7 pairs")


@pytest.mark.parametrize("n", [9, 12, 17, 20, 25])
def test_median_interval_at_95pct_covers_the_truth_93_to_97pct(n):
    """At sample counts whose sign-test interval states 95-96.5%, it covers the true median in
    93-97% of seeded trials (at other counts the attainable level is higher and stated)."""
    rng = np.random.default_rng(n)
    trials, hits, stated = 2000, 0, None
    for _ in range(trials):
        r = S.median_interval(rng.lognormal(0.0, 0.3, n), 0.95)
        stated = r["coverage"]
        hits += r["ci"][0] <= 1.0 <= r["ci"][1]
    assert 0.95 <= stated <= 0.966
    assert 0.93 <= hits / trials <= 0.97, hits / trials


@pytest.mark.parametrize("n", [S.MIN_RATIO_N, 10])
def test_ratio_interval_covers_93_to_97pct_from_min_ratio_n(n):
    """The percentile bootstrap of a ratio of medians from MIN_RATIO_N values a side on:
    lognormal noise, 1,000 seeded trials (measured 96.1% at 5 and 96.3% at 10 a side over
    1,500 trials: no under-coverage to fix)."""
    rng = np.random.default_rng(100 + n)
    trials, hits = 1000, 0
    for t in range(trials):
        a, b = rng.lognormal(0, 0.2, n), 1.3 * rng.lognormal(0, 0.2, n)
        _, lo, hi = S.ratio_interval(a, b, confidence=0.95, n_boot=400, seed=t)
        hits += lo <= 1.3 <= hi
    assert 0.93 <= hits / trials <= 0.97, hits / trials


def test_share_interval_is_clopper_pearson():
    assert S.share_interval(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert S.share_interval(4, 4) == pytest.approx((0.3976, 1.0), abs=1e-4)
    assert S.share_interval(0, 10) == pytest.approx((0.0, 0.3085), abs=1e-4)
    rng = np.random.default_rng(9)
    hits = 0
    for _ in range(500):
        k = int(rng.binomial(20, 0.7))
        lo, hi = S.share_interval(k, 20)
        hits += lo <= 0.7 <= hi
    assert hits / 500 >= 0.95
    for bad in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError):
            S.share_interval(*bad)


def test_clock_grid_ignores_long_durations_and_stays_cheap():
    import time

    rng = np.random.default_rng(7)
    slow = rng.integers(1_000_000, 20_000_000, 5000)  # milliseconds: no grid can show
    t = time.perf_counter()
    g = S.clock_grid(slow)
    assert g["tick_ns"] is None and "no duration under 10000 ns" in g["what"]
    mixed = np.concatenate([rng.integers(3, 400, 60) * 10, slow])  # a few short ones on 10 ns
    assert abs(S.clock_grid(mixed)["tick_ns"] - 10) < 0.1
    assert time.perf_counter() - t < 5


def _peaked_whole_ns(seed: int = 3, n: int = 200_000) -> np.ndarray:
    """notional_walk's merged captures (r2): whole-ns durations, 93% of them on 24, 25 or 26 ns
    and a tail on whole ns above: a peak of adjacent values, no grid but the 1 ns one."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    tail = np.floor(27 + rng.exponential(40, n))
    return np.where(u < 0.45, 24.0, np.where(u < 0.85, 25.0, np.where(u < 0.93, 26.0, tail)))


def test_clock_grid_takes_no_peak_of_adjacent_values_for_a_grid():
    """24, 25 and 26 ns all lie within 1.53 ns of 2 x 12.25: with only the one most frequent
    value set aside, the rest still sat on a 12.25 ns "grid" (r2's notional_walk, +-1 tick
    then held the pivot); the peak's neighbours are set aside with it."""
    g = S.clock_grid(_peaked_whole_ns())
    assert g["saw"] == "grid" and g["tick_ns"] == pytest.approx(1.0, abs=0.01), g
    # a real 12.5 ns grid with the same peak on its second multiple is still read as one
    rng = np.random.default_rng(4)
    grid = np.floor(rng.integers(3, 40, 50_000) * 12.5)
    grid[rng.random(50_000) < 0.9] = 25.0
    assert S.clock_grid(grid)["tick_ns"] == pytest.approx(12.5, rel=0.01)


def test_clock_tick_takes_the_cycle_counters_resolution_never_a_fit():
    v = _peaked_whole_ns()
    tsc = {"source": "rdtsc (rate measured against CLOCK_MONOTONIC)", "resolution_ns": 0.385}
    g = S.clock_tick(v, clock=tsc)
    # recorded in whole ns: known to 1 ns, whatever the samples look like
    assert g["saw"] == "known" and g["tick_ns"] == 1.0 and g["n"] == len(v)
    assert g["share_on_grid"] is None and "not fitted" in g["what"] and "0.385 ns" in g["what"]
    slow = {"source": "rdtsc in-kernel (1.5 ns a tick)", "resolution_ns": 1.5}
    assert S.clock_tick([25, 25, 26], [5, 3, 0], clock=slow)["tick_ns"] == 1.5
    assert S.clock_tick([25, 25, 26], [5, 3, 0], clock=slow)["n"] == 8
    # a clock lob cannot vouch for (a foreign library's own): fitted from the samples
    own = {"source": "x@cpp: the engine's clock (lob_clock_samples)", "resolution_ns": 1.0}
    assert S.clock_tick(v, clock=own)["saw"] == "grid"
    assert S.clock_tick(v)["saw"] == "grid"


def test_known_tick_says_which_clocks_lob_knows():
    from lob.measure.clock import known_tick

    mono = {"source": "clock_gettime(CLOCK_MONOTONIC)", "resolution_ns": 17.0}
    assert known_tick(mono, clocksource="tsc")[0] == 1.0  # the kernel reads the TSC, in ns
    assert known_tick(mono, clocksource="hpet") is None  # a coarser timer: fitted
    assert known_tick({"source": "rdtsc", "resolution_ns": 0}) is None
    assert known_tick(None) is None and known_tick({}) is None
