"""The one home of lob's statistics: what a sample count supports, intervals, order-balanced
interleaving, and the call on whether something changed.

Every caller that says "is this a change" asks :func:`change`; every table that shows a
percentile asks :func:`supported`; every interval of a median comes from
:func:`median_interval` (one sample) or :func:`ratio_interval` (two). pyperf keeps its one
significance rule in one function for the same reason: two rules drift apart.

Vocabulary (``CHANGE_WORDS``), for a ratio ``new / old`` of a cost (lower is better):

- ``faster``: the whole interval lies below ``1 - threshold``;
- ``slower``: the whole interval lies above ``1 + threshold``;
- ``within noise``: the whole interval lies inside ``[1 - threshold, 1 + threshold]``
  (any change is smaller than what matters);
- ``inconclusive``: the interval crosses an edge, or there is no interval (too few values
  for the stated coverage): the data cannot tell.

Clock floor: a duration is known only to the tick of the clock that timed it. lob measures the
tick from the recorded durations themselves (:func:`clock_grid`: the grid they fall on, not the
clock's nominal resolution), and a percentile below ``CLOCK_FLOOR_TICKS`` ticks
(:func:`at_clock_floor`) is too coarse to enter a ratio: one tick is then 10% or more of it.

A/A controls: the same code measured twice in the same interleaving gives the spread of "no
change" on this machine today (:func:`aa_band`, from the median and the MAD of the log ratios,
so one stray round cannot set it); a B/A difference is called only when its interval lies
wholly outside that band (:func:`change_beyond_aa`), and never again widened by it (the band
already holds the noise once). A band wider than :data:`MAX_AA_SPREAD` says the machine
cannot measure the figure (:func:`aa_unmeasurable`).

Percentiles: a quantile ``q`` (in percent) is shown only from at least ``10 / (1 - q/100)``
samples, so that ten samples lie beyond it (p50: 20, p99: 1,000, p99.9: 10,000).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

__all__ = ["CHANGE_WORDS", "MIN_RATIO_N", "min_count", "supported", "marker",
           "median_interval", "ratio_interval", "sequential_level", "change",
           "change_of_ratios", "rotation", "rotations", "clock_grid", "clock_tick",
           "at_clock_floor",
           "CLOCK_FLOOR_TICKS",
           "aa_band", "aa_unmeasurable", "MAX_AA_SPREAD", "change_beyond_aa", "share_interval",
           "ratio_interval_what", "quantile_of", "tick_interval", "percentile_bounds",
           "ratio_bounds", "quantised_factor", "MIN_OFF_PEAK", "PEAK_SHARE"]

CHANGE_WORDS = ("faster", "slower", "within noise", "inconclusive")

# The fewest values a side from which :func:`ratio_interval` gives an interval. Below it the
# percentile bootstrap of a median covers far less often than it claims (simulated, lognormal
# noise, identical samples, 95%: three values a side exclude 1 in ~10-12% of cases, five in
# ~3%; tests/measure/test_stats.py checks it).
MIN_RATIO_N = 5


# --- percentile support -----------------------------------------------------------------------

def min_count(q: float) -> int:
    """Samples needed to show percentile ``q`` (in percent, e.g. 99.99): ceil(10 / (1 - q))."""
    if not 0 < q < 100:
        raise ValueError(f"percentile must be in (0, 100), got {q!r}")
    return math.ceil(round(10.0 / (1.0 - q / 100.0), 6))


def supported(q: float, count: int | float | None) -> bool:
    """Is ``count`` samples enough to show percentile ``q`` (in percent)?"""
    if count is None or (isinstance(count, float) and math.isnan(count)):
        return False
    return int(count) >= min_count(q)


def marker(q: float) -> str:
    """The cell shown instead of a percentile the count cannot support (``n<1000``)."""
    return f"n<{min_count(q)}"


# --- intervals ----------------------------------------------------------------------------------

def _order_stat_k(n: int, confidence: float) -> tuple[int, float] | None:
    """The largest k whose sign-test interval (x(k), x(n+1-k)) covers the median with
    probability >= confidence, and that coverage; None when even k = 1 falls short."""
    best = None
    below = 0  # P(Binomial(n, 1/2) < k) * 2**n
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1)
        cover = 1 - 2 * below / 2 ** n
        if cover >= confidence:
            best = (k, cover)
        else:
            break
    return best


def median_interval(samples: Sequence[float], confidence: float = 0.9, *,
                    of: str = "repeats") -> dict:
    """The median of repeated measurements (e.g. per-pair ratios of interleaved runs) and a
    distribution-free interval for it.

    The interval is the pair of order statistics ``x(k), x(n+1-k)`` with the largest ``k``
    whose coverage ``1 - 2 P(Binomial(n, 1/2) < k)`` is at least ``confidence`` (the sign
    test's interval: no assumption on the noise's shape, only that repeats are independent).
    With too few samples to reach ``confidence`` (n < 5 at 0.9, n < 6 at 0.95) ``ci`` is
    None: no interval. Returns ``{"median", "ci", "coverage", "n", "what"}`` (``what``: the
    interval in words; ``of`` names the samples, e.g. ``"interleaved pairs"``).
    """
    xs = sorted(float(x) for x in samples)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval needs at least one sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    best = _order_stat_k(n, confidence)
    med = statistics.median(xs)
    if best is None:
        return {"median": med, "ci": None, "coverage": None, "n": n,
                "what": f"no interval: {n} {of}, fewer than a {confidence:.0%} interval "
                        "of the median needs"}
    k, cover = best
    return {"median": med, "ci": (xs[k - 1], xs[n - k]), "coverage": cover, "n": n,
            "what": f"{cover:.1%} interval of the median of {n} {of}"}


def ratio_interval(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95,
                   n_boot: int = 2000, seed: int = 1,
                   min_n: int = MIN_RATIO_N) -> tuple[float, float | None, float | None]:
    """(median(b) / median(a), low, high): percentile-bootstrap interval of the ratio of the
    medians of two independent samples, each resampled on its own.

    The bootstrap of a median is anticonservative from a handful of values (two runs a side
    cover the truth far less often than claimed), so with fewer than ``min_n`` values on
    either side the interval is (None, None): say "inconclusive", do not invent one.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if not len(a) or not len(b):
        raise ValueError("ratio_interval needs at least one value on each side")
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = mb / ma if ma else math.inf
    if len(a) < max(2, min_n) or len(b) < max(2, min_n):
        return ratio, None, None
    rng = np.random.default_rng(seed)
    ba = np.median(rng.choice(a, size=(n_boot, len(a))), axis=1)
    bb = np.median(rng.choice(b, size=(n_boot, len(b))), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = bb / ba
    r = r[np.isfinite(r)]
    if not len(r):
        return ratio, None, None
    q = (1 - confidence) / 2
    lo, hi = np.quantile(r, [q, 1 - q])
    return ratio, float(lo), float(hi)


def ratio_interval_what(n_a: int, n_b: int, confidence: float = 0.95, *,
                        of: str = "runs") -> str:
    """What :func:`ratio_interval`'s interval is, in words (every interval shown is labelled
    with what it is); without one (fewer than :data:`MIN_RATIO_N` a side) why not."""
    if min(n_a, n_b) < MIN_RATIO_N:
        return (f"no interval: {n_a} and {n_b} {of}, fewer than {MIN_RATIO_N} a side for a "
                "bootstrap of a median")
    return (f"{confidence:.0%} percentile-bootstrap interval of the ratio of the medians of "
            f"{n_a} and {n_b} {of} (each side resampled on its own)")


def share_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson (exact binomial) interval of a share ``k / n`` of independent
    yes/no outcomes (e.g. rows above capacity that were measured to saturate): it covers the
    true share with probability >= ``confidence`` whatever it is."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    a = (1 - confidence) / 2

    def tail_ge(p):  # P(Binomial(n, p) >= k)
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))

    def solve(f, target):  # f increasing in p on [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(tail_ge, a)
    # upper: P(Binomial(n, p) <= k) = a, i.e. 1 - P(>= k + 1) = a
    high = 1.0 if k == n else solve(
        lambda p: sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i)
                      for i in range(k + 1, n + 1)), 1 - a)
    return low, high


def sequential_level(confidence: float, looks: int) -> float:
    """The level of each look when one comparison is looked at up to ``looks`` times (one
    more round, look again): Bonferroni, ``1 - (1 - confidence) / looks``, so that the
    chance of any false call over all the looks stays under ``1 - confidence``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if looks < 1:
        raise ValueError(f"looks must be >= 1, got {looks!r}")
    return 1 - (1 - confidence) / looks


# --- the change call ----------------------------------------------------------------------------

def change(lo: float | None, hi: float | None, threshold: float = 0.0) -> str:
    """The one call on a cost ratio's interval ``[lo, hi]`` (new / old): ``faster``,
    ``slower``, ``within noise`` or ``inconclusive`` (see the module docstring)."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "inconclusive"
    if lo > hi:
        lo, hi = hi, lo
    if lo > 1 + threshold:
        return "slower"
    if hi < 1 - threshold:
        return "faster"
    if lo >= 1 - threshold and hi <= 1 + threshold:
        return "within noise"
    return "inconclusive"


def change_of_ratios(ratios: Sequence[float], *, threshold: float = 0.0,
                     confidence: float = 0.9, of: str = "paired runs") -> dict:
    """:func:`median_interval` of per-pair ratios (new / old, from interleaved runs) with the
    :func:`change` call on it: ``{"median", "ci", "coverage", "n", "what", "change"}``."""
    mi = median_interval(ratios, confidence, of=of)
    lo, hi = mi["ci"] if mi["ci"] else (None, None)
    return {**mi, "change": change(lo, hi, threshold)}


# --- order-balanced interleaving ---------------------------------------------------------------

def rotations(names: Sequence, rounds: int) -> list[list]:
    """The order in which to run ``names`` in each of ``rounds`` rounds, rotated so that every
    name takes every position equally often over ``len(names)`` rounds (two names: AB, BA,
    AB, BA, ... which is ABBA over pairs of rounds). A variant measured first in every round
    would carry the warm-up (or the cool-down) of the machine into its figure."""
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds!r}")
    return [rotation(names, r) for r in range(rounds)]


def rotation(names: Sequence, r: int) -> list:
    """Round ``r``'s order of ``names`` (:func:`rotations`): started ``r`` places along."""
    names = list(names)
    k = len(names) or 1
    return names[r % k:] + names[:r % k]


# --- the clock's grid ---------------------------------------------------------------------------

CLOCK_FLOOR_TICKS = 10  # a percentile below this many clock ticks is not used in a ratio
MIN_OFF_PEAK = 10  # the fewest samples off the peak that can show a grid
# The peak is the most frequent value and every value within this many jitters of it: a peak
# of a few adjacent whole-ns values (24, 25, 26) sits within the tolerance (at most 1.25
# jitters) of one multiple of many steps, so only the values beyond it can show a grid
PEAK_HALF_WIDTH = 2.5
PEAK_SHARE = 0.5  # a value held by this share of the samples or more makes them "peaked"


def _grid_values(samples, counts) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(samples, dtype=float).ravel()
    w = np.ones_like(v) if counts is None else np.asarray(counts, dtype=float).ravel()
    if len(w) != len(v):
        raise ValueError(f"counts has {len(w)} entries for {len(v)} samples")
    keep = np.isfinite(v) & (v > 0) & (w > 0)
    v, w = v[keep], w[keep]
    if not len(v):
        return v, w
    u, inv = np.unique(v, return_inverse=True)
    return u, np.bincount(inv, weights=w)


def clock_grid(samples: Sequence[float], counts: Sequence[float] | None = None, *,
               jitter_ns: float = 1.5, min_tick_ns: float = 1.0, max_tick_ns: float = 500.0,
               min_share: float = 0.9, exact_below_ns: float = 2048.0,
               max_values: int = 512) -> dict:
    """The tick of the clock that timed ``samples`` (durations in ns), measured from the
    values themselves: the largest grid step ``t`` such that at least ``min_share`` of the
    samples lie within ``tol = 1.25 min(jitter_ns, t / 10)`` of a multiple of ``t``.

    Recorded durations fall on the clock's grid plus a jitter of about one ns (a 10 ns grid
    reads 29, 30, 40, 41, 49, 50, 51, 60, ...; a 24 MHz timer's 41.67 ns, truncated to whole
    ns, reads 41, 42, 83, 125, ...). The largest step is taken because every divisor of the
    tick also fits; the chance that a value lands within ``tol`` of a multiple of ``t`` by
    accident is ``2 tol / t`` (at most 25%), far below ``min_share``. The step found is
    refined by least squares through the origin (``tick = sum(k v) / sum(k^2)``, ``k`` the
    nearest multiple), so a non-integer tick (41.67) is recovered from integer values.

    HDR rounding: an HDR histogram with 3 significant digits stores values below 2,048
    exactly, coarser above; only values below ``exact_below_ns`` are used when at least 100
    samples lie there, else every value with a tolerance widened by its HDR resolution
    (``v / 2048``). ``counts``: the count of each value (an ``.hgrm``'s rows), else one each.
    Only the ``max_values`` most frequent distinct values are fitted (the share is of them).

    A sharply peaked distribution is no grid: one value held by 90% of the samples is within
    ``tol`` of a multiple of every step that divides it, and so is a peak of a few adjacent
    values (24, 25, 26 ns: within 1.53 ns of 2 x 12.25), so the values off the peak (beyond
    :data:`PEAK_HALF_WIDTH` jitters of the most frequent value) must lie on the grid too
    (``min_share`` of them, at least :data:`MIN_OFF_PEAK`). Where the clock's resolution is
    known, the tick is not fitted at all (:func:`clock_tick`).

    Returns ``{"tick_ns", "share_on_grid", "chance_share", "n", "values", "saw", "what"}``;
    ``saw``: ``"grid"``, ``"peaked"`` (no grid; one value holds half the samples or more),
    ``"continuous"`` (no grid) or ``"nothing"`` (no duration short enough to show one);
    ``tick_ns`` is None when no step from ``min_tick_ns`` to ``max_tick_ns`` fits.
    """
    u, w = _grid_values(samples, counts)
    n = float(w.sum())
    if not len(u):
        raise ValueError("clock_grid needs at least one positive duration")
    none = {"tick_ns": None, "share_on_grid": None, "chance_share": None, "n": int(n)}
    u, w, hdr = _grid_sample(u, w, exact_below_ns, max_tick_ns, max_values)
    if not len(u):
        return {**none, "values": 0, "saw": "nothing",
                "what": f"no duration under {20 * max_tick_ns:g} ns to show a clock grid "
                        f"of at most {max_tick_ns:g} ns"}
    total = float(w.sum())
    cands = _grid_candidates(min_tick_ns, max_tick_ns, jitter_ns, float(u.max()))
    # a peak is no grid: one value held by most samples lies on a multiple of many steps, so
    # the values other than the most frequent one must lie on the grid as well (and there
    # must be at least MIN_OFF_PEAK of them to show it)
    mode = int(np.argmax(w))
    half = PEAK_HALF_WIDTH * jitter_ns
    peak_of = np.abs(u - u[mode]) <= half  # the peak: the mode and its jittered neighbours
    shares, rest_shares = _grid_shares(u, w, cands, peak_of, jitter_ns, hdr, min_share)
    ok = np.nonzero((shares >= min_share) & (rest_shares >= min_share))[0]
    if not len(ok):
        peak = float(w[peak_of].sum() / n)
        if peak >= PEAK_SHARE:
            around = (f" ({peak:.0%} within {half:g} ns of it)"
                      if w[peak_of].sum() > w[mode] else "")
            return {**none, "values": int(len(u)), "saw": "peaked",
                    "what": f"peaked, no grid: {u[mode]:g} ns holds {w[mode] / n:.0%} of "
                            f"{int(n)} samples{around} and the other values lie on no grid "
                            f"from {min_tick_ns:g} to {max_tick_ns:g} ns"}
        return {**none, "values": int(len(u)), "saw": "continuous",
                "what": f"continuous, no grid: no grid from {min_tick_ns:g} to "
                        f"{max_tick_ns:g} ns holds {min_share:.0%} of {int(n)} samples"}
    # the cluster of fitting steps at the largest one: its best share, the middle of its ties
    top = cands[ok[-1]]
    near = ok[cands[ok] >= 0.97 * top]
    tied = near[shares[near] >= shares[near].max() - 1e-12]
    best = float(cands[tied[len(tied) // 2]])
    tol0 = 1.25 * min(jitter_ns, best / 10)
    tick, share = _grid_refit(u, w, best, tol0, hdr, min_share)
    chance = min(1.0, 2 * tol0 / tick)
    return {"tick_ns": tick, "share_on_grid": share, "chance_share": chance, "n": int(n),
            "values": int(len(u)), "saw": "grid",
            "what": f"a grid: {share:.0%} of {int(total)} durations lie within {tol0:g} ns of a "
                    f"multiple of {tick:.4g} ns (by chance: {chance:.0%})"}


def clock_tick(samples: Sequence[float], counts: Sequence[float] | None = None, *,
               clock: dict | None = None, **grid) -> dict:
    """The tick of durations ``samples`` timed by ``clock`` (its record): the clock's known
    resolution where lob knows the clock (:func:`lob.measure.clock.known_tick`: the cycle
    counter, or ``CLOCK_MONOTONIC`` on the kernel's tsc clocksource), never fitted then
    (``saw``: ``"known"``); else :func:`clock_grid` of the samples (``grid``: its options).
    Same keys as :func:`clock_grid`; a known tick has no share on a grid (None)."""
    from lob.measure.clock import known_tick

    k = known_tick(clock)
    if k is None:
        return clock_grid(samples, counts, **grid)
    v = np.asarray(samples, dtype=float).ravel()
    keep = np.isfinite(v) & (v > 0)
    n = (int(keep.sum()) if counts is None else
         int(np.asarray(counts, dtype=float).ravel()[keep].sum()))
    return {"tick_ns": k[0], "share_on_grid": None, "chance_share": None, "n": n,
            "values": None, "saw": "known", "what": k[1]}


def _grid_sample(u, w, exact_below_ns: float, max_tick_ns: float, max_values: int):
    """The distinct values (and weights) :func:`clock_grid` fits, and the HDR resolution to
    widen its tolerance by (0 when only exactly stored values are used); no values when none
    is short enough to show a grid."""
    low = u < exact_below_ns
    hdr = 0.0
    if w[low].sum() >= 100:
        u, w = u[low], w[low]
    else:
        hdr = 1.0 / exact_below_ns
        # a grid of at most max_tick_ns shows only in values of a few dozen ticks (the
        # search's candidates grow with the largest value: a millisecond tail would take
        # gigabytes), so longer durations are left out
        near = u <= 20 * max_tick_ns
        u, w = u[near], w[near]
    if len(u) > max_values:  # the most frequent values (evenly spaced among equal counts)
        keep = np.sort(np.lexsort((np.arange(len(u)) % 7, -w))[:max_values])
        u, w = u[keep], w[keep]
    return u, w, hdr


def _grid_candidates(min_tick_ns: float, max_tick_ns: float, jitter_ns: float,
                     vmax: float) -> np.ndarray:
    """Geometric candidate steps, spaced so that the grid's largest multiple moves by
    < tol / 8 between two of them; the search allows tol * 1.25 (a candidate is off the
    true tick by half a spacing at worst), the count on the refined tick uses tol."""
    t = min_tick_ns
    cands = []
    while t <= max_tick_ns:
        cands.append(t)
        t *= 1 + min(jitter_ns, t / 10) / (8 * vmax)
    return np.asarray(cands)


def _grid_shares(u, w, cands, peak_of: np.ndarray, jitter_ns: float, hdr: float,
                 min_share: float):
    """Per candidate step, the share of the samples on its grid and the share of those off
    the peak (``peak_of``: the most frequent value and its neighbours); scanned from the
    largest step down, stopping below the cluster of the first that fits (the shares of
    steps not scanned stay 0)."""
    total = float(w.sum())
    rest = np.where(peak_of, 0.0, w)
    rest_total = float(rest.sum())
    shares = np.zeros(len(cands))
    rest_shares = np.zeros(len(cands))
    first = None
    for idx in reversed(np.array_split(np.arange(len(cands)), max(1, len(cands) // 256))):
        chunk = cands[idx]
        tol = 1.25 * np.minimum(jitter_ns, chunk / 10)[:, None] + hdr * u[None, :]
        k = np.rint(u[None, :] / chunk[:, None])
        on = (k >= 1) & (np.abs(u[None, :] - k * chunk[:, None]) <= tol)
        shares[idx] = (on * w[None, :]).sum(axis=1) / total
        rest_shares[idx] = ((on * rest[None, :]).sum(axis=1) / rest_total
                            if rest_total >= MIN_OFF_PEAK else 0.0)
        fit = chunk[(shares[idx] >= min_share) & (rest_shares[idx] >= min_share)]
        if first is None and len(fit):
            first = float(fit.max())
        if first is not None and chunk[0] < 0.97 * first:
            break
    return shares, rest_shares


def _grid_refit(u, w, best: float, tol0: float, hdr: float,
                min_share: float) -> tuple[float, float]:
    """The step ``best`` refined by least squares through the origin (``sum(k v) /
    sum(k^2)``), kept only if the refit still holds ``min_share``: (tick, share on it)."""
    total = float(w.sum())

    def on_grid(t):
        k = np.rint(u / t)
        return k, (k >= 1) & (np.abs(u - k * t) <= tol0 + hdr * u)

    k, on = on_grid(best)
    tick = float((w[on] * k[on] * u[on]).sum() / (w[on] * k[on] ** 2).sum())
    k, on = on_grid(tick)
    if w[on].sum() / total < min_share:  # the refit left the grid: keep the searched step
        tick = best
        k, on = on_grid(tick)
    return tick, float(w[on].sum() / total)


def at_clock_floor(value_ns: float, tick_ns: float | None,
                   ticks: int = CLOCK_FLOOR_TICKS) -> bool:
    """Is ``value_ns`` fewer than ``ticks`` ticks of a clock of ``tick_ns``? Such a figure is
    known only to 1 / ``ticks`` of itself or worse and is not used in a ratio. An unknown tick
    (None) is not a floor: False."""
    if ticks < 1:
        raise ValueError(f"ticks must be >= 1, got {ticks!r}")
    if tick_ns is None:
        return False
    if tick_ns <= 0:
        raise ValueError(f"tick_ns must be > 0, got {tick_ns!r}")
    return float(value_ns) < ticks * float(tick_ns)


# --- quantisation: a percentile as the interval its clock's ticks allow ------------------------

def quantile_of(name: str) -> float:
    """The quantile (in percent) a percentile's name stands for: ``p50`` 50, ``p99.9`` 99.9,
    ``max`` 100; ``ValueError`` for any other name."""
    if name == "max":
        return 100.0
    if name.startswith("p"):
        try:
            q = float(name[1:])
        except ValueError:
            q = -1.0
        if 0 < q < 100:
            return q
    raise ValueError(f"not a percentile name: {name!r} (p50, p99.9, max, ...)")


def tick_interval(value_ns: float, tick_ns: float | None) -> tuple[float, float]:
    """The values a duration read as ``value_ns`` on a clock of ``tick_ns`` can have: one
    tick either side, never below zero (a one-tick p50 is "at most two ticks"). An unknown
    tick (None): the value itself."""
    v = float(value_ns)
    if tick_ns is None:
        return v, v
    if tick_ns <= 0:
        raise ValueError(f"tick_ns must be > 0, got {tick_ns!r}")
    if v < 1.5 * tick_ns:  # one tick (a truncated 41 or 42 of a 41.67 ns tick): from 0
        return 0.0, v + tick_ns
    return v - tick_ns, v + tick_ns


def percentile_bounds(table: dict, name: str, *, tick_ns: float | None = None,
                      samples: int | None = None) -> tuple[float, float, str]:
    """``(low, high, what)``: the values percentile ``name`` of a published ``table``
    (name -> ns: ``p50``, ``p99``, ..., ``max``) can have. Read on a clock of ``tick_ns``:
    :func:`tick_interval`. From fewer ``samples`` than it needs (:func:`supported`): only
    bounded by its neighbours, the nearest lower percentile the count supports and the
    ``max`` (every percentile lies between them), each to its tick."""
    v = float(table[name])
    if samples is None or name == "max" or supported(quantile_of(name), samples):
        lo, hi = tick_interval(v, tick_ns)
        what = (f"{name} {v:g} ns +-1 tick of {tick_ns:.4g} ns" if tick_ns else f"{name} {v:g} ns")
        return lo, hi, what
    below = sorted((quantile_of(k), k) for k in table
                   if k != "max" and quantile_of(k) < quantile_of(name)
                   and supported(quantile_of(k), samples))
    lo = tick_interval(float(table[below[-1][1]]), tick_ns)[0] if below else 0.0
    hi = tick_interval(float(table["max"]), tick_ns)[1] if "max" in table else math.inf
    what = (f"{name} from {samples:,} samples (it needs {min_count(quantile_of(name)):,}): only "
            f"between {below[-1][1] if below else '0'} and {'max' if 'max' in table else 'inf'}")
    return lo, hi, what


def ratio_bounds(num: tuple[float, float], den: tuple[float, float], *,
                 ordered: bool = False) -> tuple[float, float]:
    """The interval of ``num / den`` when each lies in its interval; ``ordered``: the two are
    percentiles of one distribution, the numerator's the higher quantile, so the ratio is at
    least 1 whatever the ticks allow."""
    lo = num[0] / den[1] if den[1] > 0 else math.inf
    hi = num[1] / den[0] if den[0] > 0 else math.inf
    return (max(lo, 1.0) if ordered else lo), hi


def quantised_factor(percentiles: dict, tick_ns: float | None,
                     ratio: Sequence[str] | None = None) -> tuple[float, float]:
    """``(low, high)``: how far the ticks of a clock of ``tick_ns`` let a figure made of
    ``percentiles`` (name -> ns) move, as factors on the figure. ``ratio`` (numerator,
    denominator names): exactly, from :func:`tick_interval` of each; else every percentile may
    push either way (``1 - t/p`` down, ``1 / (1 - t/p)`` up each: a bound whatever its role).
    An unknown tick: (1, 1)."""
    if tick_ns is None or not percentiles:
        return 1.0, 1.0
    if ratio is not None:
        a, b = (float(percentiles[k]) for k in ratio)
        lo, hi = ratio_bounds(tick_interval(a, tick_ns), tick_interval(b, tick_ns))
        return lo / (a / b), hi / (a / b)
    lo = hi = 1.0
    for p in percentiles.values():
        e = tick_ns / float(p) if p else math.inf
        lo *= max(0.0, 1 - e)
        hi = hi / (1 - e) if e < 1 else math.inf
    return lo, hi


# --- A/A controls -------------------------------------------------------------------------------

# Where identical code measured twice moves by more than this factor (the A/A band's high /
# low), the machine cannot measure the figure at all: more repeats would not narrow a spread
# that wide, so a claim reads "not measurable on this machine" and names the spread.
MAX_AA_SPREAD = 2.0

# 1.4826 x the median absolute deviation estimates the standard deviation of normal noise
# (1 / the normal's 75th percentile) and, unlike the largest ratio, is set by the bulk of the
# ratios: one stray round moves it by at most one order statistic.
MAD_SCALE = 1.4826


def aa_band(ratios: Sequence[float], coverage: float = 0.95) -> dict:
    """The band of "no change" from an A/A control: ratios of the same code measured twice in
    the same interleaving (one per pair of runs).

    Robust: with ``l`` the log ratios, ``s = 1.4826 MAD(l)`` (the normal-consistent median
    absolute deviation) and ``c = median(l)`` (the offset identical code shows, e.g. from its
    place in the rotation), the band is ``[exp(-h), exp(h)]`` with ``h = |c| + z s`` and ``z``
    the normal quantile that holds ``coverage`` of the ratios (1.96 at 95%). One stray round
    (a hiccup in one run) moves the median and the MAD by one order statistic at most, where
    it would have set a band taken from the largest ratios (tests/measure/test_stats.py
    simulates the false-call rate with one outlier round planted). A MAD of zero (more than
    half the ratios exactly equal) falls back to the scaled mean absolute deviation.
    Fewer than 5 ratios: no band (``None``).

    Returns ``{"low", "high", "n", "spread" (high / low), "what"}``.
    """
    r = np.asarray(ratios, dtype=float)
    if (r <= 0).any() or not np.isfinite(r).all():
        raise ValueError("A/A ratios must be positive and finite")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage!r}")
    n = len(r)
    if n < 5:
        return {"low": None, "high": None, "n": n, "spread": None,
                "what": f"no A/A band: {n} A/A ratio(s), fewer than 5"}
    lg = np.log(r)
    c = float(np.median(lg))
    dev = np.abs(lg - c)
    s = MAD_SCALE * float(np.median(dev))
    if s == 0:
        s = math.sqrt(math.pi / 2) * float(dev.mean())  # mean abs deviation, normal-consistent
    z = statistics.NormalDist().inv_cdf((1 + coverage) / 2)
    h = abs(c) + z * s
    lo, hi = math.exp(-h), math.exp(h)
    return {"low": lo, "high": hi, "n": n, "spread": hi / lo,
            "what": f"A/A band {lo:.4g}-{hi:.4g}: |median| {math.exp(abs(c)):.4g}x plus "
                    f"{z:.2f} x 1.4826 MAD of the log of {n} A/A ratios ({coverage:.0%} of "
                    "identical-code ratios under normal noise)"}


def aa_unmeasurable(band: dict | None) -> str | None:
    """None when the A/A band is narrow enough to measure a change, else why not: identical
    code measured twice moved by more than :data:`MAX_AA_SPREAD` (the band's high / low), so
    the machine cannot measure the figure (more repeats would not settle it)."""
    if not band or band.get("low") is None or band.get("high") is None:
        return None
    spread = float(band["high"]) / float(band["low"])
    if spread <= MAX_AA_SPREAD:
        return None
    return (f"not measurable on this machine: identical code measured twice in the same "
            f"interleaving spans {band['low']:.3g}-{band['high']:.3g} (a factor of "
            f"{spread:.3g}, over {MAX_AA_SPREAD:g}) across {band.get('n')} A/A ratios; more "
            "repeats would not narrow a spread that wide")


def change_beyond_aa(lo: float | None, hi: float | None, band: dict) -> str:
    """:func:`change`'s vocabulary for a B/A interval ``[lo, hi]`` against an A/A band
    (:func:`aa_band`): ``faster`` / ``slower`` only when the whole interval lies beyond the
    band, ``within noise`` when it lies inside it, else ``inconclusive`` (also without a band
    or an interval: no A/A control, no call)."""
    blo, bhi = band.get("low"), band.get("high")
    if None in (lo, hi, blo, bhi) or math.isnan(lo) or math.isnan(hi):
        return "inconclusive"
    if lo > hi:
        lo, hi = hi, lo
    if hi < blo:
        return "faster"
    if lo > bhi:
        return "slower"
    if lo >= blo and hi <= bhi:
        return "within noise"
    return "inconclusive"
