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
           "change_of_ratios", "rotations"]

CHANGE_WORDS = ("faster", "slower", "within noise", "inconclusive")

# The fewest values a side from which :func:`ratio_interval` gives an interval. Below it the
# percentile bootstrap of a median covers far less often than it claims (simulated, lognormal
# noise, identical samples, 95%: three values a side exclude 1 in ~10-12% of cases, five in
# ~3%; tests/test_stats.py checks it).
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
    names = list(names)
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds!r}")
    if not names:
        return [[] for _ in range(rounds)]
    k = len(names)
    return [names[r % k:] + names[:r % k] for r in range(rounds)]
